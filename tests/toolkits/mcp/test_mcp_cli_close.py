"""A ``codeact run`` that fails after its MCP servers started stops them (store and factory errors).

``_build`` runs in this process, as ``codeact run`` does before its run: a server left running would
outlive the failed command here, so its process being gone shows it was closed, not orphaned.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from codeact.engine.cli._run import RunFlags, _build, _Spinner, _Usage
from tests.toolkits.mcp.conftest import FLAKY, run_cli, write_agent


def _agent(tmp_path: Path, *, extra: str = "") -> Path:
    pidfile = tmp_path / "server.pid"
    flaky = (
        "  - ref: flaky\n"
        f"    mcp: {{command: {json.dumps(sys.executable)}, "
        f"args: [{json.dumps(str(FLAKY))}, --pidfile, {json.dumps(str(pidfile))}]}}\n"
    )
    return write_agent(tmp_path, flaky + extra, ["```python\nsystem.finish(await flaky.add(a=1, b=2))\n```"])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize(
    ("store", "extra", "message"),
    [
        pytest.param("nosuch://x", "", "--store", id="store-error"),
        pytest.param(None, "  - ref: no_such_toolkit\n", "no_such_toolkit", id="factory-error"),
    ],
)
def test_a_failed_build_stops_the_started_mcp_servers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store: str | None, extra: str, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CODEACT_HOME", str(tmp_path / "home"))
    path = _agent(tmp_path, extra=extra)
    with pytest.raises(_Usage, match=message):
        _build(
            RunFlags(file=path, store=store or f"sqlite:///{tmp_path / 's.db'}", json_output=True), spinner=_Spinner()
        )
    pid = int((tmp_path / "server.pid").read_text())  # the server did start
    assert not _alive(pid)


def test_the_cli_reports_the_store_error_after_starting_the_servers(tmp_path: Path) -> None:
    path = _agent(tmp_path)
    run = run_cli("run", str(path), "--input", "go", "--store", "nosuch://x", "--json", cwd=tmp_path)
    assert run.returncode == 2, run.stderr[-2000:]
    assert "--store" in run.stderr
    assert (tmp_path / "server.pid").exists()
    assert json.loads(run.stdout.splitlines()[-1])["type"] == "run.error"
