"""A hosted model without its API key: an authentication error at once, through ``codeact run``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
CODEACT = str(Path(sys.executable).with_name("codeact"))


def test_codeact_run_without_the_key_fails_once_naming_the_variable(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["HOME"] = str(tmp_path)  # no profiles file
    out = subprocess.run(
        [CODEACT, "run", str(REPO / "examples/devops/agent.yaml"), "--toolkit",
         str(REPO / "examples/devops/toolkit.py") + ":DevOps", "--model", "openai/gpt-4.1-mini",
         "--store", f"sqlite:///{tmp_path}/s.db", "--input", "Which login requirements of P-123 are open?"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 2, out.stdout + out.stderr
    text = out.stdout + out.stderr
    assert (
        "[model.auth] model 'openai/gpt-4.1-mini' needs an API key and OPENAI_API_KEY is not set (no request was sent)"
        in text
    )
    assert text.rstrip().endswith("set OPENAI_API_KEY or pass --profile NAME")
    assert "attempts" not in text  # one attempt: a missing key is never retried
