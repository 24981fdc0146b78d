"""The one opener of a sandbox: a frozen :class:`SandboxSpec` in, a backend out.

``sandbox/base.py`` never imports its implementations; this small module above them picks the backend
(ARCHITECTURE.md section 10), for every caller alike: ``codeact run`` (the agent's sandbox factory),
``codeact replay`` (the spec a session's note records), ``codeact exec`` and the MCP server's
``run_python``. Nothing else constructs a ``SubprocessSandbox`` or a ``DockerSandbox``.

A field left at None keeps the backend's own default (the Docker backend's memory limit, its full
CPython policy, one CPU), so a spec says only what its caller chose.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from codeact.sandbox.base import Limits, Sandbox
    from codeact.sandbox.channel import RpcHandler
    from codeact.sandbox.policy import Policy

__all__ = ["SandboxSpec", "open_sandbox"]

Backend = Literal["subprocess", "docker"]


@dataclass(frozen=True, kw_only=True)
class SandboxSpec:
    """Which sandbox to open and how it is bounded.

    Attributes:
        backend: ``subprocess`` (RestrictedPython in a child process) or ``docker`` (a hardened container).
        isolation: The subprocess backend's isolation: ``bwrap`` or ``process`` (weaker).
        runtime: The Docker backend's OCI runtime: ``runc`` or ``gvisor``.
        limits: Resource limits (None: the backend's defaults).
        policy: The import/compile policy (None: the backend's default).
        cpus: The Docker container's CPU quota (None: the backend's default, 1.0).
        image: The Docker image of a declared environment (None: the sandbox image).
        sys_path: Extra ``sys.path`` entries inside the container (a declared environment's mount).
        env_dir: The subprocess backend's declared environment (its ``site-packages`` folder).
    """

    backend: Backend = "subprocess"
    isolation: Literal["bwrap", "process"] = "bwrap"
    runtime: Literal["runc", "gvisor"] = "runc"
    limits: Limits | None = None
    policy: Policy | None = None
    cpus: float | None = None
    image: str | None = None
    sys_path: tuple[str, ...] = ()
    env_dir: str | None = None


def open_sandbox(spec: SandboxSpec, *, bridge: RpcHandler | None = None) -> Sandbox:
    """A sandbox of ``spec.backend``, not started yet (``async with`` it, or its first ``execute`` starts it).

    Args:
        spec: What to open.
        bridge: The host's JSON-RPC handler the code's toolkit proxies call (None: no toolkits).

    Raises:
        ValueError: A field is out of range for its backend (``cpus``, ``isolation``, ``runtime``).
    """
    if spec.backend == "docker":
        from codeact.sandbox.docker_sandbox import DockerSandbox

        return DockerSandbox(
            limits=spec.limits,
            policy=spec.policy,
            bridge=bridge,
            cpus=spec.cpus if spec.cpus is not None else 1.0,
            image=spec.image,
            sys_path=spec.sys_path,
            runtime=spec.runtime,
        )
    from codeact.sandbox.subprocess_sandbox import SubprocessSandbox

    return SubprocessSandbox(
        limits=spec.limits, policy=spec.policy, bridge=bridge, isolation=spec.isolation, env_dir=spec.env_dir
    )
