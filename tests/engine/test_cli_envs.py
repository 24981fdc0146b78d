"""Real model code with declared packages, end to end through the installed ``codeact`` script.

A blueprint declares ``sandbox: {preset: datascience}``; a scripted model writes the code real
models write (prose around fenced blocks, numpy / sympy / pandas / matplotlib, a helper function,
a chart shown with ``plt.show()`` and one left open); ``codeact run`` and ``codeact exec
--blueprint`` run it on both backends. The environments live in the stable cache
(``~/.cache/codeact/envs`` or ``$CODEACT_ENV_CACHE``): the first run builds them, later runs hit it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

CODEACT = str(Path(sys.executable).parent / "codeact")
PNG = b"\x89PNG\r\n\x1a\n"

ROUND_1 = """I'll start with the maths: solve the quadratic symbolically and check it numerically.

```python
import numpy as np
import sympy as sp

x = sp.symbols("x")
roots = [int(r) for r in sp.solve(sp.Eq(x**2 - 5*x + 6, 0), x)]
print("roots:", roots)

def mean_square(values):
    arr = np.asarray(values, dtype=float)
    return float((arr ** 2).mean())

ms = mean_square(roots)
print(f"mean square of the roots: {ms}")
```
"""

ROUND_2 = """Now a small table and a chart of it.

```python
import pandas as pd
import matplotlib.pyplot as plt

sales = pd.DataFrame({"month": ["jan", "feb", "mar"], "units": [12, 30, 21]})
best = sales.loc[sales["units"].idxmax(), "month"]
total = int(sales["units"].sum())
sales.to_csv("outputs/sales.csv", index=False)

fig, ax = plt.subplots()
ax.bar(sales["month"], sales["units"])
ax.set_title("Units per month")
plt.show()

plt.figure()
plt.plot([1, 2, 3], [ms, ms * 2, ms * 3])
print(best, total)
```
"""

ROUND_3 = """Everything is computed.

```python
system.finish(f"best month {best}, {total} units, roots {roots}")
```
"""


def _codeact(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CODEACT, *args], capture_output=True, text=True, check=False, timeout=timeout, env={**os.environ}
    )


def _blueprint(tmp_path: Path, sandbox: str) -> Path:
    replies = tmp_path / "replies.yaml"
    replies.write_text(json.dumps([ROUND_1, ROUND_2, ROUND_3]))
    path = tmp_path / "agent.yaml"
    path.write_text(
        "version: codeact.agent/v1\nextend: codeact-base\nid: analyst\n"
        f"model: {{provider: scripted, model: scripted/{replies}}}\n"
        "workflow: {maxTurns: 5, codeact: {thought: 'off'}}\n"
        f"sandbox: {sandbox}\n"
    )
    return path


@pytest.fixture(params=["subprocess", "docker"])
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "docker":
        request.getfixturevalue("docker_client")
    return str(request.param)


def _sandbox_block(backend: str) -> str:
    # The Docker variant selects its backend the ai4j way: `provider: docker` (issue 11).
    return (
        "{preset: datascience}" if backend == "subprocess" else "{enabled: true, provider: docker, preset: datascience}"
    )


def test_run_with_the_datascience_preset(tmp_path: Path, backend: str) -> None:
    bp = _blueprint(tmp_path, _sandbox_block(backend))
    store = f"sqlite:///{tmp_path / 's.db'}"
    out_dir = tmp_path / "artifacts"
    run = _codeact(
        "run", str(bp), "--input", "analyse the sales", "--allow-sandbox-declaration", "--store", store,
        "--session", "S1", "--json", "--artifacts", str(out_dir),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    events = [json.loads(line) for line in run.stdout.splitlines()]
    completed = [e for e in events if e["type"] == "code.completed"]
    assert [e["status"] for e in completed] == ["ok", "ok", "ok"], completed
    assert "roots: [2, 3]" in completed[0]["stdout"]
    assert "mean square of the roots: 6.5" in completed[0]["stdout"]
    assert "mar 63" not in completed[1]["stdout"] and "feb 63" in completed[1]["stdout"]
    assert events[-1]["type"] == "run.completed"
    assert events[-1]["answer"] == "best month feb, 63 units, roots [2, 3]"

    created = [e for e in events if e["type"] == "artifact.created"]
    assert [(e["round"], e["name"], e["mime"]) for e in created] == [
        (2, "figure-1.png", "image/png"),
        (2, "figure-2.png", "image/png"),
        (2, "sales.csv", "text/csv"),
    ]
    assert all(e["size"] > 0 and e["refused"] is None for e in created)
    assert created[0]["uri"] == "codeact://sessions/S1/rounds/2/artifacts/figure-1.png"

    chart = out_dir / "figure-1.png"
    assert chart.read_bytes().startswith(PNG) and chart.stat().st_size == created[0]["size"]
    assert (out_dir / "sales.csv").read_text() == "month,units\njan,12\nfeb,30\nmar,21\n"

    # The model was told which files it produced.
    evaluations = [
        e["segment"]["content"]
        for e in events
        if e["type"] == "segment.created" and e["segment"].get("kind") == "Evaluation"
    ]
    produced = [
        t for t in evaluations if "Files produced in outputs/ (returned to the user): figure-1.png (image/png" in t
    ]
    assert len(produced) == 1 and "sales.csv (text/csv, 33 bytes)" in produced[0]

    shown = _codeact("sessions", "show", "S1", "--store", store, "--json")
    rounds: list[dict[str, Any]] = json.loads(shown.stdout)["rounds"]
    assert [a["name"] for a in rounds[1]["artifacts"]] == ["figure-1.png", "figure-2.png", "sales.csv"]
    human = _codeact("sessions", "show", "S1", "--store", store, "--artifacts", str(tmp_path / "again"))
    assert "figure-1.png (image/png," in human.stdout
    assert (tmp_path / "again" / "figure-2.png").read_bytes().startswith(PNG)

    # Replay rebuilds the same sandbox, packages included (from the environment cache).
    replay = _codeact("replay", "S1", "--store", store)
    assert replay.returncode == 0, replay.stderr
    assert replay.stdout.splitlines()[-1] == "replayed 3 round(s) of S1: 3 match, 0 mismatch"


def test_exec_with_blueprint_runs_the_declared_sandbox(tmp_path: Path, backend: str) -> None:
    bp = _blueprint(tmp_path, _sandbox_block(backend))
    code = tmp_path / "analysis.py"
    code.write_text(
        "import numpy as np\nimport pandas as pd\nimport sympy\nimport matplotlib.pyplot as plt\n"
        "df = pd.DataFrame({'v': np.arange(5)})\n"
        "print(int(df['v'].sum()), sympy.factorint(360))\n"
        "plt.plot(df['v'])\nplt.savefig('outputs/line.png')\n"
    )
    refused = _codeact("exec", str(code), "--blueprint", str(bp))
    assert refused.returncode == 2
    assert "blueprint.sandbox.unsupported" in refused.stderr

    out_dir = tmp_path / "out"
    ran = _codeact(
        "exec", str(code), "--blueprint", str(bp), "--allow-sandbox-declaration", "--json", "--artifacts", str(out_dir)
    )
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert result["backend"] == backend
    assert result["stdout"] == "10 {2: 3, 3: 2, 5: 1}\n"
    # savefig wrote line.png; the figure was still open at the end, so it is saved as well.
    assert [(a["name"], a["mime"]) for a in result["artifacts"]] == [
        ("figure-1.png", "image/png"),
        ("line.png", "image/png"),
    ]
    assert (out_dir / "line.png").read_bytes().startswith(PNG)


def test_exec_session_records_artifacts(tmp_path: Path) -> None:
    bp = _blueprint(tmp_path, "{preset: datascience}")
    store = f"sqlite:///{tmp_path / 's.db'}"
    first = tmp_path / "one.py"
    first.write_text("import numpy as np\nvalues = np.linspace(0, 1, 3).tolist()\n")
    second = tmp_path / "two.py"
    second.write_text("import json\nwith_total = sum(values)\n")
    for path in (first, second):
        ran = _codeact(
            "exec", str(path), "--blueprint", str(bp), "--allow-sandbox-declaration", "--session", "E1", "--store",
            store,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr
    shown = json.loads(_codeact("sessions", "show", "E1", "--store", store, "--json").stdout)
    assert shown["variables"]["with_total"] == 1.5


def test_unknown_package_fails_the_run_with_one_clear_error(tmp_path: Path) -> None:
    bp = _blueprint(tmp_path, "{packages: [numpy, codeact-no-such-package-7f3a]}")
    run = _codeact("run", str(bp), "--input", "x", "--allow-sandbox-declaration", "--store", f"sqlite:///{tmp_path}/s")
    assert run.returncode == 2
    assert (
        "Sandbox environment error [sandbox.env.build]: cannot install package 'codeact-no-such-package-7f3a' "
        "into the sandbox environment for the host: pip says: " in run.stderr
    )


def test_unknown_provider_is_refused_never_a_silent_fallback(tmp_path: Path) -> None:
    bp = _blueprint(tmp_path, "{enabled: true, provider: remote-vm}")
    run = _codeact("run", str(bp), "--input", "x", "--allow-sandbox-declaration", "--store", f"sqlite:///{tmp_path}/s")
    assert run.returncode == 2
    assert "Blueprint factory error [blueprint.sandbox.provider.unknown]: sandbox.provider 'remote-vm' is not a " in (
        run.stderr
    )
    conflict = _blueprint(tmp_path, "{provider: docker, backend: subprocess}")
    run = _codeact("exec", str(tmp_path / "replies.yaml"), "--blueprint", str(conflict), "--allow-sandbox-declaration")
    assert run.returncode == 2
    assert "blueprint.sandbox.provider.conflict" in run.stderr


def test_an_artifact_over_the_cap_is_refused_with_a_note(tmp_path: Path) -> None:
    bp = _blueprint(tmp_path, "{preset: datascience, limits: {artifactBytes: 1000}}")
    code = tmp_path / "big.py"
    code.write_text(
        "import pandas as pd\n"
        "pd.DataFrame({'n': range(2000)}).to_csv('outputs/big.csv')\n"
        "pd.DataFrame({'n': [1]}).to_csv('outputs/small.csv')\n"
    )
    ran = _codeact(
        "exec", str(code), "--blueprint", str(bp), "--allow-sandbox-declaration", "--artifacts", str(tmp_path)
    )
    assert ran.returncode == 0, ran.stderr
    assert "artifact refused: big.csv (" in ran.stderr and "bytes is over the 1000-byte limit per file)" in ran.stderr
    assert "artifact: small.csv (text/csv, " in ran.stderr
    assert (tmp_path / "small.csv").exists() and not (tmp_path / "big.csv").exists()
