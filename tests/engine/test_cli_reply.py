"""What a reply that cannot run does, end to end: ``codeact run`` in a subprocess against the local model server.

A broken reply and a reply cut off at the token limit run nothing (a toolkit call and an assignment
written before the syntax error do not happen); the syntax error at the model's line is in the
terminal, the ``--json`` events, the record and the next prompt; a cut-off reply is continued; a
prose-only round shows what the model said; a runtime error has the same line in the terminal and in
``sessions show``, and appears once in the next prompt. Chat and completion protocols both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.engine.openai_server import OpenAIServer, Reply

CODEACT = str(Path(sys.executable).parent / "codeact")
F = "```"

LEDGER = '''
from __future__ import annotations

import os

from codeact.toolkits import operation, toolkit


@toolkit(name="ledger", description="An append-only ledger (a file)")
class Ledger:
    """Adds items to the file named by LEDGER_FILE: a side effect the test can see."""

    @operation
    async def add(self, item: str) -> str:
        """Add an item.

        Args:
            item: The item.
        """
        with open(os.environ["LEDGER_FILE"], "a") as out:
            out.write(item + "\\n")
        return item
'''


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    environ = {k: v for k, v in os.environ.items() if k not in ("CODEACT_MODEL", "CODEACT_STORE", "CODEACT_PROFILE")}
    environ.update(
        CODEACT_HOME=str(home),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        OPENAI_API_KEY="sk-test",
        LEDGER_FILE=str(tmp_path / "ledger.txt"),
        COLUMNS="200",
    )
    return environ


def _setup(tmp_path: Path) -> tuple[Path, str]:
    (tmp_path / "ledger_tk.py").write_text(LEDGER)
    path = tmp_path / "agent.yaml"
    path.write_text(
        "version: codeact.agent/v1\nextend: codeact-base\nid: reply-agent\n"
        "workflow: {maxTurns: 4, codeact: {thought: 'off'}}\n"
        "toolkits:\n  - ref: system\n  - ref: ledger\n    approval: auto\n"
    )
    return path, f"{tmp_path / 'ledger_tk.py'}:Ledger"


def run(tmp_path: Path, env: dict[str, str], server: OpenAIServer, protocol: str, *extra: str,
        session: str = "S") -> subprocess.CompletedProcess[str]:  # fmt: skip
    path, toolkit = _setup(tmp_path)
    model = "openai/qwen2.5-coder" if protocol == "completion" else "openai/test-model"
    command = [CODEACT, "run", str(path), "--input", "add an item", "--toolkit", toolkit, "--store",
               f"sqlite:///{tmp_path / 'sessions.db'}", "--session", session, "--model", model,
               "--base-url", server.base_url, "--protocol", protocol, *extra]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, env=env, check=False, timeout=180, cwd=tmp_path)


def show(tmp_path: Path, env: dict[str, str], session: str = "S", *, as_json: bool = True) -> Any:
    command = [CODEACT, "sessions", "show", session, "--store", f"sqlite:///{tmp_path / 'sessions.db'}"]
    done = subprocess.run(
        command + (["--json"] if as_json else []), capture_output=True, text=True, env=env, check=True, timeout=120
    )
    return json.loads(done.stdout) if as_json else done.stdout


def code(protocol: str, text: str) -> str:
    """A reply as each protocol's models write it: fenced for chat, the bare middle for completion.

    A completion model continues right after ``try:`` and the body's indentation: its first line is
    flush left, its later lines indented (the FIM shape).
    """
    if protocol == "chat":
        return f"Here is the code.\n{F}python\n{text}\n{F}"
    first, *rest = text.split("\n")
    return "\n".join([first, *(f"    {line}" for line in rest)])


def posts(server: OpenAIServer) -> list[dict[str, Any]]:
    return [r.body for r in server.requests if r.method == "POST"]


def prompt_text(body: dict[str, Any]) -> str:
    return body["prompt"] if "prompt" in body else "\n".join(str(m["content"]) for m in body["messages"])


def ledger(tmp_path: Path) -> list[str]:
    path = tmp_path / "ledger.txt"
    return path.read_text().splitlines() if path.exists() else []


PROTOCOLS = [pytest.param("chat", id="chat"), pytest.param("completion", id="completion")]
BROKEN = "keep = 41\nawait ledger.add(item='first')\nx = (1, 2\nprint(x)"
SYNTAX = "SyntaxError: '(' was never closed (line 3: x = (1, 2); nothing ran"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_broken_reply_runs_nothing_and_says_where(
    tmp_path: Path, env: dict[str, str], openai_server: OpenAIServer, protocol: str
) -> None:
    openai_server.push(code(protocol, BROKEN), code(protocol, "system.finish('fixed')"))
    done = run(tmp_path, env, openai_server, protocol)
    assert done.returncode == 0, done.stderr
    assert ledger(tmp_path) == []  # the toolkit call before the syntax error did not happen
    assert SYNTAX in done.stderr  # the terminal: the model's line, and that nothing ran
    data = show(tmp_path, env)
    first = data["rounds"][0]
    assert (first["status"], first["code"]) == ("parse_error", None)
    assert first["error"] == {
        "type": "SyntaxError",
        "message": "'(' was never closed",
        "reason": "syntax",
        "model_line": 3,
        "source": "x = (1, 2",
    }
    assert "keep" not in data["variables"]  # the assignment before the error did not happen either
    assert SYNTAX in show(tmp_path, env, as_json=False)
    # The next prompt tells the model, at its line.
    assert "does not parse: '(' was never closed (line 3: `x = (1, 2`)" in prompt_text(posts(openai_server)[1])


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_json_events_carry_the_syntax_error_and_no_code_started(
    tmp_path: Path, env: dict[str, str], openai_server: OpenAIServer, protocol: str
) -> None:
    openai_server.push(code(protocol, BROKEN), code(protocol, "system.finish('fixed')"))
    done = run(tmp_path, env, openai_server, protocol, "--json")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    round_one = [e for e in events if e.get("round") == 1]
    assert not [e for e in round_one if e["type"] == "code.started"]
    [completed] = [e for e in round_one if e["type"] == "code.completed"]
    assert completed["status"] == "parse_error"
    assert completed["error"] == {
        "type": "SyntaxError",
        "message": "'(' was never closed",
        "reason": "syntax",
        "line": 3,
        "source": "x = (1, 2",
    }
    assert "x = (1, 2" in completed["reply"]
    assert ledger(tmp_path) == []


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_reply_cut_off_at_the_token_limit_runs_nothing(
    tmp_path: Path, env: dict[str, str], openai_server: OpenAIServer, protocol: str
) -> None:
    cut = code(protocol, "await ledger.add(item='first')\nrows = [1, 2,").removesuffix(f"\n{F}")
    openai_server.push(
        Reply(text=cut, finish_reason="length"),
        Reply(text=" 3,", finish_reason="length"),
        Reply(text=" 4,", finish_reason="length"),
        code(protocol, "system.finish('shorter')"),
    )
    done = run(tmp_path, env, openai_server, protocol)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "shorter\n"
    assert ledger(tmp_path) == []  # a complete statement before the cut did not run
    assert "SyntaxError: reply cut off at the token limit; nothing ran" in done.stderr
    first = show(tmp_path, env)["rounds"][0]
    assert (first["status"], first["code"], first["error"]["reason"]) == ("parse_error", None, "truncated")
    assert first["reply"].endswith("rows = [1, 2, 3, 4,")  # the continuations are concatenated
    assert first["usage"]["code"]["continuations"] == 2
    bodies = posts(openai_server)
    assert len(bodies) == 4  # the reply, two continuations, round 2
    assert "cut off at the token limit (also after 2 requests to continue)" in prompt_text(bodies[3])


def test_a_completion_that_runs_on_into_the_history_comments_is_not_continued(
    tmp_path: Path, env: dict[str, str], openai_server: OpenAIServer
) -> None:
    """The 1.5B model wrote its code, then `# Evaluation: ...` lines to its token limit (continued twice, 150 s)."""
    echoed = (
        code("completion", "total = await ledger.add(item='once')\nprint(total)")
        + "\n# Evaluation: Output:\n# once\n\n# Variables from earlier rounds (defined; reuse, do not redefine):\n"
        + "#   (none yet)\n\ntry:\n    total = await ledger.add(item='once')\n    print(tot"
    )
    openai_server.push(Reply(text=echoed, finish_reason="length"), code("completion", "system.finish(total)"))
    done = run(tmp_path, env, openai_server, "completion")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "once\n"
    assert ledger(tmp_path) == ["once"]  # the code before the echoed history ran, once
    bodies = posts(openai_server)
    assert len(bodies) == 2  # no request to continue: round 1, round 2
    assert "\n# Evaluation:" in bodies[0]["stop"]  # and a server that honours stop strings ends there
    first = show(tmp_path, env)["rounds"][0]
    assert (first["status"], first["stdout"]) == ("ok", "once\n")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_reply_cut_off_while_repeating_one_line_is_not_continued(
    tmp_path: Path, env: dict[str, str], openai_server: OpenAIServer, protocol: str
) -> None:
    """The 1.5B wrote one call fifteen times to its token limit, then 2 x 400 tokens more of it: 130 s a round."""
    looping = "await ledger.add(item='x')\n" + "await ledger.count(letters='aeiou')\n" * 8 + "await ledger.co"
    openai_server.push(
        Reply(text=code(protocol, looping).removesuffix(f"\n{F}"), finish_reason="length"),
        code(protocol, "system.finish('once')"),
    )
    done = run(tmp_path, env, openai_server, protocol)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "once\n"
    assert ledger(tmp_path) == []  # nothing of the looping reply ran
    bodies = posts(openai_server)
    assert len(bodies) == 2  # no request to continue: round 1, round 2
    assert "wrote the line `await ledger.count(letters='aeiou')` over and over" in prompt_text(bodies[1])
    first = show(tmp_path, env)["rounds"][0]
    assert (first["status"], first["error"]["reason"]) == ("parse_error", "truncated")
    assert "continuations" not in first["usage"]["code"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_cut_off_reply_is_continued_then_runs_whole(
    tmp_path: Path, env: dict[str, str], openai_server: OpenAIServer, protocol: str
) -> None:
    cut = code(protocol, "await ledger.add(item='first')\nrows = [1, 2,").removesuffix(f"\n{F}")
    rest = " 3]\nprint(sum(rows))" + (f"\n{F}" if protocol == "chat" else "")
    rest = rest if protocol == "chat" else " 3]\n    print(sum(rows))"
    openai_server.push(
        Reply(text=cut, finish_reason="length"), Reply(text=rest), code(protocol, "system.finish(sum(rows))")
    )
    done = run(tmp_path, env, openai_server, protocol)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "6\n"
    assert ledger(tmp_path) == ["first"]  # ran once, whole
    bodies = posts(openai_server)
    if protocol == "completion":
        assert bodies[1]["prompt"] == bodies[0]["prompt"] + cut  # the model extends its own text
    else:
        assert bodies[1]["messages"][-2] == {"role": "assistant", "content": cut}
        assert "cut off at the token limit. Continue exactly where it stopped" in bodies[1]["messages"][-1]["content"]
    first = show(tmp_path, env)["rounds"][0]
    # the awaited call before the end is shown as a REPL shows it, labelled
    assert (first["status"], first["stdout"]) == ("ok", "await ledger.add(item='first') -> 'first'\n6\n")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_prose_only_round_shows_what_the_model_said(
    tmp_path: Path, env: dict[str, str], openai_server: OpenAIServer, protocol: str
) -> None:
    openai_server.push(
        "I will look at the ledger first,\n\nthen add the item.", code(protocol, "system.finish('done')")
    )
    done = run(tmp_path, env, openai_server, protocol)
    assert done.returncode == 0, done.stderr
    assert "model said: I will look at the ledger first,\nthen add the item." in done.stderr
    assert "nothing ran: Your reply contains no Python code." in done.stderr
    text = show(tmp_path, env, as_json=False)
    assert "model said: I will look at the ledger first," in text
    assert show(tmp_path, env)["rounds"][0]["status"] == "no_code"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_runtime_error_has_one_line_number_everywhere_and_appears_once(
    tmp_path: Path, env: dict[str, str], openai_server: OpenAIServer, protocol: str
) -> None:
    openai_server.push(code(protocol, "rows = [1]\nprint(rows[3])"), code(protocol, "system.finish(len(rows))"))
    done = run(tmp_path, env, openai_server, protocol)
    assert done.returncode == 0, done.stderr
    terminal = [line for line in done.stderr.splitlines() if line.startswith("IndexError")]
    assert len(terminal) == 1
    assert terminal[0].startswith("IndexError: list index out of range (line 2: print(rows[3]); program line ")
    text = show(tmp_path, env, as_json=False)
    shown = [line.strip() for line in text.splitlines() if line.strip().startswith("error: IndexError")]
    assert shown == ["error: " + terminal[0]]  # the same words, the same line, in `sessions show`
    next_prompt = prompt_text(posts(openai_server)[1])
    assert next_prompt.count("list index out of range") == 1
    assert "Failed with IndexError: list index out of range (line 2 of your code: `print(rows[3])`)" in next_prompt
