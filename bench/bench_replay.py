"""Capture and replay figures, each against a baseline measured in the same run.

* recording non-deterministic reads on the warm round: ``x = 1 + 1`` with recording (the default:
  seeding ``random``, the recording ``__import__``, the tape in the result) vs the same round with
  recording off (``nondeterminism={"record": False}``), rounds interleaved (target ratio <= 1.02);
* the same for a round that reads the clock, uuid4 and random (what a read costs);
* capture of a round that defines 50 functions and classes inside the frame's ``try:`` (finding the
  definitions in the AST + encoding the namespace), in process, against running those definitions
  (``exec`` of the compiled program: dataclass creation dominates); and that round in a warm
  sandbox vs the warm ``x = 1 + 1`` round.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from codeact.sandbox import SubprocessSandbox
from codeact.sandbox.policy import DEFAULT_IMPORTS, Policy, compile_code
from codeact.sandbox.runtime.capture import capture, collect_definitions
from codeact.sandbox.runtime.guards import restricted_globals
from codeact.segments import build_frame

OFF = {"record": False}
READS = (
    "import random\nimport uuid\nfrom datetime import datetime\n"
    "stamp = datetime.now().isoformat()\ntoken = str(uuid.uuid4())\nr = random.random()\n"
)


def fifty_definitions() -> str:
    """A model's middle defining 25 functions (decorated, with defaults) and 25 classes (one a dataclass each)."""
    parts = ["from dataclasses import dataclass\nimport functools\n"]
    for i in range(25):
        parts.append(
            f"@functools.lru_cache(maxsize=None)\ndef helper_{i}(x, scale={i}, *, label='f{i}'):\n"
            f'    """Helper {i}."""\n    return (x * scale, label)\n'
        )
        parts.append(
            f"@dataclass\nclass Record{i}:\n    name: str\n    qty: int = {i}\n\n"
            f"    def total(self, extra=0):\n        return self.qty + extra + helper_{i}(1)[0]\n"
        )
    parts.append("items = [Record3('a'), Record7('b')]\n")
    return "\n".join(parts)


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


async def _round(sb: SubprocessSandbox, code: str, **kwargs: Any) -> float:
    started = time.perf_counter()
    result = await sb.execute(code, deadline=60, **kwargs)
    elapsed = time.perf_counter() - started
    if not result.ok:
        raise RuntimeError(f"benchmark round failed: {result.error}")
    return elapsed


async def _ab(sb: SubprocessSandbox, code: str, rounds: int) -> tuple[float, float]:
    """Median warm round with and without recording, interleaved so both see the same machine load."""
    on: list[float] = []
    off: list[float] = []
    for _ in range(rounds):
        on.append(await _round(sb, code))
        off.append(await _round(sb, code, nondeterminism=OFF))
    return statistics.median(on), statistics.median(off)


def _capture_in_process(program: str) -> tuple[float, float, int, float]:
    """(collect_definitions s, capture s, captured names, running the program s) for ``program``, best of 5."""
    compiled = compile_code(program, policy=Policy())
    import marshal

    code = marshal.loads(compiled.code)
    runs = []
    for _ in range(5):
        namespace = restricted_globals(allowed_imports=DEFAULT_IMPORTS)
        baseline = dict(namespace)
        t0 = time.perf_counter()
        eval(code, namespace)  # noqa: S307 - our own benchmark program, compiled under the policy
        runs.append(time.perf_counter() - t0)
    collect_s, capture_s = [], []
    captured = 0
    for i in range(5):
        t0 = time.perf_counter()
        found = collect_definitions(program, filename=f"<code {i}>")  # a new key: not the prelude's cache
        t1 = time.perf_counter()
        variables, lost = capture(
            namespace, source_defs={d.name: d.source for d in found}, definitions=found, baseline=baseline
        )
        t2 = time.perf_counter()
        if lost:
            raise RuntimeError(f"benchmark capture lost {lost}")
        collect_s.append(t1 - t0)
        capture_s.append(t2 - t1)
        captured = len(variables)
    return min(collect_s), min(capture_s), captured, min(runs)


async def _main() -> dict[str, Any]:
    figures: dict[str, Any] = {}
    program = build_frame().program(fifty_definitions())
    async with SubprocessSandbox() as sb:
        await _round(sb, "x = 1 + 1")
        await _round(sb, READS)
        on, off = await _ab(sb, "x = 1 + 1", 100)
        figures["warm_round_recording_ms"] = _ms(on)
        figures["warm_round_not_recording_ms"] = _ms(off)
        figures["warm_round_recording_ratio"] = round(on / off, 4)
        on, off = await _ab(sb, READS, 50)
        figures["reads_round_recording_ms"] = _ms(on)
        figures["reads_round_not_recording_ms"] = _ms(off)
        figures["reads_round_recording_ratio"] = round(on / off, 4)
        warm = statistics.median([await _round(sb, "x = 1 + 1") for _ in range(20)])
        defs_round = statistics.median([await _round(sb, program) for _ in range(10)])
        figures["fifty_definitions_round_ms"] = _ms(defs_round)
        figures["fifty_definitions_round_vs_warm_ratio"] = round(defs_round / warm, 3)
    collect_s, capture_s, captured, exec_s = _capture_in_process(program)
    figures["fifty_definitions_collect_ms"] = _ms(collect_s)
    figures["fifty_definitions_capture_ms"] = _ms(capture_s)
    figures["fifty_definitions_captured_names"] = captured
    figures["fifty_definitions_exec_in_process_ms"] = _ms(exec_s)  # running the definitions themselves
    figures["fifty_definitions_capture_vs_exec_ratio"] = round((collect_s + capture_s) / exec_s, 3)
    return figures


def run() -> dict[str, Any]:
    """Run the capture/replay benchmarks (about 10 s)."""
    return asyncio.run(_main())


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
