"""The process wall's cost: a subprocess sandbox's start and warm round with and without its cgroup.

Both measured in the same run: ``process_wall="cgroup"`` (the default for root: a cgroup per runtime
with ``pids.max``, a memory limit and a CPU quota, and the round-end sweep of leftover processes)
against ``process_wall="rlimits"`` (no cgroup, explicitly weaker). Medians; the machine is shared.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from typing import Any, Literal

from codeact.sandbox import Policy, SubprocessSandbox

OPEN = Policy(restricted=False, allowed_imports=frozenset(sys.stdlib_module_names))


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


async def _start(wall: Literal["cgroup", "rlimits"]) -> float:
    started = time.perf_counter()
    async with SubprocessSandbox(policy=OPEN, process_wall=wall) as sb:
        result = await sb.execute("x = 1 + 1")
        if not result.ok:
            raise RuntimeError(f"benchmark round failed: {result.error}")
        return time.perf_counter() - started


async def _warm(wall: Literal["cgroup", "rlimits"]) -> float:
    async with SubprocessSandbox(policy=OPEN, process_wall=wall) as sb:
        await sb.execute("x = 1")
        rounds = []
        for _ in range(30):
            started = time.perf_counter()
            await sb.execute("x = 1 + 1")
            rounds.append(time.perf_counter() - started)
    return statistics.median(rounds)


async def _measure() -> dict[str, Any]:
    await _start("rlimits")  # the one-time bubblewrap self-test is nobody's cost
    starts: dict[str, list[float]] = {"cgroup": [], "rlimits": []}
    warms: dict[str, list[float]] = {"cgroup": [], "rlimits": []}
    for _ in range(5):  # interleaved: the shared machine's load falls on both alike
        for wall in ("cgroup", "rlimits"):
            starts[wall].append(await _start(wall))  # type: ignore[arg-type]
    for _ in range(3):
        for wall in ("cgroup", "rlimits"):
            warms[wall].append(await _warm(wall))  # type: ignore[arg-type]
    start = {k: statistics.median(v) for k, v in starts.items()}
    warm = {k: statistics.median(v) for k, v in warms.items()}
    return {
        "start_first_result": {
            "cgroup_ms": _ms(start["cgroup"]),
            "rlimits_only_ms": _ms(start["rlimits"]),
            "ratio": round(start["cgroup"] / start["rlimits"], 3),
        },
        "warm_round": {
            "cgroup_ms": _ms(warm["cgroup"]),
            "rlimits_only_ms": _ms(warm["rlimits"]),
            "ratio": round(warm["cgroup"] / warm["rlimits"], 3),
            "note": "includes the round-end sweep (one read of cgroup.procs when nothing is left over)",
        },
    }


def run() -> dict[str, Any]:
    return asyncio.run(_measure())


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
