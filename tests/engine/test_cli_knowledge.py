"""Blueprint knowledge (seed 001's domain and constraint knowledge; issue 26 item 5), end to end.

``knowledge.sources`` of a blueprint (inline text, a file, a folder) are chunked and indexed once per
agent; each run retrieves from them for its task: constraint chunks always (the system prompt's
Knowledge section), domain chunks only when they match the task (a Knowledge segment of the task's
round, recorded with the session). Driven through ``codeact run`` against the local OpenAI-compatible
server; assertions are on the prompts the server received and on the recorded segments.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from codeact.engine.cli import app
from codeact.engine.store import open_store
from tests.engine.openai_server import OpenAIServer

pytestmark = pytest.mark.usefixtures("cli_home")

BLUEPRINT = """\
version: codeact.agent/v1
extend: codeact-base
id: shop
model: {provider: openai-compatible, model: openai/test-model}
workflow: {mode: codeact, maxTurns: 3, codeact: {thought: inline}}
knowledge:
  - text: "Never issue a refund above 500 EUR without a manager's approval."
    kind: constraint
  - file: docs/returns.md
  - folder: kb
"""
RETURNS = """\
# Returns

Customers may return an item within 30 days of delivery, with the receipt.

## Refunds

A refund goes back to the original payment method within 5 business days.
"""
SHIPPING = "# Shipping\n\nWe ship to every EU country; express delivery takes 2 days.\n"
GIFT = "Gift cards never expire and cannot be exchanged for cash.\n"
RULE = "Never issue a refund above 500 EUR without a manager's approval."
REFUND_FACT = "A refund goes back to the original payment method within 5 business days."
# The way models answer: a line of prose, then the code.
REPLY = "The knowledge says how long refunds take.\n```python\nsystem.finish('5 business days')\n```"


@pytest.fixture
def blueprint(tmp_path: Path) -> Path:
    folder = tmp_path / "shop"
    (folder / "docs").mkdir(parents=True)
    (folder / "kb" / "cards").mkdir(parents=True)
    (folder / "docs" / "returns.md").write_text(RETURNS)
    (folder / "kb" / "shipping.md").write_text(SHIPPING)
    (folder / "kb" / "cards" / "gift.txt").write_text(GIFT)
    (folder / "kb" / "image.png").write_bytes(b"\x89PNG\r\n")  # not a text file: the folder's glob leaves it out
    path = folder / "agent.yaml"
    path.write_text(BLUEPRINT)
    return path


def run(tmp_path: Path, server: OpenAIServer, path: Path, task: str, *, session: str) -> str:
    """Run ``task`` once; the text of the one model request (its messages, JSON)."""
    before = len(server.requests)
    result = CliRunner().invoke(
        app,
        ["run", str(path), "--input", task, "--store", f"sqlite:///{tmp_path / 's.db'}", "--session", session,
         "--base-url", server.base_url, "--isolation", "process"],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "5 business days\n"
    posts = [r for r in server.requests[before:] if r.method == "POST"]
    assert len(posts) == 1
    return json.dumps(posts[0].body["messages"], ensure_ascii=False)


def recorded_segments(tmp_path: Path, session: str) -> list[dict[str, object]]:
    async def read() -> list[dict[str, object]]:
        store = open_store(f"sqlite:///{tmp_path / 's.db'}")
        try:
            return await store.segments(session)
        finally:
            await store.close()

    return asyncio.run(read())


def test_matching_task_gets_the_domain_knowledge_and_it_is_recorded(
    tmp_path: Path, blueprint: Path, openai_server: OpenAIServer
) -> None:
    openai_server.push(REPLY)
    prompt = run(tmp_path, openai_server, blueprint, "How long does a refund take to arrive?", session="s-refund")
    assert REFUND_FACT in prompt  # the Refunds chunk of docs/returns.md, under its heading
    assert "(Refunds) " + REFUND_FACT in prompt
    assert "express delivery" not in prompt  # shipping does not match the task
    assert RULE in prompt  # the constraint, always
    knowledge = [s for s in recorded_segments(tmp_path, "s-refund") if s["kind"] == "Knowledge"]
    assert len(knowledge) == 1
    assert REFUND_FACT in str(knowledge[0]["content"])
    assert "docs/returns.md" in knowledge[0]["tags"]  # which source it came from


def test_unrelated_task_gets_only_the_constraints(tmp_path: Path, blueprint: Path, openai_server: OpenAIServer) -> None:
    openai_server.push(REPLY)
    prompt = run(tmp_path, openai_server, blueprint, "What is the weather like in Paris?", session="s-weather")
    assert RULE in prompt
    for text in (REFUND_FACT, "express delivery", "Gift cards", "within 30 days"):
        assert text not in prompt
    assert not [s for s in recorded_segments(tmp_path, "s-weather") if s["kind"] == "Knowledge"]


def test_constraints_sit_in_the_system_prompt_and_every_round_sees_the_same_knowledge(
    tmp_path: Path, blueprint: Path, openai_server: OpenAIServer
) -> None:
    # Round 1 breaks (a name error), round 2 finishes: both prompts carry the same knowledge, once.
    openai_server.push("Let me check.\n```python\nprint(refund_days)\n```", REPLY)
    result = CliRunner().invoke(
        app,
        ["run", str(blueprint), "--input", "Ship a gift card to Spain", "--store", f"sqlite:///{tmp_path / 's.db'}",
         "--base-url", openai_server.base_url, "--isolation", "process"],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    first, second = (r.body["messages"] for r in openai_server.requests if r.method == "POST")
    assert first[0]["role"] == "system" and first[0] == second[0]  # the system prompt did not change
    assert "## Knowledge\n- " + RULE in first[0]["content"]
    for messages in (first, second):
        text = json.dumps(messages, ensure_ascii=False)
        assert text.count("Gift cards never expire") == 1
        assert text.count("express delivery takes 2 days") == 1


def test_a_missing_knowledge_file_is_refused_with_the_fix(
    tmp_path: Path, blueprint: Path, openai_server: OpenAIServer
) -> None:
    blueprint.write_text(BLUEPRINT.replace("docs/returns.md", "docs/refunds.md"))
    expected = (
        "ERROR $.knowledge.sources[1].file blueprint.knowledge.notFound: knowledge.sources[1]: file "
        f"'docs/refunds.md' was not found (looked for '{blueprint.parent / 'docs' / 'refunds.md'}'); a path is "
        "relative to the blueprint file that declares it: fix the path or remove the entry."
    )
    validated = CliRunner().invoke(app, ["validate", str(blueprint)])
    assert validated.exit_code == 1
    assert expected in validated.stdout
    result = CliRunner().invoke(
        app,
        ["run", str(blueprint), "--input", "How long does a refund take?", "--store",
         f"sqlite:///{tmp_path / 's.db'}", "--base-url", openai_server.base_url],
    )  # fmt: skip
    assert result.exit_code != 0
    assert "blueprint.knowledge.notFound" in result.stderr
    assert "docs/refunds.md" in result.stderr
    assert not [r for r in openai_server.requests if r.method == "POST"]  # refused before any model call


def test_knowledge_in_a_base_blueprint_resolves_against_the_base_folder(
    tmp_path: Path, blueprint: Path, openai_server: OpenAIServer
) -> None:
    child = tmp_path / "teams" / "support.yaml"
    child.parent.mkdir()
    child.write_text("version: codeact.agent/v1\nextend: ../shop/agent.yaml\nid: support\nknowledge: {budget: 200}\n")
    listed = CliRunner().invoke(app, ["knowledge", "list", str(child), "--json"])
    assert listed.exit_code == 0, listed.stderr
    data = json.loads(listed.stdout)
    assert data["budget"] == 200  # the child's budget, the base's sources (blocks merge key by key)
    assert [s["source"] for s in data["sources"]] == ["text[0]", "../shop/docs/returns.md", "../shop/kb/"]


def test_knowledge_list_and_show(blueprint: Path) -> None:
    listed = CliRunner().invoke(app, ["knowledge", "list", str(blueprint)])
    assert listed.exit_code == 0, listed.stderr
    assert listed.stdout.splitlines() == [
        "text[0]          constraint    inline    1 chunks      64 chars",
        "docs/returns.md  domain        1 file    2 chunks     147 chars",
        "kb/              domain       2 files    2 chunks     116 chars",
        "5 chunks; budget 1000 tokens per task.",
    ]
    shown = CliRunner().invoke(app, ["knowledge", "show", str(blueprint), "--query", "gift card refund", "--json"])
    assert shown.exit_code == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert [c["text"] for c in data["constraints"]] == [RULE]
    assert [d["source"] for d in data["domain"]] == ["kb/cards/gift.txt", "docs/returns.md"]
    assert all(d["score"] > 0 for d in data["domain"])
    plain = CliRunner().invoke(app, ["knowledge", "show", str(blueprint), "--query", "weather in Paris"])
    assert plain.stdout.splitlines()[:3] == [
        "constraints (1, always included):",
        f"  [text[0]] {RULE}",
        "domain (0 matching the query):",
    ]


def test_knowledge_commands_name_a_missing_folder(blueprint: Path) -> None:
    blueprint.write_text(BLUEPRINT.replace("folder: kb", "folder: faq"))
    result = CliRunner().invoke(app, ["knowledge", "list", str(blueprint)])
    assert result.exit_code == 1
    assert "knowledge.sources[2]: folder 'faq' was not found" in result.stderr
    assert "fix the path or remove the entry" in result.stderr


def test_budget_bounds_the_selection(blueprint: Path) -> None:
    # 25 tokens: the rule (16) fits, the domain chunks (~25 each) do not; they are counted as dropped.
    blueprint.write_text(BLUEPRINT.replace("knowledge:\n", "knowledge:\n  budget: 25\n  sources:\n"))
    shown = CliRunner().invoke(app, ["knowledge", "show", str(blueprint), "--query", "refund gift card", "--json"])
    assert shown.exit_code == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert [c["text"] for c in data["constraints"]] == [RULE]
    assert data["domain"] == []
    assert data["dropped"] == 2 and data["tokens"] <= 25


def test_a_queued_run_carries_the_knowledge_files(tmp_path: Path, blueprint: Path) -> None:
    from codeact.engine.blueprint.bundle import pack_blueprint, unpack_blueprint

    bundle = pack_blueprint(blueprint)
    assert sorted(bundle["files"]) == [
        "agent.yaml",
        "docs/returns.md",
        "kb/cards/gift.txt",
        "kb/shipping.md",
    ]  # the folder's text files; the image is not one of them
    copy = unpack_blueprint(bundle, tmp_path / "worker")
    shown = CliRunner().invoke(app, ["knowledge", "show", str(copy), "--query", "refund", "--json"])
    assert shown.exit_code == 0, shown.stderr
    assert REFUND_FACT in shown.stdout
