"""Values of any type live across rounds (issue 27 item 11), end to end through ``codeact run``.

A blueprint declares ``sandbox: {preset: datascience}``; a scripted model writes what real models
write: a DataFrame, an array and sympy symbols in one turn, ``solve(eq, d)`` on them in the next.
Within a run the warm sandbox keeps the namespace (also a value no codec carries, a generator); the
store keeps a tagged snapshot (numpy bytes, pandas columns, sympy ``srepr``) that a resumed run in a
new process restores, on the same backend and on Docker (a fresh sandbox elsewhere); replay matches.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

CODEACT = str(Path(sys.executable).parent / "codeact")

MAKE = """First I'll set up the data and the symbols.

```python
import numpy as np
import pandas as pd
from sympy import symbols, Eq, solve

a = np.arange(6).reshape(2, 3)
df = pd.DataFrame({"city": ["Oslo", "Lima", "Pune"], "temp": [4.5, 19.25, 31.0]})
x, d = symbols('x d')
eq = Eq(x**2 - d, 0)
total = a.sum()
squares = (i * i for i in range(5))
print(a.shape, len(df), eq)
```
"""

USE = """Now I use what I made in the previous step.

```python
print(a * 2)
print(df.loc[df["temp"].idxmax(), "city"], df["temp"].mean())
print(solve(eq, d), solve(eq, x))
print(type(total).__name__, total)
print(next(squares), next(squares))
```
"""

RESUME = """Continuing the analysis from before.

```python
print(a.T.tolist(), a.dtype)
print(df.sort_values("temp").city.tolist())
print(solve(eq.subs(d, 9), x), type(total).__name__)
```
"""

FINISH = """Done.

```python
system.finish("done")
```
"""


def _codeact(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CODEACT, *args], capture_output=True, text=True, check=False, timeout=timeout, env={**os.environ}
    )


def _blueprint(tmp_path: Path, name: str, replies: list[str]) -> Path:
    path = tmp_path / f"{name}.replies.json"
    path.write_text(json.dumps(replies))
    bp = tmp_path / f"{name}.yaml"
    bp.write_text(
        "version: codeact.agent/v1\nextend: codeact-base\nid: analyst\n"
        f"model: {{provider: scripted, model: scripted/{path}}}\n"
        "workflow: {maxTurns: 5, codeact: {thought: 'off'}}\n"
        "sandbox: {preset: datascience}\n"
    )
    return bp


def _run(bp: Path, store: str, *extra: str) -> list[dict[str, Any]]:
    run = _codeact(
        "run", str(bp), "--input", "analyse", "--allow-sandbox-declaration", "--store", store, "--session", "V1",
        "--json", *extra,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    return [json.loads(line) for line in run.stdout.splitlines()]


def _completed(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "code.completed"]


def test_values_live_across_rounds_resume_and_backends(tmp_path: Path, docker_client: Any) -> None:
    store = f"sqlite:///{tmp_path / 's.db'}"
    events = _run(_blueprint(tmp_path, "first", [MAKE, USE, FINISH]), store)
    first, second, _ = _completed(events)
    assert first["status"] == "ok", first
    assert first["stdout"] == "(2, 3) 3 Eq(-d + x**2, 0)\n"
    assert second["status"] == "ok", second
    assert second["stdout"] == ("[[ 0  2  4]\n [ 6  8 10]]\nPune 18.25\n[x**2] [-sqrt(d), sqrt(d)]\nint64 15\n0 1\n")
    # The generator has no snapshot: it lives in the run's sandbox only, and says so.
    state = next(e for e in events if e["type"] == "state.updated" and e["round"] == 1)
    assert [(u["name"], u.get("live")) for u in state["uncaptured"]] == [("squares", True)]
    assert {"a", "df", "x", "d", "eq", "total"} <= set(state["changed"])
    assert state["changed"]["df"]["$type"] == "dataframe" and state["changed"]["a"]["class"] == "ndarray"

    # A resumed run in a new process (a fresh sandbox) restores the snapshot from the store.
    resumed = _run(_blueprint(tmp_path, "again", [RESUME, FINISH]), store)
    again = _completed(resumed)[0]
    assert again["status"] == "ok", again
    assert again["stdout"] == "[[0, 3], [1, 4], [2, 5]] int64\n['Oslo', 'Lima', 'Pune']\n[-3, 3] int64\n"

    # ...and so does a sandbox of another backend (a container, full CPython, the image's packages).
    elsewhere = _completed(_run(_blueprint(tmp_path, "docker", [RESUME, FINISH]), store, "--sandbox", "docker"))[0]
    assert elsewhere["status"] == "ok", elsewhere
    assert elsewhere["stdout"] == again["stdout"]

    replay = _codeact("replay", "V1", "--store", store)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert replay.stdout.splitlines()[-1] == "replayed 7 round(s) of V1: 7 match, 0 mismatch"
