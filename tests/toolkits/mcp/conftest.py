"""Shared fixtures: the npm reference servers (installed by scripts/setup.d/mcp.sh) and CLI helpers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
FLAKY = Path(__file__).with_name("flaky_server.py")
CODEACT = str(Path(sys.executable).parent / "codeact")


def _servers() -> dict[str, str]:
    """The reference servers' entry scripts: from the environment, else installed now (cached by hash)."""
    names = ("CODEACT_MCP_EVERYTHING", "CODEACT_MCP_FILESYSTEM")
    if all(os.environ.get(n) for n in names):
        return {n: os.environ[n] for n in names}
    if shutil.which("npm") is None:
        pytest.fail("npm is missing: the MCP reference servers need Node (scripts/setup.d/mcp.sh installs it)")
    state = REPO / ".services"
    subprocess.run(
        ["bash", str(REPO / "scripts" / "setup.d" / "mcp.sh")],
        env={**os.environ, "STATE_DIR": str(state)},
        check=True,
        capture_output=True,
        timeout=600,
    )
    found: dict[str, str] = {}
    for line in (state / "env.d" / "mcp.env").read_text().splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        found[name] = value.strip("'")
    return found


@pytest.fixture(scope="session")
def reference_servers() -> dict[str, str]:
    return _servers()


def run_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``codeact ARGS`` as a subprocess (the installed script)."""
    return subprocess.run(
        [CODEACT, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "CODEACT_HOME": str(cwd / "home"), "LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})},
        check=False,
        timeout=timeout,
    )


def write_agent(tmp_path: Path, toolkits: str, replies: list[str], *, max_turns: int = 6) -> Path:
    """A codeact blueprint with scripted replies and the given ``toolkits:`` YAML block."""
    (tmp_path / "replies.yaml").write_text(json.dumps(replies))
    path = tmp_path / "agent.yaml"
    path.write_text(
        "version: codeact.agent/v1\n"
        "extend: codeact-base\n"
        "id: mcp-agent\n"
        "model: {provider: scripted, model: scripted/replies.yaml}\n"
        f"workflow: {{maxTurns: {max_turns}, codeact: {{thought: 'off'}}}}\n"
        f"toolkits:\n{toolkits}"
    )
    return path


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def answer(stdout: str) -> Any:
    done = [e for e in events(stdout) if e["type"] in ("run.completed", "run.failed")]
    assert done, stdout
    return done[-1].get("answer", done[-1])
