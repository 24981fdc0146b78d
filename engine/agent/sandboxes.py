"""Building the sandbox a spec declares: backend, limits, import policy and declared environment.

One place turns :class:`~codeact.engine.blueprint.SandboxSettings` into a running configuration, for
``codeact run`` (through :func:`codeact.engine.agent.default_sandbox_factory`) and ``codeact exec
--blueprint`` alike. The declared packages (``sandbox.packages`` / ``sandbox.preset``) are built
(or found in the cache) by :mod:`codeact.sandbox.env`; their top-level modules widen the import policy,
because a host that accepted the declaration accepted those packages.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from codeact.engine.blueprint import AgentSpec, SandboxSettings
    from codeact.sandbox import Limits, RpcHandler, Sandbox, SandboxSpec
    from codeact.sandbox.env import Environment

__all__ = [
    "declared_environment",
    "declared_spec",
    "default_sandbox_factory",
    "env_note",
    "limits_for",
    "noted_environment",
    "sandbox_spec",
]

Backend = Literal["subprocess", "docker"]


def limits_for(settings: SandboxSettings) -> Limits:
    """The sandbox ``Limits`` of ``sandbox.limits`` (unset fields keep the backend's defaults)."""
    from codeact.sandbox import Limits

    lim = settings.limits
    overrides: dict[str, Any] = {}
    if lim.timeout_seconds is not None:
        overrides["wall_s"] = float(lim.timeout_seconds)
    if lim.memory_mb is not None:
        overrides["memory_bytes"] = int(lim.memory_mb) * 1024 * 1024
    if lim.cpu_seconds is not None:
        overrides["cpu_s"] = int(lim.cpu_seconds)
    if lim.pids is not None:
        overrides["processes"] = int(lim.pids)
    if lim.output_bytes is not None:
        overrides["output_bytes"] = int(lim.output_bytes)
    if lim.artifact_bytes is not None:
        overrides["artifact_bytes"] = int(lim.artifact_bytes)
    if lim.round_artifact_bytes is not None:
        overrides["round_artifact_bytes"] = int(lim.round_artifact_bytes)
    return Limits(**overrides)


def declared_environment(
    settings: SandboxSettings, backend: Backend, *, progress: Callable[[str], None] | None = None
) -> Environment | None:
    """The environment ``settings`` declares on ``backend`` (built on first use), or None.

    Raises:
        EnvironmentBuildError: A package could not be installed (named, with pip's message).
    """
    if not settings.packages and settings.preset is None:
        return None
    from codeact.sandbox.env import EnvSpec, ensure_environment

    spec = EnvSpec(packages=settings.packages, preset=settings.preset)
    return ensure_environment(spec, backend=backend, progress=progress)


def sandbox_spec(
    backend: Backend,
    *,
    limits: Limits | None = None,
    imports: tuple[str, ...] = (),
    env: Environment | None = None,
    isolation: Literal["bwrap", "process"] = "bwrap",
    runtime: Literal["runc", "gvisor"] = "runc",
    cpus: float | None = None,
) -> SandboxSpec:
    """The spec of a sandbox of ``backend`` with the import policy widened by ``imports`` and ``env``'s modules.

    ``cpus`` is the Docker container's CPU quota (``sandbox.limits.cpus``; default 1.0).
    """
    from codeact.sandbox import SandboxSpec
    from codeact.sandbox.env import MOUNT_POINT
    from codeact.sandbox.policy import Policy

    modules = sorted(env.modules) if env is not None else []
    if backend == "docker":
        from codeact.sandbox.docker_sandbox import full_python_policy

        # The container is the boundary: full CPython, the whole stdlib, plus the environment's packages.
        image = env.image if env is not None else None
        return SandboxSpec(
            backend="docker",
            limits=limits,
            policy=full_python_policy().widen(*imports, *modules) if (modules or imports) else None,
            image=image,
            sys_path=(MOUNT_POINT,) if image is not None else (),
            cpus=float(cpus) if cpus is not None else 1.0,
            runtime=runtime,
        )
    return SandboxSpec(
        backend="subprocess",
        limits=limits,
        policy=Policy().widen(*imports, *modules),
        isolation=isolation,
        env_dir=str(env.site) if env is not None and env.site is not None else None,
    )


def declared_spec(
    settings: SandboxSettings,
    backend: Backend,
    *,
    env: Environment | None,
    isolation: Literal["bwrap", "process"] = "bwrap",
    runtime: Literal["runc", "gvisor"] | None = None,
) -> SandboxSpec:
    """The :func:`sandbox_spec` of the sandbox ``settings`` declare on ``backend``, in ``env`` (built already).

    ``runtime`` overrides ``sandbox.runtime`` (None: the declared one, else runc).
    """
    return sandbox_spec(
        backend,
        limits=limits_for(settings),
        # Docker's default policy is full CPython: its imports widen only when packages are declared.
        imports=settings.imports if backend == "subprocess" else (),
        env=env,
        isolation=isolation,
        runtime=runtime or settings.runtime or "runc",
        cpus=settings.limits.cpus,
    )


def env_note(settings: SandboxSettings) -> dict[str, object] | None:
    """What a session records (``extra.sandbox.env``) so a replay runs in the same environment."""
    if not settings.packages and settings.preset is None:
        return None
    return {"packages": list(settings.packages), "preset": settings.preset}


def noted_environment(note: object, backend: Backend) -> Environment | None:
    """The environment an ``env_note`` names (from the cache, or built again), or None for no note.

    Raises:
        EnvironmentBuildError: It cannot be built any more (a package gone from the index, ...).
    """
    if not isinstance(note, dict):
        return None
    from codeact.sandbox.env import EnvSpec, ensure_environment

    packages = tuple(str(p) for p in note.get("packages") or ())
    preset = note.get("preset")
    spec = EnvSpec(packages=packages, preset=preset if isinstance(preset, str) else None)
    return ensure_environment(spec, backend=backend)


def default_sandbox_factory(
    *,
    backend: Literal["subprocess", "docker"] | None = None,
    isolation: Literal["bwrap", "process"] = "bwrap",
    runtime: Literal["runc", "gvisor"] | None = None,
) -> Callable[[RpcHandler, AgentSpec], Sandbox]:
    """A factory building the spec's sandbox (``backend``/``runtime`` override the blueprint's choice).

    The agent's ``SandboxFactory`` (engine/agent/_wiring.py); the run calls it once it has its bridge.
    """

    def _make(handler: RpcHandler, spec: AgentSpec) -> Sandbox:
        from codeact.sandbox import open_sandbox

        declared = spec.sandbox
        chosen = backend or declared.backend or "subprocess"
        # Built before the run by the CLI (`codeact run`, `codeact sandbox build`): here a cache hit.
        env = declared_environment(declared, chosen)
        opened = declared_spec(declared, chosen, env=env, isolation=isolation, runtime=runtime)
        return open_sandbox(opened, bridge=handler)

    return _make
