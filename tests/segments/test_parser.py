"""The reply parser: many real-world reply shapes, each with the exact code expected."""

from __future__ import annotations

import ast

import pytest

from codeact.segments import (
    CodeParseError,
    Segment,
    SegmentKind,
    ThoughtParseError,
    build_frame,
    extract_code,
    parse_thought,
)
from codeact.segments.fim import FIM_FAMILIES

FRAME = build_frame({"project_id": ("str", "'123'")}, imports=["import json"])
DS = FIM_FAMILIES["deepseek"]
F = "```"

CASES = [
    # --- raw code ---
    pytest.param("print(1)", "print(1)", id="raw-one-line"),
    pytest.param("x = 1\nprint(x)\n", "x = 1\nprint(x)", id="raw-two-lines"),
    pytest.param("\n\n  \nx = 1\n\n", "x = 1", id="raw-blank-lines-around"),
    pytest.param("x = 1\r\nprint(x)\r\n", "x = 1\nprint(x)", id="raw-crlf"),
    pytest.param("x = 1\rprint(x)", "x = 1\nprint(x)", id="raw-lone-cr"),
    pytest.param("    x = 1\n    print(x)", "x = 1\nprint(x)", id="raw-indented-body"),
    pytest.param("\tx = 1\n\tif x:\n\t\tprint(x)", "x = 1\nif x:\n    print(x)", id="raw-tabs"),
    pytest.param(
        "if x:\n\tprint(1)\nelse:\n\tprint(2)", "if x:\n    print(1)\nelse:\n    print(2)", id="raw-tab-blocks"
    ),
    pytest.param("x = 1\n    y = 2\n    print(y)", "x = 1\ny = 2\nprint(y)", id="raw-fim-first-line-flush"),
    pytest.param("r = await tk.get(id=1)\nprint(r)", "r = await tk.get(id=1)\nprint(r)", id="raw-top-level-await"),
    pytest.param(
        "async for item in tk.stream():\n    print(item)",
        "async for item in tk.stream():\n    print(item)",
        id="raw-async-for",
    ),
    pytest.param("\ufeffprint(1)", "print(1)", id="raw-bom"),
    pytest.param("x = 1   \nprint(x)  ", "x = 1\nprint(x)", id="raw-trailing-spaces"),
    pytest.param("# just look\nprint(project_id)", "# just look\nprint(project_id)", id="raw-leading-comment"),
    pytest.param(
        "def f(a):\n    return a * 2\n\nprint(f(2))", "def f(a):\n    return a * 2\n\nprint(f(2))", id="raw-function"
    ),
    # --- fenced ---
    pytest.param(f"{F}python\nprint(1)\n{F}", "print(1)", id="fence-python"),
    pytest.param(f"{F}py\nprint(1)\n{F}", "print(1)", id="fence-py"),
    pytest.param(f"{F}Python\nprint(1)\n{F}", "print(1)", id="fence-capitalized"),
    pytest.param(f"{F}python3\nprint(1)\n{F}", "print(1)", id="fence-python3"),
    pytest.param(f"{F}\nprint(1)\n{F}", "print(1)", id="fence-bare"),
    pytest.param("~~~python\nprint(1)\n~~~", "print(1)", id="fence-tilde"),
    pytest.param("````python\nprint(1)\n````", "print(1)", id="fence-four-backticks"),
    pytest.param(f'{F}python title="step.py"\nprint(1)\n{F}', "print(1)", id="fence-with-attributes"),
    pytest.param(f"  {F}python\n  x = 1\n  print(x)\n  {F}", "x = 1\nprint(x)", id="fence-indented"),
    pytest.param(f"{F}python print(1) {F}", "print(1)", id="fence-inline"),
    pytest.param(f"Here is the code:\n\n{F}python\nprint(1)\n{F}", "print(1)", id="fence-prose-before"),
    pytest.param(f"{F}python\nprint(1)\n{F}\n\nThis prints 1.", "print(1)", id="fence-prose-after"),
    pytest.param(
        f"First I load it.\n{F}python\ndata = await tk.load()\n{F}\nThen I print it.\n{F}python\nprint(data)\n{F}",
        "data = await tk.load()\nprint(data)",
        id="fence-two-python-blocks-joined",
    ),
    pytest.param(f"{F}python\nx = 1\n{F}\nOutput:\n{F}\n1\n{F}", "x = 1", id="fence-python-then-untagged-output"),
    pytest.param(f"{F}python\nprint(1)\n{F}\n{F}text\n1\n{F}", "print(1)", id="fence-python-then-text-block"),
    pytest.param(f"{F}python\nprint(1)\n{F}\nagain:\n{F}python\nprint(1)\n{F}", "print(1)", id="fence-duplicate-block"),
    pytest.param(
        f"{F}python\nfor i in range(3):\n{F}\n{F}python\nprint(2)\n{F}",
        "print(2)",
        id="fence-join-fails-last-parsing-block",
    ),
    pytest.param(f"{F}python\nx = 1\nprint(x)\n", "x = 1\nprint(x)", id="fence-unclosed"),
    pytest.param(f"{F}python\r\nx = 1\r\n{F}\r\n", "x = 1", id="fence-crlf"),
    pytest.param(f"{F}python\n\tif True:\n\t\tprint(1)\n{F}", "if True:\n    print(1)", id="fence-tabs"),
    pytest.param(f"{F}python\n# comment first\nx = 1\n{F}", "# comment first\nx = 1", id="fence-comment-first"),
    pytest.param(f"{F}pycon\n>>> x = 1\n>>> print(x)\n1\n{F}", "x = 1\nprint(x)", id="fence-pycon-prompts"),
    # --- tags ---
    pytest.param("<execute>\nprint(1)\n</execute>", "print(1)", id="tag-execute"),
    pytest.param("<code>print(1)</code>", "print(1)", id="tag-code"),
    pytest.param("<python>\nprint(1)\n</python>", "print(1)", id="tag-python"),
    pytest.param("I will run:\n<execute>\nx = 2\nprint(x)\n</execute>\nDone.", "x = 2\nprint(x)", id="tag-with-prose"),
    pytest.param("<execute>\nprint(1)\n", "print(1)", id="tag-unclosed"),
    pytest.param(f"<execute>\n{F}python\nprint(1)\n{F}\n</execute>", "print(1)", id="tag-containing-fence"),
    pytest.param("<execute>a = 1</execute>\n<execute>print(a)</execute>", "a = 1\nprint(a)", id="tag-two"),
    # --- FIM markers echoed back ---
    pytest.param("<|fim_middle|>print(1)", "print(1)", id="fim-middle-marker-first"),
    pytest.param("<|fim_middle|>print(1)<|endoftext|>", "print(1)", id="fim-middle-and-eot"),
    pytest.param(
        "<|fim_prefix|>try:\n<|fim_suffix|>except Exception as e:\n    pass\n<|fim_middle|>    x = 1\n    print(x)",
        "x = 1\nprint(x)",
        id="fim-whole-frame-echoed",
    ),
    pytest.param(f"{DS.middle}print(1)", "print(1)", id="fim-deepseek-marker"),
    pytest.param("<fim_middle>print(1)<|endoftext|>", "print(1)", id="fim-starcoder-marker"),
    pytest.param(" <MID> print(1) <EOT>", "print(1)", id="fim-codellama-marker"),
    pytest.param("print(1)<|fim_middle|>", "print(1)", id="fim-marker-trailing"),
    pytest.param("print(1)<|im_end|>", "print(1)", id="chat-end-token"),
    pytest.param("print(1)\n<|file_sep|>other.py\nimport os", "print(1)", id="eot-file-separator"),
    # --- frame repeated ---
    pytest.param(
        FRAME.prefix + "    x = project_id\n    print(x)\n" + FRAME.suffix, "x = project_id\nprint(x)", id="frame-both"
    ),
    pytest.param(FRAME.prefix + "    print(project_id)\n", "print(project_id)", id="frame-prefix-only"),
    pytest.param("print(project_id)\n" + FRAME.suffix, "print(project_id)", id="frame-suffix-only"),
    pytest.param(f"{F}python\n{FRAME.prefix}    print(1)\n{FRAME.suffix}{F}", "print(1)", id="frame-inside-fence"),
    pytest.param(
        "try:\n    x = int('a')\nexcept ValueError:\n    x = 0\nprint(x)",
        "try:\n    x = int('a')\nexcept ValueError:\n    x = 0\nprint(x)",
        id="own-try-except-kept",
    ),
    pytest.param("import json\nprint(json.dumps({}))", "print(json.dumps({}))", id="frame-import-repeated"),
    # --- prose ---
    pytest.param(
        "Sure, let me check the project.\n\ninfo = await tk.get_project_info(project_id='123')\nprint(info)",
        "info = await tk.get_project_info(project_id='123')\nprint(info)",
        id="prose-before-raw",
    ),
    pytest.param("x = 1\nprint(x)\n\nThis prints the value of x.", "x = 1\nprint(x)", id="prose-after-raw"),
    pytest.param(
        "Let me do it:\nx = 1\nprint(x)\nThat should work!", "x = 1\nprint(x)", id="prose-both-sides-no-blank"
    ),
    pytest.param("Thought: I need the project.\nPython:\nprint(project_id)", "print(project_id)", id="label-python"),
    pytest.param("Python: print(project_id)", "print(project_id)", id="label-python-inline"),
    pytest.param("Python:\nprint(1)\nEvaluation: it will print 1", "print(1)", id="label-python-then-evaluation"),
    pytest.param(
        "<think>Maybe `import os; os.remove('x')`?\nNo.</think>\nprint('safe')",
        "print('safe')",
        id="think-block-dropped",
    ),
    pytest.param('{"code": "print(3)"}', "print(3)", id="json-code"),
    pytest.param('{"thought": "x", "python": "a = 1\\nprint(a)"}', "a = 1\nprint(a)", id="json-python-key"),
    pytest.param(f'{F}json\n{{"code": "print(3)"}}\n{F}', "print(3)", id="json-in-fence"),
    # --- tags with code on the opening tag's line ---
    pytest.param("<execute> print(x) </execute>", "print(x)", id="tag-inline-spaces"),
    pytest.param(
        "<execute> graph = {\n    'a': ['b'],\n    'b': [],\n}\nprint(graph)\n</execute>",
        "graph = {\n    'a': ['b'],\n    'b': [],\n}\nprint(graph)",
        id="tag-code-on-tag-line-then-block",
    ),
    pytest.param(
        "<execute> for n in range(2):\n        print(n)\n</execute>",
        "for n in range(2):\n        print(n)",
        id="tag-code-on-tag-line-indented-body",
    ),
    # --- several blocks ---
    pytest.param(
        f"{F}python\nx = int('a')\n{F}\nWait, that fails. Corrected:\n{F}python\nx = int('1')\nprint(x)\n{F}",
        "x = int('1')\nprint(x)",
        id="blocks-first-attempt-then-correction",
    ),
    pytest.param(
        f"{F}python\ndef area(r):\n    return 3.14 * r\n{F}\n{F}python\ndef area(r):\n    return 3.14 * r * r\n"
        f"print(area(2))\n{F}",
        "def area(r):\n    return 3.14 * r * r\nprint(area(2))",
        id="blocks-function-rewritten",
    ),
    pytest.param(
        f"The code I ran before:\n{F}python\nprint(total)\n{F}\nNow:\n{F}python\ntotal = 3\nprint(total)\n{F}",
        "total = 3\nprint(total)",
        id="blocks-quoted-earlier-code",
    ),
    pytest.param(
        "<execute>x = (1, 2</execute>\nOops, fixed:\n<execute>x = (1, 2)\nprint(x)</execute>",
        "x = (1, 2)\nprint(x)",
        id="tags-broken-then-fixed",
    ),
]


@pytest.mark.parametrize(("reply", "expected"), CASES)
def test_extract_code(reply: str, expected: str) -> None:
    block = extract_code(reply, frame=FRAME)
    assert block.code == expected
    ast.parse(block.code)
    ast.parse(FRAME.program(block.code))


def test_there_are_at_least_sixty_reply_shapes() -> None:
    assert len(CASES) >= 60


@pytest.mark.parametrize(
    ("reply", "source"),
    [
        pytest.param("print(1)", "raw", id="raw"),
        pytest.param(f"{F}python\nprint(1)\n{F}", "fence", id="fence"),
        pytest.param("<execute>print(1)</execute>", "tag", id="tag"),
        pytest.param("<|fim_middle|>print(1)", "fim", id="fim"),
        pytest.param('{"code": "print(1)"}', "json", id="json"),
    ],
)
def test_code_block_reports_source(reply: str, source: str) -> None:
    assert extract_code(reply).source == source


def test_notes_say_what_was_repaired() -> None:
    block = extract_code(FRAME.prefix + "    print(1)\n" + FRAME.suffix, frame=FRAME)
    assert block.notes == ("the reply repeated the frame's prefix or suffix; only the middle was kept",)
    assert extract_code(f"First:\n{F}python\nx = 1\n{F}\nThen:\n{F}python\nprint(x)\n{F}").notes == (
        "your reply held 2 code blocks; they ran as one program, in order",
    )


def test_without_frame_a_try_except_reply_is_kept_whole() -> None:
    reply = FRAME.prefix + "    print(1)\n" + FRAME.suffix
    code = extract_code(reply).code
    assert code.startswith("# Variables from earlier rounds") and code.endswith("raise")


ERRORS = [
    pytest.param(
        "",
        "empty",
        "Your reply was empty. Reply with the Python code that fills the hole after `try:` (only the code; explain "
        "in `#` comments).",
        id="empty",
    ),
    pytest.param("   \n\t\n", "empty", None, id="whitespace"),
    pytest.param("<think>only thinking</think>", "empty", None, id="only-think"),
    pytest.param(
        "I cannot help with that request.",
        "no_code",
        "Your reply contains no Python code. Reply with the Python code that fills the hole after `try:` (only the "
        "code; explain in `#` comments).",
        id="prose-only",
    ),
    pytest.param("OK", "no_code", None, id="single-word"),
    pytest.param("42", "no_code", None, id="number"),
    pytest.param(
        f"{F}bash\nls -la\n{F}",
        "wrong_language",
        "Your reply contains only bash code blocks, and only Python runs here. Reply with the Python code that fills "
        "the hole after `try:`.",
        id="bash-block",
    ),
    pytest.param(
        "x = = 1\nprint(x)",
        "syntax",
        "The code in your reply does not parse: invalid syntax (line 1: `x = = 1`). Reply with the whole corrected "
        "code, not a diff.",
        id="syntax-error",
    ),
    pytest.param(f"{F}python\ndef f(:\n    pass\nprint(1)\n{F}", "syntax", None, id="syntax-error-in-fence"),
    # a reply cut off mid-statement is a syntax error: no part of it runs
    pytest.param("x = 1\nprint(foo(x,", "syntax", None, id="cut-open-paren"),
    pytest.param("x = 1\ny = {\n  'a': 1,\n  'b':", "syntax", None, id="cut-open-dict"),
    pytest.param('x = 1\nprint("hel', "syntax", None, id="cut-open-string"),
    pytest.param("x = 1\nfor i in range(3):", "syntax", None, id="cut-block-header"),
    pytest.param("x = 1\nif x:\n    print(x)\nelse", "syntax", None, id="cut-after-else"),
    pytest.param(f"{F}python\nx = 1\nprint(x\n", "syntax", None, id="cut-unclosed-fence"),
    pytest.param('x = 1\ns = """abc\ndef', "syntax", None, id="cut-triple-quote"),
]


@pytest.mark.parametrize(("reply", "reason", "message"), ERRORS)
def test_extract_code_errors(reply: str, reason: str, message: str | None) -> None:
    with pytest.raises(CodeParseError) as caught:
        extract_code(reply, frame=FRAME)
    assert caught.value.reason == reason
    assert caught.value.code == "reply.code.missing"
    assert caught.value.reply == reply
    if message is not None:
        assert str(caught.value) == message


def test_broken_code_is_never_cut_down_to_what_parses() -> None:
    with pytest.raises(CodeParseError) as caught:
        extract_code("keep = 41\nx = (1, 2\nprint(x)", frame=FRAME)
    error = caught.value
    assert (error.reason, error.line, error.text, error.detail) == ("syntax", 2, "x = (1, 2", "'(' was never closed")
    assert str(error) == (
        "The code in your reply does not parse: '(' was never closed (line 2: `x = (1, 2`). Reply with the whole "
        "corrected code, not a diff."
    )


def test_broken_code_in_the_fim_shape_reports_the_real_error_not_the_indentation() -> None:
    with pytest.raises(CodeParseError) as caught:
        extract_code("keep = 41\n    x = (1, 2\n    print(x)", frame=FRAME)
    assert (caught.value.detail, caught.value.line, caught.value.text) == ("'(' was never closed", 2, "x = (1, 2")


def test_the_line_of_a_broken_block_is_the_line_in_that_block() -> None:
    reply = f"Load:\n{F}python\nrows = [1]\n{F}\nThen:\n{F}python\nfor r in rows:\nprint(r)\n{F}"
    with pytest.raises(CodeParseError) as caught:
        extract_code(reply, frame=FRAME)
    assert (caught.value.line, caught.value.text) == (2, "print(r)")


def test_a_block_repeating_an_earlier_rounds_code_is_not_run_again() -> None:
    reply = f"{F}python\nrows = load()\n{F}\n{F}python\nprint(len(rows))\n{F}"
    block = extract_code(reply, history=["rows = load()"])
    assert block.code == "print(len(rows))"
    assert block.notes == (
        "your reply held 2 code blocks; only the last one ran (code quoted from an earlier round was not run again)",
    )


def _kinds(segments: list[Segment]) -> list[tuple[str, str]]:
    return [(s.kind, s.content) for s in segments]


THOUGHTS = [
    pytest.param("Thought: a\nPlan: b", [("Thought", "a"), ("Plan", "b")], id="plain"),
    pytest.param("thought: a\nplan: b", [("Thought", "a"), ("Plan", "b")], id="lowercase"),
    pytest.param("**Thought:** a\n**Plan:**\n1. x\n2. y", [("Thought", "a"), ("Plan", "1. x\n2. y")], id="bold"),
    pytest.param("## Thought\na\n## Plan\nb", [("Thought", "a"), ("Plan", "b")], id="headings"),
    pytest.param("- Thought: a\n- Plan: b", [("Thought", "a"), ("Plan", "b")], id="bullets"),
    pytest.param("Thought 2: a\nPlan 2: b", [("Thought", "a"), ("Plan", "b")], id="numbered"),
    pytest.param("Thought：a\nPlan：b", [("Thought", "a"), ("Plan", "b")], id="fullwidth-colon"),
    pytest.param(
        "I should look first.\nPlan: look",
        [("Thought", "I should look first."), ("Plan", "look")],
        id="unlabelled-start",
    ),
    pytest.param("just thinking", [("Thought", "just thinking")], id="no-labels"),
    pytest.param("<thought>a</thought><plan>b</plan>", [("Thought", "a"), ("Plan", "b")], id="xml"),
    pytest.param('{"thought": "a", "plan": ["x", "y"]}', [("Thought", "a"), ("Plan", "- x\n- y")], id="json"),
    pytest.param(
        "NextGoal: print titles\nExpress: Found 3.",
        [("NextGoal", "print titles"), ("Express", "Found 3.")],
        id="next-goal",
    ),
    pytest.param("Next goal: done", [("NextGoal", "done")], id="next-goal-spaced"),
    pytest.param("Thought: a\r\nPlan: b\r\n", [("Thought", "a"), ("Plan", "b")], id="crlf"),
    pytest.param("Thought: a\nThought: b", [("Thought", "a\nb")], id="repeated-label-merged"),
    pytest.param("<think>hidden</think>Thought: a", [("Thought", "a")], id="think-dropped"),
    pytest.param("<think>only this</think>", [("Thought", "only this")], id="think-only-used"),
    pytest.param(
        "Thought: a\n```python\nplan: int = 1\n```", [("Thought", "a\n```python\nplan: int = 1\n```")], id="fence-kept"
    ),
    pytest.param("The plan is simple: look.", [("Thought", "The plan is simple: look.")], id="plan-word-in-prose"),
]


@pytest.mark.parametrize(("reply", "expected"), THOUGHTS)
def test_parse_thought(reply: str, expected: list[tuple[str, str]]) -> None:
    assert _kinds(parse_thought(reply, round_index=2)) == expected


def test_parse_thought_sets_round_and_exec_id() -> None:
    segments = parse_thought("Thought: a", round_index=3, exec_id="r3")
    assert [(s.kind, s.round_index, s.exec_id) for s in segments] == [(SegmentKind.THOUGHT, 3, "r3")]


def test_parse_thought_empty_reply() -> None:
    with pytest.raises(ThoughtParseError) as caught:
        parse_thought("  \n")
    assert (
        str(caught.value)
        == "Your reply was empty. Reply with Express, NextGoal, Plan, Thought lines, each as `Label: text`."
    )
    assert caught.value.code == "reply.thought.missing"


# --- replies that invent the next turn, toolkit imports, indented middles (real Qwen2.5-Coder shapes) ---------

CHAT_FRAME = build_frame({"apps": ("list", "[{'id': 'checkout-api'}]")})
DEPLOY = 'deploy_id = await devops.deploy_app("checkout-api", "2.4.0")\nprint(f"Deploy ID: {deploy_id}")'
INVENTED = "your reply went on after the code as if it had already run (from its '{}:' line)"

INVENTED_TURNS = [
    pytest.param(
        f"{F}python\n{DEPLOY}\n{F}\nOutput:\n{F}\nDeploy ID: D-1001\n{F}\nAssistant: The deploy id is D-1001.\n"
        f"{F}python\nstatus = await devops.get_deploy_status(deploy_id=deploy_id['id']",
        DEPLOY,
        "Output",
        id="chat-output-then-next-turn-cut-off",
    ),
    pytest.param(
        f"{F}python\n{DEPLOY}\nEvaluation: Your reply contains no Python code. Reply with the Python code that "
        f"fills the hole after `try:` (only the code; explain in `#` comments).\n{F}",
        DEPLOY,
        "Evaluation",
        id="chat-evaluation-inside-the-block",
    ),
    pytest.param(
        f"Thought: deploy the backend\n{F}python\n{DEPLOY}\n{F}\n\nUser: thanks! now check it\n\n{F}python\nprint(x",
        DEPLOY,
        "User",
        id="chat-invented-user-turn",
    ),
    pytest.param(
        f"{DEPLOY}\nObservation: {{'id': 'D-1001', 'status': 'succeeded'}}\nThought: done\n"
        "await system.finish(answer=deploy_id['id']",
        DEPLOY,
        "Observation",
        id="raw-observation-then-cut-off-call",
    ),
    pytest.param(
        CHAT_FRAME.prefix
        + "    "
        + DEPLOY.replace("\n", "\n    ")
        + "\n"
        + CHAT_FRAME.suffix
        + "Output:\nDeploy ID: D-1001\nPython:\nawait system.finish(",
        DEPLOY,
        "Output",
        id="fim-echoed-frame-then-output",
    ),
    pytest.param(
        f"<|fim_middle|>{DEPLOY}\nEvaluation:\nDeploy ID: D-1001\nNextGoal: done",
        DEPLOY,
        "Evaluation",
        id="fim-marker-then-evaluation",
    ),
    pytest.param(
        # raw FIM completion: the prompt shows history as comments, and the 1.5B model went on writing them
        f"{DEPLOY}\n# Evaluation: Output:\n# Deploy ID: D-1001\n\n# Variables from earlier rounds:\ntry:\n    x = (",
        DEPLOY,
        "Evaluation",
        id="raw-completion-history-comment",
    ),
]


def test_a_comment_with_a_label_in_raw_code_is_code() -> None:
    """Only the raw prompt's own `# Evaluation:` ends raw code; `# Output: ...` is the model's comment."""
    raw = "total = 1 + 2\n# Output: the sum\nprint(total)"
    assert extract_code(raw, frame=CHAT_FRAME).code == raw


@pytest.mark.parametrize(("reply", "expected", "label"), INVENTED_TURNS)
def test_a_reply_that_invents_the_next_turn_runs_the_code_before_it(reply: str, expected: str, label: str) -> None:
    block = extract_code(reply, frame=CHAT_FRAME)
    assert block.code == expected
    assert block.notes[0].startswith(INVENTED.format(label))
    assert "the rest was ignored" in block.notes[0]


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(f"{F}python\nr = await devops.deploy_app(app_id='x'\n{F}\nOutput:\n42", id="chat"),
        pytest.param("r = await devops.deploy_app(app_id='x'\nObservation: ok\nprint(r)", id="raw"),
    ],
)
def test_broken_code_before_an_invented_turn_still_runs_nothing(reply: str) -> None:
    with pytest.raises(CodeParseError) as caught:
        extract_code(reply, frame=CHAT_FRAME)
    assert caught.value.reason == "syntax"


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("output = compute()\nprint(output)", id="a-name-that-looks-like-a-label"),
        pytest.param("result: int = 3\nprint(result)", id="annotated-assignment"),
        pytest.param('print("Output:")\nprint(1)', id="label-in-a-string"),
    ],
)
def test_code_that_only_looks_like_a_turn_label_is_kept(code: str) -> None:
    assert extract_code(f"{F}python\n{code}\n{F}").code == code
    assert extract_code(code).notes == ()


IMPORTS = [
    pytest.param("from tools import devops\nprint(1)", "pass\nprint(1)", id="from-tools-import"),
    pytest.param("import devops\nimport json\nprint(1)", "pass\nimport json\nprint(1)", id="import-toolkit"),
    pytest.param("import json, devops as d\nprint(1)", "import json; d = devops\nprint(1)", id="mixed-import-alias"),
    pytest.param(
        "from devops import get_app_list, deploy_app as deploy\nprint(1)",
        "get_app_list = devops.get_app_list; deploy = devops.deploy_app\nprint(1)",
        id="from-toolkit-import-operations",
    ),
    pytest.param(
        "if True:\n    from tools import devops, system\nprint(1)", "if True:\n    pass\nprint(1)", id="nested"
    ),
    pytest.param(
        "from tools import (\n    devops,\n    system,\n)\nprint(1)",
        "pass\n\n\n\nprint(1)",
        id="parenthesized-keeps-lines",
    ),
]


@pytest.mark.parametrize(("reply", "expected"), IMPORTS)
def test_imports_of_granted_toolkits_bind_the_toolkit(reply: str, expected: str) -> None:
    block = extract_code(reply, toolkits=("devops", "system"))
    assert block.code == expected
    assert block.code.count("\n") == reply.count("\n")  # error lines still map to the model's lines
    assert "toolkits are not modules" in block.notes[-1]


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param("from tools import secrets\nprint(1)", id="ungranted-name"),
        pytest.param("from tools import devops, secrets\nprint(1)", id="one-ungranted-name"),
        pytest.param("import os\nprint(1)", id="a-real-module"),
        pytest.param("from devops import *\nprint(1)", id="star"),
    ],
)
def test_imports_of_anything_not_granted_are_left_for_the_sandbox_to_refuse(reply: str) -> None:
    block = extract_code(reply, toolkits=("devops", "system"))
    assert block.code == reply
    assert block.notes == ()


def test_an_indented_middle_under_flush_comments_is_dedented_once() -> None:
    reply = "# Get the applications\n# of the project\n    apps = await devops.get_app_list(project_id='P-123')\n" \
        "    for app in apps:\n        print(app['id'])"  # fmt: skip
    block = extract_code(reply, frame=CHAT_FRAME)
    assert block.code == (
        "# Get the applications\n# of the project\napps = await devops.get_app_list(project_id='P-123')\n"
        "for app in apps:\n    print(app['id'])"
    )
    assert block.notes == (
        "your code was indented as a whole (it is the body of the frame's `try:`); it was dedented once",
    )


def test_asyncio_run_is_said_in_a_note() -> None:
    reply = (
        f"{F}python\nfrom tools import devops\nimport asyncio\n\nasync def main():\n"
        "    apps = await devops.get_app_list(project_id='P-123')\n    print(apps)\n\n"
        f'if __name__ == "__main__":\n    asyncio.run(main())\n{F}'
    )
    block = extract_code(reply, toolkits=("devops",))
    assert block.code.startswith("pass\nimport asyncio\n")
    assert block.notes[-1] == (
        "`asyncio.run(main())` ran `main()` on the sandbox's own event loop (the sandbox already runs one; "
        "top-level `await main()` does the same)"
    )


def test_an_inline_thought_stops_where_the_invented_turn_starts() -> None:
    reply = f"Thought: list the apps first\n{F}python\nprint(1)\n{F}\nOutput:\n1\nThought: now deploy it"
    [thought] = parse_thought(reply)
    assert thought.content == f"list the apps first\n{F}python\nprint(1)\n{F}"
