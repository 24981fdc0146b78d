"""gVisor beside runc: the Docker backend's warm round, loop and cold start on both runtimes.

Both runtimes are measured in the same run, so the ratios (gVisor / runc) are what to read:

* ``warm_round``: a round of ``x = 1 + 1`` on a warm container;
* ``loop``: a 1,000,000-iteration loop round minus an empty round (full CPython in both);
* ``cold_start``: a fresh sandbox without a pool to its first result (container start included).

Medians; the machine is shared. Skipped with a reason when the engine has no ``runsc`` runtime
(``scripts/services.sh up`` registers it).
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from typing import Any, Literal

from codeact.sandbox import DockerSandbox

LOOP = "total = 0\nfor i in range(1000000):\n    total += i\n"
Runtime = Literal["runc", "gvisor"]


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


async def _round(sb: DockerSandbox, code: str) -> float:
    started = time.perf_counter()
    result = await sb.execute(code, deadline=60)
    elapsed = time.perf_counter() - started
    if not result.ok:
        raise RuntimeError(f"benchmark round failed on {sb.runtime}: {result.status} {result.error}")
    return elapsed


async def _figures(runtime: Runtime) -> dict[str, float]:
    colds = []
    for _ in range(3):
        started = time.perf_counter()
        async with DockerSandbox(pool_size=0, runtime=runtime, session_id=f"bench-{uuid.uuid4().hex[:8]}") as sb:
            await sb.execute("x = 1 + 1", deadline=60)
            colds.append(time.perf_counter() - started)
    async with DockerSandbox(pool_size=1, runtime=runtime, session_id=f"bench-{uuid.uuid4().hex[:8]}") as sb:
        await _round(sb, "x = 1 + 1")
        warm = statistics.median([await _round(sb, "x = 1 + 1") for _ in range(20)])
        await _round(sb, LOOP)
        loop = statistics.median([await _round(sb, LOOP) for _ in range(5)])
        empty = statistics.median([await _round(sb, "pass") for _ in range(10)])
    return {"warm": warm, "loop": loop - empty, "cold": statistics.median(colds)}


def _has_gvisor() -> bool:
    from codeact.sandbox.docker_sandbox._engine import _client

    client = _client()
    try:
        return "runsc" in (client.info().get("Runtimes") or {})
    finally:
        client.close()


async def _measure() -> dict[str, Any]:
    if not _has_gvisor():
        return {"skipped": "the Docker engine has no runsc runtime; run scripts/services.sh up"}
    runc = await _figures("runc")
    gvisor = await _figures("gvisor")
    out: dict[str, Any] = {}
    for key, name in (("warm", "warm_round"), ("loop", "loop"), ("cold", "cold_start")):
        out[name] = {
            "runc_ms": _ms(runc[key]),
            "gvisor_ms": _ms(gvisor[key]),
            "ratio_gvisor_vs_runc": round(gvisor[key] / runc[key], 3),
        }
    out["loop"]["note"] = "a 1,000,000-iteration loop round minus an empty round; 1-CPU quota on both"
    return out


def run() -> dict[str, Any]:
    return asyncio.run(_measure())


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
