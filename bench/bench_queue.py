"""The queue: dispatch overhead, throughput with 1 vs 2 worker processes, takeover after a worker dies.

A private ``redis-server`` and real ``codeact worker`` processes (threads pool, ``--concurrency 2``);
the scripted model and trivial code (one round, ``system.finish``).

* ``inprocess_run_ms``: one run in-process (``Agent.invoke`` on a warm agent); the baseline.
  ``queue_run_ms``: the same run through the queue (``submit`` -> ``result``) with a warm worker
  (which keeps the agent of a blueprint and model between runs). ``first_event_*_ms``: from the
  call (``invoke`` / ``submit``) to ``run.started``;
  ``dispatch_overhead_ms`` = their difference (goal <= 10 ms); ``enqueue_ms``: ``submit()`` alone.
* ``runs_per_s_1_worker`` / ``runs_per_s_2_workers``: 24 runs submitted at once, until all completed.
* ``takeover_s``: SIGKILL of the worker running a run -> the run's next ``run.started`` on another
  worker (lease expiry + reaper + resume; goal <= 10 s).
* ``store_bytes_per_round`` / ``stream_bytes_per_round``: Redis memory (``MEMORY USAGE``) of a
  session's keys and of a run's event stream, per recorded round (3-round runs; docs/scaling.md).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CODEACT = str(Path(sys.executable).parent / "codeact")
BLUEPRINT = """\
version: codeact.agent/v1
extend: codeact-base
id: bench-queue
toolkits:
  - ref: system
workflow: {maxTurns: 6, codeact: {thought: 'off'}}
"""
FINISH = "Done.\n```python\nsystem.finish('ok')\n```"


def _steps(rounds: int, sleep: float) -> list[str]:
    code = (
        "try:\n    step += 1\nexcept NameError:\n    step = 1\n"
        f"import time\ntime.sleep({sleep})\nif step >= {rounds}:\n    system.finish('steps:' + str(step))\n"
    )
    return [f"Round.\n```python\n# {k}\n{code}```" for k in range(rounds + 4)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_redis(directory: str) -> tuple[subprocess.Popen[bytes], str]:
    import redis

    port = _free_port()
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", directory],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if redis.Redis.from_url(url).ping():
                return process, url
        except redis.RedisError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("redis-server did not start")


def _worker(url: str, name: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [CODEACT, "worker", "--queue", url, "--concurrency", "2", "--name", name],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _stop(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    if process.poll() is None:
        os.killpg(process.pid, sig)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _script(tmp: Path, name: str, replies: list[str]) -> str:
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(replies))
    return f"scripted/{path}"


def _wait_up(url: str, workers: int) -> None:
    import redis

    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + 60
    # A started worker answers the broadcast ping of Celery's remote control.
    from codeact.engine.queue import make_app

    app = make_app(url)
    while time.monotonic() < deadline:
        replies = app.control.ping(timeout=0.5) or []
        if len(replies) >= workers:
            app.close()
            client.close()
            return
    raise RuntimeError("workers did not start")


def _inprocess_ms(blueprint: Path, tmp: Path, url: str, n: int) -> tuple[float, float]:
    """Median (whole run, call -> run.started) in ms, in-process on a warm agent."""
    from codeact.engine.agent import Agent

    async def go() -> tuple[list[float], list[float]]:
        totals, firsts = [], []
        agent = Agent.from_blueprint(blueprint, model=_script(tmp, "in", [FINISH] * n), store=url, stream=False)
        for _ in range(n):
            t0 = time.perf_counter()
            first: list[float] = []

            def note(event: Any, first: list[float] = first) -> None:
                if event.type == "run.started":
                    first.append(time.perf_counter())

            result = await agent.invoke("go", on_event=note)
            totals.append((time.perf_counter() - t0) * 1000)
            firsts.append((first[0] - t0) * 1000)
            if result.status != "completed":
                raise RuntimeError(f"in-process run failed: {result}")
        await agent.aclose()
        return totals, firsts

    totals, firsts = asyncio.run(go())
    return statistics.median(totals[1:]), statistics.median(firsts[1:])


def _queue_ms(blueprint: Path, tmp: Path, url: str, n: int) -> tuple[float, float, float]:
    """Median (whole run, submit -> run.started written by the worker, submit alone) in ms."""
    from codeact.engine.queue import submit

    totals, firsts, enqueues = [], [], []
    model = _script(tmp, "q", [FINISH] * 1000)  # one model for every run: the worker keeps the agent warm
    for _ in range(n):
        wall, t0 = time.time(), time.perf_counter()
        handle = submit(blueprint, "go", queue=url, model=model)
        enqueues.append((time.perf_counter() - t0) * 1000)
        result = handle.result(timeout=60)
        totals.append((time.perf_counter() - t0) * 1000)
        if result.status != "completed":
            raise RuntimeError(f"queued run failed: {result}")
        started = next(e for e, ev in handle.client.state.read(handle.run_id) if ev["type"] == "run.started")
        firsts.append(int(started.split("-")[0]) - wall * 1000)  # the stream id is the server's ms clock
    return statistics.median(totals[1:]), statistics.median(firsts[1:]), statistics.median(enqueues[1:])


def _throughput(blueprint: Path, tmp: Path, url: str, label: str, n: int = 24) -> float:
    from codeact.engine.queue import submit

    model = _script(tmp, label, [FINISH] * 1000)
    t0 = time.perf_counter()
    handles = [submit(blueprint, "go", queue=url, model=model) for _ in range(n)]
    for handle in handles:
        if handle.result(timeout=120).status != "completed":
            raise RuntimeError("a throughput run failed")
    return n / (time.perf_counter() - t0)


def _takeover_s(blueprint: Path, tmp: Path, url: str, workers: dict[str, subprocess.Popen[bytes]]) -> float:
    from codeact.engine.queue import submit

    handle = submit(blueprint, "go", queue=url, model=_script(tmp, "takeover", _steps(6, 0.5)))
    starts = 0
    for event in handle.events():
        starts += event["type"] == "round.started"
        if starts == 2:  # round 1 is recorded
            break
    if starts < 2:
        raise RuntimeError("the takeover run never completed a round")
    victim = handle.client.state.get(handle.run_id)["worker"]
    killed_at = time.perf_counter()
    _stop(workers[victim], signal.SIGKILL)
    cursor = handle._cursor
    for _entry, event in handle.client.state.follow(handle.run_id, cursor, until_stop=False):
        if event["type"] == "run.started":
            took = time.perf_counter() - killed_at
            break
    result = handle.result(timeout=120)
    if result.status != "completed":
        raise RuntimeError(f"the taken-over run did not complete: {result}")
    return took


def _sizes(blueprint: Path, tmp: Path, url: str) -> dict[str, float]:
    import redis

    from codeact.engine.queue import submit

    handle = submit(blueprint, "go", queue=url, model=_script(tmp, "size", _steps(3, 0.0)))
    result = handle.result(timeout=60)
    client = redis.Redis.from_url(url)
    store = sum(int(client.memory_usage(key) or 0) for key in client.scan_iter(f"codeact:session:{result.session_id}*"))
    stream = int(client.memory_usage(f"codeact:q:run:{handle.run_id}:events") or 0)
    state = int(client.memory_usage(f"codeact:q:run:{handle.run_id}") or 0)
    client.close()
    return {
        "store_bytes_per_round": round(store / 3),
        "stream_bytes_per_round": round(stream / 3),
        "run_state_bytes": state,
    }


def run() -> dict[str, Any]:
    """The figures (see the module docstring)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        redis_process, url = _start_redis(directory)
        blueprint = tmp / "agent.yaml"
        blueprint.write_text(BLUEPRINT)
        env = {k: v for k, v in os.environ.items() if k not in ("CODEACT_STORE", "CODEACT_MODEL", "CODEACT_PROFILE")}
        env["CODEACT_HOME"] = str(tmp / "home")
        workers: dict[str, subprocess.Popen[bytes]] = {}
        try:
            workers["w1"] = _worker(url, "w1", env, tmp / "w1.log")
            _wait_up(url, 1)
            inprocess, first_in = _inprocess_ms(blueprint, tmp, url, 8)
            queued, first_q, enqueue = _queue_ms(blueprint, tmp, url, 8)
            one = _throughput(blueprint, tmp, url, "one")
            workers["w2"] = _worker(url, "w2", env, tmp / "w2.log")
            _wait_up(url, 2)
            _throughput(blueprint, tmp, url, "warm", n=4)
            two = _throughput(blueprint, tmp, url, "two")
            sizes = _sizes(blueprint, tmp, url)
            takeover = _takeover_s(blueprint, tmp, url, workers)
        finally:
            for process in workers.values():
                _stop(process)
            redis_process.kill()
            redis_process.wait()
    return {
        "inprocess_run_ms": round(inprocess, 1),
        "queue_run_ms": round(queued, 1),
        "first_event_inprocess_ms": round(first_in, 1),
        "first_event_queue_ms": round(first_q, 1),
        "dispatch_overhead_ms": round(first_q - first_in, 1),
        "enqueue_ms": round(enqueue, 2),
        "runs_per_s_1_worker": round(one, 2),
        "runs_per_s_2_workers": round(two, 2),
        "speedup_2_vs_1": round(two / one, 2),
        "takeover_s": round(takeover, 2),
        **sizes,
    }
