"""The Docker backend: one hardened container per session, full CPython inside.

This is the ONE module that imports the ``docker`` SDK, and it does so lazily (inside functions),
so ``import sandbox`` never loads it. Every SDK call runs inside :func:`map_docker_errors`, which
translates ``docker.errors.*`` (and the transport errors under them) into
:class:`~sandbox.errors.SandboxError` subclasses once, here; nothing above this module catches
``docker.*``. Blocking SDK calls run in worker threads (``asyncio.to_thread``) so the event loop
never stalls on the Docker engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal

from sandbox.base import Limits, RuntimeWorker, Sandbox
from sandbox.channel import Channel, RpcHandler
from sandbox.errors import SandboxError, SandboxImageMissingError
from sandbox.image import ensure_image, image_tag
from sandbox.subprocess_sandbox import RUNTIME_DIR

if TYPE_CHECKING:
    from sandbox.policy import Policy

__all__ = [
    "LABEL_SANDBOX",
    "DockerSandbox",
    "RemovedContainer",
    "full_python_policy",
    "map_docker_errors",
    "remove_orphans",
]

LABEL_SANDBOX: Final = "org.codeact.sandbox"
LABEL_SESSION: Final = "org.codeact.session"
LABEL_HOST_PID: Final = "org.codeact.host_pid"
LABEL_HOST_START: Final = "org.codeact.host_start"
LABEL_HOSTNAME: Final = "org.codeact.hostname"


@contextmanager
def map_docker_errors(action: str) -> Iterator[None]:
    """Translate Docker SDK errors raised inside the block into ``SandboxError`` subclasses.

    Args:
        action: What was being done, for the message (``"start a sandbox container"``).

    Raises:
        SandboxImageMissingError: The engine reports the sandbox image missing.
        SandboxError: Any other Docker failure; ``code`` is ``sandbox.docker.unavailable`` when
            the engine cannot be reached, ``sandbox.docker.not_found`` for a vanished object and
            ``sandbox.docker.api`` when the engine refused the request.
    """
    import docker.errors

    try:
        yield
    except docker.errors.ImageNotFound as exc:
        raise SandboxImageMissingError(
            f"cannot {action}: the Docker sandbox image is missing ({_explain(exc)}); run `make sandbox-image`"
        ) from None
    except docker.errors.NotFound as exc:
        raise SandboxError(
            f"cannot {action}: the Docker engine no longer knows the object ({_explain(exc)}); "
            "the container was probably removed from outside, retry the round",
            code="sandbox.docker.not_found",
        ) from None
    except docker.errors.APIError as exc:
        raise SandboxError(
            f"cannot {action}: the Docker engine refused the request ({_explain(exc)}); "
            "check `docker info` and the engine's log",
            code="sandbox.docker.api",
        ) from None
    except (docker.errors.DockerException, OSError) as exc:
        # OSError covers requests' ConnectionError and socket errors when the engine goes away.
        raise SandboxError(
            f"cannot {action}: the Docker engine is not reachable ({exc}); "
            "start Docker or point DOCKER_HOST at it, or use the subprocess sandbox",
            code="sandbox.docker.unavailable",
        ) from None


def _explain(exc: Any) -> str:
    explanation = getattr(exc, "explanation", None)
    return str(explanation or exc)


def _client() -> Any:
    """A Docker SDK client from the environment (DOCKER_HOST, ...), checked with a ping."""
    import docker

    with map_docker_errors("connect to the Docker engine"):
        client = docker.from_env()
        try:
            client.ping()
        except BaseException:
            client.close()
            raise
    return client


# ---------------------------------------------------------------------------------------------
# Host identity labels and orphan collection


def _process_start(pid: int) -> str:
    """The kernel start time of ``pid`` (``/proc/<pid>/stat`` field 22), "" when unknown.

    Stored next to the pid so a recycled pid does not keep an orphan alive.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return ""
    # The command name (field 2) is in parentheses and may contain spaces: split after it.
    fields = stat[stat.rfind(b")") + 2 :].split()
    return fields[19].decode() if len(fields) > 19 else ""


def _host_labels(session_id: str) -> dict[str, str]:
    pid = os.getpid()
    return {
        LABEL_SANDBOX: "1",
        LABEL_SESSION: session_id,
        LABEL_HOST_PID: str(pid),
        LABEL_HOST_START: _process_start(pid),
        LABEL_HOSTNAME: socket.gethostname(),
    }


def _owner_alive(labels: dict[str, str]) -> bool:
    """Whether the host process that started a container (by its labels) is still running.

    Containers started on another machine (a shared engine) count as alive: their owner cannot
    be checked from here.
    """
    if labels.get(LABEL_HOSTNAME, socket.gethostname()) != socket.gethostname():
        return True
    try:
        pid = int(labels.get(LABEL_HOST_PID, ""))
    except ValueError:
        return False
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    started = labels.get(LABEL_HOST_START, "")
    return not started or started == _process_start(pid)


@dataclass(frozen=True, kw_only=True)
class RemovedContainer:
    """A sandbox container that :func:`remove_orphans` removed.

    Attributes:
        id: The short container id.
        name: The container name.
        session: The ``org.codeact.session`` label.
        host_pid: The ``org.codeact.host_pid`` label (the host process that started it).
        status: The container's state before removal (``running``, ``exited``, ...).
    """

    id: str
    name: str
    session: str
    host_pid: str
    status: str


def remove_orphans(*, include_live: bool = False, client: Any = None) -> list[RemovedContainer]:
    """Remove sandbox containers (label ``org.codeact.sandbox``) whose host process is gone.

    Args:
        include_live: Remove every sandbox container, also those of running hosts.
        client: A ``docker.DockerClient``; one is built from the environment when omitted.

    Returns:
        The removed containers, in the engine's listing order.

    Raises:
        SandboxError: The Docker engine is unreachable or refused the request.
    """
    own_client = client is None
    docker_client = _client() if client is None else client
    removed: list[RemovedContainer] = []
    try:
        with map_docker_errors("list sandbox containers"):
            containers = docker_client.containers.list(all=True, filters={"label": f"{LABEL_SANDBOX}=1"})
        for container in containers:
            labels: dict[str, str] = dict(container.labels or {})
            if not include_live and _owner_alive(labels):
                continue
            if _force_remove(container):
                removed.append(
                    RemovedContainer(
                        id=container.short_id,
                        name=container.name,
                        session=labels.get(LABEL_SESSION, ""),
                        host_pid=labels.get(LABEL_HOST_PID, ""),
                        status=container.status,
                    )
                )
    finally:
        if own_client:
            docker_client.close()
    return removed


def _force_remove(container: Any) -> bool:
    """Kill and remove ``container``; False when it was already gone (auto-remove raced us)."""
    import docker.errors

    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        return False
    except docker.errors.APIError as exc:
        if exc.status_code == 409:  # "removal already in progress" (auto_remove after kill)
            return False
        with map_docker_errors(f"remove sandbox container {container.short_id}"):
            raise
    return True


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
        return {
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
            "pids_limit": self.pids,
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "user": f"{uid}:{gid}",
            "oom_score_adj": 1000,
            "ulimits": [
                Ulimit(name="core", soft=0, hard=0),
                Ulimit(name="nofile", soft=self.nofile, hard=self.nofile),
                Ulimit(name="fsize", soft=self.file_bytes, hard=self.file_bytes),
            ],
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

    def __init__(self, *, channel: Channel, isolation: str, container: Any) -> None:
        super().__init__(channel=channel, isolation=isolation)
        self.container = container
        self._killed = False
        self._kill_task: asyncio.Future[None] | None = None
        self._state: dict[str, Any] | None = None
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
            await asyncio.wait_for(asyncio.shield(self._kill_task), timeout)
        elif not self._killed:
            await asyncio.wait_for(asyncio.shield(self.channel.lost), timeout)

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
    from sandbox.policy import Policy

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
        image: The image to run (default :func:`sandbox.image.image_tag`, built by ``make sandbox-image``).
        session_id: The ``org.codeact.session`` label (default: a random id).

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
    ) -> None:
        if not 0 < cpus <= 64:
            raise ValueError(f"cpus must be in (0, 64], got {cpus}")
        super().__init__(
            limits=limits if limits is not None else Limits(memory_bytes=_DEFAULT_MEMORY),
            policy=policy,
            bridge=bridge,
            pool_size=pool_size,
        )
        self.cpus = cpus
        self.image = image
        self.session_id = session_id or uuid.uuid4().hex
        self._client: Any = None
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
        return f"docker(no-net,ro-root,caps-dropped,non-root){restricted}"

    def _spec(self) -> _ContainerSpec:
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
        )

    async def _docker(self) -> Any:
        """The SDK client, created (and the image checked) once per sandbox, off the event loop."""
        if self._client_lock is None:
            self._client_lock = asyncio.Lock()
        async with self._client_lock:
            if self._client is None:
                tag = self.image or image_tag()

                def connect() -> Any:
                    client = _client()
                    try:
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
        rlimits = {k: v for k, v in self.limits.rlimits().items() if k != "NPROC"}  # pids cgroup instead
        config = {"socket": f"{_BRIDGE_MOUNT}/{channel.socket_path.name}", "token": channel.token, "rlimits": rlimits}
        kwargs = spec.run_kwargs(
            bridge_dir=str(channel.directory), command=["python3", "-I", "-S", f"{_RUNTIME_MOUNT}/main.py"]
        )
        kwargs["environment"]["CODEACT_RUNTIME_CONFIG"] = json.dumps(config)

        abandoned = threading.Event()

        def run() -> Any:
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
            # Cancelled (or failed): let the thread finish, then remove whatever it started.
            abandoned.set()
            with contextlib.suppress(BaseException):
                leftover = await starting
                await asyncio.to_thread(_force_remove, leftover)
            await channel.close()
            raise
        worker = _ContainerWorker(channel=channel, isolation=self.isolation, container=container)
        try:
            await self._wait_connected(worker)
        except BaseException:
            await worker.aclose()
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
_START_POLL_S: Final = 0.5


def _status_and_logs(container: Any) -> tuple[str, str]:
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
