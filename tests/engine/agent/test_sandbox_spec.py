"""The spec of a declared sandbox (``declared_spec``): what ``codeact run`` and ``codeact exec --blueprint`` open."""

from __future__ import annotations

from typing import Literal

import pytest

from codeact.engine.agent.sandboxes import declared_spec
from codeact.engine.blueprint import SandboxLimitSettings, SandboxSettings
from codeact.sandbox import Limits, SandboxSpec
from codeact.sandbox.policy import Policy

LIMITS = SandboxLimitSettings(timeout_seconds=5, memory_mb=64, cpus=0.5)
SETTINGS = SandboxSettings(declared=True, limits=LIMITS, imports=("zoneinfo",))
Runtime = Literal["runc", "gvisor"]


def test_a_subprocess_sandbox_gets_the_declared_limits_and_imports() -> None:
    spec = declared_spec(SETTINGS, "subprocess", env=None, isolation="process")
    assert spec == SandboxSpec(
        backend="subprocess",
        isolation="process",
        limits=Limits(wall_s=5.0, memory_bytes=64 * 1024 * 1024),
        policy=Policy().widen("zoneinfo"),
    )


def test_a_docker_sandbox_keeps_full_python_and_takes_the_declared_cpus() -> None:
    spec = declared_spec(SETTINGS, "docker", env=None)
    # policy None: the backend's full CPython (sandbox.imports widen only a subprocess sandbox's policy)
    assert spec == SandboxSpec(backend="docker", limits=Limits(wall_s=5.0, memory_bytes=64 * 1024 * 1024), cpus=0.5)


@pytest.mark.parametrize(
    ("declared", "override", "expected"),
    [
        pytest.param(None, None, "runc", id="none-runc"),
        pytest.param("gvisor", None, "gvisor", id="declared"),
        pytest.param("runc", "gvisor", "gvisor", id="override"),
    ],
)
def test_the_runtime_override_wins_over_the_declared_one(
    declared: Runtime | None, override: Runtime | None, expected: Runtime
) -> None:
    settings = SandboxSettings(declared=True, runtime=declared)
    assert declared_spec(settings, "docker", env=None, runtime=override).runtime == expected
