"""``codeact run ... --trace FILE`` end to end through the installed script; tokens in ``sessions show``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from codeact.engine.cli import app
from tests.engine.test_cli_run import DEMO, DEMO_ANSWER, DEMO_INPUT, DEVOPS

CODEACT = str(Path(sys.executable).parent / "codeact")


def test_run_writes_the_trace_as_json_lines_and_sessions_show_the_tokens(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'sessions.db'}"
    trace_file = tmp_path / "trace.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update({"CODEACT_HOME": str(tmp_path / "home"), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "COLUMNS": "120"})
    run = subprocess.run(
        [CODEACT, "run", str(DEMO / "agent.yaml"), "--toolkit", DEVOPS, "--store", store, "--session", "T"]
        + ["--trace", str(trace_file), "--input", DEMO_INPUT],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == DEMO_ANSWER

    spans = [json.loads(line) for line in trace_file.read_text().splitlines()]
    by_id = {s["context"]["span_id"]: s for s in spans}
    assert len({s["context"]["trace_id"] for s in spans}) == 1
    (root,) = [s for s in spans if s["parent_id"] is None]
    assert root["name"] == "invoke_agent devops-assistant" or root["name"].startswith("invoke_agent ")
    assert root["attributes"]["codeact.session_id"] == "T"
    assert root["attributes"]["codeact.run.status"] == "completed"
    assert root["attributes"]["gen_ai.usage.input_tokens"] > 0
    rounds = [s for s in spans if s["name"].startswith("round ")]
    assert len(rounds) == root["attributes"]["codeact.run.rounds"] == 5
    tools = [s for s in spans if s["name"].startswith("execute_tool ")]
    assert tools and all(by_id[t["parent_id"]]["name"] == "sandbox.execute" for t in tools)
    assert any(t["attributes"]["codeact.toolkit"] == "devops" for t in tools)
    assert "codeact.tool.arguments" not in tools[0]["attributes"]  # not captured unless the blueprint opts in
    models = [s for s in spans if s["attributes"].get("gen_ai.operation.name") == "chat"]
    assert len(models) >= 5 and all(by_id[m["parent_id"]]["name"].startswith("round ") for m in models)

    # sessions show, in-process (the run above went through the installed script).
    runner = CliRunner()
    shown = runner.invoke(app, ["sessions", "show", "T", "--store", store], env={"COLUMNS": "160"})
    assert shown.exit_code == 0, shown.output
    assert " out tokens" in shown.stdout and "\ntotal  " in shown.stdout
    as_json = runner.invoke(app, ["sessions", "show", "T", "--store", store, "--json"])
    usage = json.loads(as_json.stdout)["usage"]
    assert usage["input_tokens"] == root["attributes"]["gen_ai.usage.input_tokens"]
    assert usage["output_tokens"] == root["attributes"]["gen_ai.usage.output_tokens"]
