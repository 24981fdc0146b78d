"""A runtime's resource limits (``Limits``) and the handle on one started runtime (``RuntimeWorker``)."""

from __future__ import annotations

import abc
import contextlib
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Final, Literal

from codeact.sandbox.channel import Channel

if TYPE_CHECKING:
    from codeact.sandbox.runtime.protocol import RoundLimits

_KiB: Final = 1024
_MiB: Final = 1024 * 1024
_GiB: Final = 1024 * 1024 * 1024

LimitName = Literal["cpu", "memory"]
"""A resource limit whose enforcement kills the runtime (the others fail inside the code: see ``limit_note``)."""

_MAX_ROUND_ARTIFACT_BYTES: Final = 5 * _MiB
"""Artifacts travel base64-encoded in the round's result frame (8 MiB at most): the per-round cap stops below."""


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Resource limits of one sandbox (no looser defaults than the product's security floor).

    Attributes:
        wall_s: Default limit of a round: seconds of the code's own time (time while a toolkit call is in
            flight on the host is not counted); the runtime is KILLED past it.
        cpu_s: CPU seconds a round may use (soft RLIMIT_CPU per round, set by the runtime in both backends;
            ``sandbox.limits.cpuSeconds``): past it the runtime dies of SIGXCPU, the round ends ``CpuLimitExceeded``.
        memory_bytes: Address space of the runtime (RLIMIT_AS) and the memory limit of its cgroup (all
            its processes together) / the container's memory limit.
        output_bytes: Cap of stdout and of stderr per round (head + tail kept, middle cut).
        file_bytes: Largest file the code may write (RLIMIT_FSIZE).
        disk_bytes: Size of the writable work dir and of /tmp (each a size-limited tmpfs).
        open_files: RLIMIT_NOFILE.
        processes: ``pids.max`` of the runtime's cgroup (processes and threads; binds root too) and
            RLIMIT_NPROC / the container's pids limit (on gVisor: RLIMIT_NPROC in gVisor's kernel).
        max_var_bytes: Largest encoded variable that is captured.
        max_total_bytes: Largest total of encoded variables that is captured.
        start_timeout_s: How long a runtime may take to start and authenticate.
        artifact_bytes: Largest file of ``outputs/`` returned as an artifact (larger: refused with a note).
        round_artifact_bytes: Largest total of a round's artifacts (kept under the bridge's frame size).
        round_wall_s: Wall-clock cap of a whole round, time waiting on the host COUNTED (generous: it only
            ends rounds that wait on the host without end, since ``wall_s`` does not count those waits); a
            round's cap is the larger of this and its own limit. The runtime is killed past it.
    """

    wall_s: float = 60.0
    cpu_s: int = 10
    memory_bytes: int = 1 * _GiB
    output_bytes: int = 64 * _KiB
    file_bytes: int = 64 * _MiB
    disk_bytes: int = 256 * _MiB
    open_files: int = 256
    processes: int = 64
    max_var_bytes: int = 1 * _MiB
    max_total_bytes: int = 16 * _MiB
    start_timeout_s: float = 15.0
    artifact_bytes: int = 2 * _MiB
    round_artifact_bytes: int = 4 * _MiB
    round_wall_s: float = 600.0

    def runtime_params(self) -> RoundLimits:
        """The per-round ``limits`` object of the ``execute`` request."""
        return {
            "output_bytes": self.output_bytes,
            "cpu_s": self.cpu_s,
            "max_var_bytes": self.max_var_bytes,
            "max_total_bytes": self.max_total_bytes,
            "artifact_bytes": self.artifact_bytes,
            "round_artifact_bytes": min(self.round_artifact_bytes, _MAX_ROUND_ARTIFACT_BYTES),
        }

    def rlimits(self) -> dict[str, int]:
        """Resource limits the runtime applies to itself before any user code runs."""
        return {
            "AS": self.memory_bytes,
            "FSIZE": self.file_bytes,
            "NOFILE": self.open_files,
            "NPROC": self.processes,
            "CORE": 0,
        }

    def to_json(self) -> dict[str, object]:
        """All fields as a JSON object."""
        return asdict(self)


class RuntimeWorker(abc.ABC):
    """One running runtime (a process or a container), connected on ``channel``.

    Args:
        channel: The authenticated bridge channel of this runtime.
        isolation: What is in force, e.g. ``"bwrap+rlimits+restricted"``.
    """

    def __init__(self, *, channel: Channel, isolation: str) -> None:
        self.channel = channel
        self.isolation = isolation

    @property
    def alive(self) -> bool:
        """True while the runtime is connected (and so can run a round)."""
        return self.channel.connected and not self.exited

    @property
    @abc.abstractmethod
    def exited(self) -> bool:
        """True once the process/container has exited."""

    @abc.abstractmethod
    def kill(self) -> None:
        """Kill the runtime and everything it started, now (synchronous, idempotent)."""

    @abc.abstractmethod
    async def wait_exit(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) until the runtime has exited."""

    def crash_detail(self) -> str:
        """A short explanation of why the runtime died (exit status, signal, last stderr line)."""
        return "the runtime exited"

    def limit_hit(self) -> LimitName | None:
        """The resource limit that killed the runtime (after it exited), if its exit says so; None otherwise."""
        return None

    async def aclose(self) -> None:
        """Kill the runtime and release its resources (channel, directories)."""
        self.kill()
        with contextlib.suppress(Exception):
            await self.wait_exit(5.0)
        await self.channel.close()
        self.cleanup()

    def close_now(self) -> None:
        """Synchronous best-effort ``aclose`` (outside the event loop)."""
        self.kill()
        self.channel.close_now()
        self.cleanup()

    def cleanup(self) -> None:  # noqa: B027 - optional hook
        """Remove backend resources (work dirs, ...) after the runtime is gone."""

    def reap(self) -> None:  # noqa: B027 - optional hook
        """Kill the processes the last round started, sparing the runtime (after every round)."""
