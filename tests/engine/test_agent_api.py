"""The agent's own API (issue 26): input as messages, the run's state in the result, state between runs.

Every test runs ``codeact.Agent`` against the local OpenAI-compatible server with a real subprocess
sandbox and a SQLite store; the replies are written as models write them (prose, then a code block).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from codeact import Agent, RunConfig
from codeact.engine import CodeactError
from codeact.engine.agent import Hook, HookContext, HookResult
from codeact.engine.replay import replay_session
from codeact.engine.store import open_store
from codeact.toolkits import ToolkitContext, operation, toolkit
from tests.engine.openai_server import OpenAIServer

CODEACT = str(Path(sys.executable).parent / "codeact")
BLUEPRINT = """\
version: codeact.agent/v1
extend: codeact-base
id: api-agent
workflow:
  maxTurns: 3
  codeact:
    thought: inline
"""


@pytest.fixture(autouse=True)
def model_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEACT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for name in ("CODEACT_MODEL", "CODEACT_STORE", "CODEACT_PROFILE"):
        monkeypatch.delenv(name, raising=False)


def make_agent(tmp_path: Path, server: OpenAIServer, text: str = BLUEPRINT, **kwargs: object) -> Agent:
    path = tmp_path / "agent.yaml"
    path.write_text(text)
    return Agent.from_blueprint(
        path, model="openai/test", base_url=server.base_url, store=f"sqlite:///{tmp_path / 's.db'}", **kwargs
    )


def sent(server: OpenAIServer) -> str:
    """Everything the model was sent in the last chat request, as one text."""
    body = server.requests[-1].body
    return "\n".join(str(m.get("content")) for m in body.get("messages", ()))


async def test_a_list_of_messages_is_history_and_a_task(tmp_path: Path, openai_server: OpenAIServer) -> None:
    openai_server.push('Thought: the user is Ada.\n```python\nsystem.finish("Hello Ada")\n```')
    messages = [
        {"role": "user", "content": "My name is Ada Lovelace."},
        {"role": "assistant", "content": "Nice to meet you, Ada."},
        {"role": "user", "content": [{"type": "text", "text": "Greet me by name."}]},
    ]
    async with make_agent(tmp_path, openai_server) as agent:
        result = await agent.invoke(messages)
    assert (result.status, result.answer) == ("completed", "Hello Ada")
    prompt = sent(openai_server)
    assert "My name is Ada Lovelace." in prompt and "Nice to meet you, Ada." in prompt
    assert prompt.index("Nice to meet you") < prompt.index("Greet me by name.")
    assert result.messages == [
        {"role": "user", "content": "My name is Ada Lovelace."},
        {"role": "assistant", "content": "Nice to meet you, Ada."},
        {"role": "user", "content": "Greet me by name."},
        {"role": "assistant", "content": "Hello Ada"},
    ]


async def test_a_single_message_and_bad_inputs(tmp_path: Path, openai_server: OpenAIServer) -> None:
    openai_server.push("Thought: easy.\n```python\nsystem.finish(2 + 2)\n```")
    async with make_agent(tmp_path, openai_server) as agent:
        result = await agent.invoke({"role": "user", "content": "What is 2 + 2?"})
        assert (result.status, result.answer) == ("completed", 4)
        image = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x.test/a.png"}}]}
        with pytest.raises(CodeactError, match="codeact fetches no URLs") as caught:
            await agent.invoke(image)
        assert caught.value.code == "input.image_url"
        with pytest.raises(CodeactError, match="no user message"):
            await agent.invoke([{"role": "assistant", "content": "hi"}])
        with pytest.raises(CodeactError, match="role 'robot'"):
            await agent.invoke([{"role": "robot", "content": "hi"}])
    assert openai_server.pending == 0


async def test_result_variables_and_a_state_update_the_next_run_uses(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.push(
        "Thought: I note the order.\n```python\norder = {'sku': 'A-1', 'qty': 2}\n"
        "when = (2026, 1, 2)\nsystem.finish('noted')\n```",
        "Thought: the host changed the quantity.\n```python\nsystem.finish(f\"{order['qty']} x {order['sku']}\")\n```",
    )
    async with make_agent(tmp_path, openai_server) as agent:
        first = await agent.invoke("Note an order of 2 A-1.")
        assert first.variables == {"order": {"sku": "A-1", "qty": 2}, "when": [2026, 1, 2]}
        assert await agent.state(first.session_id) == first.variables
        after = await agent.update_state(
            first.session_id, variables={"order": {"sku": "A-1", "qty": 5}}, remove=["when"]
        )
        assert after == {"order": {"sku": "A-1", "qty": 5}}
        second = await agent.invoke("How many now?", session_id=first.session_id)
        with pytest.raises(CodeactError, match="no session 'nope'"):
            await agent.update_state("nope", variables={"x": 1})
        with pytest.raises(CodeactError, match="not a Python identifier"):
            await agent.update_state(first.session_id, variables={"not a name": 1})
        rounds = await agent.store.rounds(first.session_id)
        report = await replay_session(agent.store, first.session_id)
    assert (second.status, second.answer) == ("completed", "5 x A-1")
    assert [r.status for r in rounds] == ["ok", "host_edit", "ok"]
    assert rounds[1].control == {"kind": "host_edit", "set": ["order"], "removed": ["when"]}
    assert report.ok, report.to_json()


async def test_invoke_without_a_session_starts_a_new_one(tmp_path: Path, openai_server: OpenAIServer) -> None:
    openai_server.push(
        "Thought: x.\n```python\nx = 1\nsystem.finish('one')\n```",
        "Thought: is x there?\n```python\ntry:\n    system.finish(x)\n"
        "except NameError:\n    system.finish('unset')\n```",
    )
    async with make_agent(tmp_path, openai_server) as agent:
        first = await agent.invoke("Set x.")
        second = await agent.invoke("Is x set?")
    assert first.session_id != second.session_id
    assert second.variables == {} and second.answer == "unset"


async def test_run_config_labels_the_run_and_the_session(tmp_path: Path, openai_server: OpenAIServer) -> None:
    openai_server.push(
        'Thought: done.\n```python\nsystem.finish("one")\n```', 'Thought: done.\n```python\nsystem.finish("two")\n```'
    )
    events: list[Any] = []
    async with make_agent(tmp_path, openai_server) as agent:
        config = RunConfig(thread_id="thread-7", tags=["nightly", "eu"], metadata={"ticket": 42}, user="ada")
        first = await agent.invoke("First.", config=config, on_event=events.append)
        again = RunConfig(thread_id="thread-7", tags=["retry"], metadata={"ticket": 43, "by": "ops"})
        second = await agent.invoke("Second.", config=again)
        meta = await agent.store.get_session("thread-7")
        with pytest.raises(CodeactError, match="differ"):
            await agent.invoke("x", session_id="other", config=again)
    with pytest.raises(CodeactError, match="at most 8000"):
        RunConfig(metadata={"blob": "x" * 9000})
    assert first.session_id == second.session_id == "thread-7"
    started = events[0]
    assert (started.type, started.tags, started.metadata) == ("run.started", ("nightly", "eu"), {"ticket": 42})
    assert meta is not None
    assert meta.extra["tags"] == ["nightly", "eu", "retry"]
    assert meta.extra["metadata"] == {"ticket": 43, "by": "ops"}


async def test_the_callers_context_is_a_bounded_recorded_segment(tmp_path: Path, openai_server: OpenAIServer) -> None:
    openai_server.push(
        'Thought: the user is on the checkout page.\n```python\nsystem.finish("checkout")\n```',
        'Thought: long.\n```python\nsystem.finish("ok")\n```',
    )
    async with make_agent(tmp_path, openai_server) as agent:
        context = {"page": "/checkout", "cart": {"items": 3}}
        result = await agent.invoke("Where am I?", context=context)
        prompt = sent(openai_server)
        segments = await agent.store.segments(result.session_id)
        await agent.invoke("And now?", context={"notes": "y" * 10_000})
        long_prompt = sent(openai_server)
        with pytest.raises(CodeactError, match="mapping"):
            await agent.invoke("x", context=["not", "a", "mapping"])  # type: ignore[arg-type]
    assert "page: /checkout" in prompt and 'cart: {"items": 3}' in prompt
    assert prompt.index("page: /checkout") < prompt.index("Where am I?")
    (caller,) = [s for s in segments if s["kind"] == "Context"]
    assert caller["tags"] == ["caller"] and "page: /checkout" in caller["content"]
    assert "[context truncated: 4000 of 10007 characters kept]" in long_prompt and "y" * 4100 not in long_prompt


def test_codeact_run_takes_tags_metadata_context_and_prompt(tmp_path: Path, openai_server: OpenAIServer) -> None:
    """Through the installed script (tracing is per process): --prompt, --tag, --meta, --context, --trace."""
    openai_server.push('Thought: the user is on /billing.\n```python\nsystem.finish("billing")\n```')
    agent = tmp_path / "agent.yaml"
    agent.write_text(BLUEPRINT)
    context = tmp_path / "ctx.json"
    context.write_text(json.dumps({"page": "/billing", "locale": "fr-FR"}))
    trace_file, store = tmp_path / "trace.jsonl", f"sqlite:///{tmp_path / 's.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update({"CODEACT_HOME": str(tmp_path / "home"), "OPENAI_API_KEY": "sk-test"})
    run = subprocess.run(
        [CODEACT, "run", str(agent), "--model", "openai/test", "--base-url", openai_server.base_url]
        + ["--store", store, "--session", "S1", "--json", "--trace", str(trace_file)]
        + ["--tag", "nightly", "--tag", "eu", "--meta", "ticket=42", "--meta", "team=ops"]
        + ["--context", str(context), "--prompt", "Where am I?"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    events = [json.loads(line) for line in run.stdout.splitlines()]
    assert events[0]["type"] == "run.started"
    assert (events[0]["tags"], events[0]["metadata"]) == (["nightly", "eu"], {"ticket": 42, "team": "ops"})
    assert events[-1]["answer"] == "billing"
    assert "page: /billing\nlocale: fr-FR" in sent(openai_server)

    async def session() -> Any:
        async with open_store(store) as opened:
            return await opened.get_session("S1")

    meta = asyncio.run(session())
    assert meta.extra["tags"] == ["nightly", "eu"] and meta.extra["metadata"] == {"ticket": 42, "team": "ops"}
    spans = [json.loads(line) for line in trace_file.read_text().splitlines()]
    (root,) = [s for s in spans if s["parent_id"] is None]
    assert root["attributes"]["codeact.tags"] == ["nightly", "eu"]
    assert root["attributes"]["codeact.metadata.ticket"] == 42

    bad = subprocess.run(
        [CODEACT, "run", str(agent), "--model", "openai/test", "--meta", "no-equals", "--input", "x"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )
    assert bad.returncode == 2 and "--meta takes KEY=VALUE, not 'no-equals'" in bad.stderr


class Budget(Hook):
    """Sees the run's state and sets ``budget`` before each model call; names itself for errors."""

    name = "budget"

    def __init__(self) -> None:
        self.seen: list[tuple[int, Any, Any]] = []

    async def before_model(self, ctx: HookContext) -> HookResult | None:
        status = ctx.last_outcome["status"] if ctx.last_outcome else None
        self.seen.append((ctx.round, ctx.variables.get("spent"), status))
        return HookResult(update={"budget": 100 - (ctx.variables.get("spent") or 0)}, remove=["scratch"])


async def test_a_hook_sees_state_and_changes_a_variable_the_code_uses(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.push(
        "Thought: I spend some.\n```python\nspent = 30\nscratch = 'tmp'\nprint(budget)\n```",
        "Thought: what is left?\n```python\ntry:\n    scratch\n    kept = True\nexcept NameError:\n    kept = False\n"
        "system.finish(f'left {budget}, scratch {kept}')\n```",
    )
    hook = Budget()
    async with make_agent(tmp_path, openai_server, hooks=[hook]) as agent:
        result = await agent.invoke("Spend 30 of the budget.")
        rounds = await agent.store.rounds(result.session_id)
        report = await replay_session(agent.store, result.session_id)
    assert hook.seen == [(1, None, None), (2, 30, "ok")]
    assert result.answer == "left 70, scratch False"
    assert rounds[0].edits == {"set": {"budget": 100}, "removed": [], "by": ["budget.before_model"]}
    assert rounds[1].edits == {"set": {"budget": 70}, "removed": ["scratch"], "by": ["budget.before_model"]}
    assert "budget" in result.variables and "scratch" not in result.variables
    assert report.ok, report.to_json()


async def test_a_hook_update_that_cannot_be_kept_names_the_hook(tmp_path: Path, openai_server: OpenAIServer) -> None:
    class Bad(Hook):
        name = "socket-hook"

        async def before_model(self, ctx: HookContext) -> HookResult:
            return HookResult(update={"lock": __import__("threading").Lock()})

    async with make_agent(tmp_path, openai_server, hooks=[Bad()]) as agent:
        result = await agent.invoke("Anything.")
    assert result.status == "failed" and result.error is not None
    assert "hook 'socket-hook' (before_model): variable 'lock' cannot be kept" in result.error["message"]


def test_an_unknown_compact_strategy_is_refused_naming_the_valid_ones(tmp_path: Path) -> None:
    agent = tmp_path / "agent.yaml"
    agent.write_text(BLUEPRINT + "session:\n  compact:\n    enabled: true\n    strategy: sliding-window\n")
    env = {**os.environ, "CODEACT_HOME": str(tmp_path / "home"), "OPENAI_API_KEY": "sk-test"}
    run = subprocess.run(
        [CODEACT, "run", str(agent), "--model", "openai/test", "--store", f"sqlite:///{tmp_path / 's.db'}"]
        + ["--input", "x"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )
    assert run.returncode == 2, run.stderr
    assert "session.compact.strategy must be one of: structured-summary (got 'sliding-window')" in run.stderr


@toolkit(name="probe", description="Reports the call's context")
class Probe:
    @operation
    async def ids(self, context: ToolkitContext) -> dict[str, Any]:
        """The trace and run ids the toolkit sees."""
        return {"trace_id": context.trace_id, "run_id": context.run_id}


async def test_toolkits_see_the_runs_trace_id(tmp_path: Path, openai_server: OpenAIServer) -> None:
    openai_server.push("Thought: I ask.\n```python\nsystem.finish(await probe.ids())\n```")
    events: list[Any] = []
    granted = BLUEPRINT + "toolkits:\n  - ref: probe\n"
    async with make_agent(tmp_path, openai_server, granted, toolkits=[Probe]) as agent:
        result = await agent.invoke("Which ids?", on_event=events.append)
    assert result.answer == {"trace_id": events[0].run_id, "run_id": events[0].run_id}
