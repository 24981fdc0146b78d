"""The Docker backend's containers: the hardened container spec, the worker, ``DockerSandbox``.

Part of the Docker adapter (``codeact.sandbox.docker_sandbox``): the ``docker`` SDK is imported lazily
(inside functions) and every SDK call runs inside :func:`~codeact.sandbox.docker_sandbox._engine.map_docker_errors`.
Blocking SDK calls run in worker threads (``asyncio.to_thread``) so the event loop never stalls on
the Docker engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal

from codeact.sandbox._owner import session_of
from codeact.sandbox._worker import LimitName
from codeact.sandbox.aio import finish_through_cancels, wait_for
from codeact.sandbox.base import Limits, RuntimeWorker, Sandbox
from codeact.sandbox.channel import Channel, RpcHandler
from codeact.sandbox.docker_sandbox._engine import _client, _force_remove, _host_labels, map_docker_errors
from codeact.sandbox.errors import IsolationUnavailableError, SandboxError
from codeact.sandbox.image import ensure_image, image_tag
from codeact.sandbox.subprocess_sandbox import RUNTIME_DIR, compile_runtime

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container

    from codeact.sandbox.policy import Policy

__all__ = ["DockerSandbox", "full_python_policy"]

# ---------------------------------------------------------------------------------------------
# Containers

_RUNTIME_MOUNT: Final = "/opt/codeact/runtime"
_BRIDGE_MOUNT: Final = "/opt/codeact/bridge"
_WORK_DIR: Final = "/work"
_NOBODY: Final = 65534
_MiB: Final = 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class _ContainerSpec:
    """Everything that decides how a session's containers are created (fixed per sandbox)."""

    image: str
    session_id: str
    runtime_dir: str
    memory_bytes: int
    cpus: float
    pids: int
    work_bytes: int
    tmp_bytes: int
    nofile: int
    file_bytes: int
    runtime: str | None = None  # the engine's OCI runtime name ("runsc" for gVisor), None: the default

    @property
    def user(self) -> tuple[int, int]:
        """uid/gid inside the container: nobody when the host can hand it the socket, else the host's own."""
        if os.geteuid() == 0:
            return _NOBODY, _NOBODY
        return os.getuid(), os.getgid()

    def run_kwargs(self, *, bridge_dir: str, command: list[str]) -> dict[str, Any]:
        """Keyword arguments of ``client.containers.create`` for one hardened container."""
        from docker.types import LogConfig, Ulimit

        uid, gid = self.user
        tmpfs_opts = "rw,nosuid,nodev,noexec"
        extra: dict[str, Any] = {"runtime": self.runtime} if self.runtime else {}
        ulimits = [
            Ulimit(name="core", soft=0, hard=0),
            Ulimit(name="nofile", soft=self.nofile, hard=self.nofile),
            Ulimit(name="fsize", soft=self.file_bytes, hard=self.file_bytes),
        ]
        if self.runtime == "runsc":
            # gVisor: the container's pids cgroup would count the Sentry's own host threads (a guest
            # fork storm then kills the whole sandbox); gVisor's kernel enforces RLIMIT_NPROC for the
            # guest's non-root user instead, processes and threads alike.
            ulimits.append(Ulimit(name="nproc", soft=self.pids, hard=self.pids))
        else:
            extra["pids_limit"] = self.pids
        return {
            **extra,
            "image": self.image,
            "command": command,
            # Not auto_remove: a crashed container is inspected (OOMKilled, exit code) before the
            # worker removes it. After a host crash the runtime exits (its socket closed) and
            # `codeact sandbox gc` removes the stopped container by its labels.
            "auto_remove": False,
            "network_mode": "none",
            "read_only": True,
            "ipc_mode": "none",
            "tmpfs": {
                _WORK_DIR: f"{tmpfs_opts},size={self.work_bytes},mode=0700,uid={uid},gid={gid}",
                "/tmp": f"{tmpfs_opts},size={self.tmp_bytes},mode=1777",
            },
            "mem_limit": self.memory_bytes,
            "memswap_limit": self.memory_bytes,
            "nano_cpus": int(self.cpus * 1e9),
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "user": f"{uid}:{gid}",
            "oom_score_adj": 1000,
            "ulimits": ulimits,
            # Output written straight to fd 1/2 bypasses capture and lands in the engine's log:
            # cap it so a flood cannot fill the host's disk.
            "log_config": LogConfig(type="json-file", config={"max-size": "1m", "max-file": "1"}),
            "labels": _host_labels(self.session_id),
            "environment": {
                "PATH": "/usr/local/bin:/usr/bin:/bin",
                "LANG": "C.UTF-8",
                "HOME": _WORK_DIR,
                "PYTHONDONTWRITEBYTECODE": "1",
            },
            "volumes": {
                self.runtime_dir: {"bind": _RUNTIME_MOUNT, "mode": "ro"},
                bridge_dir: {"bind": _BRIDGE_MOUNT, "mode": "ro"},
            },
            "working_dir": _WORK_DIR,
            "hostname": "sandbox",
            "stdin_open": False,
            "tty": False,
        }


# ---------------------------------------------------------------------------------------------
# The worker (one container) and the sandbox


class _ContainerWorker(RuntimeWorker):
    """One sandbox container whose runtime is connected on ``channel``.

    ``kill()`` is synchronous in the base contract but the SDK blocks: inside an event loop it
    starts the kill in a worker thread and ``wait_exit``/``aclose`` await it.
    """

    def __init__(self, *, channel: Channel, isolation: str, container: Container) -> None:
        super().__init__(channel=channel, isolation=isolation)
        self.container = container
        self._killed = False
        self._kill_task: asyncio.Future[None] | None = None
        self._state: dict[str, object] | None = None
        self._removed = False

    @property
    def exited(self) -> bool:
        """True once killed, or once the runtime dropped its bridge connection (it is exiting)."""
        return self._killed or self.channel.lost.done()

    def kill(self) -> None:
        """``docker kill`` the container: every process in it stops (idempotent)."""
        if self._killed:
            return
        self._killed = True
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._kill_blocking()
            return
        self._kill_task = asyncio.ensure_future(asyncio.to_thread(self._kill_blocking), loop=loop)

    def _kill_blocking(self) -> None:
        import docker.errors

        try:
            self.container.kill()
        except docker.errors.APIError:
            pass  # already stopped (409) or already removed (404)
        except OSError:
            return  # the engine went away: nothing left to inspect
        try:
            self.container.wait(timeout=10)
            self.container.reload()
            self._state = dict(self.container.attrs.get("State") or {})
        except (docker.errors.DockerException, OSError):
            self._state = None

    async def wait_exit(self, timeout: float) -> None:
        """Wait until the container has stopped (after ``kill()``) or the runtime disconnected."""
        if self._kill_task is not None:
            await wait_for(asyncio.shield(self._kill_task), timeout)
        elif not self._killed:
            await wait_for(asyncio.shield(self.channel.lost), timeout)

    def crash_detail(self) -> str:
        """Why the container's runtime died: OOM kill, exit status, or the last log line."""
        state = self._state
        if not state:
            return "the bridge connection closed"
        code = state.get("ExitCode")
        if state.get("OOMKilled"):
            return "killed by the out-of-memory killer: the container's memory limit was reached"
        detail = f"exit status {code}"
        if code == 137:
            detail = "killed (SIGKILL: out of memory or a resource limit)"
        return detail

    def limit_hit(self) -> LimitName | None:
        """``memory`` when the engine says the container was OOM-killed, ``cpu`` for a runtime dead of SIGXCPU."""
        state = self._state or {}
        if state.get("OOMKilled"):
            return "memory"
        if state.get("ExitCode") == 128 + 24:  # SIGXCPU (24 on Linux, the containers' kernel)
            return "cpu"
        return None

    async def aclose(self) -> None:
        """Kill and remove the container, close the channel (its directory goes with it)."""
        self.kill()
        if self._kill_task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.shield(self._kill_task)
        await self.channel.close()
        await asyncio.to_thread(self._remove_blocking)

    def close_now(self) -> None:
        """Synchronous best-effort close (outside the event loop); blocks on the engine."""
        self._killed = True
        self.channel.close_now()
        self._remove_blocking()

    def _remove_blocking(self) -> None:
        if self._removed:
            return
        self._removed = True
        with contextlib.suppress(SandboxError):
            _force_remove(self.container)


def full_python_policy() -> Policy:
    """The Docker backend's default policy: no RestrictedPython transform, every stdlib module importable.

    The container is the boundary, so the code runs as plain CPython. The image holds only the
    standard library, so allowing all of it is the same as not limiting imports at all.

    Returns:
        ``Policy(restricted=False, allowed_imports=<sys.stdlib_module_names>)``.
    """
    from codeact.sandbox.policy import Policy

    return Policy(restricted=False, allowed_imports=frozenset(sys.stdlib_module_names))


class DockerSandbox(Sandbox):
    """A hardened container per session, running full CPython (the container is the boundary).

    Each container: no network, read-only root, size-limited tmpfs for ``/work`` and ``/tmp``
    (``noexec``), a memory limit (swap included), a CPU quota, a pids limit, every capability
    dropped, ``no-new-privileges``, uid 65534, labels naming the product, the session and the
    host process (for ``codeact sandbox gc``). The runtime is bind-mounted read-only; the bridge
    socket's private directory is bind-mounted read-only too (connecting needs no write access).

    Args:
        limits: Resource limits; by default ``Limits(memory_bytes=512 MiB)``. ``memory_bytes`` is the
            container's memory+swap limit, ``processes`` its pids limit, ``disk_bytes`` the size of
            ``/work`` and of ``/tmp``.
        policy: Compilation policy; by default :func:`full_python_policy` (full CPython). Pass
            ``Policy()`` to run the RestrictedPython layer inside the container as well.
        bridge: Serves the session's toolkits (``toolkits.ToolkitBridge``), or None.
        pool_size: Containers started ahead of need (default 1): the first round after ``start()``
            and the replacement after a kill do not wait for a container to start.
        cpus: CPU quota in CPUs (default 1.0).
        image: The image to run (default :func:`codeact.sandbox.image.image_tag`, built by
            ``codeact sandbox image build``).
        session_id: The ``org.codeact.session`` label (default: the bridge's ``session_id``, else a random id).
        sys_path: Directories the runtime appends to ``sys.path`` (a declared environment's
            ``/opt/codeact/env``, baked into ``image``).
        runtime: ``"runc"`` (default: the engine's default runtime) or ``"gvisor"``: the strongest
            setting, every container runs on gVisor's user-space kernel (the engine's ``runsc``
            runtime, registered by ``scripts/services.sh up``). Never falls back to runc: when the
            engine has no ``runsc`` runtime the first start raises ``IsolationUnavailableError``.

    Raises:
        SandboxImageMissingError: (on first start) the image is not built.
        SandboxError: (on first start) the Docker engine is unreachable or refused the container.
    """

    backend: ClassVar[Literal["subprocess", "docker"]] = "docker"

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        policy: Policy | None = None,
        bridge: RpcHandler | None = None,
        pool_size: int = 1,
        cpus: float = 1.0,
        image: str | None = None,
        session_id: str | None = None,
        sys_path: tuple[str, ...] = (),
        runtime: Literal["runc", "gvisor"] = "runc",
    ) -> None:
        if not 0 < cpus <= 64:
            raise ValueError(f"cpus must be in (0, 64], got {cpus}")
        if runtime not in RUNTIMES:
            raise ValueError(f"runtime must be one of {', '.join(sorted(RUNTIMES))}, got {runtime!r}")
        super().__init__(
            limits=limits if limits is not None else Limits(memory_bytes=_DEFAULT_MEMORY),
            policy=policy,
            bridge=bridge,
            pool_size=pool_size,
        )
        self.cpus = cpus
        self.image = image
        self.runtime = runtime
        self.session_id = session_id or session_of(bridge) or uuid.uuid4().hex
        self.sys_path = tuple(sys_path)
        self._client: DockerClient | None = None
        self._client_lock: asyncio.Lock | None = None

    @property
    def policy(self) -> Policy:
        """The compilation policy: full CPython (:func:`full_python_policy`) unless one was given."""
        if self._policy is None:
            self._policy = full_python_policy()
        return self._policy

    @property
    def isolation(self) -> str:
        """``docker(no-net,ro-root,caps-dropped,non-root)`` plus ``+restricted`` when the policy is on."""
        restricted = "+restricted" if self._policy is not None and self._policy.restricted else ""
        kernel = "gvisor," if self.runtime == "gvisor" else ""
        return f"docker({kernel}no-net,ro-root,caps-dropped,non-root){restricted}"

    def _spec(self) -> _ContainerSpec:
        compile_runtime()  # the image's python3.11 reads the host's cpython-311 bytecode from the mount
        limits = self.limits
        return _ContainerSpec(
            image=self.image or image_tag(),
            session_id=self.session_id,
            runtime_dir=str(RUNTIME_DIR),
            memory_bytes=limits.memory_bytes,
            cpus=self.cpus,
            pids=limits.processes,
            work_bytes=limits.disk_bytes,
            tmp_bytes=limits.disk_bytes,
            nofile=limits.open_files,
            file_bytes=limits.file_bytes,
            runtime=RUNTIMES[self.runtime],
        )

    async def _docker(self) -> DockerClient:
        """The SDK client, created (and the image checked) once per sandbox, off the event loop."""
        if self._client_lock is None:
            self._client_lock = asyncio.Lock()
        async with self._client_lock:
            if self._client is None:
                tag = self.image or image_tag()

                runtime = RUNTIMES[self.runtime]

                def connect() -> DockerClient:
                    client = _client()
                    try:
                        if runtime is not None:
                            _check_runtime(client, runtime)
                        with map_docker_errors("look up the sandbox image"):
                            ensure_image(client, tag)
                    except BaseException:
                        client.close()
                        raise
                    return client

                self._client = await asyncio.to_thread(connect)
            return self._client

    async def _spawn(self) -> RuntimeWorker:
        client = await self._docker()
        spec = self._spec()
        uid, _ = spec.user
        channel = await Channel.open(self.bridge, socket_uid=uid if os.geteuid() == 0 else None)
        rlimits = self.limits.rlimits()
        if self.runtime != "gvisor":
            del rlimits["NPROC"]  # the pids cgroup instead
        config: dict[str, object] = {
            "socket": f"{_BRIDGE_MOUNT}/{channel.socket_path.name}",
            "token": channel.token,
            "rlimits": rlimits,
            "reap_children": True,  # the runtime is the container's pid 1: nothing outlives a round
        }
        if self.sys_path:
            config["sys_path"] = list(self.sys_path)
        flags, seed_env = self.interpreter()
        # The token travels in a file of the private bridge directory that the channel deletes as
        # soon as the runtime authenticates: never in the environment (/proc/1/environ) or argv.
        config_file = channel.write_config(config)
        command = [
            "python3",
            *flags,
            f"{_RUNTIME_MOUNT}/main.py",
            "--config-file",
            f"{_BRIDGE_MOUNT}/{config_file.name}",
        ]
        kwargs = spec.run_kwargs(bridge_dir=str(channel.directory), command=command)
        kwargs["environment"].update(seed_env)

        abandoned = threading.Event()

        def run() -> Container:
            # create + start rather than run(): a container whose start fails (or whose caller was
            # cancelled meanwhile) is removed here instead of being left behind in "created" state.
            with map_docker_errors("start a sandbox container"):
                container = client.containers.create(**kwargs)
                try:
                    if abandoned.is_set():
                        raise asyncio.CancelledError
                    container.start()
                except BaseException:
                    _force_remove(container)
                    raise
            return container

        starting = asyncio.ensure_future(asyncio.to_thread(run))
        try:
            container = await asyncio.shield(starting)
        except BaseException:
            # Cancelled (or failed): let the thread finish, then remove whatever it started. The
            # clean-up runs to its end through further cancels (cancel_and_wait repeats them every
            # second, and a start on a busy gVisor engine takes longer): cut short, it left a
            # started container behind whose bridge directory was already gone.
            abandoned.set()

            async def remove_started() -> None:
                with contextlib.suppress(BaseException):
                    leftover = await starting
                    await asyncio.to_thread(_force_remove, leftover)
                await channel.close()

            await finish_through_cancels(remove_started())
            raise
        worker = _ContainerWorker(channel=channel, isolation=self.isolation, container=container)
        try:
            await self._wait_connected(worker)
        except BaseException:
            await finish_through_cancels(worker.aclose())
            raise
        return worker

    async def _wait_connected(self, worker: _ContainerWorker) -> None:
        """Wait for the runtime to authenticate, watching the container so a failed start fails fast."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.limits.start_timeout_s
        while True:
            try:
                await worker.channel.wait_connected(_START_POLL_S)
                return
            except TimeoutError:
                pass
            status, logs = await asyncio.to_thread(_status_and_logs, worker.container)
            if status not in ("created", "running"):
                raise SandboxError(
                    f"the sandbox container exited before its runtime connected (status {status!r}); "
                    f"last log lines: {logs or '(none)'}",
                    code="sandbox.start",
                )
            if loop.time() > give_up:
                raise SandboxError(
                    f"the sandbox runtime did not connect within {self.limits.start_timeout_s:g} s; "
                    "check `docker info` (an overloaded engine) or raise Limits.start_timeout_s",
                    code="sandbox.start",
                )

    async def aclose(self) -> None:
        """Remove every container of this sandbox and release the Docker client (idempotent)."""
        await super().aclose()
        client, self._client = self._client, None
        if client is not None:
            await asyncio.to_thread(client.close)

    def close(self) -> None:
        """Synchronous close: remove every container (blocks on the engine) and release the client."""
        super().close()
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()


_DEFAULT_MEMORY: Final = 512 * _MiB

RUNTIMES: Final[dict[str, str | None]] = {"runc": None, "gvisor": "runsc"}
"""``DockerSandbox(runtime=...)`` -> the engine's OCI runtime name (None: the engine's default, runc)."""


def _check_runtime(client: DockerClient, runtime: str) -> None:
    """Raise unless the engine has ``runtime`` registered: never fall back to runc silently."""
    with map_docker_errors("list the Docker engine's runtimes"):
        registered = client.info().get("Runtimes") or {}
    if runtime not in registered:
        raise IsolationUnavailableError(
            f"the Docker engine has no {runtime!r} runtime (gVisor) registered (it has: "
            f"{', '.join(sorted(registered)) or 'none'}); install it (`apt-get install runsc`) and register it "
            f'in /etc/docker/daemon.json ("runtimes": {{"{runtime}": {{"path": "/usr/bin/runsc"}}}}), then reload '
            "dockerd (`scripts/services.sh up` does all of this), or choose runtime runc"
        )


_START_POLL_S: Final = 0.5


def _status_and_logs(container: Container) -> tuple[str, str]:
    import docker.errors

    try:
        container.reload()
        status = str(container.status)
        logs = container.logs(tail=5).decode("utf-8", "replace").strip() if status not in ("created", "running") else ""
    except docker.errors.NotFound:
        return "removed", ""
    except (docker.errors.DockerException, OSError) as exc:
        return f"unknown ({exc})", ""
    return status, logs[-1000:]
