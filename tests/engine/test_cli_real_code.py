"""``codeact run`` end to end on model replies that use what real model code uses under the policy.

The scripted model answers the way models write: prose, a fenced block with ``from m import *``, a
class with private state, ``match``, ``except*`` and a ``__main__`` block; the next round uses the
variables; the subprocess sandbox runs it with the RestrictedPython policy on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CODEACT = str(Path(sys.executable).parent / "codeact")

ROUND_1 = """I'll set up a small ledger and classify the entries.

```python
from math import *
from collections import *


class Ledger:
    def __init__(self):
        self._entries = []

    def _check(self, amount):
        if not isfinite(amount):
            raise ValueError("amount must be finite")

    def add(self, amount):
        self._check(amount)
        self._entries.append(amount)

    @property
    def total(self):
        return fsum(self._entries)


def kind(x):
    match x:
        case 0:
            return "zero"
        case int() | float() if x < 0:
            return "debit"
        case _:
            return "credit"


ledger = Ledger()
for amount in (120.5, -20.25, 0, 75):
    ledger.add(amount)
kinds = Counter(kind(a) for a in ledger._entries)

try:
    raise ExceptionGroup("checks", [ValueError("late"), KeyError("missing")])
except* ValueError as group:
    problems = len(group.exceptions)
except* KeyError:
    problems_key = 1

if __name__ == "__main__":
    print(f"total={ledger.total:.2f} kinds={sorted(kinds.items())} problems={problems}")

total = ledger.total
summary = dict(kinds)
```
"""

ROUND_2 = "Done.\n```python\nsystem.finish(f\"{total:.2f} {summary['credit']} credits\")\n```"


def test_run_with_real_model_code_under_the_policy(tmp_path: Path) -> None:
    (tmp_path / "replies.yaml").write_text(json.dumps([ROUND_1, ROUND_2]))
    bp = tmp_path / "agent.yaml"
    bp.write_text(
        "version: codeact.agent/v1\nextend: codeact-base\nid: ledger\n"
        "model: {provider: scripted, model: scripted/replies.yaml}\n"
        "workflow: {maxTurns: 4, codeact: {thought: 'off'}}\n"
    )
    env = {**os.environ, "CODEACT_HOME": str(tmp_path / "home"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("CODEACT_MODEL", None)
    done = subprocess.run(
        [CODEACT, "run", str(bp), "--input", "balance?", "--store", f"sqlite:///{tmp_path / 's.db'}", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    outputs = [e for e in events if e.get("stdout")]
    expected = "total=175.25 kinds=[('credit', 2), ('debit', 1), ('zero', 1)] problems=1\n"
    assert [e["stdout"] for e in outputs] == [expected]
    assert "175.25 2 credits" in json.dumps(events[-1])
