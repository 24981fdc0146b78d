"""Docker sandbox figures, each against a baseline measured in the same run.

* ``warm_round``: a round of ``x = 1 + 1`` on a warm container vs spawning ``python -c pass``
  (target ratio <= 0.25);
* ``cold_start``: a fresh sandbox to its first result without a pool (container start included),
  the first round after ``start()`` with a pool, and the round after a deadline kill with and
  without a pre-started container to replace it;
* ``loop``: a 1,000,000-iteration loop in the container (full CPython) vs plain ``exec`` here
  (target ratio <= 1.2);
* ``memory``: memory of a warm container (``docker stats``: usage minus page cache).

Figures are medians; the machine is shared, so the ratios matter more than absolute times. The
container runs Debian's python3 (built with PGO/LTO), the baseline runs the host's interpreter: a
loop ratio below 1 means the image's interpreter is faster, not that the sandbox is free.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import time
import uuid
from typing import Any

from codeact.sandbox import DockerSandbox
from codeact.sandbox.subprocess_sandbox import python_interpreter

LOOP = "total = 0\nfor i in range(1000000):\n    total += i\n"
MiB = 1024 * 1024


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def _spawn_python(repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([python_interpreter()[0], "-c", "pass"], check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _exec_loop(repeat: int = 5) -> float:
    code = compile(LOOP, "<bench>", "exec")
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        exec(code, {})
        times.append(time.perf_counter() - started)
    return statistics.median(times)


async def _round(sb: DockerSandbox, code: str, **kwargs: Any) -> float:
    started = time.perf_counter()
    result = await sb.execute(code, **kwargs)
    elapsed = time.perf_counter() - started
    if not result.ok and result.status != "deadline_exceeded":
        raise RuntimeError(f"benchmark round failed: {result.status} {result.error}")
    return elapsed


def _container_memory(sb: DockerSandbox) -> float:
    worker = sb._worker
    if worker is None:
        raise RuntimeError("no warm container")
    stats = worker.container.stats(stream=False)  # type: ignore[attr-defined]
    mem = stats.get("memory_stats") or {}
    usage = int(mem.get("usage", 0))
    cache = int((mem.get("stats") or {}).get("cache", (mem.get("stats") or {}).get("inactive_file", 0)))
    return round((usage - cache) / MiB, 2)


async def _measure() -> dict[str, Any]:
    figures: dict[str, Any] = {}
    spawn = _spawn_python()
    plain_loop = _exec_loop()

    # Cold start without a pool: construction to the first result, container start included.
    colds = []
    for _ in range(3):
        started = time.perf_counter()
        async with DockerSandbox(pool_size=0, session_id=f"bench-{uuid.uuid4().hex[:8]}") as sb:
            await sb.execute("x = 1 + 1")
            colds.append(time.perf_counter() - started)

    async with DockerSandbox(pool_size=1, session_id=f"bench-{uuid.uuid4().hex[:8]}") as sb:
        # __aenter__ started the warm container and the pool: the first round is already warm.
        first_pooled = await _round(sb, "x = 1 + 1")
        warm = statistics.median([await _round(sb, "x = 1 + 1") for _ in range(30)])
        await _round(sb, LOOP)  # warm the loop path once
        loop = statistics.median([await _round(sb, LOOP) for _ in range(5)])
        empty = statistics.median([await _round(sb, "pass") for _ in range(10)])
        memory = _container_memory(sb)
        replaced_pooled = []
        for _ in range(3):
            await _round(sb, "while True:\n    pass", deadline=0.3)
            await asyncio.sleep(1.0)  # let the pool refill, as between real rounds
            replaced_pooled.append(await _round(sb, "x = 1 + 1"))

    async with DockerSandbox(pool_size=0, session_id=f"bench-{uuid.uuid4().hex[:8]}") as sb:
        await _round(sb, "x = 1 + 1")
        replaced_cold = []
        for _ in range(3):
            await _round(sb, "while True:\n    pass", deadline=0.3)
            replaced_cold.append(await _round(sb, "x = 1 + 1"))

    figures["warm_round"] = {
        "round_ms": _ms(warm),
        "spawn_python_ms": _ms(spawn),
        "ratio": round(warm / spawn, 3),
        "target_ratio": 0.25,
    }
    figures["cold_start"] = {
        "no_pool_first_result_ms": _ms(statistics.median(colds)),
        "pool_first_round_after_start_ms": _ms(first_pooled),
        "after_kill_with_pool_ms": _ms(statistics.median(replaced_pooled)),
        "after_kill_without_pool_ms": _ms(statistics.median(replaced_cold)),
        "spawn_python_ms": _ms(spawn),
    }
    figures["loop"] = {
        "sandbox_ms": _ms(loop - empty),
        "round_ms": _ms(loop),
        "plain_exec_ms": _ms(plain_loop),
        "ratio": round((loop - empty) / plain_loop, 3),
        "target_ratio": 1.2,
        "note": "sandbox_ms is the loop round minus an empty round; the container has a 1-CPU quota",
    }
    figures["memory"] = {"warm_container_mib": memory}
    return figures


def run() -> dict[str, Any]:
    return asyncio.run(_measure())


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
