"""Build ``replies.jsonl``: model replies written the way real models write them, each with the program it holds.

Run ``python -m tests.segments.corpus.build`` to regenerate (deterministic: fixed seed). Each line is
``{"id", "kind", "reply", "expect", "error"}``: ``expect`` is the program that should run (compared as
an AST), or null with ``error`` the parser's reason (``syntax``, ``no_code``, ``wrong_language``)
when nothing should run. The shapes come from replies seen from chat and completion models: fences
(tagged, bare, with attributes, unclosed), ``<execute>`` tags (code on the tag's line too), several
blocks (steps, a first attempt then a correction, a rewrite, quoted earlier code, example output),
inline code in prose, ``<think>``, JSON, REPL prompts, CRLF and tabs, FIM markers echoed back.
"""

from __future__ import annotations

import ast
import json
import random
from pathlib import Path
from typing import Any

from codeact.segments import build_frame

HERE = Path(__file__).resolve().parent
# The corpus frame (tests/segments/corpus/__init__.py's FRAME), built here too: build.py runs as a script.
FIM_FRAME = build_frame({"info": ("dict", "{'name': 'Checkout'}")}, imports=["import asyncio"])
F = "```"

# Programs as top-level chunks (a block may be split between chunks).
SNIPPETS: list[list[str]] = [
    ["info = await devops.get_project_info(project_id='P-123')", "print(info['name'], info['apps'])"],
    [
        "reqs = await devops.search_requirements(project_id='P-123', query='login')",
        "open_reqs = [r for r in reqs if r['status'] != 'done']",
        "print(len(open_reqs), [r['title'] for r in open_reqs])",
    ],
    ["def total_qty(items):\n    return sum(i['qty'] for i in items)", "print(total_qty([{'qty': 2}, {'qty': 3}]))"],
    [
        "class Inventory:\n    def __init__(self):\n        self.items = {}\n\n"
        "    def add(self, sku, qty):\n        self.items[sku] = self.items.get(sku, 0) + qty",
        "inv = Inventory()\ninv.add('A-1', 3)",
        "print(inv.items)",
    ],
    ["import json", "data = json.loads('{\"a\": [1, 2, 3]}')", "print(sum(data['a']))"],
    [
        "graph = {\n    'a': ['b', 'c'],\n    'b': ['d'],\n    'c': ['d'],\n    'd': [],\n}",
        "seen = []\nstack = ['a']\nwhile stack:\n    node = stack.pop()\n    if node not in seen:\n"
        "        seen.append(node)\n        stack.extend(graph[node])",
        "print(seen)",
    ],
    ["results = await asyncio.gather(*(devops.get_app(app_id=a) for a in info['apps']))", "print(results)"],
    [
        "from dataclasses import dataclass",
        "@dataclass\nclass Point:\n    x: int\n    y: int",
        "p = Point(1, 2)\nprint(p)",
    ],
    [
        "try:\n    value = int(text)\nexcept ValueError:\n    value = 0",
        "print(value * 2)",
    ],
    ["for app in info['apps']:\n    status = await devops.get_app(app_id=app)\n    print(app, status['healthy'])"],
    ["deploy = await devops.deploy(app_id='checkout-api', version='2.4.0')", "print(deploy['id'], deploy['status'])"],
    ['system.finish(f"{len(open_reqs)} open requirements")'],
    [
        "squares = {n: n * n for n in range(10)}",
        "evens = [k for k, v in squares.items() if v % 2 == 0]",
        "print(evens)",
    ],
    [
        "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a",
        "print([fib(i) for i in range(10)])",
    ],
    [
        "rows = [line.split(',') for line in csv_text.strip().splitlines()]",
        "header, *body = rows",
        "print(header, len(body))",
    ],
    ["with open('notes.txt', 'w') as fh:\n    fh.write('hello')", "print(open('notes.txt').read())"],
    ["import re", "emails = re.findall(r'[\\w.]+@[\\w.]+', text)", "print(emails)"],
    ["total = 0\nfor price, qty in zip(prices, qtys):\n    total += price * qty", "print(round(total, 2))"],
    [
        "async def fetch_all(ids):\n    return [await devops.get_app(app_id=i) for i in ids]",
        "apps = await fetch_all(['checkout-api', 'auth-service'])",
        "print([a['version'] for a in apps])",
    ],
    ["answer = max(scores, key=scores.get)", "system.finish(answer)"],
    ["from collections import Counter", "counts = Counter(words)", "print(counts.most_common(3))"],
    [
        "if not reqs:\n    print('no requirements')\nelse:\n    for r in reqs:\n        print(r['id'], r['title'])",
    ],
    ["matrix = [[1, 2], [3, 4]]", "transposed = list(zip(*matrix))", "print(transposed)"],
    [
        "def is_prime(n):\n    if n < 2:\n        return False\n    for d in range(2, int(n ** 0.5) + 1):\n"
        "        if n % d == 0:\n            return False\n    return True",
        "print([n for n in range(30) if is_prime(n)])",
    ],
    ["text = 'The quick brown fox'", "print(text.lower().split())"],
    ["item = await inventory.add_item(sku='A-1', name='Widget', qty=3)", "print(item)"],
    ["import math", "print(math.sqrt(2) * 10)"],
    ["x = 20 + 1", "print(x)"],
    ["names = sorted({u['name'] for u in users})", "print(', '.join(names))"],
    [
        "class Stack:\n    def __init__(self):\n        self._items = []\n\n    def push(self, x):\n"
        "        self._items.append(x)\n\n    def pop(self):\n        return self._items.pop()",
        "s = Stack()\ns.push(1)\ns.push(2)\nprint(s.pop())",
    ],
]

PROSE_BEFORE = [
    "Let me look at the project first.",
    "I'll start by fetching the data.",
    "Sure! Here's the code:",
    "To answer this, I need to compute the values.",
    "Next step: process the results from the previous round.",
    "Okay, let me write the code for this step.",
    "**Step 2.** Compute the totals.",
    "## Plan\n1. Fetch the project.\n2. Print its apps.\n\n## Code",
    "I will call `devops.get_project_info` and print the result.",
    "The variable `info` already holds the project, so I can use it directly.",
]
PROSE_AFTER = [
    "This prints the result.",
    "Once this runs, I'll check the output and continue.",
    "Note: `asyncio.gather` runs the calls concurrently.",
    "If this fails, I will try another approach.",
    "Let me know if you need anything else!",
    "The output will tell us which requirements are still open.",
]
CORRECTION = [
    "Wait, that has a bug. Here is the corrected version:",
    "Oops, I forgot to close the bracket. Fixed:",
    "Actually, let me rewrite that more simply:",
    "Sorry, there's a mistake above. The correct code is:",
    "Let me fix that:",
    "Here is the full code instead:",
]
QUOTE = [
    "In the previous round I ran:",
    "The code that failed earlier was:",
    "Previously I wrote this:",
    "Last round I tried:",
]
STEP = ["Then print it:", "Now I can use it:", "Next:", "And then:", "After that, compute the result:"]


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return True


def _broken(code: str, rng: random.Random) -> str:
    lines = code.split("\n")
    for _ in range(20):
        index = rng.randrange(len(lines))
        line = lines[index]
        if ")" in line:
            cut = line[: line.rindex(")")] + line[line.rindex(")") + 1 :]
        elif line.rstrip().endswith(":"):
            cut = line.rstrip()[:-1]
        elif "=" in line and "==" not in line:
            cut = line.replace("=", "= =", 1)
        else:
            continue
        candidate = "\n".join([*lines[:index], cut, *lines[index + 1 :]])
        if not _parses(candidate):
            return candidate
    return code + "\nprint((1, 2"


def _variant(code: str) -> str:
    """A similar program (an earlier attempt): a number or a name changed."""
    for old, new in (("print(", "print('result:', "), ("3", "4"), ("2", "5"), ("1", "7")):
        if old in code:
            return code.replace(old, new, 1)
    return code + "\nprint('done')"


def _indent(code: str, by: str) -> str:
    return "\n".join(by + line if line.strip() else line for line in code.split("\n"))


# Replies written by hand after ones seen from real models (the shapes the generator does not make).
HANDWRITTEN: list[tuple[str, str, str | None, str | None]] = [
    (
        "execute-graph-on-tag-line",
        "<execute> graph = {\n  'a': ['b'],\n  'b': []\n}\nprint(graph)</execute>",
        "graph = {'a': ['b'], 'b': []}\nprint(graph)",
        None,
    ),
    ("execute-print-inline", "I'll check it. <execute> print(x) </execute>", "print(x)", None),
    ("fim-first-line-flush", "x = 1\n    if x:\n        print(x)", "x = 1\nif x:\n    print(x)", None),
    ("pycon", f"{F}pycon\n>>> x = [1, 2]\n>>> sum(x)\n3\n{F}", "x = [1, 2]\nsum(x)", None),
    (
        "tabs",
        f"{F}python\nfor i in range(2):\n\tif i:\n\t\tprint(i)\n{F}",
        "for i in range(2):\n if i:\n  print(i)",
        None,
    ),
    ("same-block-twice", f"{F}python\nprint(1)\n{F}\nAs said:\n{F}python\nprint(1)\n{F}", "print(1)", None),
    (
        "output-after-tagged",
        f"{F}python\nprint({{'a': 1}})\n{F}\n\nThis will output:\n{F}\n{{'a': 1}}\n{F}",
        "print({'a': 1})",
        None,
    ),
    ("untagged-output-label", f"{F}\nx = 2\nprint(x * 2)\n{F}\nResult:\n{F}\n4\n{F}", "x = 2\nprint(x * 2)", None),
    (
        "plan-bullets-then-code",
        "Plan:\n- fetch the project\n- list its apps\n\n"
        f"{F}python\ninfo = await devops.get_project_info(project_id='P-1')\nprint(info['apps'])\n{F}",
        "info = await devops.get_project_info(project_id='P-1')\nprint(info['apps'])",
        None,
    ),
    ("json-fenced", f'{F}json\n{{"code": "print(2 + 2)"}}\n{F}', "print(2 + 2)", None),
    (
        "think-with-code-inside",
        "<think>\n```python\nos.remove('x')\n```\n</think>\nprint('safe')",
        "print('safe')",
        None,
    ),
    ("end-token", "print(3)<|im_end|>\nmore text", "print(3)", None),
    (
        "quoted-then-new-tags",
        "Previously I ran:\n<execute>print(total)</execute>\nIt failed. Now:\n"
        "<execute>total = 3\nprint(total)</execute>",
        "total = 3\nprint(total)",
        None,
    ),
    (
        "correction-after-working",
        f"{F}python\nprint(sum([1, 2]))\n{F}\nActually, the task wants the mean:\n"
        f"{F}python\nprint(sum([1, 2]) / 2)\n{F}",
        "print(sum([1, 2]) / 2)",
        None,
    ),
    (
        "three-steps",
        f"{F}python\na = 1\n{F}\nthen\n{F}python\nb = a + 1\n{F}\nand\n{F}python\nprint(a, b)\n{F}",
        "a = 1\nb = a + 1\nprint(a, b)",
        None,
    ),
    (
        "two-similar-loops-are-steps",
        f"Apps:\n{F}python\nfor app in apps:\n    print(app)\n{F}\nAnd requirements:\n{F}python\n"
        f"for req in reqs:\n    print(req)\n{F}",
        "for app in apps:\n    print(app)\nfor req in reqs:\n    print(req)",
        None,
    ),
    (
        "two-similar-fetches-are-steps",
        f"{F}python\nproject = await devops.get_project_info(project_id='P-123')\nprint(project)\n{F}\n"
        f"{F}python\nother = await devops.get_project_info(project_id='P-200')\nprint(other)\n{F}",
        "project = await devops.get_project_info(project_id='P-123')\nprint(project)\n"
        "other = await devops.get_project_info(project_id='P-200')\nprint(other)",
        None,
    ),
    (
        "same-names-rewritten-no-cue",
        f"{F}python\nrows = load('a.csv')\ntotal = sum(rows)\n{F}\n\n{F}python\nrows = load('a.csv')\n"
        f"total = sum(r for r in rows if r)\nprint(total)\n{F}",
        "rows = load('a.csv')\ntotal = sum(r for r in rows if r)\nprint(total)",
        None,
    ),
    (
        "steps-without-prose",
        f"{F}python\nimport json\n{F}\n{F}python\nprint(json.dumps({{'a': 1}}))\n{F}",
        "import json\nprint(json.dumps({'a': 1}))",
        None,
    ),
    (
        "broken-first-step-then-second",
        f"{F}python\nrows = [1, 2\n{F}\nThen:\n{F}python\nprint(len(rows))\n{F}",
        "print(len(rows))",
        None,
    ),
    (
        "fim-shape-blank-lines",
        "info = await devops.get_project_info(project_id='P-1')\n\n    for app in info['apps']:\n        print(app)",
        "info = await devops.get_project_info(project_id='P-1')\nfor app in info['apps']:\n    print(app)",
        None,
    ),
    ("fim-shape-broken", "keep = 41\n    await ledger.add(item='a')\n    x = (1, 2\n    print(x)", None, "syntax"),
    (
        "fim-shape-broken-blank-line",
        "keep = 41\n    await ledger.add(item='a')\n\n    x = (1, 2\n    print(x)",
        None,
        "syntax",
    ),
    ("code-label-inline", "Thought: look\nPython: print(project_id)", "print(project_id)", None),
    ("cut-off-mid-call", "x = 1\nprint(foo(x,", None, "syntax"),
    ("cut-off-open-string", 'x = 1\nprint("hel', None, "syntax"),
    ("cut-off-block-header", "rows = load()\nfor r in rows:", None, "syntax"),
    ("broken-middle-line", "keep = 41\nx = (1, 2\nprint(x)", None, "syntax"),
    ("broken-last-block", f"{F}python\nprint(1)\n{F}\nFixed:\n{F}python\nprint(2\n{F}", None, "syntax"),
    ("broken-call-line", "answer = max(scores, key=scores.get)\nsystem.finish(answer", None, "syntax"),
    ("empty", "", None, "empty"),
    ("refusal", "I'm sorry, but I can't help with that.", None, "no_code"),
    ("just-ok", "OK", None, "no_code"),
]


def _cases(rng: random.Random) -> list[dict[str, object]]:  # noqa: C901, PLR0915 - a catalogue
    cases: list[dict[str, object]] = []

    def add(kind: str, reply: str, expect: str | None, error: str | None = None) -> None:
        cases.append({"id": f"{kind}-{sum(1 for c in cases if c['kind'] == kind) + 1}", "kind": kind,
                      "reply": reply, "expect": expect, "error": error})  # fmt: skip

    for chunks in SNIPPETS:
        code = "\n".join(chunks)
        one = chunks[0]
        pre, post = rng.choice(PROSE_BEFORE), rng.choice(PROSE_AFTER)
        add("fence-python", f"{pre}\n\n{F}python\n{code}\n{F}\n\n{post}", code)
        add("fence-bare", f"{pre}\n{F}\n{code}\n{F}", code)
        add(
            "fence-lang-variant",
            f"{F}{rng.choice(['py', 'Python', 'python3', 'python title=step.py'])}\n{code}\n{F}",
            code,
        )
        add("fence-unclosed", f"{pre}\n{F}python\n{code}\n", code)
        add("tag-newline", f"{pre}\n<execute>\n{code}\n</execute>", code)
        add("tag-same-line", f"<execute> {code}\n</execute>", code)
        add("tag-same-line-one", f"{pre}\n<execute> {one} </execute>", one)
        add("tag-same-line-indented-rest", f"<execute> {chunks[0].split(chr(10))[0]}\n" +
            _indent("\n".join([*chunks[0].split("\n")[1:], *chunks[1:]]), "    ") + "\n</execute>", code)  # fmt: skip
        add("tag-fence-inside", f"<execute>\n{F}python\n{code}\n{F}\n</execute>", code)
        add("raw", code, code)
        add("raw-prose-around", f"{pre}\n\n{code}\n\n{post}", code)
        add("think-then-fence", f"<think>The user wants this. Maybe `print(1)`?</think>\n{F}python\n{code}\n{F}", code)
        add("json", json.dumps({"thought": pre, "code": code}), code)
        add("inline-code-prose", f"I'll use `json.loads()` and `print()` here.\n{F}python\n{code}\n{F}\n"
            f"The `{one.split('(')[0][:20]}` call returns a dict.", code)  # fmt: skip
        add("crlf", f"{F}python\r\n{code.replace(chr(10), chr(13) + chr(10))}\r\n{F}\r\n", code)
        add("fim-marker", f"<|fim_middle|>{code}<|endoftext|>", code)
        add("python-label", f"Thought: {pre}\nPython:\n{code}", code)
        add("bash-then-python", f"{F}bash\npip install requests\n{F}\n{F}python\n{code}\n{F}", code)
        add("code-then-output", f"{F}\n{code}\n{F}\nOutput:\n{F}\n42\n{F}", code)
        if len(chunks) >= 2:
            k = rng.randrange(1, len(chunks))
            first, second = "\n".join(chunks[:k]), "\n".join(chunks[k:])
            add("blocks-steps", f"{pre}\n{F}python\n{first}\n{F}\n{rng.choice(STEP)}\n{F}python\n{second}\n{F}", code)
            add("tags-steps", f"<execute>\n{first}\n</execute>\n{rng.choice(STEP)}\n<execute> {second}</execute>", code)
        add("blocks-broken-then-fixed", f"{F}python\n{_broken(code, rng)}\n{F}\n{rng.choice(CORRECTION)}\n"
            f"{F}python\n{code}\n{F}", code)  # fmt: skip
        add("tags-broken-then-fixed", f"<execute>{_broken(code, rng)}</execute>\n{rng.choice(CORRECTION)}\n"
            f"<execute> {code} </execute>", code)  # fmt: skip
        add("blocks-attempt-then-correction", f"{F}python\n{_variant(code)}\n{F}\n{rng.choice(CORRECTION)}\n"
            f"{F}python\n{code}\n{F}", code)  # fmt: skip
        add("blocks-quoted-earlier", f"{rng.choice(QUOTE)}\n{F}python\nprint(undefined_thing)\n{F}\n"
            f"It failed with NameError. This time:\n{F}python\n{code}\n{F}", code)  # fmt: skip
        if "def " in code or "class " in code:
            add("blocks-rewrite-no-cue", f"{F}python\n{_variant(code)}\n{F}\n\n{F}python\n{code}\n{F}", code)
        # nothing runs
        add("broken-fence", f"{pre}\n{F}python\n{_broken(code, rng)}\n{F}", None, "syntax")
        add("broken-raw", _broken(code, rng), None, "syntax")
        add("broken-tag", f"<execute> {_broken(code, rng)} </execute>", None, "syntax")
    for name, reply, expect, error in HANDWRITTEN:
        add(f"hand-{name}", reply, expect, error)
    for text in PROSE_BEFORE[:6] + PROSE_AFTER:
        add("prose-only", text, None, "no_code")
    for lang, body in (("bash", "ls -la"), ("sql", "SELECT * FROM t;"), ("javascript", "console.log(1)")):
        add("other-language", f"Run this:\n{F}{lang}\n{body}\n{F}", None, "wrong_language")
    _invented_turns(add, random.Random(20261126))
    return cases


def _invented_turns(add: Any, rng: random.Random) -> None:
    """Replies that invent the next turn after their code (issue 27 item 9), as Qwen2.5-Coder wrote them.

    The code before the invented part runs; a broken block before it still runs nothing. Own seed, so
    the cases above stay as they were.
    """
    cut = "result = await devops.deploy_app(app_id='checkout-api', version="
    for chunks in SNIPPETS:
        code = "\n".join(chunks)
        add("invented-output-turn", f"{F}python\n{code}\n{F}\nOutput:\n{F}\n{{'name': 'Checkout'}}\n{F}\n"
            f"Assistant: The project is Checkout. Now I deploy it:\n{F}python\n{cut}", code)  # fmt: skip
        add("invented-observation-raw", f"{code}\nObservation: {{'name': 'Checkout', 'apps': ['checkout-api']}}\n"
            f"Thought: now deploy\n{cut}", code)  # fmt: skip
        add("invented-user-turn", f"{rng.choice(PROSE_BEFORE)}\n{F}python\n{code}\n{F}\n\nUser: Great, deploy it.\n\n"
            f"{F}python\n{cut}", code)  # fmt: skip
        add("invented-evaluation-fim", f"{FIM_FRAME.prefix}{_indent(code, '    ')}\n{FIM_FRAME.suffix}Evaluation:\n"
            f"Output: Checkout\nNextGoal: deploy\nPython:\n{cut}", code)  # fmt: skip
        add("invented-broken-first", f"{F}python\n{_broken(code, rng)}\n{F}\nOutput:\n42\n", None, "syntax")


def main() -> None:
    """Write ``replies.jsonl`` next to this file."""
    rng = random.Random(20261124)
    cases = _cases(rng)
    for case in cases:
        expect = case["expect"]
        if isinstance(expect, str) and not _parses(expect):
            raise SystemExit(f"case {case['id']}: the expected program does not parse")
    with (HERE / "replies.jsonl").open("w", encoding="utf-8") as out:
        for case in cases:
            out.write(json.dumps(case, ensure_ascii=False) + "\n")
    print(f"wrote {len(cases)} cases")


if __name__ == "__main__":
    main()
