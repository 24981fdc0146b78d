"""Agreement with plain CPython of multi-turn model code, turn by turn (issue 27 item 11).

Each sequence of ``bench/values_corpus.py`` (numpy, pandas, sympy and plain Python, written as models
write it: values made in one turn used in the next) runs three ways:

* ``cpython``: the reference, every turn ``exec``'d in one namespace in one plain ``python3`` process
  with the ``datascience`` environment on ``sys.path``;
* ``warm``: through a ``SubprocessSandbox`` with the ``datascience`` preset, turn by turn as the agent
  loop runs rounds (``execute(code, variables=<previous result's>, warm=True)``);
* ``snapshot``: the same with ``warm=False``: every turn starts from a fresh namespace restored from
  the previous turn's captured variables, as a resumed session or another worker does.

A turn agrees when its stdout and its error type (or no error) are the same as CPython's.
``agreement_warm_pct`` and ``agreement_snapshot_pct`` are the shares of agreeing turns (goal >= 99 %
for the warm sandbox); ``disagreements`` lists the turns that differ.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

from bench.values_corpus import SEQUENCES
from codeact.engine.agent.sandboxes import sandbox_spec
from codeact.sandbox import open_sandbox
from codeact.sandbox.env import EnvSpec, ensure_environment

_REFERENCE = r"""
import contextlib, io, json, sys
sys.path.append(sys.argv[1])
sequences = json.loads(sys.stdin.read())
out = []
for turns in sequences:
    ns = {"__name__": "__main__"}
    seq = []
    for code in turns:
        buf = io.StringIO()
        error = None
        with contextlib.redirect_stdout(buf):
            try:
                exec(compile(code, "<code>", "exec"), ns)
            except BaseException as exc:
                error = type(exc).__name__
        seq.append({"stdout": buf.getvalue(), "error": error})
    out.append(seq)
print(json.dumps(out))
"""


def _reference(site: str) -> list[list[dict[str, Any]]]:
    done = subprocess.run(
        [sys.executable, "-I", "-c", _REFERENCE, site],
        input=json.dumps(SEQUENCES),
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    result: list[list[dict[str, Any]]] = json.loads(done.stdout)
    return result


async def _sandboxed(env: Any, *, warm: bool) -> list[list[dict[str, Any]]]:
    out: list[list[dict[str, Any]]] = []
    sandbox = open_sandbox(sandbox_spec("subprocess", env=env))
    async with sandbox:
        for turns in SEQUENCES:
            variables: dict[str, Any] = {}
            seq = []
            for i, code in enumerate(turns):
                # the first turn of a sequence is a new session: never warm
                result = await sandbox.execute(code, variables=variables, deadline=60, warm=warm and i > 0)
                variables = result.variables
                seq.append({"stdout": result.stdout, "error": result.error.type if result.error else None})
            out.append(seq)
    return out


def _agreement(reference: list[list[dict[str, Any]]], got: list[list[dict[str, Any]]]) -> tuple[float, list[str]]:
    total = agree = 0
    differ: list[str] = []
    for s, (ref_seq, got_seq) in enumerate(zip(reference, got, strict=True)):
        for t, (ref, mine) in enumerate(zip(ref_seq, got_seq, strict=True)):
            total += 1
            if ref == mine:
                agree += 1
            else:
                differ.append(f"sequence {s + 1} turn {t + 1}: cpython {ref!r}, sandbox {mine!r}"[:400])
    return round(100.0 * agree / total, 2), differ


def run() -> dict[str, Any]:
    """Measure; returns the figures."""
    env = ensure_environment(EnvSpec(preset="datascience"), backend="subprocess")
    reference = _reference(str(env.site))
    warm_pct, warm_diff = _agreement(reference, asyncio.run(_sandboxed(env, warm=True)))
    snap_pct, snap_diff = _agreement(reference, asyncio.run(_sandboxed(env, warm=False)))
    return {
        "sequences": len(SEQUENCES),
        "turns": sum(len(s) for s in SEQUENCES),
        "agreement_warm_pct": warm_pct,
        "agreement_snapshot_pct": snap_pct,
        "disagreements_warm": warm_diff,
        "disagreements_snapshot": snap_diff,
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=1))
