"""Run every ``bench/bench_*.py`` module's ``run()`` and merge the figures into results.json.

``python -m bench [NAME ...]`` runs only the named modules (``sandbox`` for bench_sandbox.py).

At the end it prints the issue-38 table (``ISSUE_38``): the figures a user waits on, each beside its
floor measured in the same run and its goal, so a regression shows on the next run. A row whose
module did not run this time is read from results.json and marked ``old``.
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    names = sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py"))
    wanted = argv or names
    unknown = sorted(set(wanted) - set(names))
    if unknown:
        print(f"unknown benchmark(s) {unknown}; available: {names}", file=sys.stderr)
        return 2
    out_path = HERE / "results.json"
    results = json.loads(out_path.read_text()) if out_path.exists() else {}
    results["_machine"] = {"python": platform.python_version(), "cpus": os.cpu_count(), "when": time.time()}
    failed = []
    for name in wanted:
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        started = time.perf_counter()
        try:
            module = importlib.import_module(f"bench.bench_{name}")
            figures = module.run()
        except Exception as exc:  # a broken benchmark is reported, the others still run
            failed.append(name)
            figures = {"error": f"{type(exc).__name__}: {exc}"}
        figures["_seconds"] = round(time.perf_counter() - started, 2)
        results[name] = figures
        print(json.dumps({name: figures}, indent=2), file=sys.stderr)
        out_path.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(f"[bench] wrote {out_path}", file=sys.stderr)
    print(issue_38_table(results, ran=set(wanted) - set(failed)))
    return 1 if failed else 0


@dataclass(frozen=True, kw_only=True)
class Row:
    """One figure of issue 38: ``module.key`` against ``floor`` (same run), held to ``goal``.

    ``kind`` says how the goal reads: ``ratio`` (figure / floor <= goal), ``above`` (figure - floor
    <= goal, in the figure's unit), ``max`` (figure <= goal; the floor is shown for scale).
    """

    name: str
    figure: str
    floor: str | None
    goal: float
    kind: str = "ratio"
    unit: str = "ms"


ISSUE_38: tuple[Row, ...] = (
    Row(
        name="cold sandbox, first result, no pool",
        figure="sandbox.cold_first_result_no_pool_ms",
        floor="sandbox.spawn_python_ms",
        goal=1.3,
    ),
    Row(
        name="one in-process run, scripted, 1 round",
        figure="queue.inprocess_run_ms",
        floor="sandbox.cold_first_result_no_pool_ms",
        goal=130,
        kind="max",
    ),
    Row(
        name="model call: scripted",
        figure="model.scripted_call_ms",
        floor="model.baseline_take_ms",
        goal=0.5,
        kind="max",
    ),
    Row(
        name="model call: local HTTP server",
        figure="model.http_local_call_ms",
        floor="model.http_raw_post_ms",
        goal=2.0,
        kind="above",
    ),
    Row(
        name="attribute loop vs plain exec",
        figure="sandbox.attr_300k_sandbox_ms",
        floor="sandbox.attr_300k_plain_ms",
        goal=2.0,
    ),
    Row(
        name="bridge: host RSS after abuse",
        figure="abuse.rss_after_mib",
        floor="abuse.rss_baseline_mib",
        goal=1.05,
        unit="MiB",
    ),
)


def _figure(results: dict[str, Any], path: str | None) -> float | None:
    if path is None:
        return None
    module, _, key = path.partition(".")
    value = results.get(module, {}).get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def issue_38_table(results: dict[str, Any], *, ran: set[str]) -> str:
    """The issue-38 rows as a one-screen table: figure, floor, ratio (or excess), goal, and whether it is met."""
    lines = [
        "issue 38: fast where a user waits (floors measured in the same run)",
        f"{'figure':40} {'now':>10} {'floor':>10} {'vs floor':>10} {'goal':>10}  ok",
    ]
    for row in ISSUE_38:
        value, floor = _figure(results, row.figure), _figure(results, row.floor)
        modules = {row.figure.partition(".")[0]} | ({row.floor.partition(".")[0]} if row.floor else set())
        stale = "" if modules <= ran else "  old"
        if value is None:
            lines.append(f"{row.name:40} {'n/a':>10} {'':>10} {'':>10} {'':>10}  -{stale}")
            continue
        shown_floor = f"{floor:.3g} {row.unit}" if floor is not None else "n/a"
        if row.kind == "ratio":
            versus = f"{value / floor:.2f}x" if floor else "n/a"
            met = floor is not None and value / floor <= row.goal
            goal = f"<= {row.goal:g}x"
        elif row.kind == "above":
            versus = f"+{value - floor:.3g} {row.unit}" if floor is not None else "n/a"
            met = floor is not None and value - floor <= row.goal
            goal = f"+{row.goal:g} {row.unit}"
        else:
            versus = f"{value / floor:.2f}x" if floor else ""
            met = value <= row.goal
            goal = f"<= {row.goal:g} {row.unit}"
        lines.append(
            f"{row.name:40} {f'{value:.3g} {row.unit}':>10} {shown_floor:>10} {versus:>10} {goal:>10}  "
            f"{'yes' if met else 'NO'}{stale}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
