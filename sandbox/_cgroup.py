"""One control group per subprocess sandbox: the process, memory and CPU wall that binds root too.

``RLIMIT_NPROC`` does not bind root (the kernel exempts uid 0 and ``CAP_SYS_RESOURCE``), so a fork
bomb run by a root host is bounded only by a cgroup: ``pids.max`` counts every process and thread
of the sandbox, ``memory.max`` their memory together (the per-process ``RLIMIT_AS`` does not add
up), ``cpu.max`` their CPU rate. Both layouts are handled:

- cgroup v2 (``/sys/fs/cgroup/cgroup.controllers``): ``<mount>/codeact/<name>``, the controllers
  enabled in ``cgroup.subtree_control`` on the way down; ``cgroup.kill`` kills everything at once.
- cgroup v1 (one hierarchy per controller, e.g. a hybrid host): ``<hierarchy>/<own cgroup>/codeact-<name>``
  in the ``pids``, ``memory`` and ``cpu`` hierarchies; killing is a SIGKILL sweep while ``pids.max``
  is 0, so nothing can fork while it runs.

The child enters the cgroup before it runs anything of the sandbox: a ``/bin/sh`` writes itself into
the cgroup, then execs the sandbox's command (:meth:`SandboxCgroup.command`; it exits 126 when a write
fails, so nothing runs outside). A Python ``preexec_fn`` (:meth:`SandboxCgroup.enter`) would do the
same between ``fork`` and ``exec``, but it forces a full ``fork`` of the host: ~27 ms for a 250 MiB
worker process, against ~1 ms for the ``vfork`` that asyncio's spawn uses without one.
Nothing here is silently skipped: a missing controller raises
:class:`~codeact.sandbox.errors.IsolationUnavailableError`, and the caller decides (see ``SubprocessSandbox``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from codeact.sandbox.errors import IsolationUnavailableError

# $1: how many cgroup.procs files follow; then the files; then the command. "0": the writing process.
_ENTER_AND_EXEC: Final = (
    'n=$1; shift; while [ "$n" -gt 0 ]; do printf 0 >"$1" || exit 126; shift; n=$((n - 1)); done; exec "$@"'
)

__all__ = ["SandboxCgroup", "cgroup_support"]

_ROOT: Final = Path("/sys/fs/cgroup")
_V1_CONTROLLERS: Final = ("pids", "memory", "cpu")
_CPU_PERIOD_US: Final = 100_000
_SWEEPS: Final = 200
_SWEEP_S: Final = 3.0  # the longest a sweep waits for killed processes to leave the cgroup
_STALE_S: Final = 60.0  # an empty sandbox cgroup this old was left behind (a host killed mid-close)
_LEFTOVERS: list[Path] = []  # directories a dying process still pinned at removal: retried at the next start
_HINT: Final = (
    "run the host as root on a machine whose cgroup hierarchy is writable (cgroup v2 with the pids, "
    "memory and cpu controllers, or the v1 pids/memory/cpu hierarchies), or pass "
    'process_wall="rlimits" to run without it (explicitly weaker: RLIMIT_NPROC does not bind root)'
)


def _own_path(controller: str | None) -> str:
    """This process's cgroup path in the v2 hierarchy (``controller=None``) or a v1 one."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if (controller is None and names == "") or (controller is not None and controller in names.split(",")):
            return path
    return "/"


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def cgroup_support() -> str | None:
    """Why no sandbox cgroup can be created here, or None when one can (it creates and removes a probe).

    Returns:
        None, or the reason (a sentence) naming what is missing.
    """
    try:
        probe = SandboxCgroup.create(pids=8, memory_bytes=64 * 1024 * 1024, cpus=1.0)
    except IsolationUnavailableError as exc:
        return str(exc)
    probe.remove()
    return None


@dataclass(frozen=True, kw_only=True)
class _Layout:
    version: int
    dirs: tuple[Path, ...]  # v2: one; v1: pids, memory, cpu (in that order)


class SandboxCgroup:
    """One sandbox's cgroup: created with limits, entered by the child, swept, removed.

    Use :meth:`create`; the constructor only records an existing layout.
    """

    def __init__(self, layout: _Layout) -> None:
        self._layout = layout
        self._enter_paths = [str(d / "cgroup.procs") for d in layout.dirs]

    @property
    def version(self) -> int:
        """1 or 2."""
        return self._layout.version

    @property
    def path(self) -> Path:
        """The cgroup directory (v1: the one in the pids hierarchy)."""
        return self._layout.dirs[0]

    @classmethod
    def create(cls, *, pids: int, memory_bytes: int, cpus: float) -> SandboxCgroup:
        """Create a fresh cgroup with ``pids.max``, a memory limit (swap included) and a CPU quota.

        Args:
            pids: Most processes + threads at once.
            memory_bytes: Memory of all its processes together.
            cpus: CPU quota in CPUs.

        Returns:
            The cgroup (empty).

        Raises:
            IsolationUnavailableError: No writable cgroup hierarchy with these controllers.
        """
        name = "codeact-" + secrets.token_hex(6)
        _retry_leftovers()
        if (_ROOT / "cgroup.controllers").exists():
            layout = _create_v2(name)
        else:
            layout = _create_v1(name)
        group = cls(layout)
        try:
            group._limit(pids=pids, memory_bytes=memory_bytes, cpus=cpus)
        except OSError as exc:
            group.remove()
            raise IsolationUnavailableError(f"cannot set the sandbox cgroup's limits ({exc}); {_HINT}") from None
        return group

    def _limit(self, *, pids: int, memory_bytes: int, cpus: float) -> None:
        quota = max(int(cpus * _CPU_PERIOD_US), 1000)
        if self.version == 2:
            (d,) = self._layout.dirs
            _write(d / "pids.max", str(pids))
            _write(d / "memory.max", str(memory_bytes))
            if (d / "memory.swap.max").exists():
                _write(d / "memory.swap.max", "0")
            _write(d / "cpu.max", f"{quota} {_CPU_PERIOD_US}")
            return
        pids_dir, memory_dir, cpu_dir = self._layout.dirs
        _write(pids_dir / "pids.max", str(pids))
        _write(memory_dir / "memory.limit_in_bytes", str(memory_bytes))
        if (memory_dir / "memory.memsw.limit_in_bytes").exists():
            _write(memory_dir / "memory.memsw.limit_in_bytes", str(memory_bytes))
        _write(cpu_dir / "cpu.cfs_period_us", str(_CPU_PERIOD_US))
        _write(cpu_dir / "cpu.cfs_quota_us", str(quota))

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` behind a ``/bin/sh`` that first moves itself into the cgroup, then execs ``argv``.

        The process keeps its pid through the ``exec`` (the spawner's pid is the command's). If a write
        fails the shell exits with status 126 and ``argv`` never runs (fail closed).
        """
        return [
            "/bin/sh",
            "-c",
            _ENTER_AND_EXEC,
            "codeact-cgroup",
            str(len(self._enter_paths)),
            *self._enter_paths,
            *argv,
        ]

    def enter(self) -> None:
        """Move the calling process into the cgroup (a ``preexec_fn``: only raw syscalls here)."""
        for path in self._enter_paths:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, b"0")  # "0": the writing process itself
            finally:
                os.close(fd)

    def processes(self) -> list[int]:
        """The pids (thread-group ids) in the cgroup now."""
        try:
            text = (self.path / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(p) for p in text.split()]

    def oom_kills(self) -> int:
        """How many processes the kernel killed for reaching the memory limit (``oom_kill`` of memory.events)."""
        name = "memory.events" if self._layout.version == 2 else "memory.oom_control"
        directory = self._layout.dirs[0] if self._layout.version == 2 else self._layout.dirs[1]
        try:
            text = (directory / name).read_text()
        except OSError:
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
        return 0

    def kill(self, *, keep: frozenset[int] = frozenset()) -> int:
        """SIGKILL every process in the cgroup but ``keep``; new forks are refused while it runs.

        Args:
            keep: Pids to spare (the runtime and bubblewrap's own processes between rounds).

        Returns:
            How many processes were signalled.
        """
        if keep and not [p for p in self.processes() if p not in keep]:
            return 0  # the common case after a round: nothing left over, no write
        if not keep and self.version == 2 and (self.path / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                _write(self.path / "cgroup.kill", "1")
                return len(self.processes())
        pids_max = self.path / "pids.max"
        try:
            previous = pids_max.read_text().strip()
            _write(pids_max, "0")  # nothing may fork while the sweep runs (existing tasks unaffected)
        except OSError:
            previous = ""
        killed = 0
        # Bounded by time, not by a count of sweeps: under load a killed process can take a while to
        # leave the cgroup, and the sweep returns only once none is left (or the bound is reached).
        deadline = time.monotonic() + _SWEEP_S
        try:
            for sweep in range(1_000_000):
                victims = [p for p in self.processes() if p not in keep]
                if not victims or time.monotonic() > deadline:
                    break
                for pid in victims:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
                        killed += 1
                if sweep >= _SWEEPS:
                    time.sleep(0.002)  # the stragglers are dying: let them go instead of spinning
        finally:
            if previous:
                with contextlib.suppress(OSError):
                    _write(pids_max, previous)
        return killed

    def remove(self, *, wait_s: float = 0.5) -> bool:
        """Remove the (emptied) cgroup directories; retry while dying processes still pin them.

        What is still pinned after ``wait_s`` is retried when the next sandbox cgroup is created.

        Returns:
            True when every directory is gone.
        """
        give_up = time.monotonic() + wait_s
        pending = list(self._layout.dirs)
        while pending:
            for d in list(pending):
                try:
                    d.rmdir()
                    pending.remove(d)
                except FileNotFoundError:
                    pending.remove(d)
                except OSError:
                    pass
            if not pending or time.monotonic() > give_up:
                break
            time.sleep(0.01)
        _LEFTOVERS.extend(pending)
        return not pending


def _retry_leftovers() -> None:
    for directory in list(_LEFTOVERS):
        try:
            directory.rmdir()
        except FileNotFoundError:
            pass
        except OSError:
            continue
        _LEFTOVERS.remove(directory)


def _sweep_stale(parent: Path) -> None:
    """Remove empty ``codeact-*`` cgroups left behind under ``parent`` (a fresh one is entered within ms)."""
    now = time.time()
    with contextlib.suppress(OSError):
        for child in parent.glob("codeact-*"):
            with contextlib.suppress(OSError):
                if now - child.stat().st_mtime > _STALE_S and not (child / "cgroup.procs").read_text().strip():
                    child.rmdir()


def _create_v2(name: str) -> _Layout:
    root = _ROOT
    available = set((root / "cgroup.controllers").read_text().split())
    missing = {"pids", "memory", "cpu"} - available
    if missing:
        raise IsolationUnavailableError(
            f"the cgroup v2 hierarchy at {root} lacks the {', '.join(sorted(missing))} controller(s); {_HINT}"
        )
    parent = root / "codeact"
    try:
        _enable(root)
        parent.mkdir(exist_ok=True)
        _enable(parent)
        _sweep_stale(parent)
        target = parent / name
        target.mkdir()
    except OSError as exc:
        raise IsolationUnavailableError(f"cannot create a sandbox cgroup under {parent} ({exc}); {_HINT}") from None
    return _Layout(version=2, dirs=(target,))


def _enable(directory: Path) -> None:
    wanted = {"pids", "memory", "cpu"}
    enabled = set((directory / "cgroup.subtree_control").read_text().split())
    if not wanted <= enabled:
        _write(directory / "cgroup.subtree_control", " ".join(f"+{c}" for c in sorted(wanted - enabled)))


def _create_v1(name: str) -> _Layout:
    made: list[Path] = []
    try:
        for controller in _V1_CONTROLLERS:
            hierarchy = _ROOT / controller
            if not (hierarchy / "cgroup.procs").exists():
                raise IsolationUnavailableError(
                    f"no cgroup v2 hierarchy at {_ROOT} and no v1 {controller!r} hierarchy at {hierarchy}; {_HINT}"
                )
            target = hierarchy / _own_path(controller).lstrip("/") / name
            _sweep_stale(target.parent)
            try:
                target.mkdir()
            except OSError as exc:
                raise IsolationUnavailableError(f"cannot create the sandbox cgroup {target} ({exc}); {_HINT}") from None
            made.append(target)
    except BaseException:
        for d in reversed(made):
            with contextlib.suppress(OSError):
                d.rmdir()
        raise
    return _Layout(version=1, dirs=tuple(made))
