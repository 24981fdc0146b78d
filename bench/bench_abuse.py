"""Host memory under bridge abuse: RSS before and after 10,000 abusive frames from sandbox code.

The sandbox code (plain CPython in the ``process`` isolation, so it can reach the raw bridge
socket) sends, in one session:

* ``garbage``: 10,000 frames that are not JSON-RPC (junk lines, truncated objects, wrong shapes),
  without ever reading the answers;
* ``oversize``: 4 lines of 20 MiB (over the 8 MiB frame cap), 2 with and 2 without a newline;
* ``calls``: 10,000 sequential toolkit calls;
* ``big_arguments``: 20 calls with a 5 MiB argument.

Figures: the host's RSS (``/proc/self/statm``) after a warm-up session (the baseline), at its
peak during the abuse, and once the abusive sandbox is closed; ``after_vs_baseline`` is the
ratio (goal: <= 1.2).
"""

from __future__ import annotations

import asyncio
import gc
import os
import resource
import sys
import time
from typing import Any

from codeact.toolkits import ToolkitBridge, ToolkitRegistry, operation, toolkit

FRAMES = 10_000
MiB = 1024 * 1024


@toolkit(name="bench", description="Benchmark operations")
class _Bench:
    @operation
    async def ping(self, n: int) -> int:
        """Return n."""
        return n

    @operation
    async def echo(self, value: str) -> int:
        """Return the length of value."""
        return len(value)


_GARBAGE = f"""
sock = _codeact_sync_.__self__.sock
junk = [b"not json at all\\n", b"{{\\"jsonrpc\\": \\"2.0\\", \\"id\\": 1, \\"method\\"\\n", b"[1, 2, 3]\\n",
        b"{{\\"jsonrpc\\": \\"2.0\\", \\"id\\": {{}}, \\"method\\": 7}}\\n"]
for i in range({FRAMES}):
    sock.sendall(junk[i % len(junk)])
x = 1
"""

_OVERSIZE = """
sock = _codeact_sync_.__self__.sock
chunk = b"x" * (1024 * 1024)
for n in range(4):
    for _ in range(20):
        sock.sendall(chunk)
    if n % 2 == 0:
        sock.sendall(b"\\n")
sock.sendall(b"\\n")
x = 2
"""

_CALLS = f"""
for i in range({FRAMES}):
    bench.ping(i)
x = 3
"""

_BIG = """
arg = "x" * (5 * 1024 * 1024)
for _ in range(20):
    bench.echo(arg)
arg = None
x = 4
"""


def _rss_mib() -> float:
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / MiB


def _settle() -> float:
    gc.collect()
    return _rss_mib()


async def _session(bridge: ToolkitBridge, rounds: list[str]) -> float:
    """Run the rounds in one sandbox; returns the peak RSS seen after a round."""
    from codeact.sandbox import SubprocessSandbox
    from codeact.sandbox.policy import Policy

    peak = 0.0
    policy = Policy(restricted=False, allowed_imports=frozenset(sys.stdlib_module_names))
    async with SubprocessSandbox(bridge=bridge, isolation="process", policy=policy) as box:
        for code in rounds:
            result = await box.execute(code, deadline=300)
            if result.error is not None and result.status != "error":
                raise RuntimeError(f"abuse round failed: {result.status}: {result.error.message}")
            bridge.drain_calls()
            peak = max(peak, _rss_mib())
    return peak


async def _run() -> dict[str, Any]:
    bridge = ToolkitBridge(ToolkitRegistry([_Bench()]), session_id="abuse", default_timeout=60)
    await _session(bridge, ["for i in range(100):\n    bench.ping(i)\nx = 0", "x = 0"])  # warm-up
    baseline = _settle()
    started = time.perf_counter()
    peak = await _session(bridge, [_GARBAGE, _OVERSIZE, _CALLS, _BIG, "x = 5"])
    elapsed = time.perf_counter() - started
    after = _settle()
    return {
        "frames": FRAMES,
        "rss_baseline_mib": round(baseline, 1),
        "rss_peak_mib": round(max(peak, after), 1),
        "rss_after_mib": round(after, 1),
        "rss_max_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "after_vs_baseline": round(after / baseline, 2),
        "abuse_s": round(elapsed, 2),
        "targets": {"after_vs_baseline<=1.2": after / baseline <= 1.2},
    }


def run() -> dict[str, Any]:
    """Run the abuse benchmark; returns the figures (see the module docstring)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return asyncio.run(_run())


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
