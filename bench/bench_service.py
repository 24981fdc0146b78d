"""`codeact serve` figures, each against the same runs made in-process in the same benchmark.

* latency from ``POST /v1/runs`` to the first SSE event, minus the same run's first result when the
  runner is iterated in-process (median of sequential runs; goal: overhead <= 20 ms), with the
  round trip of ``GET /v1/health`` for scale (what any HTTP request costs on this machine);
* ``CONCURRENT`` (100) streamed runs at once (scripted model, one trivial round each): completed
  count, wall time, events/s, and the server's peak RSS (``VmHWM``, the server process without its
  sandboxes), against the same runs gathered in-process.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

CONCURRENT = 100
SEQUENTIAL = 15
TOKEN = "bench-token-1234"
RUNNER = "bench-runner"
_REPLY = "Done.\n```python\nsystem.finish('ok')\n```\n"
BLUEPRINT = f"""\
version: codeact.agent/v1
extend: codeact-base
id: {RUNNER}
model: {{provider: scripted, model: scripted/replies.yaml}}
toolkits:
  - ref: system
workflow: {{maxTurns: 2, codeact: {{thought: 'off'}}}}
"""


def _write(tmp: Path, replies: int) -> Path:
    (tmp / "replies.yaml").write_text(json.dumps([{"text": _REPLY, "chunks": [_REPLY]}] * replies))
    blueprint = tmp / "agent.yaml"
    blueprint.write_text(BLUEPRINT)
    return blueprint


def _context(tag: str) -> dict[str, Any]:
    run_id = f"{tag}-{uuid.uuid4().hex[:12]}"
    return {
        "run_id": run_id,
        "trigger": {"type": "message.received", "source": "api"},
        "event": {"event_id": f"evt-{run_id}", "event_type": "message.received", "source": "bench"},
        "conversation": {"conversation_id": f"conv-{run_id}"},
        "input": {"text": "Say ok."},
        "delivery": {"surface": "api", "supports_streaming": True},
        "runtime": {"deadline_at": time.time() + 240},  # a run that hangs fails (runner.timeout), it does not stall
    }


def _start_server(tmp: Path, blueprint: Path) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "CODEACT_API_TOKENS": TOKEN, "CODEACT_HOME": str(tmp / "home")}
    argv = [str(Path(sys.executable).parent / "codeact"), "serve", "--blueprints", str(blueprint), "--port", "0"]
    argv += ["--store", f"sqlite:///{tmp / 'served.db'}", "--max-runs", str(CONCURRENT * 2)]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    assert process.stdout is not None
    found = re.search(r"listening on (http://\S+)", process.stdout.readline())
    if found is None:
        process.kill()
        raise RuntimeError("codeact serve did not start")
    return process, found.group(1)


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


async def _http_run(client: httpx.AsyncClient, tag: str) -> tuple[float, int, str]:
    """(seconds to the first event, events, last type) of one streamed run."""
    body = {"runner_id": RUNNER, "context": _context(tag)}
    started = time.perf_counter()
    first = 0.0
    events, last = 0, ""
    async with client.stream("POST", "/v1/runs", json=body, headers={"Accept": "text/event-stream"}) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                if events == 0:
                    first = time.perf_counter() - started
                events += 1
                last = line.removeprefix("event: ")
    return first, events, last


async def _inproc_run(runner: Any, tag: str) -> tuple[float, int, str]:
    from codeact.engine.runner import Interactions, RunnerContext

    context = RunnerContext.model_validate(_context(tag))
    started = time.perf_counter()
    first = 0.0
    events, last = 0, ""
    async for result in runner.run(context, run_id=context.run_id, interactions=Interactions()):
        if events == 0:
            first = time.perf_counter() - started
        events += 1
        last = result.type
    return first, events, last


async def _gathered(make: Any, count: int) -> dict[str, Any]:
    started = time.perf_counter()
    outcomes = await asyncio.gather(*(make(f"c{i}") for i in range(count)), return_exceptions=True)
    wall = time.perf_counter() - started
    done = [o for o in outcomes if isinstance(o, tuple) and o[2] == "run.completed"]
    events = sum(o[1] for o in outcomes if isinstance(o, tuple))
    errors = sorted({f"{type(o).__name__}: {o}"[:200] for o in outcomes if isinstance(o, BaseException)})
    return {
        "completed": len(done),
        "wall_s": round(wall, 3),
        "events": events,
        "events_per_s": round(events / wall, 1) if wall else 0.0,
        **({"errors": errors[:3]} if errors else {}),
    }


async def _measure(tmp: Path, concurrent: int, sequential: int) -> dict[str, Any]:
    from codeact.engine.runner import BlueprintRunner

    replies = 2 * (concurrent + sequential + 4)
    (tmp / "served").mkdir()
    (tmp / "inproc").mkdir()
    served_bp, inproc_bp = _write(tmp / "served", replies), _write(tmp / "inproc", replies)
    process, url = _start_server(tmp / "served", served_bp)
    runner = BlueprintRunner.from_blueprint(inproc_bp, store=f"sqlite:///{tmp / 'inproc.db'}")
    limits = httpx.Limits(max_connections=concurrent + 10, max_keepalive_connections=concurrent + 10)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    try:
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=300, limits=limits) as client:
            for i in range(2):  # warm both paths up (imports, first sandbox, connection)
                await _http_run(client, f"warm{i}")
                await _inproc_run(runner, f"warm{i}")
            http_first, inproc_first, health = [], [], []
            for i in range(sequential):
                started = time.perf_counter()
                (await client.get("/v1/health")).raise_for_status()
                health.append(time.perf_counter() - started)
                http_first.append((await _http_run(client, f"seq{i}"))[0])
                inproc_first.append((await _inproc_run(runner, f"seq{i}"))[0])
            served = await _gathered(lambda tag: _http_run(client, tag), concurrent)
            served["server_peak_rss_mib"] = _peak_rss_mib(process.pid)
        inproc = await _gathered(lambda tag: _inproc_run(runner, tag), concurrent)
    finally:
        await runner.aclose()
        process.terminate()
        process.wait(timeout=60)
    http_ms = statistics.median(http_first) * 1000
    inproc_ms = statistics.median(inproc_first) * 1000
    return {
        "first_event_http_ms": round(http_ms, 2),
        "first_event_inproc_ms": round(inproc_ms, 2),
        "first_event_overhead_ms": round(http_ms - inproc_ms, 2),
        "first_event_overhead_goal_ms": 20,
        "http_health_roundtrip_ms": round(statistics.median(health) * 1000, 2),
        "sequential_runs": sequential,
        "concurrent_runs": concurrent,
        "concurrent_http": served,
        "concurrent_inproc": inproc,
        "concurrent_wall_ratio_http_vs_inproc": round(served["wall_s"] / inproc["wall_s"], 3)
        if inproc["wall_s"]
        else None,
    }


def run(concurrent: int = CONCURRENT, sequential: int = SEQUENTIAL) -> dict[str, Any]:
    """The figures (see the module docstring)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with tempfile.TemporaryDirectory(prefix="bench-service-") as tmp:
        return asyncio.run(_measure(Path(tmp), concurrent, sequential))


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
