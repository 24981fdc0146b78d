"""The README's and docs' commands and examples run as written (kept true by this test).

Every fenced ``bash``/``sh``/``python`` block of README.md and docs/*.md is either run here or
listed in ``NOT_RUN`` with the reason; a block that is neither fails the test, so a new example
cannot slip in untested.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent
_FENCE = re.compile(r"^[ ]*```(\w+)([^\n]*)\n(.*?)^[ ]*```", re.M | re.S)

# (file, first line of the block or of the command) -> why it is not run here. Keep it short.
NOT_RUN = {
    ("README.md", "make test"): "runs this very test suite",
    (
        "models.md",
        "codeact models pull qwen2.5-coder-1.5b",
    ): "a 1.1 GB download (make model-pull; tests/engine/model/test_local_models.py pulls built wheels)",
    (
        "models.md",
        "codeact run examples/devops/agent.yaml --toolkit examples/devops/toolkit.py:DevOps   "
        '--model local/qwen2.5-coder-1.5b --input "Which login requirements of project P-123 are still open? ..."',
    ): "a real local model, minutes (tests/real_model, make test-real-model)",
    ("models.md", "make demo-local"): "a real local model, minutes (scripts/demo-local.sh)",
    (
        "models.md",
        "llama-server -m qwen2.5-coder-1.5b-instruct-q4_k_m.gguf -c 8192 -t 2 --port 8080",
    ): "another server program, not installed here",
    (
        "models.md",
        'codeact run agent.yaml --model openai/qwen2.5-coder-1.5b --base-url http://127.0.0.1:8080/v1 -i "..."',
    ): "needs that server running",
    (
        "models.md",
        "vllm serve Qwen/Qwen2.5-Coder-7B-Instruct --port 8000",
    ): "another server program, not installed here",
    (
        "models.md",
        "codeact run agent.yaml --model openai/Qwen/Qwen2.5-Coder-7B-Instruct "
        '--base-url http://127.0.0.1:8000/v1 -i "..."',
    ): "needs that server running",
    ("models.md", "ollama pull qwen2.5-coder:1.5b"): "another server program, not installed here",
    ("models.md", 'codeact run agent.yaml --model ollama/qwen2.5-coder:1.5b -i "..."'): "needs that server running",
    ("README.md", 'export PATH="$PWD/.venv/bin:$PATH"'): "the tests' PATH starts with the venv's bin already",
    ("README.md", "make dist"): "tests/packaging/test_install.py runs it (into its own directory)",
    (
        "README.md",
        "pip install dist/codeact-0.1.0-py3-none-any.whl",
    ): "tests/packaging/test_install.py installs the wheel into a fresh venv",
    ("README.md", "codeact sandbox gc"): "acts on the shared Docker engine (tests/sandbox cover gc)",
    ("README.md", "from codeact import Agent, operation, toolkit"): "the import line alone (the toolkit example runs)",
    ("README.md", "from codeact import Agent"): "needs a model; docs/python-api.md's full example runs instead",
    ("python-api.md", "from codeact import Agent, operation, toolkit"): "run by tests/engine/test_python_api.py",
    ("python-api.md", "# needs a model server: see the example above"): "a fragment of that example (async form)",
    ("python-api.md", "result = agent.run_sync("): "a fragment (test_agent_api.py runs it)",
    (
        "python-api.md",
        'state = await agent.state(result.session_id)  # {"n": 3, ...}',
    ): "a fragment; tests/engine/test_agent_api.py updates state between two runs",
    ("python-api.md", "from codeact import RunConfig"): "a fragment (test_agent_api.py runs it)",
    ("python-api.md", "import base64"): "run by tests/engine/test_input_files.py (with an agent and the files)",
    ("python-api.md", "from codeact.engine.agent import Hook, HookResult"): "a fragment (test_agent_api.py runs it)",
    ("python-api.md", "from codeact.toolkits import operation, toolkit"): "a fragment (test_hook_api.py runs it)",
    ("python-api.md", "from pydantic import BaseModel"): "run by tests/engine/test_output_schema.py (with a model)",
    ("design.md", "class RpcHandler(Protocol):"): "an interface outline, not a program",
    (
        "flow.md",
        "from codeact.engine.flow import LoopAgent, LoopMode, ParallelAgent, RoutingAgent, SequentialAgent, Step",
    ): ("a fragment over agents built elsewhere (tests/flow/test_kinds.py runs each kind)"),
    ("flow.md", "from codeact.engine.flow import FlowAgent"): "tests/flow/test_blueprint.py builds the example's flow",
    (
        "flow.md",
        "from codeact.engine.flow import ConditionalAgent, SequentialAgent, Step",
    ): "run by tests/flow/test_branch_and_pause.py (with scripted agents)",
    (
        "flow.md",
        "from codeact.engine.flow import AgentTool, AgentToolkit",
    ): "a fragment (tests/flow/test_codeact_steps.py)",
    ("kimi-agents.md", "codeact validate agent.yaml"): "run on the doc's example by test_kimi_agents.py",
    ("kimi-agents.md", 'codeact run agent.yaml --model openai/gpt-4.1-mini --input "..."'): "needs a model",
    ("runner.md", "import asyncio"): "run by tests/runner/test_runner_doc.py",
    ("runner.md", "class RunnerPermissions(BaseModel):"): "the protocol's model, shown (test_entities.py checks it)",
    (
        "runner.md",
        'platform_api.request_action(action="message.edit", target={"message_id": "m-1"}, payload={"text": "Done."})',
    ): "code the model writes in a run (tests/service/test_platform_actions.py runs it)",
    ("sandbox-security.md", 'codeact run agent.yaml --input "..." --sandbox docker --runtime gvisor'): "needs a model",
    (
        "sandbox-security.md",
        "from codeact.sandbox import DockerSandbox",
    ): "a fragment (test_gvisor.py)",
    ("sandbox-security.md", "import dataclasses"): "escapes the policy refuses (tests/sandbox/test_match_guard.py)",
    ("mcp.md", "codeact mcp serve --toolkit examples/devops/toolkit.py:DevOps"): "a server (test_mcp_serve.py)",
    (
        "mcp.md",
        "codeact mcp serve --toolkit examples/devops/toolkit.py:DevOps --port 8931",
    ): "a server (test_mcp_serve.py)",
    ("README.md", "codeact mcp serve --toolkit examples/devops/toolkit.py:DevOps"): "a server (test_mcp_serve.py)",
    ("scaling.md", "pip install 'codeact[queue]'"): "installs from PyPI; make install already has celery",
    (
        "scaling.md",
        "codeact worker --queue redis://redis.internal:6379/0 --concurrency 8 --toolkit mycompany.devops:DevOps",
    ): "runs until stopped (tests/queue start real workers)",
    ("scaling.md", 'codeact run agent.yaml --input "Deploy the API" --queue redis://redis.internal:6379/0'): "needs "
    "a worker and a model (tests/queue)",
    (
        "scaling.md",
        'codeact run agent.yaml --input "Deploy the API" --queue redis://redis.internal:6379/0 --detach',
    ): "needs a worker (tests/queue)",
    (
        "scaling.md",
        "from codeact.engine.queue import submit",
    ): "needs a Redis and workers (tests/queue/test_queue_workers.py)",
    ("sandbox.md", "import matplotlib.pyplot as plt"): "sandbox code the model writes (tests/engine/test_cli_envs.py)",
    (
        "sandbox.md",
        "from codeact.sandbox import Limits, SubprocessSandbox",
    ): "top-level await (test_env.py)",
    (
        "telemetry.md",
        "from codeact.engine import telemetry",
    ): "a fragment (tests/engine/telemetry/test_spans.py runs it)",
    (
        "eval.md",
        "codeact eval --suite multitool --model openai/gpt-4.1-mini --modes all --concurrency 8",
    ): "needs a model provider's key",
    (
        "service.md",
        "from codeact.engine.runner import BlueprintRunner",
    ): "an outline; tests/service build the same state",
    ("README.md", "export CODEACT_API_TOKENS=demo-token-123"): "run by tests/service/test_readme_serve.py",
    ("README.md", "codeact serve --blueprints examples/serve/agent.yaml --port 8765 &"): "test_readme_serve.py",
    (
        "README.md",
        'curl -sN http://127.0.0.1:8765/v1/runs -H "Authorization: Bearer demo-token-123"   '
        '-H "Accept: text/event-stream" -d @examples/serve/run.json',
    ): "its output is checked by tests/service/test_readme_serve.py",
}
# Commands run through something equivalent here; the reason says what.
INSTEAD = {"make demo": (["bash", "scripts/demo.sh"], "make demo = make install (done) + scripts/demo.sh")}


def _blocks() -> list[tuple[str, str, str]]:
    found = []
    for doc in DOCS:
        for match in _FENCE.finditer(doc.read_text()):
            if match.group(1) in ("bash", "sh", "python"):
                found.append((doc.name, match.group(1), match.group(3)))
    return found


def _commands(block: str) -> list[str]:
    """Shell lines of a block: continuations joined, comments (after two spaces or at the start) dropped."""
    lines, current = [], ""
    for raw in block.splitlines():
        current += raw.rstrip("\\").strip() + " " if raw.rstrip().endswith("\\") else raw
        if raw.rstrip().endswith("\\"):
            continue
        line = re.split(r"(?:^|\s{2,})#", current, maxsplit=1)[0].strip()
        current = ""
        if line:
            lines.append(line)
    return lines


def _first_line(block: str) -> str:
    return next(line.strip() for line in block.splitlines() if line.strip())


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    clean = {k: v for k, v in os.environ.items() if k not in ("CODEACT_MODEL", "CODEACT_STORE", "CODEACT_PROFILE")}
    return {**clean, "CODEACT_HOME": str(home), "PATH": f"{BIN}:{clean.get('PATH', '')}", "PYTHONPATH": str(REPO)}


def test_every_example_is_run_or_has_a_reason() -> None:
    unaccounted = []
    for doc, lang, block in _blocks():
        if lang == "python":
            if (doc, _first_line(block)) not in NOT_RUN and (doc, "python") not in RUN_PYTHON:
                unaccounted.append((doc, _first_line(block)))
        else:
            for command in _commands(block):
                known = (doc, command) in NOT_RUN or command in INSTEAD or command.startswith("codeact ")
                if not known:
                    unaccounted.append((doc, command))
    assert unaccounted == []
    used = {(d, _first_line(b)) for d, _, b in _blocks()} | {
        (d, c) for d, lang, b in _blocks() if lang != "python" for c in _commands(b)
    }
    assert sorted(set(NOT_RUN) - used) == []  # no stale reasons


RUN_PYTHON = {("README.md", "python")}


def test_readme_python_toolkit_example_runs(env: dict[str, str], tmp_path: Path) -> None:
    blocks = [b for d, lang, b in _blocks() if d == "README.md" and lang == "python"]
    runnable = [b for b in blocks if ("README.md", _first_line(b)) not in NOT_RUN]
    assert runnable, "the README's toolkit example is gone"
    for block in runnable:
        script = tmp_path / "example.py"
        script.write_text(block + "\nfrom toolkits import render_stubs\nprint(render_stubs([DevOps]))\n")
        out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert "async def get_project_info(self, project_id: str) -> dict:" in out.stdout


@pytest.mark.parametrize("doc", [d.name for d in DOCS])
def test_shell_commands_of_the_doc_run(doc: str, env: dict[str, str]) -> None:
    for name, lang, block in _blocks():
        if name != doc or lang == "python":
            continue
        for command in _commands(block):
            if (doc, command) in NOT_RUN:
                continue
            argv = INSTEAD[command][0] if command in INSTEAD else shlex.split(command)
            out = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
            assert out.returncode == 0, f"{doc}: {command}\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}"


def test_the_scripted_reply_format_example_runs(env: dict[str, str]) -> None:
    text = (REPO / "examples" / "replies" / "format.yaml").read_text()
    command = " ".join(line.lstrip("#").strip().rstrip("\\") for line in text.splitlines()[2:4])
    assert command.startswith("codeact run examples/devops/agent.yaml")
    out = subprocess.run(shlex.split(command), cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "P-123 has 2 applications.\n"


def test_design_doc_names_only_files_that_exist() -> None:
    for doc in DOCS:
        for name in re.findall(r"\b((?:docs/)?[A-Za-z_-]+\.md)\b", doc.read_text()):
            path = REPO / name if "/" in name else None
            if path is not None:
                assert path.exists(), f"{doc.name} names {name}"
            else:
                assert (REPO / name).exists() or (REPO / "docs" / name).exists() or name in ("system.md",), (
                    f"{doc.name} names {name}"
                )


RUN_PYTHON.add(("store.md", "python"))


def test_store_key_values_example_runs(tmp_path: Path) -> None:
    """docs/store.md's key-value calls, each line's value printed, against a real SQLite store."""
    (block,) = [b for d, lang, b in _blocks() if d == "store.md" and lang == "python"]
    lines = [re.split(r"\s{2,}#", line)[0].strip() for line in block.splitlines() if line.strip()]
    body = "\n".join(f"    print(repr({line}))" for line in lines)
    script = tmp_path / "kv.py"
    script.write_text(
        "import asyncio\nfrom codeact.engine.store import SQLiteStore\n\n"
        f"async def main(store):\n{body}\n\n"
        f"async def run():\n    store = SQLiteStore({str(tmp_path / 's.db')!r})\n"
        "    try:\n        await main(store)\n    finally:\n        await store.close()\n\nasyncio.run(run())\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "None",
        "b'\"refunds\"'",
        "KeyPage(keys=(), has_more=False)",
        "True",
    ]
