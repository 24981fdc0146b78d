"""Agent runtime: engine overhead per round, 50 concurrent sessions, replay speed.

* ``overhead``: one run of ``N_OVERHEAD`` rounds of trivial code (``x = 1``) with the scripted model,
  on the SQLite and the Redis store (after a short warm-up run). The engine's own time is the run's
  wall time minus the model calls (timed by a ``ModelInterceptor`` around ``call_next``) minus the
  host-side sandbox time (every ``Sandbox.execute``, the first one spawning the process, and the
  final ``aclose``, timed by a proxy): ``engine_overhead_ms_per_round``, compared with the 5 ms target
  (``*_vs_target`` below 1 is inside it). ``engine_overhead_steady_ms_median`` is the median over
  rounds 2..N of each round's span (``round.started`` to the next) minus its model call and its
  execute. ``overhead_minus_code_duration`` is the variant the issue names (wall minus model minus
  ``CodeCompleted.duration_s``); ``model_ms_per_call`` is the scripted litellm call, for context.
  ``sqlite_no_compaction`` repeats the SQLite run without ``session.compact`` (the base blueprint
  enables it), which isolates the cost of the per-round prompt budget check.
* ``concurrent``: ``SESSIONS`` sessions of 3 rounds at once in one process (scripted model,
  subprocess sandboxes, one SQLite store); rounds per second against the same kind of session run
  one after another, peak RSS of this process (``VmHWM``) and the peak summed RSS of the sandbox
  processes (sampled from ``/proc`` every 100 ms).
* ``replay``: a 20-round session replayed from the record (``codeact.engine.replay.replay_session``, fresh
  subprocess sandbox) in rounds per second, against the live run that recorded it.

Redis comes from ``CODEACT_TEST_REDIS_URL`` (``source .services/env``); without it the Redis
figures are reported as skipped.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

N_OVERHEAD = 50
SESSIONS = 50
SEQUENTIAL_SESSIONS = 5
REPLAY_ROUNDS = 20
TARGET_MS = 5.0

_BLUEPRINT = """\
version: codeact.agent/v1
extend: codeact-base
id: bench-engine
model: {{provider: scripted, model: "{model}"}}
workflow: {{maxTurns: {turns}, codeact: {{thought: 'off'}}}}
"""
_NO_COMPACTION = "session: {compact: {enabled: false}}\n"


class _ModelTimer:
    """A ModelInterceptor adding up the time spent in the model call (``call_next``)."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    async def intercept_model(self, request: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        started = time.perf_counter()
        try:
            return await call_next(request)
        finally:
            self.calls.append(time.perf_counter() - started)


class _TimedSandbox:
    """Delegates to a sandbox, adding up the host-side time of ``execute`` and ``aclose``."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.executes: list[float] = []
        self.close_s = 0.0

    @property
    def seconds(self) -> float:
        return sum(self.executes) + self.close_s

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def execute(self, code: str, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await self._inner.execute(code, **kwargs)
        finally:
            self.executes.append(time.perf_counter() - started)

    async def aclose(self) -> None:
        started = time.perf_counter()
        try:
            await self._inner.aclose()
        finally:
            self.close_s += time.perf_counter() - started


def _codes(rounds: int) -> list[str]:
    # A comment per round keeps the stuck-loop detector (same code N times) out of the way.
    return [f"x = 1  # round {i}" for i in range(1, rounds)] + ["system.finish(x)"]


def _agent(
    store: Any,
    rounds: int,
    *,
    timers: list[_TimedSandbox] | None = None,
    model_timer: Any = None,
    compaction: bool = True,
) -> Any:
    """An Agent over ``store`` whose scripted model writes ``rounds`` rounds of trivial code."""
    from codeact.engine.agent import Agent, default_sandbox_factory
    from codeact.engine.blueprint import AgentFactory, Blueprint, HostContext
    from codeact.engine.model import ModelClient, ModelSettings, ScriptedReplies
    from codeact.toolkits import ToolkitRegistry

    script = ScriptedReplies(_codes(rounds))
    client = ModelClient(ModelSettings(model=script.model), env={})
    client._bench_script = script  # type: ignore[attr-defined]  # keep the script alive (weak registry)
    registry = ToolkitRegistry.from_entry_points()
    text = _BLUEPRINT.format(model=script.model, turns=rounds + 1) + ("" if compaction else _NO_COMPACTION)
    bp = Blueprint.from_text(text)
    spec = AgentFactory().create(bp, HostContext(model_client=client, toolkit_registry=registry, store=store))
    base = default_sandbox_factory()

    def factory(handler: Any, spec: Any) -> Any:
        sandbox = _TimedSandbox(base(handler, spec))
        if timers is not None:
            timers.append(sandbox)
        return sandbox

    return Agent(
        spec,
        model=client,
        store=store,
        registry=registry,
        sandbox_factory=factory,
        interceptors=(model_timer,) if model_timer is not None else (),
        stream=False,
    )


async def _run_once(agent: Any, session: str) -> tuple[float, list[Any]]:
    events = []
    started = time.perf_counter()
    async for event in agent.run("bench", session_id=session):
        events.append(event)
    wall = time.perf_counter() - started
    if events[-1].type != "run.completed":
        raise RuntimeError(f"bench run failed: {events[-1].to_json()}")
    return wall, events


async def _overhead(url: str, *, compaction: bool = True) -> dict[str, Any]:
    from codeact.engine.events import CodeCompleted, RoundStarted
    from codeact.engine.store import open_store

    store = open_store(url)
    try:
        # Warm-up: a short run pays the one-time imports (litellm, templates) outside the figure.
        await _run_once(_agent(store, 3), f"warm-{uuid.uuid4().hex}")
        timer = _ModelTimer()
        sandboxes: list[_TimedSandbox] = []
        agent = _agent(store, N_OVERHEAD, timers=sandboxes, model_timer=timer, compaction=compaction)
        wall, events = await _run_once(agent, f"overhead-{uuid.uuid4().hex}")
    finally:
        await store.close()
    (sandbox,) = sandboxes
    model_s = sum(timer.calls)
    code = [e.duration_s for e in events if isinstance(e, CodeCompleted)]
    engine_ms = (wall - model_s - sandbox.seconds) / N_OVERHEAD * 1000
    with_ipc_ms = (wall - model_s - sum(code)) / N_OVERHEAD * 1000
    # Steady state: each round's span (round.started to the next one) minus its model call and its
    # execute; round 1 is left out (it starts the sandbox process).
    starts = [e.timestamp for e in events if isinstance(e, RoundStarted)] + [events[-1].timestamp]
    spans = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    steady = [
        (span - m - x) * 1000 for span, m, x in zip(spans[1:], timer.calls[1:], sandbox.executes[1:], strict=True)
    ]
    steady_ms = statistics.median(steady)
    return {
        "rounds": N_OVERHEAD,
        "wall_ms_per_round": round(wall / N_OVERHEAD * 1000, 3),
        "model_ms_per_call": round(statistics.median(timer.calls) * 1000, 3),
        "sandbox_execute_ms_median": round(statistics.median(sandbox.executes) * 1000, 3),
        "sandbox_first_execute_ms": round(sandbox.executes[0] * 1000, 1),
        "sandbox_close_ms": round(sandbox.close_s * 1000, 1),
        "code_duration_ms_median": round(statistics.median(code) * 1000, 3),
        "code_duration_first_round_ms": round(code[0] * 1000, 1),
        "engine_overhead_ms_per_round": round(engine_ms, 3),
        "engine_overhead_vs_target": round(engine_ms / TARGET_MS, 3),
        "engine_overhead_steady_ms_median": round(steady_ms, 3),
        "engine_overhead_steady_vs_target": round(steady_ms / TARGET_MS, 3),
        "overhead_minus_code_duration_ms_per_round": round(with_ipc_ms, 3),
        "overhead_minus_code_duration_vs_target": round(with_ipc_ms / TARGET_MS, 3),
    }


# -- memory ----------------------------------------------------------------------------------------


def _status_kib(path: str, field: str) -> int:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


def _descendants_rss_kib(root: int) -> int:
    """Summed VmRSS of every descendant process of ``root`` (sandbox runtimes, bwrap)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    total, stack = 0, list(children.get(root, []))
    while stack:
        pid = stack.pop()
        total += _status_kib(f"/proc/{pid}/status", "VmRSS")
        stack.extend(children.get(pid, []))
    return total


async def _sample_children(peak: list[int], stop: asyncio.Event) -> None:
    me = os.getpid()
    while not stop.is_set():
        peak[0] = max(peak[0], await asyncio.to_thread(_descendants_rss_kib, me))
        try:
            await asyncio.wait_for(stop.wait(), timeout=0.1)
        except TimeoutError:
            pass


async def _concurrent(url: str) -> dict[str, Any]:
    from codeact.engine.store import open_store

    store = open_store(url)
    try:
        started = time.perf_counter()
        for i in range(SEQUENTIAL_SESSIONS):
            await _run_once(_agent(store, 3), f"seq-{i}-{uuid.uuid4().hex}")
        sequential_rps = SEQUENTIAL_SESSIONS * 3 / (time.perf_counter() - started)

        rss_before = _status_kib("/proc/self/status", "VmRSS")
        peak = [0]
        stop = asyncio.Event()
        sampler = asyncio.create_task(_sample_children(peak, stop))
        agents = [_agent(store, 3) for _ in range(SESSIONS)]
        started = time.perf_counter()
        results = await asyncio.gather(
            *(_run_once(agent, f"conc-{i}-{uuid.uuid4().hex}") for i, agent in enumerate(agents))
        )
        wall = time.perf_counter() - started
        stop.set()
        await sampler
    finally:
        await store.close()
    rounds = sum(sum(1 for e in events if e.type == "round.started") for _, events in results)
    rps = rounds / wall
    return {
        "sessions": SESSIONS,
        "rounds": rounds,
        "wall_s": round(wall, 2),
        "rounds_per_s": round(rps, 1),
        "sequential_rounds_per_s": round(sequential_rps, 1),
        "concurrent_vs_sequential": round(rps / sequential_rps, 2),
        "rss_before_mib": round(rss_before / 1024, 1),
        "peak_rss_mib": round(_status_kib("/proc/self/status", "VmHWM") / 1024, 1),
        "peak_children_rss_mib": round(peak[0] / 1024, 1),
        "children_rss_mib_per_session": round(peak[0] / 1024 / SESSIONS, 2),
    }


async def _replay(url: str) -> dict[str, Any]:
    from codeact.engine.replay import replay_session
    from codeact.engine.store import open_store
    from codeact.sandbox import SubprocessSandbox

    store = open_store(url)
    try:
        session = f"replay-{uuid.uuid4().hex}"
        live_wall, _ = await _run_once(_agent(store, REPLAY_ROUNDS), session)
        started = time.perf_counter()
        report = await replay_session(store, session, sandbox_factory=lambda handler: SubprocessSandbox(bridge=handler))
        replay_wall = time.perf_counter() - started
    finally:
        await store.close()
    if not report.ok or len(report.rounds) != REPLAY_ROUNDS:
        raise RuntimeError(f"bench replay did not match: {report.to_json()}")
    return {
        "rounds": REPLAY_ROUNDS,
        "replay_rounds_per_s": round(REPLAY_ROUNDS / replay_wall, 1),
        "live_rounds_per_s": round(REPLAY_ROUNDS / live_wall, 1),
        "replay_vs_live": round(live_wall / replay_wall, 2),
    }


def run() -> dict[str, Any]:
    """Measure and return the figures."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with tempfile.TemporaryDirectory(prefix="codeact-bench-engine-") as tmp:
        sqlite_url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        figures: dict[str, Any] = {"target_ms_per_round": TARGET_MS}
        overhead: dict[str, Any] = {"sqlite": asyncio.run(_overhead(sqlite_url))}
        # The same run without session.compact: its per-round budget check is most of the engine's time.
        overhead["sqlite_no_compaction"] = asyncio.run(_overhead(sqlite_url, compaction=False))
        redis = os.environ.get("CODEACT_TEST_REDIS_URL")
        if redis:
            prefix = f"codeact-bench-{uuid.uuid4().hex[:8]}"
            joiner = "&" if "?" in redis else "?"
            overhead["redis"] = asyncio.run(_overhead(f"{redis}{joiner}prefix={prefix}&ttl=300"))
        else:
            overhead["redis"] = {"skipped": "CODEACT_TEST_REDIS_URL is not set (source .services/env)"}
        figures["overhead"] = overhead
        figures["concurrent"] = asyncio.run(_concurrent(f"sqlite:///{Path(tmp) / 'concurrent.db'}"))
        figures["replay"] = asyncio.run(_replay(sqlite_url))
    return figures


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
