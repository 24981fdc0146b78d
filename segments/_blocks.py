"""Code blocks in a reply (fences, ``<execute>``-style tags) and which of them a round runs.

A reply may hold several blocks. Models write them for different reasons, and the parser must not
turn them into a program nobody wrote:

* steps of one program, prose between them ("First I load it ... Then I print it"): joined, in order;
* a first attempt, then a corrected one ("Wait, that is wrong. Fixed: ..."), or a later block that
  rewrites an earlier one (the same function defined again, mostly the same text): the later one;
* code quoted from an earlier round ("The code I ran before: ...", or a block identical to an earlier
  round's code) and example output ("Output: ..."): dropped;
* blocks that do not parse together: the longest run of trailing blocks that does.

Whatever is chosen other than "the one block there is" is said in a note the Evaluation shows.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from codeact.segments._text import clean_code, parse_python, syntax_error

__all__: list[str] = []

_TAG = re.compile(r"<(execute|code|python|tool_code|execute_python)>(.*?)(?:</\1>|\Z)", re.DOTALL | re.IGNORECASE)
_FENCE_OPEN = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+#.-]*)[^\n`]*$")
_INLINE_FENCE = re.compile(r"^[ \t]*`{3}(?P<lang>python|py)?[ \t]+(?P<code>[^`\n]+?)[ \t]*`{3}[ \t]*$", re.IGNORECASE)
PYTHON_LANGS = frozenset({"python", "py", "python3", "py3", "ipython", "pycon", "python-repl", "sage"})

_CORRECTION = re.compile(
    r"\b(?:correct(?:ed|ion)|fix(?:ed)?|oops|wait|sorry|mistake|actually|instead|updated|revised?|rewr(?:ite|itten)|"
    r"redo|retry|typo|forgot|incorrect|wrong|let me try|try again|better (?:version|approach)|"
    r"(?:full|complete|whole|final|entire) (?:code|version|program|script))\b",
    re.IGNORECASE,
)
_QUOTE = re.compile(
    r"\b(?:(?:i|you) (?:ran|wrote|tried|executed|had written|used)|previously|(?:code|block) that failed|that failed|"
    r"(?:previous|earlier|last|original|old|failing|failed)\b[^.\n]{0,30}\b(?:code|attempt|version|block|snippet|"
    r"program))\b",
    re.IGNORECASE,
)
_OUTPUT = re.compile(
    r"(?:\b(?:output|outputs|result|results|prints?|returns?|expected|response|gives?|shows?|you(?:'ll| will) see)"
    r"\b[^\n]{0,20}[:：]|^\W*(?:output|result|expected output)\W*)\s*$",
    re.IGNORECASE,
)


@dataclass(frozen=True, kw_only=True)
class Block:
    """One block: its language tag, its code, the prose before it, and whether it was closed."""

    lang: str
    code: str
    before: str = ""
    closed: bool = True


def tag_blocks(text: str) -> list[Block]:
    """The ``<execute>``-style blocks; code on the opening tag's line starts the block flush left."""
    blocks: list[Block] = []
    end = 0
    for match in _TAG.finditer(text):
        content = match.group(2)
        if not content.startswith("\n"):
            content = content.lstrip(" \t")  # `<execute> print(x)`: the code starts on the tag's line
        closed = match.group(0).lower().endswith(f"</{match.group(1).lower()}>")
        blocks.append(Block(lang="python", code=content, before=text[end : match.start()], closed=closed))
        end = match.end()
    return blocks


def fenced_blocks(text: str) -> tuple[list[Block], list[str]]:
    """``(blocks, other languages)``: the Python blocks (tagged ones, else untagged ones) and the rest."""
    found: list[Block] = []
    lines = text.split("\n")
    before: list[str] = []
    i = 0
    while i < len(lines):
        inline = _INLINE_FENCE.match(lines[i])
        if inline:
            lang = (inline.group("lang") or "").lower()
            found.append(Block(lang=lang, code=inline.group("code"), before="\n".join(before)))
            before = []
            i += 1
            continue
        opened = _FENCE_OPEN.match(lines[i])
        if not opened:
            before.append(lines[i])
            i += 1
            continue
        fence, lang = opened.group("fence"), opened.group("lang").lower()
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        body: list[str] = []
        i += 1
        while i < len(lines) and not closing.match(lines[i]):
            body.append(lines[i])
            i += 1
        found.append(Block(lang=lang, code="\n".join(body), before="\n".join(before), closed=i < len(lines)))
        before = []
        i += 1
    tagged = [b for b in found if b.lang in PYTHON_LANGS and b.code.strip()]
    untagged = [b for b in found if not b.lang and b.code.strip()]
    others = [b.lang for b in found if b.lang and b.lang not in PYTHON_LANGS and b.code.strip()]
    if tagged:
        return tagged, others
    return [b for b in untagged if not _OUTPUT.search(_last_line(b.before))], others


def candidates(blocks: Sequence[Block], *, history: Sequence[str] = ()) -> list[tuple[str, tuple[str, ...]]]:
    """The programs to try, best first, each with the notes that say how it was made from the blocks."""
    kept = _dedupe([b for b in blocks if b.code.strip()])
    total = len(kept)
    if total <= 1:
        return [(b.code, ()) for b in kept]
    reasons: list[str] = []
    earlier = {clean_code(h) for h in history if h.strip()}
    quoted = [b for b in kept[:-1] if clean_code(b.code) in earlier or _QUOTE.search(_last_line(b.before))]
    if quoted:
        kept = [b for b in kept if b not in quoted]
        reasons.append("code quoted from an earlier round was not run again")
    for index in range(len(kept) - 1, 0, -1):
        if _CORRECTION.search(kept[index].before):
            kept = kept[index:]
            reasons.append("the blocks before your correction were not run")
            break
    superseded = [a for i, a in enumerate(kept[:-1]) if any(_rewrites(b, a) for b in kept[i + 1 :])]
    if superseded:
        kept = [b for b in kept if b not in superseded]
        reasons.append("an earlier attempt rewritten by a later block was not run")
    result: list[tuple[str, tuple[str, ...]]] = []
    for start in range(len(kept)):
        part = kept[start:]
        if len(part) == 1 and total == 1:
            result.append((part[0].code, ()))
            continue
        why = [*reasons] if start == 0 else [*reasons, "the blocks do not parse as one program"]
        ran = "they ran as one program, in order" if len(part) > 1 else "only the last one ran"
        if len(part) > 1 and start > 0:
            ran = f"only the last {len(part)} ran, as one program"
        note = f"your reply held {total} code blocks; {ran}"
        if why:
            note += " (" + "; ".join(why) + ")"
        result.append(("\n".join(clean_code(b.code) for b in part), (note,)))
    return result


def _dedupe(blocks: list[Block]) -> list[Block]:
    """Blocks repeated verbatim are kept once, at their last place."""
    seen: set[str] = set()
    kept: list[Block] = []
    for block in reversed(blocks):
        key = clean_code(block.code)
        if key not in seen:
            seen.add(key)
            kept.append(block)
    return kept[::-1]


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().split("\n") if line.strip()]
    return lines[-1] if lines else ""


def _defined(code: str) -> tuple[set[str], set[str]]:
    """``(functions and classes, every top-level bound name)`` of ``code`` (empty sets when it does not parse)."""
    try:
        body = parse_python(clean_code(code)).body
    except (SyntaxError, ValueError):
        return set(), set()
    definitions = {s.name for s in body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
    bound = set(definitions)
    for statement in body:
        targets: list[ast.expr] = []
        if isinstance(statement, ast.Assign):
            targets = list(statement.targets)
        elif isinstance(statement, ast.AugAssign | ast.AnnAssign | ast.For | ast.AsyncFor):
            targets = [statement.target]
        elif isinstance(statement, ast.Import | ast.ImportFrom):
            bound |= {(a.asname or a.name).split(".")[0] for a in statement.names}
        for target in targets:
            bound |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return definitions, bound


def _rewrites(later: Block, earlier: Block) -> bool:
    """True when ``later`` is a new version of ``earlier``.

    Either it defines again every function and class ``earlier`` defines, or the two are mostly the
    same text and ``later`` binds every name ``earlier`` binds (a broken ``earlier`` needs only the
    text): two loops over different things stay two steps.
    """
    a, b = clean_code(earlier.code), clean_code(later.code)
    (defs_a, names_a), (defs_b, names_b) = _defined(a), _defined(b)
    if defs_a and defs_a <= defs_b:
        return True
    if a.count("\n") < 1:
        return False  # one-liners are too short to tell a rewrite from the next step
    ratio = difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()
    if syntax_error(a) is not None:
        return ratio >= 0.5
    return ratio >= 0.6 and bool(names_a) and names_a <= names_b
