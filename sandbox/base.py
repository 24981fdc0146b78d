"""The ``Sandbox`` contract and the logic every backend shares.

A backend subclasses :class:`Sandbox` and implements :meth:`Sandbox._spawn` (start one runtime,
connected and authenticated on a :class:`~codeact.sandbox.channel.Channel`) returning a
:class:`RuntimeWorker` (kill / wait / crash diagnostics). Everything else lives here: host-side
compilation under the policy, restoring variables (data + a re-compiled prelude of the
functions/classes earlier rounds defined), the warm worker, the pool of pre-started runtimes, the
deadline (which KILLS the runtime), crash recovery, and building the :class:`ExecutionResult`.
"""

from __future__ import annotations

import abc
import asyncio
import base64
import contextlib
import dataclasses
import time
from collections.abc import AsyncGenerator, Awaitable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, Self

from codeact.sandbox._spawn import start_slot
from codeact.sandbox._worker import _MAX_ROUND_ARTIFACT_BYTES, LimitName, Limits, RuntimeWorker
from codeact.sandbox.aio import cancel_and_wait, finish_through_cancels, wait_for
from codeact.sandbox.artifacts import artifacts_from_answer
from codeact.sandbox.channel import Channel, ChannelClosedError, RpcHandler
from codeact.sandbox.errors import SandboxError
from codeact.sandbox.result import ExecutionError, ExecutionResult, ExecutionStatus, Uncaptured, truncate_output
from codeact.sandbox.runtime import protocol as _p
from codeact.sandbox.runtime.protocol import JsonObject, JsonValue

if TYPE_CHECKING:
    from codeact.sandbox.policy import Policy

__all__ = ["Limits", "RuntimeWorker", "Sandbox", "limit_error", "limit_note", "plain_file_name"]


_PLACE_FILE_S = 30.0
"""How long writing one input file into a runtime may take."""

_QUICK_DEATH_S = 0.5
"""A crash this soon after a round started, with no call made, is a runtime that was already dead."""
_MARKER_SLACK = 300
"""Bytes of the runtime's cut marker (``... [N bytes cut: ...] ...``) over the output limit, let through."""
_EXIT_GRACE_S = 2.0
"""How long a runtime whose bridge closed may take to exit on its own before it is killed (its status says why)."""


class Sandbox(abc.ABC):
    """Runs one session's rounds; warm between rounds; replaced transparently when it dies.

    Args:
        limits: Resource limits (``Limits()`` by default).
        policy: Compilation policy: RestrictedPython on/off and the import allow-list
            (``Policy()`` by default).
        bridge: Serves the toolkits granted to this session (``toolkits.ToolkitBridge``), or None.
        pool_size: Runtimes started ahead of need (``await sandbox.start()`` fills the pool), so
            that the first round and a replacement after a crash do not wait for a start.
    """

    backend: ClassVar[Literal["subprocess", "docker"]]

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        policy: Policy | None = None,
        bridge: RpcHandler | None = None,
        pool_size: int = 0,
    ) -> None:
        if pool_size < 0:
            raise ValueError(f"pool_size must be >= 0, got {pool_size}")
        self.limits = limits if limits is not None else Limits()
        self._policy = policy
        self.bridge = bridge
        self.pool_size = pool_size
        self._worker: RuntimeWorker | None = None
        self._pool: list[RuntimeWorker] = []
        self._refill: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._guard: AsyncGenerator[None, None] | None = None
        self._closed = False
        self._hash_seed: int | None = None
        # The warm namespace the current runtime holds. Continued only by ``execute(..., warm=True)``
        # with exactly its variables, on its worker.
        self._warm: _WarmNamespace | None = None
        # The run's input files (put_files) and the runtime that has them in its working directory.
        self._input_files: dict[str, bytes] = {}
        self._files_worker: RuntimeWorker | None = None

    # -- backend hooks ---------------------------------------------------------------------------
    @abc.abstractmethod
    async def _spawn(self) -> RuntimeWorker:
        """Start one runtime and return it connected and authenticated.

        Raises:
            SandboxError: The runtime could not be started (IsolationUnavailableError, ...).
        """

    @property
    @abc.abstractmethod
    def isolation(self) -> str:
        """The isolation this sandbox puts in force (reported in every result)."""

    # -- policy ----------------------------------------------------------------------------------
    @property
    def policy(self) -> Policy:
        """The compilation policy (created on first use: it loads RestrictedPython)."""
        if self._policy is None:
            from codeact.sandbox.policy import Policy

            self._policy = Policy()
        return self._policy

    def _toolkit_names(self) -> list[str]:
        if self.bridge is None:
            return []
        toolkits = self.bridge.manifest().get("toolkits")
        return sorted(toolkits) if isinstance(toolkits, dict) else []

    @property
    def hash_seed(self) -> int | None:
        """The runtimes' string-hash seed (``PYTHONHASHSEED``), or None for a random one per runtime.

        A session fixes it (recorded with the session) so that set and dict order, ``hash()`` and
        everything built on them are the same in every round, on resume and on replay. Setting a
        different seed replaces the runtimes already started.
        """
        return self._hash_seed

    @hash_seed.setter
    def hash_seed(self, seed: int | None) -> None:
        if seed is not None and (type(seed) is not int or not 0 <= seed <= 4294967295):
            raise SandboxError(f"hash_seed must be an int in 0..4294967295, got {seed!r}", code="sandbox.config")
        if seed != self._hash_seed:
            self._hash_seed = seed
            if self._worker is not None or self._pool:
                self._drop_all_now()

    def interpreter(self) -> tuple[list[str], dict[str, str]]:
        """The runtime interpreter's flags and the environment entries they need.

        ``-I -S`` (isolated: no ``PYTHON*`` variables, no user site, no script directory on the path)
        unless :attr:`hash_seed` is set: then ``-s -P -S`` (the same minus ``-E``, which would ignore
        ``PYTHONHASHSEED``) and ``{"PYTHONHASHSEED": seed}``. Backends build the rest of the child's
        environment from an allow-list, so no other ``PYTHON*`` variable reaches it.
        """
        seed = self._hash_seed
        if seed is None:
            return ["-I", "-S"], {}
        return ["-s", "-P", "-S"], {"PYTHONHASHSEED": str(seed)}

    # -- lifecycle -------------------------------------------------------------------------------
    async def _bind_loop(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._lock is None:
            # Asyncio objects belong to one loop: a new loop (another asyncio.run) gets new runtimes.
            self._drop_all_now()
            self._loop = loop
            self._lock = asyncio.Lock()
            guard = self._loop_guard(loop)
            await guard.__anext__()
            self._guard = guard
        return self._lock

    async def _loop_guard(self, loop: asyncio.AbstractEventLoop) -> AsyncGenerator[None, None]:
        """Release the runtimes when the loop shuts down, while it can still close them cleanly.

        ``asyncio.run`` finalises async generators (``loop.shutdown_asyncgens()``) before closing the loop.
        """
        try:
            yield
        finally:
            if self._loop is loop:
                workers = [w for w in [self._worker, *self._pool] if w is not None]
                self._worker, self._pool, self._loop, self._lock = None, [], None, None
                for worker in workers:
                    with contextlib.suppress(Exception):
                        await worker.aclose()

    async def start(self) -> None:
        """Start the warm runtime and fill the pool (optional: ``execute`` starts one on demand)."""
        self._check_open()
        await self._bind_loop()
        if self._worker is None or not self._worker.alive:
            self._worker = await self._take()
        self._schedule_refill()
        if self._refill is not None:
            await asyncio.shield(self._refill)

    async def _fill_pool(self) -> None:
        while len(self._pool) < self.pool_size and not self._closed:
            async with start_slot():
                worker = await self._spawn()
            if self._closed:
                await worker.aclose()
                return
            self._pool.append(worker)

    def _schedule_refill(self) -> None:
        if self.pool_size and (self._refill is None or self._refill.done()):
            self._refill = asyncio.get_running_loop().create_task(self._fill_pool())
            self._refill.add_done_callback(_consume_exception)

    async def _take(self) -> RuntimeWorker:
        while self._pool:
            worker = self._pool.pop(0)
            if worker.alive:
                self._schedule_refill()
                return worker
            await worker.aclose()
        async with start_slot():
            worker = await self._spawn()
        self._schedule_refill()
        return worker

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError(f"this {type(self).__name__} is closed; create a new sandbox", code="sandbox.closed")

    async def aclose(self) -> None:
        """Kill every runtime and remove their directories (idempotent).

        It finishes even when its caller is cancelled meanwhile, once or again and again (a cancelled run's
        clean-up is): a close cut short would leave the spare runtime and its bridge sockets open.
        """
        self._closed = True
        await finish_through_cancels(self._close_all())

    async def _close_all(self) -> None:
        if self._refill is not None and not self._refill.done():
            await cancel_and_wait(self._refill)
        workers = [w for w in [self._worker, *self._pool] if w is not None]
        self._worker, self._pool = None, []
        for worker in workers:
            with contextlib.suppress(Exception):
                await worker.aclose()

    def close(self) -> None:
        """Synchronous close: kill every runtime and remove their directories (idempotent)."""
        self._closed = True
        self._drop_all_now()

    def restart(self) -> None:
        """Replace the runtimes: the next round starts a new one, which reads the bridge's manifest again.

        For a bridge whose toolkits changed (a hook injected one): a runtime knows the toolkits it was
        given when it connected. The warm namespace goes with the runtime, so the next round starts from
        the variables it is given (a value the codec cannot carry is not among them).
        """
        self._warm = None
        self._drop_all_now()

    def _drop_all_now(self) -> None:
        if self._refill is not None and not self._refill.done():
            with contextlib.suppress(RuntimeError):
                self._refill.cancel()
        workers = [w for w in [self._worker, *self._pool] if w is not None]
        self._worker, self._pool = None, []
        for worker in workers:
            with contextlib.suppress(Exception):
                worker.close_now()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        self._check_open()
        if self.pool_size:
            await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            with contextlib.suppress(Exception):
                self.close()

    # -- input files -----------------------------------------------------------------------------
    def put_files(self, files: Mapping[str, bytes]) -> None:
        """Files every runtime of this sandbox finds in its working directory (the run's input files).

        Each name is a plain file name (no folder, no leading dot, not ``outputs``); the code reads
        one with ``open(name)`` (read-only under RestrictedPython). They are written before the next
        round, and again into a runtime that replaces a dead one, so a crash does not lose them.

        Raises:
            SandboxError: ``sandbox.input_files`` for a name that is not a plain file name.
        """
        for name, data in files.items():
            if not plain_file_name(name) or not isinstance(data, bytes):
                raise SandboxError(
                    f"input file {name!r} is not a plain file name with bytes content", code="sandbox.input_files"
                )
        self._input_files.update(files)
        self._files_worker = None

    @property
    def input_files(self) -> dict[str, int]:
        """The input files given with :meth:`put_files`: name -> size in bytes."""
        return {name: len(data) for name, data in self._input_files.items()}

    async def _place_files(self, worker: RuntimeWorker) -> str | None:
        """Write the input files into ``worker``'s working directory; the reason when that failed."""
        for name, data in self._input_files.items():
            params: _p.PutFileParams = {"name": name, "data": base64.b64encode(data).decode("ascii")}
            try:
                await wait_for(worker.channel.request(_p.PUT_FILE, params), timeout=_PLACE_FILE_S)
            except (ChannelClosedError, _p.RpcError, TimeoutError) as exc:
                return f"{name!r}: {exc or type(exc).__name__}"
        self._files_worker = worker
        return None

    # -- one round -------------------------------------------------------------------------------
    async def execute(
        self,
        code: str,
        *,
        variables: Mapping[str, JsonValue] | None = None,
        deadline: float | None = None,
        nondeterminism: Mapping[str, JsonValue] | None = None,
        clock: Literal["code", "wall"] = "code",
        warm: bool = False,
    ) -> ExecutionResult:
        """Run ``code`` as one round.

        Args:
            code: The Python source (top-level ``await`` allowed).
            variables: The session state to restore, codec-ENCODED (a previous result's ``variables``).
            deadline: Seconds of the code's own time for this round (default ``limits.wall_s``); past
                it the runtime is killed and the result says ``deadline_exceeded``. While at least one
                toolkit call is in flight on the host the round's clock is paused (each call is bounded
                by its own timeout instead).
            nondeterminism: A recorded round's ``ExecutionResult.nondeterminism`` to feed back (replay):
                the same ``random`` seed, and the recorded clock/uuid/urandom reads in order.
            clock: ``code`` (the default, as above) or ``wall``: the deadline counts all the round's time,
                calls included (replaying a round recorded under that rule).
            warm: Continue the namespace the previous round left in the runtime (the same session's
                next round): every value it defined is still there, whatever its type, also those the
                codec cannot carry. Honoured only when ``variables`` are exactly the ones that round
                returned and the runtime is the same one; otherwise (and by default) the round starts
                from a fresh namespace restored from ``variables``, so a changed state or another
                session never sees a stale value. ``ExecutionResult.nondeterminism["warm"]`` says
                whether it did (replay repeats it).

        Returns:
            The round's result; the code raising is a normal result (``status="error"``).

        Raises:
            SandboxError: The sandbox could not run at all (closed, isolation unavailable, start failed).
        """
        self._check_open()
        lock = await self._bind_loop()
        async with lock:
            if not warm:
                self._warm = None
            return await self._execute(
                code,
                dict(variables or {}),
                self.limits.wall_s if deadline is None else deadline,
                dict(nondeterminism) if nondeterminism else None,
                clock,
            )

    async def _execute(
        self,
        code: str,
        variables: JsonObject,
        deadline: float,
        nondeterminism: JsonObject | None = None,
        clock: Literal["code", "wall"] = "code",
    ) -> ExecutionResult:
        started = time.perf_counter()
        result = await self._execute_once(code, variables, deadline, started, nondeterminism, clock)
        if (
            result.status == "crashed"
            and result.error is not None
            and result.error.type == "SandboxCrashed"  # not a limit the code ran into: that would again
            and result.rpc_count == 0
            and time.perf_counter() - started < _QUICK_DEATH_S
        ):
            # The runtime was already gone (killed between rounds, the host had not noticed yet):
            # no toolkit call was made, so nothing on the host happened twice. Run on a fresh one.
            result = await self._execute_once(code, variables, deadline, started, nondeterminism, clock)
        return result

    async def _execute_once(
        self,
        code: str,
        variables: JsonObject,
        deadline: float,
        started: float,
        nondeterminism: JsonObject | None = None,
        clock: Literal["code", "wall"] = "code",
    ) -> ExecutionResult:
        from codeact.sandbox.policy import CompileFailure, compile_code
        from codeact.sandbox.runtime.capture import split_restorable

        policy = self.policy
        names = self._toolkit_names()
        try:
            compiled = compile_code(code, policy=policy, toolkit_names=names)
        except CompileFailure as failure:
            return self._result(started, variables=variables, status="error", error=_compile_error(failure))
        data_vars, prelude_source = split_restorable(variables)
        prelude_b64: str | None = None
        if prelude_source.strip():
            try:
                prelude = compile_code(prelude_source, policy=policy, toolkit_names=names, filename="<prelude>")
            except CompileFailure as failure:
                error = _compile_error(failure)
                error = ExecutionError(
                    type=error.type,
                    message=f"a function or class restored from an earlier round does not compile: {error.message}",
                    traceback=error.traceback,
                )
                return self._result(started, variables=variables, status="error", error=error)
            prelude_b64 = base64.b64encode(prelude.code).decode("ascii")
        params: _p.ExecuteParams = {
            "code": base64.b64encode(compiled.code).decode("ascii"),
            "source": compiled.source,
            "prelude": prelude_b64,
            "prelude_source": prelude_source,
            "variables": data_vars,
            "restricted": compiled.restricted,
            "loop_free": compiled.loop_free,
            "allowed_imports": sorted(policy.allowed_imports),
            "limits": self.limits.runtime_params(),
        }
        if nondeterminism is not None:
            params["nondeterminism"] = nondeterminism

        worker = self._worker
        if worker is None or not worker.alive:
            if worker is not None:
                await worker.aclose()
            self._worker = None
            worker = self._worker = await self._take()
        if self._input_files and self._files_worker is not worker:
            failed = await self._place_files(worker)
            if failed is not None:
                await self._discard(worker)
                error = ExecutionError(
                    type="SandboxError",
                    message=f"the run's input file {failed} could not be placed in the sandbox; the round did not run",
                )
                return self._result(started, variables=variables, status="crashed", error=error)
        kept, self._warm = self._warm, None
        if kept is not None and kept.worker is worker and kept.variables == variables:
            params["warm"] = kept.token
        # The round's clock starts once a runtime is ready: starting one is not the code's time.
        started = time.perf_counter()
        channel = worker.channel
        channel.begin_round()
        try:
            if clock == "wall":
                answer = await wait_for(channel.request(_p.EXECUTE, params), timeout=max(deadline, 0.001))
            else:
                wall = max(deadline, self.limits.round_wall_s)
                answer = await _code_time_bounded(
                    channel, channel.request(_p.EXECUTE, params), deadline, started, wall=wall
                )
        except TimeoutError as exc:
            worker.kill()
            rpc_count = await channel.end_round()
            await self._discard(worker)
            what = "time" if clock == "wall" else "time running code (waiting on toolkit calls not counted)"
            message = (
                f"the round ran past its {deadline:g} s limit of {what}; the sandbox was killed and will be "
                "replaced (the variables from before the round are kept). Split long work over several rounds, "
                "or raise the limit (workflow.codeact.roundSeconds)"
            )
            if isinstance(exc, _WallCapExceeded):
                message = (
                    f"the round ran past the host's {exc.seconds:g} s cap on a round's wall-clock time (waiting on "
                    "toolkit calls counted); the sandbox was killed and will be replaced (the variables from before "
                    "the round are kept). Make fewer or shorter calls per round, or let the host allow more "
                    "(Limits(round_wall_s=...))"
                )
            error = ExecutionError(type="DeadlineExceeded", message=message)
            return self._result(
                started,
                variables=variables,
                status="deadline_exceeded",
                error=error,
                rpc_count=rpc_count,
                isolation=worker.isolation,
            )
        except (ChannelClosedError, _p.RpcError) as exc:
            rpc_count = await channel.end_round()
            if isinstance(exc, ChannelClosedError):
                # The runtime died on its own: let it exit, so its status tells why (a limit's signal).
                with contextlib.suppress(Exception):
                    await worker.wait_exit(_EXIT_GRACE_S)
            worker.kill()
            with contextlib.suppress(Exception):
                await worker.wait_exit(5.0)
            detail = worker.crash_detail() if isinstance(exc, ChannelClosedError) else f"bad answer: {exc}"
            hit = worker.limit_hit() if isinstance(exc, ChannelClosedError) else None
            await self._discard(worker)
            error = (
                limit_error(hit, self.limits)
                if hit is not None
                else ExecutionError(
                    type="SandboxCrashed",
                    message=(
                        f"the sandbox runtime died during the round ({detail}); the next round starts a fresh one "
                        "(the variables from before the round are kept)"
                    ),
                )
            )
            return self._result(
                started,
                variables=variables,
                status="crashed",
                error=error,
                rpc_count=rpc_count,
                isolation=worker.isolation,
            )
        rpc_count = await channel.end_round()
        worker.reap()
        result = self._from_answer(
            started, answer, variables=variables, rpc_count=rpc_count, isolation=worker.isolation
        )
        state = answer.get("state") if isinstance(answer, dict) else None
        if isinstance(state, str) and result.status in ("ok", "error") and worker.alive:
            self._warm = _WarmNamespace(worker=worker, token=state, variables=result.variables)
        return result

    async def _discard(self, worker: RuntimeWorker) -> None:
        if self._worker is worker:
            self._worker = None
        with contextlib.suppress(Exception):
            await worker.aclose()

    def _result(
        self,
        started: float,
        *,
        variables: JsonObject,
        status: ExecutionStatus,
        error: ExecutionError | None,
        rpc_count: int = 0,
        isolation: str | None = None,
    ) -> ExecutionResult:
        return ExecutionResult(
            variables=variables,
            error=error,
            status=status,
            rpc_count=rpc_count,
            duration_s=round(time.perf_counter() - started, 6),
            backend=self.backend,
            isolation=isolation or self.isolation,
        )

    def _from_answer(
        self, started: float, answer: object, *, variables: JsonObject, rpc_count: int, isolation: str
    ) -> ExecutionResult:
        """Build the result from the runtime's (untrusted) answer, checking every member's type."""
        if not isinstance(answer, dict):
            error = ExecutionError(type="SandboxCrashed", message="the sandbox runtime sent a malformed result")
            return self._result(
                started, variables=variables, status="crashed", error=error, rpc_count=rpc_count, isolation=isolation
            )
        limit = self.limits.output_bytes
        stdout = answer.get("stdout")
        stderr = answer.get("stderr")
        raw_error = answer.get("error")
        failure = None if raw_error is None else limit_note(ExecutionError.from_json(raw_error), self.limits)
        captured = answer.get("variables")
        control = answer.get("control")
        if isinstance(control, dict) and control.get("kind") == "budget_exceeded" and failure is None:
            # A budget of toolkit calls ran out (toolkits/budget.py): the round fails, naming the budget.
            text = control.get("message")
            failure = ExecutionError(
                type="BudgetExceeded", message=text if isinstance(text, str) else "a toolkit call budget ran out"
            )
            control = None
        uncaptured = tuple(
            Uncaptured(
                name=str(u.get("name", "")),
                type=str(u.get("type", "")),
                reason=str(u.get("reason", "")),
                live=u.get("live") is True,
            )
            for u in (answer.get("uncaptured") or [])
            if isinstance(u, dict)
        )
        nondeterminism = _nondeterminism(answer.get("nondeterminism"))
        if answer.get("warm") is True:  # the round continued the warm namespace: replay does the same
            nondeterminism = {"reads": [], **(nondeterminism or {}), "warm": True}
        return ExecutionResult(
            # The runtime already cut (a misbehaving one is cut here): let its marker through.
            stdout=truncate_output(stdout, limit, slack=_MARKER_SLACK) if isinstance(stdout, str) else "",
            stderr=truncate_output(stderr, limit, slack=_MARKER_SLACK) if isinstance(stderr, str) else "",
            error=failure,
            variables=captured if isinstance(captured, dict) else variables,
            uncaptured=uncaptured,
            rpc_count=rpc_count,
            duration_s=round(time.perf_counter() - started, 6),
            backend=self.backend,
            isolation=isolation,
            status="error" if failure is not None else "ok",
            control=control if isinstance(control, dict) else None,
            nondeterminism=nondeterminism,
            artifacts=artifacts_from_answer(
                answer.get("artifacts"),
                file_bytes=self.limits.artifact_bytes,
                round_bytes=min(self.limits.round_artifact_bytes, _MAX_ROUND_ARTIFACT_BYTES),
            ),
        )


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class _WarmNamespace:
    """The namespace a runtime kept after a round, which the same session's next round may continue.

    Attributes:
        worker: The runtime that holds it.
        token: The answer's ``state``: sent back as ``warm`` to continue exactly that namespace.
        variables: The variables that round returned (continued only when the next round is given these).
    """

    worker: RuntimeWorker
    token: str
    variables: JsonObject


class _WallCapExceeded(TimeoutError):
    """The round's wall-clock cap (host waits counted) ran out, not its limit of code time."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the round's wall-clock cap of {seconds:g} s ran out")
        self.seconds = seconds


async def _code_time_bounded(
    channel: Channel, request: Awaitable[Any], limit: float, started: float, *, wall: float | None = None
) -> object:
    """Await ``request`` (the round) while the code's own time stays under ``limit`` seconds.

    The code's time is the wall time since ``started`` minus the time at least one toolkit call was in
    flight on the host (:meth:`Channel.paused_s`): waiting on the host is bounded by each call's own
    timeout, not by the round's limit. No timer runs per call: the clock is read only when the limit's
    timer fires, and while a call is in flight the wait is for the last call to end.

    ``wall`` caps the round's whole time, waits on the host counted (``Limits.round_wall_s``).

    Raises:
        TimeoutError: The code ran ``limit`` seconds (``request`` is cancelled); ``_WallCapExceeded`` when
            the round's wall-clock time passed ``wall``.
    """
    answer = asyncio.ensure_future(request)
    try:
        while True:
            wall_left = None if wall is None else wall - (time.perf_counter() - started)
            if wall_left is not None and wall_left <= 0:
                raise _WallCapExceeded(wall)  # type: ignore[arg-type]
            if channel.in_flight:
                await asyncio.wait(
                    (answer, channel.when_idle()), timeout=wall_left, return_when=asyncio.FIRST_COMPLETED
                )
            else:
                remaining = limit - (time.perf_counter() - started - channel.paused_s())
                if remaining <= 0:
                    raise TimeoutError
                await asyncio.wait((answer,), timeout=remaining if wall_left is None else min(remaining, wall_left))
            if answer.done():
                return answer.result()
    finally:
        if not answer.done():
            answer.cancel()  # not awaited: a second cancel of this task must not be swallowed here


_REPLACED: Final = "the sandbox was killed and will be replaced (the variables from before the round are kept)"


def limit_note(error: ExecutionError, limits: Limits) -> ExecutionError:
    """``error`` with the limit it ran into named, when a limit that fails inside the code raised it.

    The address-space limit raises ``MemoryError``; the process limit makes a fork fail with EAGAIN
    (``BlockingIOError``) or a thread refuse to start. Only the message changes: replay compares the
    type and the line.
    """
    note: str | None = None
    if error.type == "MemoryError":
        note = (
            f"the sandbox's memory limit is {limits.memory_bytes / (1024 * 1024):g} MB: hold less in memory at "
            "once, or raise the limit (sandbox.limits.memoryMb)"
        )
    elif (error.type == "BlockingIOError" and "Resource temporarily unavailable" in error.message) or (
        error.type == "RuntimeError" and "can't start new thread" in error.message
    ):
        note = (
            f"the sandbox's limit of {limits.processes} processes and threads was reached: start fewer, or raise "
            "the limit (sandbox.limits.pids)"
        )
    if note is None:
        return error
    message = f"{error.message} ({note})" if error.message else note
    return dataclasses.replace(error, message=message)


def limit_error(hit: LimitName, limits: Limits) -> ExecutionError:
    """The error of a round whose runtime a resource limit killed: the limit, its value and the key that raises it.

    Worded like the round's time limit (``DeadlineExceeded``): what ran past which limit, what happened
    to the sandbox, and the blueprint key to raise (docs/limits.md).
    """
    if hit == "cpu":
        return ExecutionError(
            type="CpuLimitExceeded",
            message=(
                f"the round ran past its {limits.cpu_s} s limit of CPU time (seconds the code kept a CPU busy); "
                f"{_REPLACED}. Split heavy work over several rounds, or raise the limit (sandbox.limits.cpuSeconds)"
            ),
        )
    mb = limits.memory_bytes / (1024 * 1024)
    return ExecutionError(
        type="MemoryLimitExceeded",
        message=(
            f"the round ran past its {mb:g} MB memory limit (its processes and the files they wrote, together); "
            f"{_REPLACED}. Hold less in memory at once, or raise the limit (sandbox.limits.memoryMb)"
        ),
    )


def _compile_error(failure: Any) -> ExecutionError:
    error = failure.to_error()
    if isinstance(error, ExecutionError):
        return error
    if isinstance(error, dict):
        return ExecutionError.from_json(error)
    return ExecutionError(type="SyntaxError", message=str(failure))


def _nondeterminism(data: object) -> JsonObject | None:
    """The runtime's (untrusted) record of non-deterministic reads, checked for shape."""
    if not isinstance(data, dict) or not isinstance(data.get("reads"), list):
        return None
    out: JsonObject = {"reads": [r for r in data["reads"] if _is_read(r)]}
    if type(data.get("seed")) is int:
        out["seed"] = data["seed"]
    if isinstance(data.get("diverged"), str):
        out["diverged"] = data["diverged"][:500]
    if type(data.get("unread")) is int:
        out["unread"] = data["unread"]
    if data.get("truncated") is True:
        out["truncated"] = True
    if data.get("warm") is True:
        out["warm"] = True
    return out


def _is_read(entry: object) -> bool:
    return type(entry) is list and len(entry) == 2 and type(entry[0]) is str


def _consume_exception(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()


def plain_file_name(name: object) -> bool:
    """Whether ``name`` is a plain file name: one path component, no leading dot, not ``outputs``."""
    return (
        isinstance(name, str)
        and 0 < len(name) <= 255
        and "/" not in name
        and "\\" not in name
        and not any(ord(c) < 32 for c in name)
        and not name.startswith(".")
        and name != "outputs"
    )
