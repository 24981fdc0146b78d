"""``codeact exec``: exit codes, --json, --session, --toolkit."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from codeact.engine.cli import app

TOOLKIT = '''
from codeact.toolkits import operation, toolkit


@toolkit(name="greeter", description="Greets people")
class Greeter:
    @operation
    async def greet(self, name: str) -> str:
        """Greet someone.

        Args:
            name: Who to greet.
        """
        return f"hello {name}"
'''


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CODEACT_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["exec", *args])
    return result.exit_code, result.stdout, result.stderr


def write(tmp_path: Path, code: str, name: str = "round.py") -> str:
    path = tmp_path / name
    path.write_text(code)
    return str(path)


@pytest.mark.parametrize(
    ("code", "exit_code", "status"),
    [
        pytest.param("x = 1 + 1\nprint(x)\n", 0, "ok", id="ok"),
        pytest.param("x = 1\nraise ValueError('bad value')\n", 1, "error", id="raised"),
        pytest.param("x = (\n", 1, "error", id="syntax"),
        pytest.param("while True:\n    pass\n", 3, "deadline_exceeded", id="deadline"),
    ],
)
def test_exit_codes_and_json(tmp_path: Path, home: Path, code: str, exit_code: int, status: str) -> None:
    rc, out, _ = run(write(tmp_path, code), "--json", "--timeout", "2")
    assert rc == exit_code
    data = json.loads(out)
    assert data["status"] == status
    assert data["ok"] is (status == "ok")
    expected = {"ok", "stdout", "stderr", "error", "variables", "uncaptured", "duration_s", "backend", "isolation"}
    assert set(data) >= expected
    assert data["backend"] == "subprocess"
    assert data["isolation"] == "bwrap+cgroup+rlimits+restricted"


def test_human_output_shows_stdout_then_the_error_line(tmp_path: Path, home: Path) -> None:
    rc, out, err = run(write(tmp_path, "print('before')\nx = 1\n1 / 0\n"))
    assert rc == 1
    assert out == "before\n"
    assert "error (line 3):" in err
    assert "ZeroDivisionError: division by zero" in err


def test_missing_file_is_a_usage_error(tmp_path: Path, home: Path) -> None:
    rc, _, err = run(str(tmp_path / "nope.py"))
    assert rc == 2
    assert f"codeact exec: cannot read {str(tmp_path / 'nope.py')!r}: no such file" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--sandbox", "vm"], "--sandbox must be 'subprocess' or 'docker', got 'vm'", id="sandbox"),
        pytest.param(["--timeout", "0"], "--timeout must be a positive number of seconds, got 0.0", id="timeout"),
        pytest.param(["--session", "../x"], "--session '../x' must be letters, digits", id="session"),
    ],
)
def test_bad_options_are_usage_errors(tmp_path: Path, home: Path, args: list[str], message: str) -> None:
    rc, _, err = run(write(tmp_path, "x = 1"), *args)
    assert rc == 2
    assert message in err


def test_session_carries_variables_and_functions(tmp_path: Path, home: Path) -> None:
    first = write(tmp_path, "def double(v):\n    return v * 2\ncount = 20\n", "one.py")
    second = write(tmp_path, "count = double(count) + 2\n", "two.py")
    assert run(first, "--session", "s1")[0] == 0
    rc, out, _ = run(second, "--session", "s1", "--json")
    assert rc == 0
    assert json.loads(out)["variables"]["count"] == 42

    async def stored() -> tuple[dict[str, object], list[str | None]]:
        from codeact.engine.store import open_store

        async with open_store(f"sqlite:///{home / 'sessions.db'}") as store:
            return await store.variables("s1"), [r.code for r in await store.rounds("s1")]

    variables, codes = asyncio.run(stored())
    assert variables["count"] == 42
    assert codes == ["def double(v):\n    return v * 2\ncount = 20\n", "count = double(count) + 2\n"]
    replayed = CliRunner().invoke(app, ["replay", "s1", "--json"])
    assert replayed.exit_code == 0, replayed.stderr
    assert json.loads(replayed.stdout)["ok"] is True


def test_toolkit_is_granted(tmp_path: Path, home: Path) -> None:
    tools = write(tmp_path, TOOLKIT, "greeter_tools.py")
    code = write(tmp_path, "msg = greeter.greet('ada')\nprint(msg)\n")
    rc, out, _ = run(code, "--toolkit", f"{tools}:Greeter", "--json")
    data = json.loads(out)
    assert rc == 0, data
    assert data["stdout"] == "hello ada\n"
    assert data["rpc_count"] == 1


def test_bad_toolkit_reference_is_a_usage_error(tmp_path: Path, home: Path) -> None:
    rc, _, err = run(write(tmp_path, "x = 1"), "--toolkit", "no_such_module_xyz:Thing")
    assert rc == 2
    assert "no_such_module_xyz" in err
