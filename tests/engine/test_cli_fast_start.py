"""Fast to the first answer (issue 35): ``codeact run`` imports litellm only for a route that needs it.

A scripted model, an OpenAI-compatible server at ``--base-url`` and the configuration errors that need no
model (an unknown provider, a missing key) never import litellm (nor the OpenAI SDK); a route that does
need it says so on stderr while the import takes long. Each run is a real ``codeact run`` process; which
modules it imported is written at its exit.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine.openai_server import OpenAIServer

REPO = Path(__file__).resolve().parents[2]

# `codeact run ...` in a fresh interpreter that writes, at exit, the litellm and openai modules it imported.
_RUN = """
import atexit, sys
out = sys.argv.pop(1)
def record():
    with open(out, "w") as f:
        f.write("\\n".join(sorted(m for m in sys.modules if m.split(".")[0] in ("litellm", "openai"))))
atexit.register(record)
from codeact.engine.cli import main
sys.argv[0] = "codeact"
main()
"""

REPLY = 'Thought: nothing to look up.\n```python\nsystem.finish("hello there")\n```\n'


def _blueprint(folder: Path, model: str) -> Path:
    (folder / "replies.yaml").write_text("- |\n" + "".join(f"  {line}\n" for line in REPLY.splitlines()))
    path = folder / "agent.yaml"
    path.write_text(
        "version: codeact.agent/v1\nid: quick\nname: Quick\n"
        f"model:\n{model}\n"
        "instructions:\n  developer: Answer in one round.\n"
        "toolkits:\n  - ref: system\n"
        "workflow:\n  mode: codeact\n  maxTurns: 2\n  codeact:\n    thought: inline\n"
    )
    return path


def _run(
    folder: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    modules = folder / "modules.txt"
    environ = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    environ.update({"PYTHONPATH": str(REPO), "HOME": str(folder), **(env or {})})
    out = subprocess.run(
        [sys.executable, "-c", _RUN, str(modules), "run", *args, "--store", f"sqlite:///{folder / 's.db'}",
         "--input", "Say hello."],
        env=environ, capture_output=True, text=True, timeout=300, cwd=folder,
    )  # fmt: skip
    return out, [m for m in modules.read_text().splitlines() if m]


def test_a_scripted_run_never_imports_litellm(tmp_path: Path) -> None:
    blueprint = _blueprint(tmp_path, "  provider: scripted\n  model: scripted/replies.yaml")
    out, modules = _run(tmp_path, str(blueprint))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "hello there"
    assert modules == []


def test_a_base_url_run_never_imports_litellm(tmp_path: Path, openai_server: OpenAIServer) -> None:
    openai_server.push(REPLY)
    blueprint = _blueprint(tmp_path, "  provider: openai-compatible\n  model: qwen2.5-coder")
    out, modules = _run(tmp_path, str(blueprint), "--base-url", openai_server.base_url)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "hello there"
    assert modules == []
    (request,) = openai_server.requests
    assert request.path == "/v1/chat/completions" and request.body["model"] == "qwen2.5-coder"


@pytest.mark.parametrize(
    ("model", "message"),
    [
        pytest.param(
            "  provider: opnai\n  model: gpt-4.1-mini",
            "model.provider 'opnai' is not a provider codeact can call; did you mean 'openai'?",
            id="unknown-provider",
        ),
        pytest.param(
            "  provider: openai\n  model: gpt-4.1-mini",
            "[model.auth] model 'openai/gpt-4.1-mini' needs an API key and OPENAI_API_KEY is not set "
            "(no request was sent): set OPENAI_API_KEY or pass --profile NAME",
            id="missing-key",
        ),
    ],
)
def test_a_configuration_error_never_imports_litellm(tmp_path: Path, model: str, message: str) -> None:
    out, modules = _run(tmp_path, str(_blueprint(tmp_path, model)))
    assert out.returncode == 2, out.stdout + out.stderr
    assert message in out.stdout + out.stderr
    assert modules == []


def test_a_slow_litellm_import_is_shown_on_stderr(tmp_path: Path, openai_server: OpenAIServer) -> None:
    # hosted_vllm goes through litellm; CODEACT_PROGRESS_AFTER_S=0 makes every import "slow" (one second by default)
    openai_server.push(REPLY)
    blueprint = _blueprint(tmp_path, "  provider: hosted_vllm\n  model: hosted_vllm/tiny")
    out, modules = _run(tmp_path, str(blueprint), "--base-url", openai_server.base_url,
                        env={"CODEACT_PROGRESS_AFTER_S": "0"})  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "hello there"
    assert "litellm" in modules
    lines = [line for line in out.stderr.splitlines() if line.startswith("[codeact]")]
    assert lines[0] == "[codeact] loading the model client (litellm)..."
    assert lines[1].startswith("[codeact] loading the model client (litellm): done in ") and lines[1].endswith(" s")
