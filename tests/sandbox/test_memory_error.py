"""A round whose variables do not fit in memory reports ``MemoryError`` at its line, not a crash.

Allocating 200 MB succeeds under the subprocess sandbox's address-space limit, but encoding it
to save it does not: that used to end as ``SandboxCrashed: bad execute request: MemoryError``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CODEACT = str(Path(sys.executable).with_name("codeact"))

LINES = {"bytearray": 2, "list": 3}
CASES = {
    "bytearray": "x = 1\nbig = bytearray(200 * 1024 * 1024)\nprint('done')\n",
    "list": "x = 1\nrows = 0\nbig = [b'x' * 1000 for _ in range(200_000)]\nprint('done')\n",
}


@pytest.mark.parametrize("isolation", ["bwrap", "process"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_variables_too_big_to_save_report_memory_error_at_their_line(tmp_path: Path, isolation: str, case: str) -> None:
    script = tmp_path / "round.py"
    script.write_text(CASES[case])
    run = subprocess.run(
        [CODEACT, "exec", str(script), "--json", "--isolation", isolation, "--timeout", "60"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert "Unknown child process" not in run.stderr
    result = json.loads(run.stdout)
    error = result["error"]
    assert result["status"] == "error", result
    assert error["type"] == "MemoryError"
    assert error["line"] == LINES[case]
    assert "big" in error["message"]
    assert result["stdout"] == "done\n"
    assert "x" in result["variables"]  # the other variables are still saved
    assert [u["name"] for u in result["uncaptured"]] == ["big"]
