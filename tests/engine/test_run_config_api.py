"""Seed 002's run config through the public API: hooks see it (``HookContext.config``), results carry the metadata.

Every test runs ``codeact.Agent`` against the local OpenAI-compatible server with a real subprocess
sandbox and a SQLite store; the replies are written as models write them (prose, then a code block).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from codeact import Agent, RunConfig
from codeact.engine.agent import Hook, HookContext
from tests.engine.openai_server import OpenAIServer

pytestmark = pytest.mark.usefixtures("cli_home")

BLUEPRINT = """\
version: codeact.agent/v1
extend: codeact-base
id: labelled
workflow:
  maxTurns: 3
  codeact:
    thought: inline
"""


class Recorder(Hook):
    def __init__(self) -> None:
        self.seen: list[tuple[str, RunConfig]] = []

    async def before_agent(self, ctx: HookContext) -> None:
        self.seen.append(("before_agent", ctx.config))

    async def before_model(self, ctx: HookContext) -> None:
        self.seen.append(("before_model", ctx.config))

    async def after_agent(self, ctx: HookContext) -> None:
        self.seen.append(("after_agent", ctx.config))


def make_agent(tmp_path: Path, server: OpenAIServer, **kwargs: Any) -> Agent:
    path = tmp_path / "agent.yaml"
    path.write_text(BLUEPRINT)
    return Agent.from_blueprint(
        path, model="openai/test", base_url=server.base_url, store=f"sqlite:///{tmp_path / 's.db'}", **kwargs
    )


async def test_hooks_see_the_runs_config_and_the_result_carries_its_metadata(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.push(
        "Thought: the ticket is about a refund; I will answer directly.\n"
        '```python\nsystem.finish("Refund issued")\n```\nThat should do it.'
    )
    hook = Recorder()
    async with make_agent(tmp_path, openai_server, hooks=[hook]) as agent:
        config = RunConfig(thread_id="t-9", tags=["support"], metadata={"ticket": 42, "channel": "mail"}, user="ada")
        result = await agent.invoke("Handle ticket 42.", config=config)
    assert (result.status, result.answer) == ("completed", "Refund issued")
    assert result.metadata == {"ticket": 42, "channel": "mail"}
    assert [point for point, _ in hook.seen] == ["before_agent", "before_model", "after_agent"]
    for _, seen in hook.seen:
        assert (seen.thread_id, seen.tags, seen.metadata, seen.user) == (
            "t-9",
            ("support",),
            {"ticket": 42, "channel": "mail"},
            "ada",
        )


async def test_without_a_config_hooks_see_the_session_and_the_agents_user(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.push('Sure.\n```python\nsystem.finish("ok")\n```')
    hook = Recorder()
    async with make_agent(tmp_path, openai_server, hooks=[hook], user="bob") as agent:
        result = await agent.invoke("Say ok.")
    assert result.metadata == {}
    _, seen = hook.seen[0]
    assert (seen.thread_id, seen.user, seen.tags, seen.metadata) == (result.session_id, "bob", (), {})
