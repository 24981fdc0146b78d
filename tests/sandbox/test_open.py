"""``open_sandbox(spec)``: the one place a sandbox backend is chosen and constructed."""

from __future__ import annotations

import dataclasses

import pytest

from codeact.sandbox import DockerSandbox, Limits, Policy, SandboxSpec, SubprocessSandbox, open_sandbox


def test_the_default_spec_opens_the_subprocess_backend() -> None:
    box = open_sandbox(SandboxSpec())
    assert isinstance(box, SubprocessSandbox)
    assert box.isolation.startswith("bwrap")


def test_the_subprocess_spec_is_passed_through() -> None:
    limits = Limits(wall_s=3.0)
    policy = Policy().widen("csv")
    box = open_sandbox(SandboxSpec(isolation="process", limits=limits, policy=policy))
    assert isinstance(box, SubprocessSandbox)
    assert box.isolation.startswith("process")
    assert (box.limits, box.policy) == (limits, policy)


def test_a_docker_spec_opens_the_docker_backend_with_its_runtime() -> None:
    box = open_sandbox(SandboxSpec(backend="docker", runtime="gvisor"))
    assert isinstance(box, DockerSandbox) and box.runtime == "gvisor"


def test_the_spec_is_frozen_and_keyword_only() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        SandboxSpec().backend = "docker"  # type: ignore[misc]
    with pytest.raises(TypeError):
        SandboxSpec("docker")  # type: ignore[misc]
