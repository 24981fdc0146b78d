"""Memory through real runs: the CLI (subprocess and in-process), the Python API, both store backends.

Models are fakes only: scripted reply files (written the way models reply: prose, fences, broken code)
or the local OpenAI-compatible server, whose recorded requests show the prompt the model received.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from codeact.engine.cli import app
from tests.engine.openai_server import OpenAIServer

CODEACT = str(Path(sys.executable).parent / "codeact")


pytestmark = pytest.mark.usefixtures("cli_home")  # tests/engine/conftest.py: CODEACT_HOME, cwd, env in tmp_path


def blueprint(tmp_path: Path, memory: str = "{enabled: true, scope: agent}", *, model: str = "scripted/r.json") -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(
        "version: codeact.agent/v1\nextend: codeact-base\nid: memo-agent\n"
        f"model: {{provider: scripted, model: {model}}}\n"
        "workflow: {maxTurns: 5, codeact: {thought: 'off'}}\n"
        f"session:\n  memory: {memory}\n"
    )
    return path


def script(tmp_path: Path, name: str, *replies: str) -> str:
    (tmp_path / name).write_text(json.dumps(list(replies)))
    return f"scripted/{name}"


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


# -- entity memory: remembered in round 1, recalled after a resume in a new process --------------


def test_entity_remembered_then_recalled_after_resume_in_a_new_process(tmp_path: Path, store_url: str) -> None:
    path = blueprint(tmp_path)
    first = script(
        tmp_path,
        "first.json",
        "I'll note where we deploy before anything else.\n```python\n"
        "system.remember('deploy target', {'host': 'db-7', 'port': 5432})\nprint('noted')\n```",
        "```python\nsystem.finish('Noted the deploy target.')\n```",
    )
    second = script(
        tmp_path,
        "second.json",
        "The target was remembered earlier in this session:\n\n```python\n"
        "target = system.recall('deploy target')\nsystem.finish(f\"{target['host']}:{target['port']}\")\n```",
    )
    common = ["--store", store_url, "--session", "S-entity"]
    # this process remembers; a new process resumes the session and recalls
    rc, out, err = cli("run", str(path), "--input", "Remember that we deploy to db-7:5432", "--model", first, *common)
    assert rc == 0, err
    assert out == "Noted the deploy target.\n"
    run2 = subprocess.run(
        [CODEACT, "run", str(path), "--input", "Where do we deploy?", "--model", second, "--json", *common],
        capture_output=True, text=True, env={**os.environ}, check=False, timeout=120,
    )  # fmt: skip
    assert run2.returncode == 0, run2.stderr
    out_events = events(run2.stdout)
    assert out_events[-1]["type"] == "run.completed" and out_events[-1]["answer"] == "db-7:5432"
    contexts = [
        e["segment"]["content"]
        for e in out_events
        if e["type"] == "segment.created" and e["segment"]["kind"] == "Context"
    ]
    assert contexts == [
        "Remembered in this session (system.recall(title) returns the data):\n"
        '- \'deploy target\': {"host": "db-7", "port": 5432}'
    ]
    # the remember/recall calls are recorded with their rounds: the session replays from the store
    rc, out, err = cli("replay", "S-entity", "--store", store_url)
    assert rc == 0, err
    assert out.splitlines()[-1] == "replayed 3 round(s) of S-entity: 3 match, 0 mismatch"


def test_memory_operations_without_memory_say_how_to_enable_it(tmp_path: Path) -> None:
    path = blueprint(tmp_path, memory="{enabled: false}")
    model = script(
        tmp_path,
        "r.json",
        "```python\nsystem.remember('x', 1)\n```",
        "```python\nsystem.finish('gave up')\n```",
    )
    rc, out, err = cli(
        "run", str(path), "--input", "remember x", "--model", model, "--store", f"sqlite:///{tmp_path}/s.db"
    )
    assert rc == 0, err
    assert "system.remember() needs memory, but this agent has none: set session.memory.enabled: true" in err


# -- history summaries: a user's second session sees the first --------------------------------------


async def test_second_session_of_a_user_sees_the_first_sessions_summary(tmp_path: Path, store_url: str) -> None:
    from codeact.engine.agent import Agent
    from codeact.engine.model.scripted import ScriptedReplies

    path = blueprint(tmp_path, memory="{enabled: true, scope: user}")
    replies = ScriptedReplies(
        [
            "Let me look the invoice up.\n```python\ninvoice = {'id': 'INV-42', 'status': 'paid', 'amount': 120}\n"
            "system.finish(f\"Invoice {invoice['id']} is {invoice['status']}.\")\n```",
            "```python\nsystem.finish('Sure: the refund is on its way.')\n```",
            "```python\nsystem.finish('Hello Bob.')\n```",
        ]
    )
    async with Agent.from_blueprint(path, store=store_url, model=replies.model, user="alice") as agent:
        first = await agent.invoke("What is the status of invoice INV-42?", session_id="A1")
        assert first.answer == "Invoice INV-42 is paid."
        second = await agent.invoke("Can I get a refund for that invoice INV-42?", session_id="A2")
        assert second.status == "completed"
        other = await agent.invoke("Say hello", session_id="B1", user="bob")  # per-run user
        assert other.answer == "Hello Bob."
    prompts = ["\n".join(m["content"] for m in request.messages) for request in replies.requests]
    assert "Earlier sessions of this user" not in prompts[0]
    assert "Asked: What is the status of invoice INV-42? Answered: Invoice INV-42 is paid." in prompts[1], prompts[1]
    assert "(question; keys: status, invoice, INV-42)" in prompts[1]
    assert "INV-42" not in prompts[2]  # bob's run sees none of alice's history


# -- experience: a failed-then-recovered run helps a similar later task -----------------------------

FAILED_THEN_FIXED = (
    "I'll sum the March rows of the export.\n\n```python\n"
    "rows = [{'customer': 'ACME', 'month': '2026-03', 'amount': '120.50'},\n"
    "        {'customer': 'ACME', 'month': '2026-03', 'amount': '80'}]\n"
    "total = sum(row['amount'] for row in rows if row['month'] == '2026-03')\nprint(total)\n```",
    "The amounts are strings; convert them first.\n```python\n"
    "total = sum(float(row['amount']) for row in rows if row['month'] == '2026-03')\n"
    "system.finish(f'ACME owes {total:.2f} for March')\n```",
)


def _system_prompts(server: OpenAIServer) -> list[str]:
    posts = [r for r in server.requests if r.method == "POST"]
    return [str(r.body["messages"][0]["content"]) for r in posts]


def test_failed_then_recovered_run_becomes_an_experience_for_a_similar_task(
    tmp_path: Path, store_url: str, openai_server: OpenAIServer
) -> None:
    path = blueprint(tmp_path)
    common = ["--store", store_url, "--model", "openai/test-model", "--base-url", openai_server.base_url]
    openai_server.push(*FAILED_THEN_FIXED)
    rc, out, err = cli("run", str(path), "--input", "Total the March invoices of customer ACME", *common)
    assert rc == 0, err
    assert out == "ACME owes 200.50 for March\n"
    assert "TypeError" in err
    assert all("## Experience" not in p for p in _system_prompts(openai_server))

    rc, out, _ = cli("memory", "list", "--kind", "experience", "--store", store_url, "--json")
    (experience,) = json.loads(out)
    assert experience["scope"] == "agent:memo-agent"
    data = experience["data"]
    assert data["task"] == "Total the March invoices of customer ACME"
    assert data["errors"][0]["error"].startswith("TypeError: unsupported operand type(s) for +")
    assert data["errors"][0]["fixed_in_round"] == 2
    assert "float(row['amount'])" in data["code"] and "row['amount'] for" not in data["code"].split("float")[0]
    assert data["outcome"]["status"] == "completed"

    before = len(openai_server.requests)
    openai_server.push("```python\nsystem.finish('ACME owes 75.00 for April')\n```")
    rc, out, err = cli("run", str(path), "--input", "Total the April invoices of customer ACME", *common)
    assert rc == 0, err
    assert len(openai_server.requests) == before + 1
    system = _system_prompts(openai_server)[-1]
    assert "## Experience" in system
    assert "User: Total the March invoices of customer ACME" in system
    assert "float(row['amount'])" in system
    assert "TypeError: unsupported operand type(s) for +" in system

    openai_server.push("```python\nsystem.finish('Leaves fall, slowly')\n```")
    rc, out, err = cli("run", str(path), "--input", "Write a haiku about autumn leaves", *common)
    assert rc == 0, err
    assert "## Experience" not in _system_prompts(openai_server)[-1]


# -- curation: list, show, export, delete, import, approve -------------------------------------------


def test_memory_cli_curates_and_approval_gates_retrieval(
    tmp_path: Path, store_url: str, openai_server: OpenAIServer
) -> None:
    path = blueprint(tmp_path, memory="{enabled: true, scope: project, config: {experience: {requireApproval: true}}}")
    first = script(tmp_path, "one.json", "```python\nsystem.finish(sum(range(10)))\n```")
    rc, _, err = cli("run", str(path), "--input", "Sum the numbers below ten", "--model", first, "--store", store_url)
    assert rc == 0, err
    rc, out, _ = cli("memory", "list", "--store", store_url)
    assert rc == 0
    (line,) = out.splitlines()
    item_id = line.split()[0]
    assert "experience" in line and "project" in line and "Sum the numbers below ten" in line

    rc, out, _ = cli("memory", "show", item_id, "--store", store_url)
    assert "approved: no" in out and "code: system.finish(sum(range(10)))" in out

    export = tmp_path / "memories.jsonl"
    rc, _, err = cli("memory", "export", "--output", str(export), "--store", store_url)
    assert rc == 0 and "exported 1 memory record(s)" in err
    rc, out, _ = cli("memory", "delete", item_id, "--store", store_url)
    assert (rc, out) == (0, "deleted 1 memory record(s)\n")
    rc, out, _ = cli("memory", "list", "--store", store_url)
    assert out == "no memories\n"
    rc, out, err = cli("memory", "delete", item_id, "--store", store_url)
    assert rc == 1 and f"no memory {item_id}" in err

    rc, out, _ = cli("memory", "import", str(export), "--store", store_url)
    assert (rc, out) == (0, "imported 1 memory record(s)\n")
    rc, out, _ = cli("memory", "prune", "--max-count", "5", "--store", store_url)
    assert (rc, out) == (0, "pruned 0 memory record(s)\n")

    # not approved yet: a similar task gets no experience; approved: it does
    served = ["--store", store_url, "--model", "openai/test-model", "--base-url", openai_server.base_url]
    openai_server.push("```python\nsystem.finish(sum(range(20)))\n```")
    rc, _, err = cli("run", str(path), "--input", "Sum the numbers below twenty", *served)
    assert rc == 0, err
    assert "## Experience" not in _system_prompts(openai_server)[-1]
    rc, out, _ = cli("memory", "approve", item_id, "--store", store_url)
    assert out == "approved 1 memory record(s)\n"
    openai_server.push("```python\nsystem.finish(sum(range(30)))\n```")
    rc, _, err = cli("run", str(path), "--input", "Sum the numbers below thirty", *served)
    assert rc == 0, err
    system = _system_prompts(openai_server)[-1]
    assert "## Experience" in system and "User: Sum the numbers below ten" in system


def test_validate_names_invalid_memory_settings(tmp_path: Path) -> None:
    path = blueprint(tmp_path, memory="{enabled: true, scope: galaxy, config: {experience: {topK: -2}}}")
    rc, out, _ = cli("validate", str(path))
    assert rc == 1
    assert "$.session.memory.scope blueprint.memory.invalid" in out
    assert "session.memory.config.experience.topK: Input should be greater than or equal to 0" in out


async def test_model_distillation_writes_the_summary_and_lesson(tmp_path: Path) -> None:
    from codeact.engine.agent import Agent
    from codeact.engine.memory import MemoryManager, memory_backend
    from codeact.engine.model.scripted import ScriptedReplies
    from codeact.engine.store import open_store

    path = blueprint(tmp_path, memory="{enabled: true, scope: user, config: {experience: {distill: model}}}")
    distilled = (
        "Here is the distilled record:\n```json\n"
        '{"question_type": "operation", "keys": ["ACME", "March"],'
        ' "summary": "Totalled ACME\'s March invoices: 200.50.",'
        ' "lesson": "Amounts in the billing export are strings: convert with float() before summing."}\n```'
    )
    replies = ScriptedReplies([*FAILED_THEN_FIXED, {"text": distilled, "purpose": "utility"}])
    url = f"sqlite:///{tmp_path / 's.db'}"
    async with Agent.from_blueprint(path, store=url, model=replies.model, user="carol") as agent:
        result = await agent.invoke("Total the March invoices of customer ACME", session_id="D1")
    assert result.answer == "ACME owes 200.50 for March"
    assert [r.purpose for r in replies.requests] == ["code", "code", "utility"]
    assert "Round 1:" in replies.requests[-1].messages[0]["content"]
    store = open_store(url)
    backend = memory_backend(store)
    try:
        manager = MemoryManager(backend)
        (history,) = await manager.list("history")
        (experience,) = await manager.list("experience")
    finally:
        await backend.close()
        await store.close()
    assert history.scope == "user:carol"
    assert history.data["summary"] == "Totalled ACME's March invoices: 200.50."
    assert history.data["keys"] == "ACME, March"
    assert experience.data["lesson"].startswith("Amounts in the billing export are strings")
    assert experience.data["distilled_by"] == "model"
