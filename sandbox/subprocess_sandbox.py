"""The subprocess backend (the default): the runtime in a child process inside bubblewrap.

Walls, from the inside out: the RestrictedPython policy (host-compiled code), resource limits the
runtime sets on itself before any user code runs (address space, file size, open files,
processes, no core dumps, CPU per round), and bubblewrap: new user/pid/net/mount/ipc/uts/cgroup
namespaces, an unprivileged uid, all capabilities dropped, ``no_new_privs``, a read-only view of
only the interpreter, the system libraries and the runtime, size-limited tmpfs for ``/work`` and
``/tmp``, its own ``/proc`` and a minimal ``/dev``. The child runs ``python -I -S`` with an
allow-listed environment, in its own session; the deadline kills the whole process group.

Under all of that, one cgroup per runtime (``codeact.sandbox._cgroup``): ``pids.max``, a memory limit and a
CPU quota for the runtime and everything it starts, which bind root too (``RLIMIT_NPROC`` does not).
After every round the processes the round started are killed (nothing outlives a round); a kill
(deadline, close) kills the whole cgroup. ``process_wall`` chooses: ``"auto"`` (default) requires the
cgroup when the host runs as root and fails closed without it; ``"cgroup"`` always requires it;
``"rlimits"`` is the explicitly weaker choice without it.

``isolation="process"`` is the explicitly weaker mode (no bubblewrap: rlimits, the environment
allow-list and a private work dir only); it is never chosen silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Final, Literal, TypeVar

from codeact.sandbox import _spawn
from codeact.sandbox._cgroup import SandboxCgroup, cgroup_support
from codeact.sandbox._owner import dir_prefix, host_tag, session_of
from codeact.sandbox._worker import LimitName
from codeact.sandbox.aio import cancel_and_wait, finish_through_cancels, wait_for
from codeact.sandbox.base import Limits, RuntimeWorker, Sandbox
from codeact.sandbox.channel import Channel, RpcHandler
from codeact.sandbox.errors import IsolationUnavailableError, SandboxError

if TYPE_CHECKING:
    from codeact.sandbox.policy import Policy

__all__ = ["SubprocessSandbox", "bwrap_command", "compile_runtime", "python_interpreter"]

_T = TypeVar("_T")

RUNTIME_DIR: Final = Path(__file__).resolve().parent / "runtime"
_RUNTIME_MOUNT: Final = "/opt/codeact/runtime"
_BRIDGE_MOUNT: Final = "/opt/codeact/bridge"
_ENV_MOUNT: Final = "/opt/codeact/env"
_WORK: Final = "/work"
_NOBODY: Final = 65534
_STDERR_TAIL: Final = 4096
_REAP_S: Final = 30.0  # how long aclose() waits for a SIGKILLed runtime to be reaped
_INSTALL_HINT: Final = (
    'install it with `apt-get install bubblewrap` (`make install` does), or pass isolation="process" '
    "to run with resource limits and an environment allow-list only (explicitly weaker)"
)
_bwrap_checked: dict[str, str | None] = {}  # bwrap path -> None (works) or the failure


@functools.cache
def compile_runtime() -> None:
    """Write the runtime modules' bytecode (``__pycache__``) where it is missing or stale, once per process.

    Sandboxes mount the runtime directory read-only, so a runtime cannot keep what it compiles: without
    these files every sandbox start compiles every runtime module from source (~100 ms, most of a cold
    start). An installed wheel has them (installers compile); a source checkout gets them here. Nothing
    is written when they are up to date (a stat and a 16-byte read per module), and a read-only
    installation is left as it is.
    """
    import compileall

    with contextlib.suppress(OSError):
        compileall.compile_dir(RUNTIME_DIR, maxlevels=0, quiet=2)


def python_interpreter() -> tuple[str, str]:
    """The real interpreter running the host and its installation prefix (a venv resolves to its base).

    Returns:
        ``(executable, prefix)``, both real paths.
    """
    executable = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    return executable, os.path.realpath(sys.base_prefix)


def _env(home: str) -> dict[str, str]:
    """The child's whole environment: nothing from the host beyond these basics."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONIOENCODING": "utf-8",
        "HOME": home,
    }


def bwrap_command(
    bwrap: str, *, bridge_dir: str, limits: Limits, command: list[str], env_dir: str | None = None
) -> list[str]:
    """The bubblewrap command line that runs ``command`` isolated.

    Args:
        bwrap: Path of the ``bwrap`` binary.
        bridge_dir: The host directory holding the bridge socket (bound at /opt/codeact/bridge).
        limits: Sizes of the work dir and /tmp.
        command: What to run inside (interpreter paths are the host's, bound read-only).
        env_dir: A declared environment's package directory, bound read-only at ``/opt/codeact/env``.

    Returns:
        The argv.
    """
    _, prefix = python_interpreter()
    argv = [
        bwrap,
        "--unshare-user",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--uid",
        str(_NOBODY),
        "--gid",
        str(_NOBODY),
        "--hostname",
        "sandbox",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    for etc in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime"):
        argv += ["--ro-bind-try", etc, etc]
    if not prefix.startswith("/usr/"):
        argv += ["--ro-bind", prefix, prefix]
    argv += [
        "--ro-bind",
        str(RUNTIME_DIR),
        _RUNTIME_MOUNT,
        "--ro-bind",
        bridge_dir,
        _BRIDGE_MOUNT,
        *(["--ro-bind", env_dir, _ENV_MOUNT] if env_dir else []),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--perms",
        "1777",
        "--size",
        str(limits.disk_bytes),
        "--tmpfs",
        "/tmp",
        "--perms",
        "0700",
        "--size",
        str(limits.disk_bytes),
        "--tmpfs",
        _WORK,
    ]
    argv += ["--remount-ro", "/", "--chdir", _WORK, "--", *command]
    return argv


async def _check_bwrap(bwrap: str, limits: Limits) -> None:
    """Run a trivial command under the exact isolation flags once per process; raise when it fails."""
    if bwrap in _bwrap_checked:
        failure = _bwrap_checked[bwrap]
    else:
        executable, _ = python_interpreter()
        with tempfile.TemporaryDirectory(prefix="codeact-bwrap-check-") as tmp:
            argv = bwrap_command(
                bwrap, bridge_dir=tmp, limits=limits, command=[executable, "-I", "-S", "-c", "import os; os.getuid()"]
            )
            try:
                proc = await _spawn.spawn(
                    *argv,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.PIPE,
                    env=_env(_WORK),
                )
                _, err = await wait_for(proc.communicate(), 30)
                failure = None if proc.returncode == 0 else err.decode("utf-8", "replace").strip()[-500:]
            except (OSError, TimeoutError) as exc:
                failure = str(exc)
        _bwrap_checked[bwrap] = failure
    if failure is not None:
        raise IsolationUnavailableError(
            f"bubblewrap ({bwrap}) failed its self-test: {failure or 'no output'}; the kernel may forbid "
            f"unprivileged user namespaces. Fix that, or {_INSTALL_HINT}"
        )


@functools.cache
def _cgroup_available() -> bool:
    return cgroup_support() is None


def _cgroup_choice(wall: str) -> bool:
    """Whether runtimes get a cgroup: ``auto`` wants one as root (fails closed later) or when available."""
    if wall == "rlimits":
        return False
    if wall == "cgroup" or os.geteuid() == 0:
        return True
    return _cgroup_available()


def _consume(future: asyncio.Future[_T]) -> None:
    if not future.cancelled():
        future.exception()


class _ProcessWorker(RuntimeWorker):
    """A runtime child process (bubblewrap's, or the interpreter itself in ``process`` mode)."""

    def __init__(
        self,
        *,
        channel: Channel,
        isolation: str,
        proc: asyncio.subprocess.Process,
        work_dir: str | None,
        cgroup: SandboxCgroup | None = None,
    ) -> None:
        super().__init__(channel=channel, isolation=isolation)
        self.proc = proc
        self.work_dir = work_dir
        self.cgroup = cgroup
        self._keep: frozenset[int] = frozenset()  # the runtime's own processes (set once connected)
        self._stderr: deque[bytes] = deque()
        self._stderr_len = 0
        self._drain: asyncio.Task[None] | None = None
        if proc.stderr is not None:
            self._drain = asyncio.get_running_loop().create_task(self._read_stderr(proc.stderr))

    async def _read_stderr(self, stream: asyncio.StreamReader) -> None:
        with contextlib.suppress(Exception):
            while chunk := await stream.read(65536):
                self._stderr.append(chunk)
                self._stderr_len += len(chunk)
                while self._stderr_len > _STDERR_TAIL and len(self._stderr) > 1:
                    self._stderr_len -= len(self._stderr.popleft())

    @property
    def exited(self) -> bool:
        """True once the child has been reaped."""
        return self.proc.returncode is not None

    def mark_started(self) -> None:
        """Record the processes that make up the runtime (before any code ran): spared by :meth:`reap`."""
        if self.cgroup is not None:
            self._keep = frozenset(self.cgroup.processes())

    def reap(self) -> None:
        """Kill every process the last round started (the runtime itself stays): nothing outlives a round."""
        if self.cgroup is not None and self._keep and self.proc.returncode is None:
            self.cgroup.kill(keep=self._keep)

    def kill(self) -> None:
        """SIGKILL the child's whole process group (bubblewrap then tears down its pid namespace) and its cgroup."""
        _spawn.kill(self.proc)
        if self.cgroup is not None:
            self.cgroup.kill()

    async def wait_exit(self, timeout: float) -> None:
        """Wait until the child is reaped."""
        await wait_for(self.proc.wait(), timeout)

    def stderr_tail(self) -> str:
        """The last bytes the child wrote to its real stderr."""
        return b"".join(self._stderr).decode("utf-8", "replace")[-_STDERR_TAIL:]

    def crash_detail(self) -> str:
        """Exit status or signal, and the last line the runtime wrote to stderr."""
        code = self.proc.returncode
        if code is None:
            detail = "the bridge connection closed"
        elif code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            detail = f"killed by signal {name}"
        elif code == 128 + signal.SIGKILL:
            # bubblewrap reports its child's death by SIGKILL as exit status 137.
            detail = "killed by signal SIGKILL (exit status 137: a kill, out of memory, or a resource limit)"
        else:
            detail = f"exit status {code}"
        last = [line for line in self.stderr_tail().splitlines() if line.strip()]
        if last:
            detail += f"; last stderr line: {last[-1][:300]}"
        return detail

    def limit_hit(self) -> LimitName | None:
        """``cpu`` for a death by SIGXCPU (RLIMIT_CPU; bubblewrap reports it as 128+24), ``memory`` for an OOM kill."""
        code = self.proc.returncode
        if code in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
            return "cpu"
        if self.cgroup is not None and self.cgroup.oom_kills() > 0:
            return "memory"
        return None

    async def aclose(self) -> None:
        """Kill, reap, close the channel, remove the work dir."""
        self.kill()
        # SIGKILLed, the child dies for sure, but on a loaded machine its reap may take a while:
        # wait for asyncio's child watcher to do it rather than close the transport under it.
        with contextlib.suppress(Exception):
            await self.wait_exit(_REAP_S)
        await super().aclose()
        if self._drain is not None:
            await cancel_and_wait(self._drain)

    def cleanup(self) -> None:
        """Release the child's pipes and remove the private work dir (``process`` mode)."""
        # asyncio keeps the child's pipes on the process transport; a sandboxed grandchild may still
        # hold the stderr pipe after the kill, so EOF need not come: close it now, not at GC time.
        _spawn.release(self.proc)
        if self.work_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)
        if self.cgroup is not None:
            self.cgroup.kill()
            self.cgroup.remove()


class SubprocessSandbox(Sandbox):
    """The default backend: the runtime in a child process, inside bubblewrap.

    Args:
        limits: Resource limits (``Limits()`` by default).
        policy: Compilation policy (``Policy()``: RestrictedPython on, the default import allow-list).
        bridge: Serves the session's toolkits (``toolkits.ToolkitBridge``), or None.
        isolation: ``"bwrap"`` (default) or ``"process"``: explicitly weaker, without namespaces.
        pool_size: Runtimes started ahead of need.
        bwrap: Path of the bubblewrap binary (default: found on PATH).
        session_id: The session, named on the runtime's command line for ``codeact sandbox gc``
            (default: the bridge's ``session_id``).
        env_dir: A declared environment's package directory (``codeact.sandbox.env``), mounted read-only
            and put on the runtime's ``sys.path``; None: the standard library only.
        process_wall: ``"auto"`` (default): a cgroup per runtime (``limits.processes`` as
            ``pids.max``, ``limits.memory_bytes`` for all its processes together, ``cpus``), required
            when the host runs as root (where ``RLIMIT_NPROC`` does not bind), used when available
            otherwise; ``"cgroup"``: always required; ``"rlimits"``: no cgroup (explicitly weaker).
        cpus: CPU quota of the cgroup, in CPUs (default 1.0).

    Raises:
        IsolationUnavailableError: (on first start) bubblewrap is missing or fails its self-test, or
            the cgroup is required and cannot be created.
    """

    backend: ClassVar[Literal["subprocess", "docker"]] = "subprocess"

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        policy: Policy | None = None,
        bridge: RpcHandler | None = None,
        isolation: Literal["bwrap", "process"] = "bwrap",
        pool_size: int = 0,
        bwrap: str | None = None,
        session_id: str | None = None,
        env_dir: str | None = None,
        process_wall: Literal["auto", "cgroup", "rlimits"] = "auto",
        cpus: float = 1.0,
    ) -> None:
        if isolation not in ("bwrap", "process"):
            raise ValueError(f"isolation must be 'bwrap' or 'process', got {isolation!r}")
        if process_wall not in ("auto", "cgroup", "rlimits"):
            raise ValueError(f"process_wall must be 'auto', 'cgroup' or 'rlimits', got {process_wall!r}")
        if not 0 < cpus <= 64:
            raise ValueError(f"cpus must be in (0, 64], got {cpus}")
        super().__init__(limits=limits, policy=policy, bridge=bridge, pool_size=pool_size)
        self._mode = isolation
        self._bwrap = bwrap
        self.session_id = session_id or session_of(bridge) or ""
        """Named on the runtime's command line, for ``codeact sandbox gc``."""
        self.env_dir = env_dir
        self._wall = process_wall
        self.cpus = cpus
        self._use_cgroup = _cgroup_choice(process_wall)

    @property
    def isolation(self) -> str:
        """``bwrap+cgroup+rlimits[+restricted]``; ``process`` for bwrap, no ``cgroup`` without one."""
        restricted = "+restricted" if self._policy is None or self._policy.restricted else ""
        cgroup = "+cgroup" if self._use_cgroup else ""
        return f"{self._mode}{cgroup}+rlimits{restricted}"

    def _new_cgroup(self) -> SandboxCgroup | None:
        if not self._use_cgroup:
            return None
        try:
            return SandboxCgroup.create(
                pids=self.limits.processes, memory_bytes=self.limits.memory_bytes, cpus=self.cpus
            )
        except IsolationUnavailableError as exc:
            if os.geteuid() == 0 or self._wall == "cgroup":
                raise IsolationUnavailableError(
                    f"the subprocess sandbox's process wall is unavailable: {exc}"
                ) from None
            raise  # pragma: no cover - _cgroup_choice() probed it

    def _find_bwrap(self) -> str:
        found = self._bwrap or shutil.which("bwrap") or shutil.which("bwrap", path="/usr/bin:/bin:/usr/local/bin")
        if not found or not os.access(found, os.X_OK):
            raise IsolationUnavailableError(f"bubblewrap (`bwrap`) is not installed; {_INSTALL_HINT}")
        return found

    async def spawn_interpreter(
        self,
        args: Sequence[str],
        *,
        bridge_dir: str,
        work_dir: str | None = None,
        stdin: int = asyncio.subprocess.DEVNULL,
        stderr: int = asyncio.subprocess.DEVNULL,
    ) -> tuple[asyncio.subprocess.Process, SandboxCgroup | None]:
        """Start ``python <flags> *args`` exactly the way this sandbox starts its runtime.

        The one place that builds the runtime's command line (interpreter flags, bubblewrap), environment
        and cgroup: :meth:`_spawn` starts every runtime through it, and the benchmark's floor
        (``bench/bench_sandbox.py``) starts ``python -I -S -c pass`` through it, so the two cannot drift.

        Args:
            args: What follows the interpreter and its flags (the runtime's ``main.py`` and its arguments).
            bridge_dir: The host directory of the bridge socket, bound at ``/opt/codeact/bridge`` under bubblewrap.
            work_dir: ``process`` isolation: the child's private working directory (also its ``HOME``).
            stdin: As for :func:`asyncio.create_subprocess_exec`.
            stderr: As for :func:`asyncio.create_subprocess_exec`.

        Returns:
            The process and its cgroup (None without one); the caller kills and removes the cgroup.

        Raises:
            IsolationUnavailableError: bubblewrap is missing or fails its self-test, or the cgroup is
                required and cannot be created.
            SandboxError: The process could not be started (``sandbox.start``).
        """
        executable, _ = python_interpreter()
        flags, seed_env = self.interpreter()
        command = [executable, *flags, *args]
        if self._mode == "bwrap":
            bwrap = self._find_bwrap()
            await _check_bwrap(bwrap, self.limits)
            argv = bwrap_command(
                bwrap, bridge_dir=bridge_dir, limits=self.limits, command=command, env_dir=self.env_dir
            )
            env, cwd = {**_env(_WORK), **seed_env}, None
        else:
            if work_dir is None:
                raise ValueError("process isolation needs a work_dir")
            argv, env, cwd = command, {**_env(work_dir), **seed_env}, work_dir
        program = argv[0]
        cgroup = self._new_cgroup()
        if cgroup is not None:
            argv = cgroup.command(argv)  # no preexec_fn: a vfork, not a fork of this (large) process
        try:
            proc = await _spawn.spawn(
                *argv,
                stdin=stdin,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=stderr,
                env=env,
                cwd=cwd,
                start_new_session=True,
                close_fds=True,
            )
        except BaseException as exc:  # a cancel too: the cgroup must not leak
            if cgroup is not None:
                cgroup.remove()
            if isinstance(exc, (OSError, subprocess.SubprocessError)):
                raise SandboxError(
                    f"cannot start the sandbox runtime ({program}): {exc}", code="sandbox.start"
                ) from None
            raise
        return proc, cgroup

    async def _spawn(self) -> RuntimeWorker:
        compile_runtime()
        config: dict[str, object] = {"rlimits": self.limits.rlimits()}
        work_dir: str | None = None
        channel = await Channel.open(self.bridge)
        try:
            if self._mode == "bwrap":
                config["socket"] = f"{_BRIDGE_MOUNT}/{channel.socket_path.name}"
                config["reap_children"] = True  # its own pid namespace: the runtime kills the round's leftovers
                main = f"{_RUNTIME_MOUNT}/main.py"
                if self.env_dir:
                    config["sys_path"] = [_ENV_MOUNT]
            else:
                work_dir = tempfile.mkdtemp(prefix=dir_prefix("work"))
                os.chmod(work_dir, 0o700)
                config["socket"] = str(channel.socket_path)
                main = str(RUNTIME_DIR / "main.py")
                if self.env_dir:
                    config["sys_path"] = [self.env_dir]
            config["token"] = channel.token
            proc, cgroup = await self.spawn_interpreter(
                [main, *self._owner_args()],
                bridge_dir=str(channel.directory),
                work_dir=work_dir,
                stdin=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except BaseException:  # a cancel too: the channel and the work dir must not leak
            await channel.close()
            if work_dir:
                shutil.rmtree(work_dir, ignore_errors=True)
            raise
        worker = _ProcessWorker(channel=channel, isolation=self.isolation, proc=proc, work_dir=work_dir, cgroup=cgroup)
        try:
            assert proc.stdin is not None  # noqa: S101 - stdin=PIPE
            proc.stdin.write(json.dumps(config).encode() + b"\n")
            with contextlib.suppress(ConnectionError):
                await proc.stdin.drain()
            proc.stdin.close()
            await self._wait_connected(worker)
        except BaseException:
            await finish_through_cancels(worker.aclose())  # cancel_and_wait cancels again: finish anyway
            raise
        worker.mark_started()
        return worker

    def _owner_args(self) -> list[str]:
        """``--host <pid>.<start> --session <id>``: who owns the runtime (read by ``codeact sandbox gc``)."""
        return ["--host", host_tag(), "--session", self.session_id or "-"]

    async def _wait_connected(self, worker: _ProcessWorker) -> None:
        connected = asyncio.ensure_future(worker.channel.wait_connected(self.limits.start_timeout_s))
        exited = asyncio.ensure_future(worker.proc.wait())
        try:
            done, _ = await asyncio.wait({connected, exited}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            connected.cancel()
            connected.add_done_callback(_consume)
            raise
        finally:
            exited.cancel()
        if connected in done and connected.exception() is None:
            return
        connected.cancel()
        with contextlib.suppress(BaseException):
            await connected
        with contextlib.suppress(Exception):
            await wait_for(asyncio.shield(worker._drain) if worker._drain else asyncio.sleep(0), 1.0)
        if connected in done and isinstance(connected.exception(), TimeoutError):
            why = f"it did not connect within {self.limits.start_timeout_s:g} s"
        else:
            why = worker.crash_detail()
        raise SandboxError(f"the sandbox runtime failed to start: {why}", code="sandbox.start")
