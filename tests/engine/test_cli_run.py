"""``codeact run``: output streams, exit codes, pinned error messages, HTTP models, resume, approvals.

Runs go through the real CLI (typer's CliRunner in-process, and the installed ``codeact`` script
for the end-to-end demo), real SQLite stores in tmp dirs, real subprocess sandboxes, the scripted
model (reply files written per test) or the local OpenAI-compatible server.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from codeact.engine.cli import app
from tests.engine.openai_server import OpenAIServer

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "examples" / "devops"
DEVOPS = f"{DEMO / 'toolkit.py'}:DevOps"
DEMO_INPUT = "Which login requirements of project P-123 are still open? Then deploy version 2.4.0 of its API."
DEMO_ANSWER = (
    "Project Checkout has 2 open login requirements (Login with passkeys, Login audit log). "
    "Deployed checkout-api 2.4.0 as D-1001: succeeded."
)
NO_MODEL = (
    "no model configured: pass --model (e.g. --model openai/gpt-4.1-mini or --model ollama/qwen2.5-coder), "
    "--profile NAME, set model in the blueprint, or set CODEACT_MODEL"
)


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user/workspace profiles, no default store or model from the developer's environment."""
    monkeypatch.setenv("CODEACT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    for name in ("CODEACT_MODEL", "CODEACT_STORE", "CODEACT_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'sessions.db'}"


def cli(*args: str) -> tuple[int, str, str]:
    """Run ``codeact ARGS`` in-process: (exit code, stdout, stderr)."""
    result = CliRunner().invoke(app, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def replies(tmp_path: Path, *texts: str, name: str = "replies.yaml") -> Path:
    """A scripted reply file: one reply (code) per model call."""
    path = tmp_path / name
    path.write_text(json.dumps(list(texts)))
    return path


def blueprint(
    tmp_path: Path,
    body: str = "",
    *,
    model: str | None = "scripted/replies.yaml",
    name: str = "agent.yaml",
    max_turns: int = 6,
) -> Path:
    """A codeact blueprint (thought off: one model call per round) with ``body`` appended."""
    lines = ["version: codeact.agent/v1", "extend: codeact-base", "id: test-agent"]
    if model is not None:
        lines.append(f"model: {{provider: scripted, model: {model}}}")
    lines.append(f"workflow: {{maxTurns: {max_turns}, codeact: {{thought: 'off'}}}}")
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n" + body)
    return path


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


def show(session: str, store: str) -> dict[str, Any]:
    rc, out, err = cli("sessions", "show", session, "--store", store, "--json")
    assert rc == 0, err
    data: dict[str, Any] = json.loads(out)
    return data


# -- the demo, end to end through the installed script --------------------------------------------


def test_demo_runs_then_replays_and_shows_five_rounds(tmp_path: Path) -> None:
    store = store_url(tmp_path)
    env = {**os.environ, "COLUMNS": "80"}
    codeact = str(Path(sys.executable).parent / "codeact")
    run = subprocess.run(
        [codeact, "run", str(DEMO / "agent.yaml"), "--toolkit", DEVOPS, "--store", store, "--session", "S"]
        + ["--input", DEMO_INPUT],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == DEMO_ANSWER + "\n"  # only the answer on stdout
    assert "round 5" in run.stderr
    assert "ToolError: application 'checkout' does not exist" in run.stderr
    assert "finished after 5 rounds" in run.stderr

    replay = subprocess.run(
        [codeact, "replay", "S", "--store", store], capture_output=True, text=True, env=env, check=False, timeout=120
    )
    assert replay.returncode == 0, replay.stderr
    assert replay.stdout.splitlines()[-1] == "replayed 5 round(s) of S: 5 match, 0 mismatch"

    rc, out, _ = cli("replay", "S", "--store", store, "--json")
    assert rc == 0
    report = json.loads(out)
    assert report["ok"] is True
    assert [r["status"] for r in report["rounds"]] == ["match"] * 5

    rc, out, _ = cli("sessions", "show", "S", "--store", store)
    assert rc == 0
    assert "status    completed, 5 rounds" in out
    assert [line.split()[:2] for line in out.splitlines() if line.startswith("round ")] == [
        ["round", str(n)] for n in range(1, 6)
    ]
    data = show("S", store)
    assert data["session"]["rounds"] == 5
    assert len(data["rounds"]) == 5


def test_json_prints_one_event_per_line_with_sequences_from_one(tmp_path: Path) -> None:
    store = store_url(tmp_path)
    rc, out, _ = cli(
        "run", str(DEMO / "agent.yaml"), "--toolkit", DEVOPS, "--store", store, "--session", "J", "--input", DEMO_INPUT,
        "--json",
    )  # fmt: skip
    assert rc == 0
    stream = events(out)
    assert all({"type", "run_id", "sequence", "timestamp"} <= set(e) for e in stream)
    assert [e["sequence"] for e in stream] == list(range(1, len(stream) + 1))
    assert len({e["run_id"] for e in stream}) == 1
    assert stream[0]["type"] == "run.started"
    assert stream[0]["session_id"] == "J"
    assert stream[-1]["type"] == "run.completed"
    assert stream[-1]["answer"] == DEMO_ANSWER
    assert stream[-1]["rounds"] == 5
    kinds = {e["type"] for e in stream}
    assert {"round.started", "segment.created", "message.delta", "message.completed", "tool.call.started"} <= kinds
    assert {"tool.call.completed", "code.started", "code.completed", "state.updated"} <= kinds
    timestamps = [e["timestamp"] for e in stream]
    assert timestamps == sorted(timestamps)


# -- exit 2: usage, load, model configuration and factory errors ----------------------------------

SANDBOX_BLOCK = "sandbox:\n  backend: subprocess\n  limits: {timeoutSeconds: 5}\n"


@pytest.mark.parametrize(
    ("make", "extra", "expected"),
    [
        pytest.param(
            lambda t: t / "missing.yaml",
            (),
            [
                "Blueprint load error [blueprint.io]: Unable to read Agent Blueprint file '{tmp}/missing.yaml': "
                "No such file or directory. Check the path and its permissions."
            ],
            id="missing-file",
        ),
        pytest.param(
            lambda t: (t / "bad.yaml").write_text("version: [\n") and t / "bad.yaml",
            (),
            [
                "Blueprint load error [blueprint.yaml.invalid]: Invalid Agent Blueprint YAML in bad.yaml: "
                "while parsing a flow node; "
                "expected the node content, but found '<stream end>' at line 2, column 1. Fix the YAML syntax there."
            ],
            id="invalid-yaml",
        ),
        pytest.param(
            lambda t: blueprint(t, SANDBOX_BLOCK),
            (),
            [
                "Blueprint factory error [blueprint.sandbox.unsupported]: The blueprint declares a sandbox, "
                "but the host "
                "has not allowed sandbox declarations; pass --allow-sandbox-declaration "
                "(HostContext(allow_sandbox_declaration=True)) or remove the sandbox block."
            ],
            id="sandbox-block",
        ),
        pytest.param(
            lambda t: blueprint(t, model=None),
            (),
            [NO_MODEL],
            id="no-model",
        ),
        pytest.param(
            lambda t: blueprint(t),
            ("--profile", "nope"),
            [
                "profile not found or incompatible with provider: nope",
                "looked in {tmp}/home/profiles.yaml (no such file) and {tmp}/.codeact/profiles.yaml (no such file).",
                "Create it in {tmp}/home/profiles.yaml (or .codeact/profiles.yaml in the workspace), e.g.:",
                "  profiles:",
                "    nope:",
                "      provider: openai",
                "      model: gpt-4.1-mini",
                "      api_key_env: OPENAI_API_KEY",
                "(see docs/profiles.md), or pass --model instead of a profile",
            ],
            id="unknown-profile",
        ),
        pytest.param(
            lambda t: blueprint(t),
            ("--sandbox", "vm"),
            ["--sandbox must be 'subprocess' or 'docker', got 'vm'"],
            id="bad-sandbox",
        ),
        pytest.param(
            lambda t: blueprint(t),
            ("--protocol", "fim"),
            ["--protocol must be 'chat', 'completion' or 'responses', got 'fim'"],
            id="bad-protocol",
        ),
        pytest.param(
            lambda t: blueprint(t),
            ("--isolation", "none"),
            ["--isolation must be 'bwrap' or 'process', got 'none'"],
            id="bad-isolation",
        ),
        pytest.param(
            lambda t: blueprint(t),
            ("--approve-all", "--deny-all"),
            ["--approve-all and --deny-all exclude each other: pass one"],
            id="approve-and-deny",
        ),
        pytest.param(
            lambda t: blueprint(t),
            ("--store", "ftp://somewhere"),
            [
                "--store: unsupported store URL scheme 'ftp': use sqlite:///PATH or redis://HOST:PORT/DB "
                "(in --store or CODEACT_STORE)"
            ],
            id="bad-store",
        ),
        pytest.param(
            lambda t: blueprint(t),
            ("--toolkit", "nocolon"),
            [
                "--toolkit: toolkit reference 'nocolon' must look like MODULE:OBJECT (for example mypkg.tools:DevOps "
                "or ./tools.py:DevOps)"
            ],
            id="bad-toolkit-ref",
        ),
    ],
)
def test_usage_errors_exit_2_with_pinned_messages(
    tmp_path: Path, make: Any, extra: tuple[str, ...], expected: list[str]
) -> None:
    replies(tmp_path, "system.finish(1)")
    path = make(tmp_path)
    rc, out, err = cli("run", str(path), "--input", "x", "--store", store_url(tmp_path), *extra)
    assert rc == 2
    assert out == ""
    assert err.splitlines() == [line.format(tmp=tmp_path) for line in expected]


def test_invalid_blueprint_prints_the_factory_error_then_one_line_per_issue(tmp_path: Path) -> None:
    path = tmp_path / "invalid.yaml"
    path.write_text(
        "version: codeact.agent/v1\nextend: codeact-base\nid: bad\n"
        "model: {provider: scripted, model: scripted/r.yaml}\n"
        "workflow: {maxTurns: -3, codeact: {thought: sometimes}}\n"
    )
    rc, out, err = cli("run", str(path), "--input", "x", "--store", store_url(tmp_path))
    assert rc == 2
    assert out == ""
    assert err.splitlines() == [
        "Blueprint factory error [blueprint.validation.failed]: Agent Blueprint validation failed with 2 errors; "
        "fix the issues listed (codeact validate FILE shows them).",
        "  ERROR $.workflow.maxTurns blueprint.workflow.maxTurns.invalid: workflow.maxTurns must be positive.",
        "  ERROR $.workflow.codeact.thought blueprint.workflow.codeact.thought.invalid: workflow.codeact.thought "
        "must be one of: separate, inline, off (got 'sometimes').",
    ]


def test_allow_sandbox_declaration_accepts_the_block(tmp_path: Path) -> None:
    replies(tmp_path, "system.finish('ok')")
    path = blueprint(tmp_path, SANDBOX_BLOCK)
    rc, out, err = cli(
        "run", str(path), "--input", "x", "--store", store_url(tmp_path), "--allow-sandbox-declaration"
    )  # fmt: skip
    assert rc == 0, err
    assert out == "ok\n"


def test_model_from_the_command_line_or_codeact_model_when_the_blueprint_has_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = replies(tmp_path, "system.finish({'a': 1})")
    path = blueprint(tmp_path, model=None)
    store = store_url(tmp_path)
    rc, out, err = cli("run", str(path), "--input", "x", "--store", store, "--model", f"scripted/{script}")
    assert (rc, out) == (0, '{"a": 1}\n'), err  # a non-string answer prints as JSON
    monkeypatch.setenv("CODEACT_MODEL", f"scripted/{script}")
    rc, out, err = cli("run", str(path), "--input", "x", "--store", store, "--session", "env", "--json")
    assert rc == 0, err
    started = events(out)[0]
    assert started["model"] == f"scripted/{script}"
    assert show("env", store)["session"]["model"] == f"scripted/{script}"


# -- exit 1: the run failed -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("codes", "error_code", "message"),
    [
        pytest.param(
            ["x = 1", "x = 2", "x = 3"],
            "run.maxTurns",
            "no answer after 3 rounds (workflow.maxTurns); raise workflow.maxTurns in the blueprint or make the "
            "task smaller",
            id="max-turns",
        ),
        pytest.param(
            ["x = 1", "x = 1", "x = 1"],
            "run.stuck",
            "the model produced the same code 3 times in a row; stopping (raise workflow.codeact.maxRepeats or "
            "rephrase the task)",
            id="stuck",
        ),
    ],
)
def test_a_failed_run_exits_1(tmp_path: Path, codes: list[str], error_code: str, message: str) -> None:
    replies(tmp_path, *codes, *codes)
    path = blueprint(tmp_path, max_turns=3)
    store = store_url(tmp_path)
    rc, out, err = cli("run", str(path), "--input", "x", "--store", store, "--session", "f")
    assert rc == 1
    assert out == ""
    assert f"[{error_code}] {message}" in err
    rc, out, _ = cli("run", str(path), "--input", "x", "--store", store, "--session", "g", "--json")
    assert rc == 1
    last = events(out)[-1]
    assert last["type"] == "run.failed"
    assert last["error"] == {"code": error_code, "message": message}
    assert last["rounds"] == 3
    assert show("g", store)["session"]["status"] == "failed"


def test_exhausted_script_is_a_failed_run_not_a_crash(tmp_path: Path) -> None:
    replies(tmp_path, "x = 1")
    path = blueprint(tmp_path)
    rc, out, err = cli("run", str(path), "--input", "x", "--store", store_url(tmp_path), "--json")
    assert rc == 1
    last = events(out)[-1]
    assert last["type"] == "run.failed"
    assert last["error"]["code"] == "model.scripted.exhausted"


# -- HTTP models through the local OpenAI-compatible server ---------------------------------------


def test_chat_model_at_a_base_url(tmp_path: Path, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    openai_server.push("```python\nx = 20 + 1\nprint(x)\n```", "```python\nsystem.finish(x * 2)\n```")
    path = blueprint(tmp_path)
    rc, out, err = cli(
        "run", str(path), "--input", "double twenty-one", "--store", store_url(tmp_path), "--session", "http",
        "--model", "openai/test-model", "--base-url", openai_server.base_url,
    )  # fmt: skip
    assert rc == 0, err
    assert out == "42\n"
    posts = [r for r in openai_server.requests if r.method == "POST"]
    assert [r.path for r in posts] == ["/v1/chat/completions"] * 2
    assert posts[0].body["model"] == "test-model"
    assert "double twenty-one" in json.dumps(posts[0].body["messages"])
    assert "Output:\n21\n" in posts[1].body["messages"][-1]["content"]  # round 1's evaluation reached the model
    assert show("http", store_url(tmp_path))["session"]["model"] == "openai/test-model"


def test_completion_protocol_sends_raw_fim_text(
    tmp_path: Path, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    openai_server.push("system.finish('fim ok')\n")
    path = blueprint(tmp_path)
    rc, out, err = cli(
        "run", str(path), "--input", "say fim ok", "--store", store_url(tmp_path), "--json",
        "--model", "openai/qwen2.5-coder", "--base-url", openai_server.base_url, "--protocol", "completion",
    )  # fmt: skip
    assert rc == 0, err
    assert events(out)[-1]["answer"] == "fim ok"
    posts = [r for r in openai_server.requests if r.method == "POST"]
    assert [r.path for r in posts] == ["/v1/completions"]
    prompt = posts[0].body["prompt"]
    assert isinstance(prompt, str)
    assert "messages" not in posts[0].body
    assert "say fim ok" in prompt
    assert "<|fim_prefix|>" in prompt and "<|fim_suffix|>" in prompt and prompt.endswith("<|fim_middle|>")


def test_blueprint_completion_protocol_reaches_the_completions_endpoint(
    tmp_path: Path, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    openai_server.push("system.finish('raw')\n")
    path = tmp_path / "fim.yaml"
    path.write_text(
        "version: codeact.agent/v1\nextend: codeact-base\nid: fim\n"
        "model: {provider: openai-compatible, model: qwen2.5-coder}\n"
        "workflow: {codeact: {thought: 'off', protocol: completion}}\n"
    )
    rc, out, err = cli(
        "run", str(path), "--input", "x", "--store", store_url(tmp_path), "--base-url", openai_server.base_url
    )
    assert (rc, out) == (0, "raw\n"), err
    posts = [r for r in openai_server.requests if r.method == "POST"]
    assert [r.path for r in posts] == ["/v1/completions"]
    assert isinstance(posts[0].body["prompt"], str)


# -- resume ---------------------------------------------------------------------------------------


def test_ask_user_pauses_and_a_second_run_resumes_with_the_variables(tmp_path: Path) -> None:
    store = store_url(tmp_path)
    replies(tmp_path, "count = 41\nsystem.ask_user('Which environment, staging or production?')")
    path = blueprint(tmp_path)
    rc, out, err = cli("run", str(path), "--input", "deploy it", "--store", store, "--session", "R")
    assert rc == 0, err
    assert out == "Which environment, staging or production?\n"
    assert err.splitlines()[-1] == (
        f"paused: the agent asks the question above; answer with codeact run {path} --store {store} --session R "
        "--input ANSWER"
    )
    assert show("R", store)["session"]["status"] == "paused"

    second = replies(tmp_path, "print(answer_env := 'staging')\nsystem.finish(f'{answer_env}: {count + 1}')",
                     name="second.yaml")  # fmt: skip
    rc, out, err = cli(
        "run", str(path), "--input", "staging", "--store", store, "--session", "R", "--json",
        "--model", f"scripted/{second}",
    )  # fmt: skip
    assert rc == 0, err
    stream = events(out)
    assert stream[0]["type"] == "run.started" and stream[0]["resumed"] is True
    assert stream[-1]["answer"] == "staging: 42"
    rounds = [e["round"] for e in stream if e["type"] == "round.started"]
    assert rounds == [2]
    data = show("R", store)
    assert data["session"]["status"] == "completed"
    assert [r["index"] for r in data["rounds"]] == [1, 2]
    assert data["variables"]["count"] == 41


# -- approvals ------------------------------------------------------------------------------------

DEPLOY = """
try:
    d = devops.deploy_app(app_id="checkout-api", version="2.4.0")
    print("deployed", d["id"], d["status"])
except Exception as e:
    print("refused:", e)
"""
DEPLOY_RESULT = """
try:
    d = devops.deploy_app(app_id="checkout-api", version="2.4.0")
    result = f"deployed {d['id']} {d['status']}"
except Exception as e:
    result = f"refused: {e}"
"""
ASK = "toolkits:\n  - ref: system\n  - ref: devops\n    approval: ask\n"


@pytest.mark.parametrize(
    ("flags", "printed"),
    [
        pytest.param(("--approve-all",), "deployed D-1001 succeeded", id="approve-all"),
        pytest.param(("--deny-all",), "refused: devops.deploy_app was not approved: --deny-all", id="deny-all"),
        pytest.param(
            (),
            "refused: devops.deploy_app was not approved: no terminal to ask on (pass --approve-all to allow)",
            id="no-tty",
        ),
    ],
)
def test_approval_ask_goes_through_the_cli_approver(tmp_path: Path, flags: tuple[str, ...], printed: str) -> None:
    replies(tmp_path, DEPLOY, "system.finish('done')")
    path = blueprint(tmp_path, ASK)
    rc, out, err = cli(
        "run", str(path), "--input", "deploy", "--store", store_url(tmp_path), "--toolkit", DEVOPS, "--json", *flags
    )  # fmt: skip
    assert rc == 0, err
    stream = events(out)
    requested = [e for e in stream if e["type"] == "action.requested"]
    assert [(e["toolkit"], e["operation"], e["kind"]) for e in requested] == [("devops", "deploy_app", "approval")]
    assert requested[0]["arguments"] == {"app_id": "checkout-api", "version": "2.4.0"}
    code = next(e for e in stream if e["type"] == "code.completed")
    assert code["stdout"] == printed + "\n"
    completed = [e for e in stream if e["type"] == "tool.call.completed" and e["operation"] == "deploy_app"]
    assert (completed[0]["error"] is None) is (flags == ("--approve-all",))
    assert stream[-1]["type"] == "run.completed"


def test_auto_approval_does_not_ask(tmp_path: Path) -> None:
    replies(tmp_path, DEPLOY, "system.finish('done')")
    path = blueprint(tmp_path, ASK.replace("ask", "auto"))
    rc, out, err = cli(
        "run", str(path), "--input", "deploy", "--store", store_url(tmp_path), "--toolkit", DEVOPS, "--json",
        "--deny-all",
    )  # fmt: skip
    assert rc == 0, err
    stream = events(out)
    assert not [e for e in stream if e["type"] == "action.requested"]
    assert next(e for e in stream if e["type"] == "code.completed")["stdout"] == "deployed D-1001 succeeded\n"


def _run_in_a_terminal(args: list[str], answer: bytes, *, delay: float = 0.0) -> tuple[int, str, str]:
    """Run ``codeact`` with stdin and stderr on a pseudo-terminal, answering its first [y/N] question.

    ``delay``: seconds the user takes to answer.
    """
    master, slave = os.openpty()
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "codeact"), *args],
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=slave,
        env={**os.environ, "TERM": "xterm", "COLUMNS": "120"},
    )
    os.close(slave)
    screen, asked = b"", False
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            screen += chunk
            if not asked and b"[y/N]" in screen:
                time.sleep(delay)
                os.write(master, answer)
                asked = True
        stdout, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        os.close(master)
    rc = proc.returncode
    return rc, stdout.decode(), screen.decode("utf-8", "replace")


@pytest.mark.parametrize(
    ("answer", "result"),
    [
        pytest.param(b"y\n", "deployed D-1001 succeeded", id="yes"),
        pytest.param(b"n\n", "refused: devops.deploy_app was not approved: the user answered no", id="no"),
    ],
)
def test_a_terminal_user_answers_the_approval_question(tmp_path: Path, answer: bytes, result: str) -> None:
    replies(tmp_path, DEPLOY_RESULT, "system.finish(result)")
    path = blueprint(tmp_path, ASK)
    rc, out, screen = _run_in_a_terminal(
        ["run", str(path), "--input", "deploy", "--store", store_url(tmp_path), "--toolkit", DEVOPS], answer
    )
    assert rc == 0, screen
    assert 'Allow devops.deploy_app({"app_id": "checkout-api", "version": "2.4.0"})? [y/N]:' in screen
    assert out == result + "\n"


def test_a_second_run_on_a_busy_session_fails_clearly(tmp_path: Path) -> None:
    store = store_url(tmp_path)
    replies(tmp_path, "system.sleep(5)", "system.finish('first')")
    path = blueprint(tmp_path)
    first = subprocess.Popen(
        [str(Path(sys.executable).parent / "codeact"), "run", str(path), "--input", "x", "--store", store]
        + ["--session", "L", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert first.stdout is not None
        for line in first.stdout:  # wait until the first run holds the lock and runs its code
            if json.loads(line)["type"] == "code.started":
                break
        rc, out, err = cli("run", str(path), "--input", "y", "--store", store, "--session", "L")
        assert rc == 1
        assert out == ""
        assert "[store.session_busy] session 'L' is in use by another run (lock held until " in err
        assert "); wait or use another --session" in err
        rest, _ = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert first.returncode == 0
    assert json.loads(rest.splitlines()[-1])["answer"] == "first"
    assert show("L", store)["session"]["rounds"] == 2
