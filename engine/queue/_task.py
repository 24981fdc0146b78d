"""One queued run on a worker: lease, agent, events to the run's stream, cancel, pause, deadline.

The rule that keeps toolkit calls from running twice: a run is only ever continued from what the
session's store recorded. A round cut short (the worker died, a cancel, a pause for approval) is
recorded as ``interrupted`` with the calls that completed (the pending list, folded by the next run
holding the session lock; ``engine/agent/recovery.py``), and the model is told what ran. So a
redelivered or continued run never re-executes a round: the model decides what to do next knowing
what already happened. A model that writes the interrupted round's program again does not do its
completed calls again: the continuation's first round answers the same calls from the interrupted
round's record (``engine.calls.FromRecord``). The call a pause waited on had not run; the decision given
for it is stored for the session and used once, for the same toolkit, operation and arguments.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codeact.engine.queue._state import BEAT_S, LEASE_TTL_S, TERMINAL, RunState, call_digest, swap_status
from codeact.prompts.errors import ErrorInfo

if TYPE_CHECKING:
    from codeact.engine.agent import Agent
    from codeact.engine.store import Store
    from codeact.toolkits import ApprovalDecision, ApprovalRequest, CallBudgets, ToolkitRegistry

__all__ = ["WorkerConfig", "execute"]

_POLL_S = 0.2
_SESSION_WAIT_S = 15.0
_AGENTS_KEPT = 16
_STOP_WAIT_S = 30.0

_CURRENT: contextvars.ContextVar[_Run] = contextvars.ContextVar("codeact_queue_run")


async def _route_approval(request: ApprovalRequest) -> ApprovalDecision:
    """The approver of every cached agent: asks the run whose task makes the call."""
    return await _CURRENT.get()._approve(request)


@dataclass(kw_only=True)
class WorkerConfig:
    """What a worker process runs with.

    Attributes:
        name: The worker's name (host and pid by default).
        store: Default store URL of runs whose request names none.
        registry: The worker's toolkits (``--toolkit``), shared by its runs.
        blueprints: Blueprint id -> file, from ``--blueprints DIR``.
        max_sandboxes: Global cap of sandboxes (runs) alive at once in this worker process.
        run_timeout_s: Run time limit when neither the request nor the blueprint gives one.
        max_round_seconds: The host's cap on a blueprint's round limit (``--max-round-seconds``; None: 600 s).
        call_budgets: The host's caps on toolkit calls and bridge bytes (``--max-round-calls``, ...; None: defaults).
        strict: Refuse (fail) a run whose blueprint the validator warns about (``--strict``).
    """

    name: str
    store: str | None = None
    registry: ToolkitRegistry | None = None
    blueprints: dict[str, Path] = field(default_factory=dict)
    max_sandboxes: int = 4
    run_timeout_s: float | None = None
    max_round_seconds: float | None = None
    call_budgets: CallBudgets | None = None
    strict: bool = False
    _slots: threading.BoundedSemaphore | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    _leases: _Leases | None = None
    _agents: dict[str, list[Any]] = field(default_factory=dict)
    _stores: dict[str, Store] = field(default_factory=dict)
    _guard: threading.Lock = field(default_factory=threading.Lock)

    def store_for(self, url: str | None) -> Store:
        """The process's one store per URL, shared by every agent of this worker.

        A Redis store's connection pool is sized from ``max_sandboxes`` (the runs this process
        holds at once: ``--concurrency`` unless ``--max-sandboxes``), not one pool per agent.
        """
        from codeact.engine.store import open_store

        with self._guard:
            store = self._stores.get(url or "")
            if store is None:
                store = self._stores[url or ""] = open_store(url, concurrency=self.max_sandboxes)
            return store

    def slots(self) -> threading.BoundedSemaphore:
        """The semaphore capping the sandboxes of this process."""
        with self._guard:
            if self._slots is None:
                self._slots = threading.BoundedSemaphore(max(1, self.max_sandboxes))
            return self._slots

    def loop(self) -> asyncio.AbstractEventLoop:
        """The process's one event loop (a daemon thread) every run of this worker runs on.

        One loop, not one per Celery thread: litellm and the stores keep loop-bound state, and the
        runs are I/O-bound (model calls, sandbox processes).
        """
        with self._guard:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="codeact-runs", daemon=True).start()
                self._loop = loop
            return self._loop

    def leases(self, state: RunState) -> _Leases:
        """The heartbeat thread renewing the leases of this process's runs."""
        with self._guard:
            if self._leases is None:
                self._leases = _Leases(state)
            return self._leases


_BUNDLES: dict[int, Path] = {}  # pid -> that process's folder of unpacked blueprint folders (made on first use)


def _unpacked(bundle: Mapping[str, Any]) -> Path:
    """The blueprint path of a packed blueprint folder, unpacked once per content in this process.

    The folders live as long as the worker process (an agent built from one is cached and may be
    used again), inside one folder named after the process, ``<tmp>/codeact-blueprints-<pid>.<start>-XXXX``
    (the owner tag of ``codeact.sandbox.leftovers``). A normal exit removes it (atexit). A process that
    ends without running atexit handlers (SIGKILL, ``os._exit``) leaves it behind: the next process that
    makes its folder here removes those whose owner is dead, as ``codeact sandbox gc`` does (kind
    ``blueprints_dir``). A folder whose owner still runs is never removed, so a live worker keeps its own.
    """
    from codeact.engine.blueprint import unpack_blueprint
    from codeact.engine.blueprint.bundle import bundle_digest

    target = _bundles_folder() / bundle_digest(bundle)[:32]
    return unpack_blueprint(bundle, target)


def _bundles_folder() -> Path:
    """This process's folder of unpacked blueprints, made on first use (after removing those of dead workers).

    Keyed by pid: a forked child makes its own, named after itself, instead of using its parent's
    (whose owner may die while the child still uses it).
    """
    pid = os.getpid()
    folder = _BUNDLES.get(pid)
    if folder is None:
        import atexit
        import tempfile

        from codeact.sandbox.leftovers import dir_prefix, remove_dead_dirs

        remove_dead_dirs("blueprints_dir")
        folder = _BUNDLES[pid] = Path(tempfile.mkdtemp(prefix=dir_prefix("blueprints")))
        atexit.register(_remove_own, folder, pid)
    return folder


def _remove_own(folder: Path, pid: int) -> None:
    """The atexit removal of ``pid``'s folder; a forked child inherits the handler, not the folder."""
    if os.getpid() == pid:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


def _agent_key(request: Mapping[str, Any], store: str | None) -> str:
    keys = (
        "blueprint_id",
        "blueprint_text",
        "blueprint_bundle",
        "blueprint_dir",
        "model",
        "base_url",
        "user",
        "sandbox",
    )
    parts = [request.get(k) for k in keys]
    text = json.dumps([parts, request.get("store") or store], sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class _Leases:
    """Renews the leases of the runs a worker process holds, every ``BEAT_S``, on its own thread.

    A thread, not the runs' event loop: a loop busy for a moment (building an agent) must not let a
    live run's lease expire and have it taken over.
    """

    def __init__(self, state: RunState) -> None:
        self._state = state
        self._held: dict[str, str] = {}
        self._lost: set[str] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._beat, name="codeact-leases", daemon=True).start()

    def add(self, run_id: str, owner: str) -> None:
        with self._lock:
            self._held[run_id] = owner
            self._lost.discard(run_id)

    def discard(self, run_id: str) -> None:
        with self._lock:
            self._held.pop(run_id, None)
            self._lost.discard(run_id)

    def lost(self, run_id: str) -> bool:
        with self._lock:
            return run_id in self._lost

    def _beat(self) -> None:
        while True:
            time.sleep(BEAT_S)
            with self._lock:
                held = dict(self._held)
            for run_id, owner in held.items():
                try:
                    ok = self._state.renew_lease(run_id, owner)
                except Exception:  # Redis away for a moment: the next beat tries again
                    continue
                if not ok:
                    with self._lock:
                        self._lost.add(run_id)


def execute(state: RunState, config: WorkerConfig, run_id: str, attempt: int) -> str:
    """Run one delivery of a queued run; returns what happened (``completed``, ``stale``, ...)."""
    info = state.get(run_id)
    if not info:
        return "unknown"
    if info.get("status") in TERMINAL or info.get("status") == "paused":
        return "done"
    if int(info.get("attempt") or 1) != attempt:
        return "stale"  # a redelivered message of an attempt that was re-enqueued since
    owner = f"{attempt}|{config.name}:{uuid.uuid4().hex[:8]}"
    taken = _take_lease(state, run_id, owner, attempt)
    if taken != "ok":
        return taken  # duplicate: a live worker runs this attempt; busy: the earlier one is still closing
    try:
        if info.get("cancel") == "1":
            if swap_status(state, run_id, "queued", "cancelled"):
                state.append(run_id, _cancelled(run_id, "cancelled before it started"))
            return "cancelled"
        leases = config.leases(state)
        leases.add(run_id, owner)
        try:
            with config.slots():
                future = asyncio.run_coroutine_threadsafe(_Run(state, config, run_id, owner).go(), config.loop())
                return future.result()
        finally:
            leases.discard(run_id)
    finally:
        state.drop_lease(run_id, owner)


def _take_lease(state: RunState, run_id: str, owner: str, attempt: int) -> str:
    """Take the run's lease for ``attempt``; wait while an EARLIER attempt still holds it (it is ending).

    An answer can enqueue the continuation while the attempt that paused is still closing its run;
    its lease goes when it ends (or expires if its worker died). A holder of the same attempt is a
    live worker running it: the delivery is a duplicate. Returns ``ok``, ``duplicate`` or ``busy``
    (the earlier attempt still runs after a lease's lifetime: the caller enqueues this one again).
    """
    deadline = time.monotonic() + LEASE_TTL_S + 2.0
    while True:
        if state.take_lease(run_id, owner):
            return "ok"
        holder = state.lease_holder(run_id) or ""
        held, _, _ = holder.partition("|")
        if held.isdigit() and int(held) >= attempt:
            return "duplicate"
        if time.monotonic() > deadline:
            return "busy"
        time.sleep(0.05)


def _for_context(
    agent: Agent, request: Mapping[str, Any], *, earlier: Callable[[], Iterable[Mapping[str, Any]]] = tuple
) -> tuple[Agent, dict[str, str]]:
    """The run's agent and its runtime notes, from the run context the request carries (else ``agent``, none).

    ``codeact serve --queue`` sends the run context; the worker builds the run as ``BlueprintRunner`` builds
    a direct one (``codeact.engine.runner``): the binding's ``config`` over the blueprint's variables
    (``configured_spec``), the ``attachments`` toolkit of the input's attachments and URL contents (always,
    as ``compose_input`` lists them in the queued input), ``system.get_current_time()`` in
    ``runtime.timezone``, and ``platform_api`` for the actions the blueprint declares
    (``extensions.runner.permissions``, the runner manifest's ``permissions.platform_api``, computed here
    from the same blueprint) whose cap counts the requests the run's ``earlier`` events (its stream: an
    attempt before an approval, a lost worker's) hold; the notes (``runtime.locale``, ``runtime.timezone``)
    are the run's Context segment.

    Raises:
        StoreError: ``store.unavailable``, the run's stream could not be read (the queue's Redis is out).
        CodeactError: ``context.invalid``, a malformed locale or time zone (``runtime_notes``); a variable
            the instructions cannot render (``configured_spec``).
        ValueError: the request's context is not a run context (a request written by hand).
    """
    raw = request.get("context")
    if not isinstance(raw, Mapping):
        return agent, {}
    from codeact.engine.runner import (
        Attachments,
        RunnerContext,
        compose_input,
        configured_spec,
        declared_permissions,
        runtime_notes,
        runtime_toolkits,
    )
    from codeact.engine.runner.entities import RunnerPermissions
    from codeact.engine.runner.platform_actions import actions_requested
    from codeact.toolkits import ToolkitRegistry

    context = RunnerContext.model_validate(raw)
    notes = runtime_notes(context)
    spec = configured_spec(agent.spec, context)
    _text, attachments, _parts = compose_input(context)  # the server refused parts; URL contents are attachments
    registry = ToolkitRegistry(bound for bound in agent.registry)
    actions = declared_permissions(agent.spec.blueprint, RunnerPermissions()).platform_api
    requested = actions_requested(earlier()) if actions else 0
    granted = runtime_toolkits(
        registry,
        context,
        attachments=Attachments(attachments),
        platform_actions=actions,
        actions_requested=requested,
    )
    return agent.derive(spec=spec, registry=registry, grants=granted), notes


def _run_options(request: Mapping[str, Any], notes: Mapping[str, str]) -> dict[str, Any]:
    """``Agent.run``'s ``config`` (the request's tags and metadata) and ``context`` (the caller's).

    A continuation (an answer, an approval) keeps the request, so it carries the same labels. The
    ``context`` is the submitter's (``submit(context=...)``) and the run context's ``notes`` (locale, time zone).

    Raises:
        CodeactError: ``config.invalid`` or ``context.invalid``.
    """
    from codeact.engine.agent import RunConfig, context_text

    options: dict[str, Any] = {}
    tags, metadata = request.get("tags") or (), request.get("metadata") or {}
    if tags or metadata:
        options["config"] = RunConfig(tags=tags, metadata=metadata)
    context = request.get("caller_context")
    if context is not None:
        context_text(context)
        options["context"] = context
    if notes:
        options["context"] = {**(context or {}), **notes}
    return options


def _cancelled(run_id: str, reason: str) -> dict[str, object]:
    return {"type": "run.cancelled", "run_id": run_id, "reason": reason, "timestamp": time.time()}


class _Run:
    def __init__(self, state: RunState, config: WorkerConfig, run_id: str, owner: str) -> None:
        self.state = state
        self.config = config
        self.run_id = run_id
        self.owner = owner
        self.pause: dict[str, Any] | None = None
        self.last: dict[str, Any] | None = None
        self.asked = ""  # request_id of the last action.requested (the protocol's interaction_id)
        self.settled: str | None = None
        self.session_id = ""
        self.request: dict[str, Any] = {}

    async def go(self) -> str:
        request = self.request = self.state.request(self.run_id) or {}
        self.session_id = str(request.get("session_id") or "")
        self.state.update(self.run_id, status="running", worker=self.config.name)
        key = _agent_key(request, self.config.store)
        agents = self.config._agents
        entry = agents.pop(key, None)  # runs share the event loop: no lock needed around the cache
        if entry is None:
            try:
                entry = [self._agent(request), 0]
            except Exception as exc:  # a bad blueprint or model: the run fails, the worker goes on
                code = getattr(exc, "code", "queue.invalid_request")
                self._fail(code, f"the worker could not build the agent: {exc}")
                return "failed"
        agents[key] = entry  # most recently used last
        entry[1] += 1
        try:
            return await self._drive(entry[0], request)
        finally:
            entry[1] -= 1
            await self._trim(agents)

    async def _trim(self, agents: dict[str, list[Any]]) -> None:
        """Close the least recently used idle agents beyond ``_AGENTS_KEPT``."""
        for key in list(agents)[: max(0, len(agents) - _AGENTS_KEPT)]:
            if agents[key][1] == 0:
                agent = agents.pop(key)[0]
                with contextlib.suppress(Exception):
                    await agent.aclose()

    def _agent(self, request: Mapping[str, Any]) -> Agent:
        from codeact.engine.agent import Agent, BuildOptions, assemble
        from codeact.engine.blueprint import load_path, load_text
        from codeact.engine.errors import CodeactError

        if request.get("blueprint_id"):
            path = self.config.blueprints.get(str(request["blueprint_id"]))
            if path is None:
                raise CodeactError(
                    f"blueprint {request['blueprint_id']!r} is not among this worker's --blueprints",
                    code="queue.unknown_blueprint",
                )
            blueprint = load_path(path)
        elif isinstance(request.get("blueprint_bundle"), Mapping):
            # The blueprint's folder as the submitter packed it: unpacked here, its paths resolve as there.
            blueprint = load_path(_unpacked(request["blueprint_bundle"]))
        else:  # a request of an older submitter: the text alone
            blueprint = load_text(str(request.get("blueprint_text") or ""), base_dir=request.get("blueprint_dir"))
        options = BuildOptions(
            model=request.get("model"),
            base_url=request.get("base_url"),
            store=self.config.store_for(request.get("store") or self.config.store),
            sandbox=request["sandbox"] if request.get("sandbox") in ("subprocess", "docker") else None,
            approver=_route_approval,
            stream=bool(request.get("stream", False)),
            user=request.get("user"),
            max_round_seconds=self.config.max_round_seconds,
            call_budgets=self.config.call_budgets,
            strict=self.config.strict,
        )
        toolkits = self.config.registry if self.config.registry is not None else ()
        return assemble(Agent, blueprint, toolkits=toolkits, options=options)

    async def _approve(self, request: ApprovalRequest) -> ApprovalDecision:
        from codeact.toolkits import ApprovalDecision

        digest = call_digest(request.toolkit, request.operation, request.arguments)
        decision = self.state.take_decision(self.session_id, digest)
        if decision is not None:
            return ApprovalDecision(allow=bool(decision.get("allow")), reason=str(decision.get("reason") or ""))
        if self.pause is None:
            self.pause = {
                "kind": "approval",
                "request_id": digest,
                "interaction_id": self.asked,
                "toolkit": request.toolkit,
                "operation": request.operation,
                "arguments": dict(request.arguments),
            }
        await asyncio.Event().wait()  # the run is stopped around this call (it never ran)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _wait_session(self, agent: Any) -> None:
        """Wait until the session's lock is free or its holder is dead (a dead worker's lock expires)."""
        if not self.session_id:
            return
        deadline = time.monotonic() + _SESSION_WAIT_S
        while time.monotonic() < deadline:
            holder = await agent.store.lock_info(self.session_id)
            if holder is None or holder.owner_dead():
                return
            await asyncio.sleep(0.25)

    async def _drive(self, agent: Agent, request: Mapping[str, Any]) -> str:
        await self._wait_session(agent)
        timeout = request.get("timeout_s") or self.config.run_timeout_s
        deadline = time.monotonic() + float(timeout) if timeout else None
        session_id = self.session_id or None
        from codeact.engine.errors import CodeactError

        try:
            agent, notes = _for_context(agent, request, earlier=lambda: self.state.history(self.run_id))
        except CodeactError as invalid:  # a malformed locale or time zone: refused as a direct run refuses it
            if invalid.code == "store.unavailable":
                # The queue's Redis is out, not the request: this attempt stops as on any other Redis error here
                # (it could not even write a failure); the run stays `running`, its lease goes, and the reaper
                # enqueues it again once Redis answers.
                raise
            self._fail("runner.invalid_context", f"[{invalid.code}] {invalid.message}")
            return "failed"
        except Exception as refused:  # a context written by hand (the server validated its own): the run fails
            self._fail("queue.invalid_request", f"the run's context was refused: {refused}")
            return "failed"
        try:
            options = _run_options(request, notes)
        except Exception as refused:  # a request written by hand (submit validates): the run fails, the worker goes on
            self._fail(getattr(refused, "code", "queue.invalid_request"), f"the run's request was refused: {refused}")
            return "failed"
        pump = asyncio.create_task(self._pump(agent, str(request.get("input") or ""), session_id, options))
        stop: str | None = None
        leases = self.config.leases(self.state)
        while not pump.done():
            await asyncio.wait({pump}, timeout=_POLL_S)
            if pump.done():
                break
            now = time.monotonic()
            if leases.lost(self.run_id):
                stop = "lost"
            if stop is None and self.state.redis.hget(self.state.key(self.run_id), "cancel") == "1":
                stop = "cancel"
            if stop is None and self.pause is not None:
                stop = "pause"
            if stop is None and deadline is not None and now >= deadline:
                stop = "deadline"
            if stop is not None:
                pump.cancel()
                await asyncio.wait({pump}, timeout=_STOP_WAIT_S)  # the agent records the round, kills the sandbox
                break
        if stop is None:
            exc = pump.exception()
            if exc is not None:
                self._fail("queue.worker_error", f"the run raised {type(exc).__name__}: {exc}")
                return "failed"
        return await self._finish(agent, stop, timeout)

    async def _pump(self, agent: Agent, input: str, session_id: str | None, options: Mapping[str, Any]) -> None:
        _CURRENT.set(self)  # the agent's approver finds this run through it (tasks copy the context)
        async with contextlib.aclosing(agent.run(input, session_id=session_id, **options)) as events:
            async for event in events:
                data = event.to_json()
                fields: dict[str, str] = {}  # state written with the event, in one round trip
                if data.get("type") == "run.started" and not self.session_id:
                    self.session_id = str(data.get("session_id") or "")
                    fields.update(self._pinned())
                if data.get("type") == "action.requested":
                    self.asked = str(data.get("request_id") or "")
                    if self.pause is not None and not self.pause.get("interaction_id"):
                        self.pause["interaction_id"] = self.asked
                self.last = data
                if data.get("type") in ("run.completed", "run.failed"):
                    fields.update(self._settle(data))  # the state says it before a watcher can see the last event
                self.state.append(self.run_id, data, **fields)

    def _pinned(self) -> dict[str, str]:
        """The session id, and the request with it: a redelivery continues this session.

        The request read when the run began is current: only the lease's holder writes it while
        the run is running (a requeue needs the lease gone, an answer a paused run).
        """
        self.request["session_id"] = self.session_id
        return {"session_id": self.session_id, "request": json.dumps(self.request, ensure_ascii=False)}

    async def _finish(self, agent: Agent, stop: str | None, timeout: object) -> str:
        if stop == "lost":
            return "lost"  # another worker took the run over: it writes the rest
        if stop == "cancel":
            self.state.append(self.run_id, _cancelled(self.run_id, "cancelled while running"), status="cancelled")
            return "cancelled"
        if stop == "pause" and self.pause is not None:
            with contextlib.suppress(Exception):
                await agent.store.update_session(self.session_id, status="paused")
            self.state.append(
                self.run_id,
                {"type": "run.paused", "run_id": self.run_id, "session_id": self.session_id, **self.pause},
                status="paused",
                pause=json.dumps(self.pause),
            )
            return "paused"
        if stop == "deadline":
            self._fail("queue.deadline", f"the run went past its time limit ({timeout} s) and was stopped")
            return "failed"
        if self.settled is not None:
            return self.settled  # written with the last event (an answer may have enqueued the next attempt since)
        self.state.update(self.run_id, **self._settle(self.last or {}))
        return str(self.settled)

    def _settle(self, last: Mapping[str, Any]) -> dict[str, str]:
        """The state the run's last engine event gives (paused for ask_user), to write; sets ``settled``."""
        if last.get("type") == "run.completed":
            if last.get("reason") == "ask_user":
                self.settled = "paused"
                pause = {"kind": "ask_user", "question": last.get("answer")}
                return {"status": "paused", "pause": json.dumps(pause)}
            self.settled = "completed"
            return {"status": "completed"}
        self.settled = "failed"
        return {"status": "failed"}

    def _fail(self, code: str, message: str) -> None:
        self.state.append(
            self.run_id,
            {
                "type": "run.failed",
                "run_id": self.run_id,
                "error": ErrorInfo(code=code, message=message).to_dict(),
                "timestamp": time.time(),
            },
            status="failed",
        )
