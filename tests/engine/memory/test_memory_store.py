"""The memory manager on both backends: entities, history, experiences, retrieval, eviction, approval."""

from __future__ import annotations

import time

import pytest

from codeact.engine.memory import (
    AgentMemoryError,
    MemoryBackend,
    MemoryConfig,
    MemoryItem,
    MemoryManager,
    memory_config,
)
from tests.engine.openai_server import OpenAIServer


def _config(**config: object) -> MemoryConfig:
    return memory_config(enabled=True, scope="agent", store=None, config=config)


async def test_entities_remember_recall_replace_and_list(backend: MemoryBackend) -> None:
    manager = MemoryManager(backend, _config())
    await manager.remember("S1", "deploy target", {"host": "db1", "port": 5432})
    await manager.remember("S1", "owner", "alice")
    await manager.remember("S1", "deploy target", {"host": "db2"})  # replaces
    await manager.remember("S2", "owner", "bob")  # another session
    assert await manager.recall("S1", "deploy target") == {"host": "db2"}
    assert await manager.recall("S2", "owner") == "bob"
    assert sorted(item.title for item in await manager.entities("S1")) == ["deploy target", "owner"]
    with pytest.raises(AgentMemoryError) as caught:
        await manager.recall("S1", "nothing")
    assert "nothing is remembered under 'nothing' in this session" in caught.value.message
    assert "'owner'" in caught.value.message


async def test_entity_data_must_be_json_and_bounded(backend: MemoryBackend) -> None:
    manager = MemoryManager(backend, _config(entities={"maxDataChars": 20}))
    with pytest.raises(AgentMemoryError, match="must be JSON"):
        await manager.remember("S1", "x", {1, 2})
    with pytest.raises(AgentMemoryError, match="over the limit of 20"):
        await manager.remember("S1", "x", "a" * 50)
    with pytest.raises(AgentMemoryError, match="non-empty string"):
        await manager.remember("S1", "  ", 1)


async def test_experience_retrieval_is_lexical_and_skips_unrelated(backend: MemoryBackend) -> None:
    manager = MemoryManager(backend, _config())
    await manager.add_experience(
        "agent:a", {"task": "Deploy version 2.4 of the checkout API", "lesson": "call devops.deploy_app"}
    )
    await manager.add_experience("agent:a", {"task": "Plot monthly sales as a bar chart", "lesson": "use matplotlib"})
    await manager.add_experience("agent:b", {"task": "Deploy the web app", "lesson": "other agent"})
    found = await manager.experiences_for("agent:a", "deploy the checkout api version 2.5")
    assert [item.data["task"] for item, _ in found] == ["Deploy version 2.4 of the checkout API"]
    assert await manager.experiences_for("agent:a", "translate hello into French") == []
    # a write changes the scope's version: the cached index is rebuilt
    await manager.add_experience("agent:a", {"task": "Translate a greeting into French", "lesson": "no tools"})
    found = await manager.experiences_for("agent:a", "translate hello into French")
    assert [item.data["task"] for item, _ in found] == ["Translate a greeting into French"]


async def test_history_relevant_then_most_recent(backend: MemoryBackend) -> None:
    manager = MemoryManager(backend, _config(history={"topK": 2, "recent": 1}))
    await manager.add_history("alice", {"summary": "Asked about the login requirements of project P-123", "keys": ""})
    await manager.add_history("alice", {"summary": "Asked for the weather in Paris", "keys": "Paris"})
    await manager.add_history("bob", {"summary": "Asked about the login page", "keys": ""})
    found = await manager.history_for("alice", "which login requirements are open?")
    assert [item.data["summary"] for item in found] == [
        "Asked about the login requirements of project P-123",
        "Asked for the weather in Paris",  # the most recent, though unrelated
    ]
    assert [item.data["summary"] for item in await manager.history_for("carol", "login")] == []


async def test_eviction_keeps_count_age_and_size_limits(backend: MemoryBackend) -> None:
    manager = MemoryManager(backend, _config(experience={"maxCount": 3, "maxAgeDays": 30}))
    now = time.time()
    old = MemoryItem(kind="experience", scope="agent:a", title="old", text="old task", created_at=now - 40 * 86_400)
    await backend.put([old])
    for i in range(5):
        await manager.add_experience("agent:a", {"task": f"task number {i}"})
    kept = await backend.items("experience", "agent:a")
    assert [item.data["task"] for item in kept] == ["task number 4", "task number 3", "task number 2"]

    sized = MemoryManager(backend, _config(history={"maxChars": 1200, "maxCount": None, "maxAgeDays": None}))
    for i in range(10):
        await sized.add_history("u", {"summary": f"summary {i} " + "x" * 200})
    rows = await backend.items("history", "user:u")
    assert sum(item.size for item in rows) <= 1200
    assert rows[0].data["summary"].startswith("summary 9")

    entities = MemoryManager(backend, _config(entities={"maxCount": 2}))
    for title in ("a", "b", "c"):
        await entities.remember("S", title, 1)
    assert sorted(item.title for item in await entities.entities("S")) == ["b", "c"]


async def test_lru_policy_keeps_what_was_used(backend: MemoryBackend) -> None:
    manager = MemoryManager(backend, _config(policy="lru", experience={"maxCount": 2}))
    first = await manager.add_experience("agent:a", {"task": "resize the product images"})
    await manager.add_experience("agent:a", {"task": "count the open tickets"})
    assert [i.id for i, _ in await manager.experiences_for("agent:a", "resize images")] == [first.id]
    await manager.add_experience("agent:a", {"task": "archive the old logs"})
    kept = {item.data["task"] for item in await backend.items("experience", "agent:a")}
    assert kept == {"resize the product images", "archive the old logs"}


async def test_require_approval_retrieves_only_reviewed(backend: MemoryBackend) -> None:
    manager = MemoryManager(backend, _config(experience={"requireApproval": True}))
    item = await manager.add_experience("agent:a", {"task": "rotate the API keys of the billing service"})
    assert await manager.experiences_for("agent:a", "rotate billing API keys") == []
    await manager.approve(item.id)
    found = await manager.experiences_for("agent:a", "rotate billing API keys")
    assert [i.id for i, _ in found] == [item.id]


async def test_curation_list_find_delete_import(backend: MemoryBackend) -> None:
    manager = MemoryManager(backend)
    item = await manager.add_experience("project", {"task": "a task"})
    await manager.remember("S", "t", 1)
    assert {i.kind for i in await manager.list()} == {"experience", "entity"}
    exported = [i.to_json() for i in await manager.list("experience")]
    assert await manager.delete(item.id) is True
    assert await manager.delete(item.id) is False
    assert await manager.find(item.id) is None
    assert await manager.import_items(exported, approved=True) == 1
    back = await manager.find(item.id)
    assert back is not None and back.approved and back.data["task"] == "a task"


def test_config_problems_name_the_field() -> None:
    from codeact.engine.memory import memory_config_problems

    problems = memory_config_problems(
        enabled=True,
        scope="galaxy",
        store=None,
        config={"experience": {"topK": -1, "retrival": "x"}, "budgetTokens": 10},
    )
    text = "\n".join(message for _, message in problems)
    assert "session.memory.scope: Input should be 'session', 'user', 'agent' or 'project'" in text
    assert "session.memory.config.experience.topK: Input should be greater than or equal to 0" in text
    assert "session.memory.config.experience.retrival: unknown key" in text
    assert "session.memory.config.budgetTokens: Input should be greater than or equal to 50" in text
    assert memory_config_problems(enabled=True, scope="user", store="session", config={}) == []


async def test_embedding_retrieval_through_litellm(
    backend: MemoryBackend, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    config = _config(experience={"embeddingModel": "openai/test-embedding"})
    manager = MemoryManager(backend, config, embedding_base=openai_server.base_url)
    deploy = await manager.add_experience("agent:a", {"task": "deploy the checkout api to production"})
    await manager.add_experience("agent:a", {"task": "plot monthly sales"})
    # a record stored without a vector (imported) is embedded on first retrieval
    await backend.put([MemoryItem(kind="experience", scope="agent:a", title="t", text="translate greetings")])
    found = await manager.experiences_for("agent:a", "deploy checkout to production", k=1)
    assert [item.id for item, _ in found] == [deploy.id]
    posts = [r for r in openai_server.requests if r.path.startswith("/v1/embeddings")]
    assert posts and posts[0].body["model"] == "test-embedding"
    assert all(item.data.get("_embedding") for item in await backend.items("experience", "agent:a"))


async def test_prune_ages_out_scopes_nobody_writes_to(backend: MemoryBackend) -> None:
    old = time.time() - 10 * 86_400
    stale = [
        MemoryItem(kind="entity", scope=f"S{i}", title="t", text="1", data={"value": 1}, created_at=old)
        for i in range(3)
    ]
    await backend.put(stale)
    manager = MemoryManager(backend, _config(entities={"maxAgeDays": 5}))
    await manager.remember("S-live", "t", 2)
    assert await manager.prune("entity") == 3
    assert await backend.scopes("entity") == ["S-live"]


async def test_prompt_memory_stays_within_the_budget(backend: MemoryBackend) -> None:
    from codeact.engine.memory import RunMemory, memory_budget

    config = _config(history={"topK": 5, "recent": 0})
    assert memory_budget(config, window=32_000, compact_ratio=0.75) == 1_200  # budgetTokens
    assert memory_budget(config, window=8_000, compact_ratio=0.75) == 1_000  # half the compaction headroom
    assert memory_budget(config, window=8_000, compact_ratio=None) == 1_000  # an eighth of the window
    manager = MemoryManager(backend, config)
    for i in range(5):
        await manager.add_history("dana", {"summary": f"Asked about the quarterly revenue report number {i}"})
        await manager.add_experience("agent:a", {"task": f"Build the quarterly revenue report number {i}"})
    await manager.remember("S", "report", {"quarter": "Q3"})
    run = RunMemory(manager, session_id="S", user="dana", agent_id="a")

    def words(text: str) -> int:
        return len(text.split())

    roomy = await run.prepare("the quarterly revenue report", budget=10_000, count=words)
    assert roomy.context is not None and roomy.context.count("\n- ") == 6  # 5 summaries + 1 entity
    assert len(roomy.experiences) == 3  # topK
    tight = await run.prepare("the quarterly revenue report", budget=40, count=words)
    assert tight.used_tokens <= 40
    assert tight.context is not None and tight.context.count("\n- ") == 2
    assert tight.experiences == ()
