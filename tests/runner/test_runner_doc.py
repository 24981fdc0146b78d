"""docs/runner.md's example runs as written (offline: a scripted model, a SQLite store)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_documented_example_runs(tmp_path: Path) -> None:
    text = (REPO / "docs" / "runner.md").read_text()
    (block,) = [m.group(1) for m in re.finditer(r"^```python\n(.*?)^```", text, re.M | re.S)]
    script = tmp_path / "example.py"
    script.write_text(block)
    env = {**os.environ, "PYTHONPATH": str(REPO), "CODEACT_HOME": str(tmp_path / "home")}
    out = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "hello True"
    assert lines[1] == "1 state.updated" and lines[-1].endswith(" run.completed")
    assert any(line.endswith(" message.completed") for line in lines)
