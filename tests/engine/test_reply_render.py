"""How rounds in which no code ran, and errors, are rendered in the terminal (``render_event``, ``error_summary``)."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from codeact.engine.events import CodeCompleted, error_summary, render_event, reply_excerpt


def _render(**payload: Any) -> str:
    out = io.StringIO()
    render_event(CodeCompleted(run_id="r", sequence=1, timestamp=0.0, round=1, **payload), Console(file=out, width=200))
    return out.getvalue()


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        pytest.param("I will check the project first.", "I will check the project first.", id="prose"),
        pytest.param("", "(an empty reply)", id="empty"),
        pytest.param("```bash\nls -la\n```", "```bash\nls -la\n```", id="bash"),
    ],
)
def test_a_round_without_code_shows_what_the_model_said_and_why(reply: str, said: str) -> None:
    why = {"type": "NoCode", "message": "Your reply contains no Python code.", "reason": "no_code"}
    text = _render(status="no_code", error=why, reply=reply_excerpt(reply))
    assert text == f"model said: {said}\nnothing ran: Your reply contains no Python code.\n"


def test_a_syntax_error_shows_the_models_line_and_that_nothing_ran() -> None:
    error = {"type": "SyntaxError", "message": "'(' was never closed", "reason": "syntax", "line": 2,
             "source": "x = (1, 2"}  # fmt: skip
    text = _render(status="parse_error", error=error, reply="keep = 41\nx = (1, 2")
    assert text.splitlines()[-1] == "SyntaxError: '(' was never closed (line 2: x = (1, 2); nothing ran"


@pytest.mark.parametrize(
    ("error", "line"),
    [
        pytest.param(
            {"type": "KeyError", "message": "'a'", "line": 2, "program_line": 9, "source": "d['a']"},
            "KeyError: 'a' (line 2: d['a']; program line 9)",
            id="event",
        ),
        pytest.param(
            {"type": "KeyError", "message": "'a'", "line": 9, "model_line": 2, "source": "d['a']"},
            "KeyError: 'a' (line 2: d['a']; program line 9)",
            id="record",
        ),
        pytest.param({"type": "KeyError", "message": "'a'", "line": 9}, "KeyError: 'a' (program line 9)", id="old"),
        pytest.param(
            {"type": "E", "message": "m", "line": None, "program_line": 12}, "E: m (program line 12)", id="in-frame"
        ),
    ],
)
def test_event_and_record_errors_read_the_same(error: dict[str, Any], line: str) -> None:
    assert error_summary(error) == line


def test_a_long_reply_is_trimmed() -> None:
    excerpt = reply_excerpt("word " * 200)
    assert len(excerpt) == 300 and excerpt.endswith("…")
    assert reply_excerpt("a\n\n\n  \nb") == "a\nb"


def test_the_terminal_says_the_error_once_and_shows_how_the_code_was_read() -> None:
    from codeact.engine.events import CodeStarted

    error = {"type": "IndexError", "message": "list index out of range", "line": 2, "program_line": 6}
    text = _render(status="error", stdout="1\nError: IndexError('list index out of range')\n", error=error)
    assert text == "1\nIndexError: list index out of range (line 2; program line 6)\n"
    out = io.StringIO()
    note = "your reply held 2 code blocks; they ran as one program, in order"
    render_event(CodeStarted(run_id="r", sequence=1, timestamp=0.0, round=1, code="x = 1", notes=(note,)),
                 Console(file=out, width=200))  # fmt: skip
    assert out.getvalue() == f"x = 1\nnote: {note}\n"
