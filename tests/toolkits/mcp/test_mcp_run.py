"""MCP servers as toolkits, end to end: blueprints run through ``codeact run`` with the scripted model.

Real servers only: the npm reference servers (``server-everything``, ``server-filesystem``, from
the cache ``scripts/setup.d/mcp.sh`` fills) and a FastMCP server of these tests (``flaky_server.py``)
for tool errors, a crashing server, timeouts, credentials by environment name and streamable HTTP.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from codeact.engine.cli import app
from tests.ports import free_port, wait_listening
from tests.toolkits.mcp.conftest import FLAKY, answer, events, run_cli, write_agent


def cli(*args: str) -> tuple[int, str, str]:
    """``codeact ARGS`` in-process (for the commands that run no model): (exit code, stdout, stderr)."""
    result = CliRunner().invoke(app, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def test_reference_servers_from_a_blueprint(tmp_path: Path, reference_servers: dict[str, str]) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "todo.txt").write_text("buy milk\nship release 2.4\n")
    everything = json.dumps(reference_servers["CODEACT_MCP_EVERYTHING"])
    filesystem = json.dumps(reference_servers["CODEACT_MCP_FILESYSTEM"])
    toolkits = (
        "  - ref: everything\n"
        f"    mcp: {{command: node, args: [{everything}, stdio]}}\n"
        "  - ref: fs\n"
        f"    mcp: {{command: node, args: [{filesystem}, {json.dumps(str(data))}]}}\n"
    )
    replies = [
        "I'll start by checking what the filesystem holds and do a quick sum.\n\n```python\n"
        f"listing = await fs.list_directory(path={str(data)!r})\n"
        "print(listing)\n"
        "total = await everything.get_sum(a=19, b=23)\n"
        "print(total)\n"
        "weather = await everything.get_structured_content(location='Chicago')\n"
        "print(weather['temperature'], weather['conditions'])\n```",
        "Now I read the todo file, write a summary next to it and fetch the image.\n\n```python\n"
        f"todo = await fs.read_text_file(path={str(data / 'todo.txt')!r})\n"
        "lines = todo.splitlines() if isinstance(todo, str) else todo['content'].splitlines()\n"
        f"await fs.write_file(path={str(data / 'summary.txt')!r}, content=f'{{len(lines)}} items')\n"
        "picture = await everything.get_tiny_image()\n"
        "image = next(part for part in picture if isinstance(part, dict) and part.get('type') == 'image')\n"
        "echo = await everything.echo(message='done')\n"
        "system.finish({'sum': total, 'items': len(lines), 'mime': image['mime_type'], 'echo': echo})\n```",
    ]
    path = write_agent(tmp_path, toolkits, replies)
    store = f"sqlite:///{tmp_path / 's.db'}"
    run = run_cli("run", str(path), "--input", "Summarise my todo file.", "--store", store, "--json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:] + run.stdout[-2000:]
    result = answer(run.stdout)
    assert result == {"sum": "The sum of 19 and 23 is 42.", "items": 2, "mime": "image/png", "echo": "Echo: done"}
    assert (data / "summary.txt").read_text() == "2 items"
    kept = [e for e in events(run.stdout) if e["type"] == "artifact.created"]
    assert [(e["name"], e["mime"], e["refused"]) for e in kept] == [
        ("everything-get_tiny_image-3.png", "image/png", None)
    ]
    calls = [(e["toolkit"], e["operation"]) for e in events(run.stdout) if e["type"] == "tool.call.completed"]
    assert ("fs", "write_file") in calls and ("everything", "get_tiny_image") in calls

    # The session replays from the store (recorded results, no server needed).
    replay = run_cli("replay", _session(run.stdout), "--store", store, cwd=tmp_path)
    assert replay.returncode == 0, replay.stderr


def _session(stdout: str) -> str:
    started = next(e for e in events(stdout) if e["type"] == "run.started")
    return str(started["session_id"])


def _flaky(tmp_path: Path, extra: str = "", *, args: str = "") -> str:
    return (
        "  - ref: flaky\n"
        f"    mcp: {{command: {json.dumps(sys.executable)}, args: [{json.dumps(str(FLAKY))}{args}]{extra}}}\n"
    )


def test_tool_errors_crashes_and_timeouts_are_errors_in_the_code(tmp_path: Path) -> None:
    replies = [
        "Let me try the tools, catching what fails.\n\n```python\n"
        "notes = []\n"
        "notes.append(await flaky.add(a=2, b=40))\n"
        "try:\n"
        "    await flaky.fail(reason='no access')\n"
        "except ToolError as e:\n"
        "    notes.append(f'fail: {e}')\n"
        "s = await flaky.stats(values=[1, 2, 3, 6])\n"
        "notes.append(s['mean'])\n"
        "print(notes)\n```",
        "The slow tool should not hang the round.\n\n```python\n"
        "try:\n"
        "    await flaky.slow(seconds=30)\n"
        "except ToolError as e:\n"
        "    notes.append(f'slow: {e.code}')\n"
        "try:\n"
        "    await flaky.crash()\n"
        "except ToolError as e:\n"
        "    notes.append('crash: ' + str(e).split(';')[0])\n"
        "print(notes)\n```",
        "After the crash the server comes back on the next call.\n\n```python\n"
        "notes.append(await flaky.add(a=1, b=1))\n"
        "notes.append(await flaky.secrets())\n"
        "system.finish(notes)\n```",
    ]
    path = write_agent(tmp_path, _flaky(tmp_path, ", env: [FLAKY_TOKEN], timeout: 2"), replies)
    env = {"FLAKY_TOKEN": "t0ken-from-host", "FLAKY_NOT_NAMED": "must-not-leak"}
    store = f"sqlite:///{tmp_path / 's.db'}"
    run = run_cli("run", str(path), "--input", "go", "--store", store, "--json", cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr[-2000:] + run.stdout[-2000:]
    notes = answer(run.stdout)
    assert notes[0] == 42
    assert notes[1].startswith("fail: flaky.fail() failed: ") and "refused: no access" in notes[1]
    assert notes[2] == 3.0
    assert notes[3] == "slow: deadline_exceeded"
    assert notes[4].startswith("crash: MCP server 'flaky' (")
    assert notes[5] == 2
    # Only the variables the blueprint names reach the server, and never the sandbox or the record.
    assert notes[6] == {"FLAKY_TOKEN": "t0ken-from-host", "FLAKY_NOT_NAMED": None}
    assert "must-not-leak" not in run.stdout

    missing = cli("toolkits", "list", "--blueprint", str(path), "--no-builtins")
    assert missing[0] == 2
    assert "the host environment variable(s) FLAKY_TOKEN named in its mcp.env are not set" in missing[2]


def test_a_hung_server_is_started_again_on_the_next_call(tmp_path: Path) -> None:
    """A server that stops answering (its loop blocked) times the call out, then is replaced."""
    replies = [
        "hang() will time out; the server should be back for the next call.\n\n```python\n"
        "try:\n"
        "    await flaky.hang()\n"
        "except ToolError as e:\n"
        "    first = e.code\n"
        "total = await flaky.add(a=1, b=2)\n"
        "system.finish([first, total])\n```",
    ]
    path = write_agent(tmp_path, _flaky(tmp_path, ", timeout: 8"), replies)  # room to restart it
    path.write_text(path.read_text() + "sandbox: {limits: {timeoutSeconds: 40}}\n")
    store = f"sqlite:///{tmp_path / 's.db'}"
    args = ("--input", "go", "--store", store, "--json", "--allow-sandbox-declaration")
    run = run_cli("run", str(path), *args, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:] + run.stdout[-2000:]
    assert answer(run.stdout) == ["deadline_exceeded", 3]


def test_server_that_cannot_start_is_a_clear_error(tmp_path: Path) -> None:
    toolkits = (
        "  - ref: broken\n    mcp: {command: "
        + json.dumps(sys.executable)
        + ", args: ['-c', 'import sys; sys.exit(\"no config found\")']}\n"
    )
    path = write_agent(tmp_path, toolkits, ["print(1)"])
    run = run_cli("run", str(path), "--input", "go", "--store", f"sqlite:///{tmp_path / 's.db'}", cwd=tmp_path)
    assert run.returncode == 2
    assert "Toolkit error [toolkit.mcp.server]: MCP server 'broken' (" in run.stderr
    assert "failed to start" in run.stderr
    assert "no config found" in run.stderr  # the server's stderr is quoted


@pytest.mark.parametrize(
    ("mcp", "message"),
    [
        pytest.param(
            "{command: srv, env: [API_TOKEN=abc123]}",
            "toolkits[0].mcp.env: 'API_TOKEN=abc123' is not an environment variable name (UPPER_CASE)",
            id="env-value",
        ),
        pytest.param(
            "{url: 'http://127.0.0.1:9/mcp', headers: {Authorization: 'Bearer abc123'}}",
            "toolkits[0].mcp.headers.Authorization must name a host environment variable holding the value",
            id="header-value",
        ),
        pytest.param("{command: srv, url: 'http://x/mcp'}", "mcp needs exactly one of command", id="both"),
        pytest.param("{url: 'http://u:p@host/mcp'}", "mcp.url must not carry credentials", id="url-creds"),
    ],
)
def test_validator_refuses_literal_secrets(tmp_path: Path, mcp: str, message: str) -> None:
    path = write_agent(tmp_path, f"  - ref: tracker\n    mcp: {mcp}\n", ["print(1)"])
    rc, out, _ = cli("validate", str(path))
    assert rc == 1, out
    assert message in out


def test_toolkits_list_shows_the_stubs_the_model_sees(tmp_path: Path) -> None:
    path = write_agent(tmp_path, _flaky(tmp_path), ["print(1)"])
    run = run_cli("toolkits", "list", "--blueprint", str(path), "--no-builtins", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:] + run.stdout[-2000:]
    assert "class Stats(TypedDict):\n    count: int\n    mean: float\n" in run.stdout
    assert "class flaky:\n" in run.stdout
    assert "    async def add(self, a: int, b: int) -> int:\n" in run.stdout
    assert "    async def stats(self, values: list[float]) -> Stats:\n" in run.stdout


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(FLAKY), "--port", str(port)], stderr=subprocess.DEVNULL)
    try:
        wait_listening(proc, port, timeout=30, what="the HTTP MCP server")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_streamable_http_server_with_header_from_the_environment(tmp_path: Path, http_server: str) -> None:
    toolkits = f"  - ref: flaky\n    mcp: {{url: {json.dumps(http_server)}, headers: {{Authorization: FLAKY_AUTH}}}}\n"
    replies = [
        "Checking the remote server.\n```python\nseen = await flaky.header()\ns = await flaky.add(a=5, b=6)\n"
        "system.finish({'auth': seen, 'sum': s})\n```"
    ]
    path = write_agent(tmp_path, toolkits, replies)
    env = {"FLAKY_AUTH": "Bearer from-env"}
    run = run_cli(
        "run", str(path), "--input", "go", "--store", f"sqlite:///{tmp_path / 's.db'}", "--json", cwd=tmp_path, env=env
    )
    assert run.returncode == 0, run.stderr[-2000:] + run.stdout[-2000:]
    assert answer(run.stdout) == {"auth": "Bearer from-env", "sum": 11}
    assert "from-env" not in (tmp_path / "agent.yaml").read_text()
