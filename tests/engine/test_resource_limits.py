"""Resource limits that name themselves when they fire (issue 35 item 4), end to end through ``codeact run``.

A busy loop past its CPU seconds, an allocation past the memory limit, output past its cap: each
round's error (or cut marker) says which limit fired, its value, and the blueprint key that raises it,
the way the round's time limit does. The limits are scaled down (1 CPU second, 256 MB, 200 bytes).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.engine.cli_support import cli

pytestmark = pytest.mark.usefixtures("cli_home")

SANDBOXES = [
    pytest.param((), id="subprocess"),
    pytest.param(("--sandbox", "docker"), id="docker", marks=[pytest.mark.integration, pytest.mark.docker]),
]
REPLACED = "the sandbox was killed and will be replaced (the variables from before the round are kept)"


def _run(tmp_path: Path, limits: str, *replies: str, sandbox: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    (tmp_path / "replies.yaml").write_text(json.dumps(list(replies)))
    path = tmp_path / "agent.yaml"
    path.write_text(
        "version: codeact.agent/v1\nextend: codeact-base\nid: limits\n"
        "model: {provider: scripted, model: scripted/replies.yaml}\n"
        "workflow: {maxTurns: 4, codeact: {thought: 'off'}}\n"
        f"toolkits: [{{ref: system}}]\nsandbox: {{limits: {limits}}}\n"
    )
    rc, out, err = cli(
        "run", str(path), "--input", "go", "--store", f"sqlite:///{tmp_path / 's.db'}", "--json",
        "--allow-sandbox-declaration", *sandbox,
    )  # fmt: skip
    assert rc == 0, err
    return [json.loads(line) for line in out.splitlines()]


def _rounds(stream: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [event for event in stream if event["type"] == "code.completed"]


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_busy_loop_names_the_cpu_limit_and_its_key(tmp_path: Path, sandbox: tuple[str, ...]) -> None:
    stream = _run(
        tmp_path,
        "{cpuSeconds: 1}",
        "```python\nn = 0\nwhile True:\n    n += 1\n```",
        "The loop used up its CPU time.\n```python\nsystem.finish('gave up')\n```",
        sandbox=sandbox,
    )
    first = _rounds(stream)[0]
    assert first["status"] == "crashed"
    assert first["error"]["type"] == "CpuLimitExceeded"
    assert first["error"]["message"] == (
        f"the round ran past its 1 s limit of CPU time (seconds the code kept a CPU busy); {REPLACED}. "
        "Split heavy work over several rounds, or raise the limit (sandbox.limits.cpuSeconds)"
    )
    assert stream[-1]["type"] == "run.completed" and stream[-1]["answer"] == "gave up"


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_memory_and_output_limits_name_themselves(tmp_path: Path, sandbox: tuple[str, ...]) -> None:
    stream = _run(
        tmp_path,
        "{memoryMb: 256, outputBytes: 200}",
        "```python\nprint('x' * 1000)\n```",
        "```python\nbig = bytearray(1024 ** 3)\n```",
        "```python\nsystem.finish('smaller')\n```",
        sandbox=sandbox,
    )
    first, second = _rounds(stream)[:2]
    assert first["stdout"] == (
        "x" * 100 + "\n... [801 bytes cut: output is capped at 200 bytes per stream and round, raise "
        "sandbox.limits.outputBytes] ...\n" + "x" * 99 + "\n"
    )
    assert second["error"]["type"] == "MemoryError"
    assert second["error"]["message"] == (
        "the sandbox's memory limit is 256 MB: hold less in memory at once, or raise the limit "
        "(sandbox.limits.memoryMb)"
    )
    assert stream[-1]["answer"] == "smaller"
