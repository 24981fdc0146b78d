"""Run every ``bench/bench_*.py`` module's ``run()`` and merge the figures into results.json.

``python -m bench [NAME ...]`` runs only the named modules (``sandbox`` for bench_sandbox.py).
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import sys
import time
from pathlib import Path

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
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
