"""The FIM frame (program, line mapping, sanitizing) and the token table."""

from __future__ import annotations

import ast
import asyncio
import inspect
import io
from contextlib import redirect_stdout
from typing import Any

import pytest

from codeact.segments import FIM_FAMILIES, CodeFrame, FimTokens, PromptConfigError, build_frame, fim_tokens_for

EXPECTED_PREFIX = (
    "# Goal: list the titles\n"
    "# Variables from earlier rounds (defined; reuse, do not redefine):\n"
    "#   project_id: str = '123'\n"
    "#   rows: list = [{'id': 1}]\n"
    "import json\n"
    "\n"
    "try:\n"
)
EXPECTED_SUFFIX = 'except Exception as e:\n    print(f"Error: {e!r}")\n    raise\n'


def _frame() -> CodeFrame:
    return build_frame(
        {"rows": ("list", "[{'id': 1}]"), "project_id": ("str", "'123'")},
        imports=["import json"],
        goal="list the titles",
    )


def test_frame_prefix_and_suffix_exact() -> None:
    frame = _frame()
    assert frame.prefix == EXPECTED_PREFIX
    assert frame.suffix == EXPECTED_SUFFIX
    assert frame.prefix_lines == 7


def test_frame_without_variables_or_reraise() -> None:
    frame = build_frame(reraise=False)
    assert frame.prefix == (
        "# Variables from earlier rounds (defined; reuse, do not redefine):\n#   (none yet)\n\ntry:\n"
    )
    assert frame.suffix == 'except Exception as e:\n    print(f"Error: {e!r}")\n'


def test_program_is_prefix_body_suffix() -> None:
    frame = _frame()
    middle = "titles = [r['id'] for r in rows]\nprint(titles)"
    program = frame.program(middle)
    assert program == EXPECTED_PREFIX + "    titles = [r['id'] for r in rows]\n    print(titles)\n" + EXPECTED_SUFFIX
    ast.parse(program)


@pytest.mark.parametrize(
    ("middle", "body"),
    [
        pytest.param("x = 1", "    x = 1\n", id="one-line"),
        pytest.param("    x = 1\n    y = 2\n", "    x = 1\n    y = 2\n", id="already-indented"),
        pytest.param("x = 1\r\nif x:\r\n    y = 2\r\n", "    x = 1\n    if x:\n        y = 2\n", id="crlf"),
        pytest.param("if x:\n\ty = 1", "    if x:\n        y = 1\n", id="tabs"),
        pytest.param("x = 1\n    y = 2", "    x = 1\n    y = 2\n", id="fim-first-line-flush"),
        pytest.param("x = 1\n\ny = 2", "    x = 1\n\n    y = 2\n", id="blank-line-kept"),
        pytest.param("", "    pass\n", id="empty"),
        pytest.param("# nothing to do", "    # nothing to do\n    pass\n", id="comment-only"),
    ],
)
def test_body_reindents(middle: str, body: str) -> None:
    assert build_frame().body(middle) == body


@pytest.mark.parametrize(
    ("program_line", "expected"),
    [
        pytest.param(1, None, id="header"),
        pytest.param(7, None, id="try-line"),
        pytest.param(8, 1, id="first-middle-line"),
        pytest.param(9, 2, id="second-middle-line"),
        pytest.param(10, None, id="suffix-except"),
        pytest.param(12, None, id="suffix-raise"),
    ],
)
def test_map_line_with_middle(program_line: int, expected: int | None) -> None:
    assert _frame().map_line(program_line, "x = 1\ny = x / 0") == expected


def test_map_line_without_middle_maps_everything_after_prefix() -> None:
    assert _frame().map_line(20) == 13


def _run(program: str, variables: dict[str, Any]) -> tuple[str, BaseException | None]:
    code = compile(program, "<program>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    out = io.StringIO()
    error: BaseException | None = None
    with redirect_stdout(out):
        try:
            result = eval(code, variables)  # noqa: S307 - test program we built ourselves
            if inspect.iscoroutine(result):
                asyncio.run(result)
        except Exception as exc:
            error = exc
    return out.getvalue(), error


def test_program_runs_and_error_line_maps_back_to_the_middle() -> None:
    frame = _frame()
    middle = "x = len(rows)\nprint(x)\ny = x / 0"
    stdout, error = _run(frame.program(middle), {"rows": [{"id": 1}], "project_id": "123"})
    assert isinstance(error, ZeroDivisionError)
    assert stdout == "1\nError: ZeroDivisionError('division by zero')\n"
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != "<program>":
        tb = tb.tb_next
    assert tb is not None
    assert frame.map_line(tb.tb_lineno, middle) == 3


def test_program_supports_top_level_await() -> None:
    middle = "import asyncio\nawait asyncio.sleep(0)\nprint('awaited')"
    stdout, error = _run(build_frame().program(middle), {})
    assert (stdout, error) == ("awaited\n", None)


def test_hostile_variable_reprs_cannot_inject_code() -> None:
    frame = build_frame(
        {
            "x": ("str", "'a'\nimport os; os.system('boom')"),
            "y": ("li\nst", "1\r2\u2028 3\x0c4\x00"),
            "bad name\nprint(1)": ("int", "1"),
            "\u0430": ("int", "1"),  # a non-ASCII identifier is skipped too
        }
    )
    assert frame.prefix.count("\n") == 5
    assert "#   x: str = 'a'\\nimport os; os.system('boom')\n" in frame.prefix
    assert "#   y: li\\nst = 1\\r2\\u2028 3\\x0c4\n" in frame.prefix
    assert "bad name" not in frame.prefix
    tree = ast.parse(frame.program("pass"))
    assert [type(node).__name__ for node in tree.body] == ["Try"]


def test_long_repr_is_shortened() -> None:
    frame = build_frame({"big": ("str", "x" * 500)}, max_repr=20)
    assert "#   big: str = " + "x" * 17 + "...\n" in frame.prefix


def test_render_chat_markers() -> None:
    frame = build_frame()
    assert (
        frame.render(FIM_FAMILIES["qwen"]) == f"<|fim_prefix|>{frame.prefix}<|fim_suffix|>{frame.suffix}<|fim_middle|>"
    )


@pytest.mark.parametrize(
    ("family", "expected"),
    [
        pytest.param("qwen", "<|fim_prefix|>P<|fim_suffix|>S<|fim_middle|>", id="qwen"),
        pytest.param(
            "deepseek",
            "<\uff5cfim\u2581begin\uff5c>P<\uff5cfim\u2581hole\uff5c>S<\uff5cfim\u2581end\uff5c>",
            id="deepseek",
        ),
        pytest.param("starcoder", "<fim_prefix>P<fim_suffix>S<fim_middle>", id="starcoder"),
        pytest.param("codellama", "<PRE> P <SUF>S <MID>", id="codellama"),
        pytest.param("codestral", "[SUFFIX]S[PREFIX]P", id="codestral-suffix-first"),
        pytest.param("codegemma", "<|fim_prefix|>P<|fim_suffix|>S<|fim_middle|>", id="codegemma"),
    ],
)
def test_token_table(family: str, expected: str) -> None:
    assert FIM_FAMILIES[family].wrap("P", "S") == expected


@pytest.mark.parametrize(
    ("model", "family"),
    [
        pytest.param("Qwen/Qwen2.5-Coder-7B", "qwen", id="qwen25"),
        pytest.param("text-completion-openai/qwen3-coder-30b-a3b", "qwen", id="qwen3-route"),
        pytest.param("deepseek-ai/deepseek-coder-6.7b-base", "deepseek", id="deepseek"),
        pytest.param("bigcode/starcoder2-15b", "starcoder", id="starcoder2"),
        pytest.param("stabilityai/stable-code-3b", "starcoder", id="stable-code"),
        pytest.param("codellama/CodeLlama-13b-hf", "codellama", id="codellama"),
        pytest.param("text-completion-codestral/codestral-latest", "codestral", id="codestral"),
        pytest.param("google/codegemma-2b", "codegemma", id="codegemma"),
        pytest.param("gpt-4.1-mini", "qwen", id="unknown-defaults-to-qwen"),
    ],
)
def test_fim_tokens_for_guesses_family(model: str, family: str) -> None:
    assert fim_tokens_for(model).family == family


def test_fim_tokens_for_explicit_family() -> None:
    assert fim_tokens_for("gpt-4.1", family="starcoder").family == "starcoder"
    assert fim_tokens_for("starcoder2", family="auto").family == "starcoder"


def test_fim_tokens_for_unknown_family() -> None:
    with pytest.raises(PromptConfigError) as caught:
        fim_tokens_for("x", family="gpt")
    assert str(caught.value) == (
        "unknown FIM family 'gpt': use one of codegemma, codellama, codestral, deepseek, qwen, starcoder, 'auto', "
        "or give the markers in fim_tokens"
    )
    assert caught.value.field == "fim"


def test_custom_tokens() -> None:
    tokens = FimTokens(prefix="<P>", suffix="<S>", middle="<M>", stop=("<E>",))
    assert tokens.wrap("a", "b") == "<P>a<S>b<M>"
    assert tokens.markers == ("<P>", "<S>", "<M>")
    assert tokens.family == "custom"
