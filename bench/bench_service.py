"""`codeact serve` figures, each against the same runs made in-process in the same benchmark.

* latency from ``POST /v1/runs`` to the first SSE event, minus the same run's first result when the
  runner is iterated in-process (median of sequential runs; goal: overhead <= 20 ms), with the
  round trip of ``GET /v1/health`` for scale (what any HTTP request costs on this machine);
* ``CONCURRENT`` (100) streamed runs at once (scripted model, one trivial round each): completed
  count, wall time, events/s, and the server's peak RSS (``VmHWM``, the server process without its
  sandboxes), against the same runs gathered in-process;
* the run-scoped API (``POST /v1/runs/{run_id}/api/{action}``) of a run kept alive (it waits for an
  approval): ``API_CALLS`` (200) sequential ``state_get`` and ``get_binding_storage`` calls over one
  keep-alive client, each next to a ``GET /v1/health`` round trip on the same client; median and p95
  of each, and ``api_call_overhead_ms`` = median ``state_get`` minus median health round trip (what
  the API layer adds to any HTTP request: token, authorization, rate limit, audit line; goal <= 5 ms).
  The server keeps an audit log file and a rate limit (high enough never to refuse), as a host would.
"""

from __future__ import annotations

import asyncio
import base64
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

from codeact.toolkits import operation, toolkit

CONCURRENT = 100
SEQUENTIAL = 15
API_CALLS = 200
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

API_RUNNER = "bench-api-runner"
API_BLUEPRINT = f"""\
version: codeact.agent/v1
extend: codeact-base
id: {API_RUNNER}
model: {{provider: scripted, model: scripted/replies.yaml}}
toolkits:
  - ref: system
  - ref: bench_ping
    approval: ask
workflow: {{maxTurns: 3, codeact: {{thought: 'off'}}}}
extensions:
  runner:
    permissions:
      storage: [binding]
"""
_ASK = "Now the ping, which needs approval.\n```python\npong = await bench_ping.ping()\n```\n"
_FINISH = "Approved; finishing.\n```python\nsystem.finish('done: ' + pong)\n```\n"


@toolkit(name="bench_ping", description="A service whose call waits for an approval (keeps a run alive)")
class BenchPing:
    @operation
    async def ping(self) -> str:
        """Answer at once."""
        return "pong"


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


def _start_server(tmp: Path, blueprint: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "CODEACT_API_TOKENS": TOKEN, "CODEACT_HOME": str(tmp / "home")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH")]))
    argv = [str(Path(sys.executable).parent / "codeact"), "serve", "--blueprints", str(blueprint), "--port", "0"]
    argv += ["--store", f"sqlite:///{tmp / 'served.db'}", "--max-runs", str(CONCURRENT * 2), *extra]
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


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"median_ms": round(statistics.median(ordered) * 1000, 3), "p95_ms": round(p95 * 1000, 3)}


async def _timed(client: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> float:
    started = time.perf_counter()
    (await client.request(method, url, **kwargs)).raise_for_status()
    return time.perf_counter() - started


async def _measure_api(tmp: Path, calls: int) -> dict[str, Any]:
    """The run-scoped API's figures (see the module docstring), one server with a run waiting for an approval."""
    tmp.mkdir()
    (tmp / "replies.yaml").write_text(json.dumps([{"text": r, "chunks": [r]} for r in (_ASK, _FINISH)]))
    blueprint = tmp / "agent.yaml"
    blueprint.write_text(API_BLUEPRINT)
    rate = f"{calls * 100}/3600"  # checked on every call, never reached
    toolkit_ref = f"{__name__}:BenchPing" if __name__ != "__main__" else "bench.bench_service:BenchPing"
    process, url = _start_server(
        tmp, blueprint, "--toolkit", toolkit_ref, "--api-rate", rate, "--audit-log", str(tmp / "audit.jsonl")
    )
    ctx = _context("api")
    ctx["resources"] = {"storage": {"plugin_storage": False, "workspace_storage": False, "binding_storage": True}}
    ctx["context"] = {"conversation_id": ctx["conversation"]["conversation_id"], "available_apis": {"state": True}}
    ctx["state"] = {"conversation": {"topic": "refunds"}}
    run_id = ctx["run_id"]
    headers = {"Authorization": f"Bearer {TOKEN}"}
    call_headers = {"X-Runner-Id": API_RUNNER}
    try:
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120) as client:
            body = {"runner_id": API_RUNNER, "context": ctx}
            async with client.stream("POST", "/v1/runs", json=body, headers={"Accept": "text/event-stream"}) as sse:
                sse.raise_for_status()
                async for line in sse.aiter_lines():
                    if line == "event: action.requested":
                        break
            shown = (await client.get(f"/v1/runs/{run_id}")).json()
            if shown["status"] != "waiting":
                raise RuntimeError(f"the run did not wait for its approval: {shown['status']} {shown.get('error')}")
            api = f"/v1/runs/{run_id}/api"
            state = {"scope": "conversation", "key": "topic"}
            stored = {"key": "cache", "value_base64": base64.b64encode(b"cached value").decode()}
            await _timed(client, "POST", f"{api}/set_binding_storage", json=stored, headers=call_headers)
            health: list[float] = []
            state_get: list[float] = []
            storage_get: list[float] = []
            for i in range(calls + 10):  # the first 10 warm the path up and are not counted
                timed = [
                    await _timed(client, "GET", "/v1/health"),
                    await _timed(client, "POST", f"{api}/state_get", json=state, headers=call_headers),
                    await _timed(
                        client, "POST", f"{api}/get_binding_storage", json={"key": "cache"}, headers=call_headers
                    ),
                ]
                if i >= 10:
                    for samples, took in zip((health, state_get, storage_get), timed, strict=True):
                        samples.append(took)
            [pending] = (await client.get(f"/v1/runs/{run_id}")).json()["pending"]
            approve = {"interaction_id": pending["interaction_id"], "action_id": "approve", "values": {}}
            (await client.post(f"/v1/runs/{run_id}/interactions", json=approve)).raise_for_status()
            for _ in range(600):  # the run ends (its status read back), so the server stops cleanly
                if (await client.get(f"/v1/runs/{run_id}")).json()["status"] != "waiting":
                    break
                await asyncio.sleep(0.05)
    finally:
        process.terminate()
        process.wait(timeout=60)
    audited = len((tmp / "audit.jsonl").read_text().splitlines())
    figures = {"health": _ms(health), "state_get": _ms(state_get), "get_binding_storage": _ms(storage_get)}
    overhead = figures["state_get"]["median_ms"] - figures["health"]["median_ms"]
    return {
        "api_calls": calls,
        "api_state_get_ms": figures["state_get"],
        "api_storage_get_ms": figures["get_binding_storage"],
        "api_health_roundtrip_ms": figures["health"],
        "api_call_overhead_ms": round(overhead, 3),
        "api_call_overhead_goal_ms": 5,
        "api_audit_lines": audited,
    }


def run(concurrent: int = CONCURRENT, sequential: int = SEQUENTIAL, api_calls: int = API_CALLS) -> dict[str, Any]:
    """The figures (see the module docstring)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with tempfile.TemporaryDirectory(prefix="bench-service-") as tmp:
        figures = asyncio.run(_measure(Path(tmp), concurrent, sequential))
        figures.update(asyncio.run(_measure_api(Path(tmp) / "api", api_calls)))
        return figures


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
