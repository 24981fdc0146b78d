"""The console's reads from the store: paging, filters, parent/child links, variables before -> after."""

from __future__ import annotations

from pathlib import Path

import pytest

from codeact.engine.service.console._data import list_rows, parent_of, read_session
from codeact.engine.store import RoundRecord, SessionMeta, open_store


async def test_sessions_are_paged_newest_first_and_filtered(tmp_path: Path) -> None:
    async with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        for i in range(120):
            blueprint = "odd" if i % 2 else "even"
            meta = SessionMeta(session_id=f"s-{i:03d}", blueprint_id=blueprint, blueprint_hash="h", model="m",
                               created_at=1_700_000_000 + i)  # fmt: skip
            await store.create_session(meta)
            if i % 3 == 0:
                await store.update_session(meta.session_id, status="failed")
        rows, total, blueprints = await list_rows(store, status=None, blueprint=None, page=1, per_page=50)
        assert total == 120 and blueprints == ["even", "odd"]
        assert [r.session_id for r in rows[:2]] == ["s-119", "s-118"] and len(rows) == 50
        rows, _, _ = await list_rows(store, status=None, blueprint=None, page=3, per_page=50)
        assert [r.session_id for r in rows] == [f"s-{i:03d}" for i in range(19, -1, -1)]
        rows, total, _ = await list_rows(store, status="failed", blueprint="odd", page=1, per_page=50)
        assert total == 20 and all(int(r.session_id[2:]) % 6 == 3 for r in rows)
        rows, total, _ = await list_rows(store, status=None, blueprint=None, page=1, per_page=50, show=lambda m: False)
        assert (rows, total) == ([], 0)


async def test_a_session_shows_variables_before_and_after_and_its_links(tmp_path: Path) -> None:
    async with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        for sid in ("main", "main.helper.1"):
            await store.create_session(SessionMeta(session_id=sid, blueprint_id="b", blueprint_hash="h", model="m"))
        states = [{"x": 1, "gone": "soon"}, {"x": 2, "y": "<new>"}]
        for index, variables in enumerate(states, start=1):
            record = RoundRecord(session_id="main", index=index, started_at=0.0, duration_s=0.1, prompt_hash="p",
                                 reply="r", code="x = 1\n", variables=variables)  # fmt: skip
            await store.append_round(record, segments=[], variables=variables)
        view = await read_session(store, "main")
        assert view is not None and view.children == ["main.helper.1"] and view.parent is None
        changes = {c.name: (c.kind, c.before, c.after) for c in view.rounds[1].variables}
        assert changes == {
            "x": ("changed", "1", "2"),
            "y": ("added", None, '"<new>"'),
            "gone": ("removed", '"soon"', None),
        }
        child = await read_session(store, "main.helper.1")
        assert child is not None and child.parent == "main"
        assert await read_session(store, "nobody") is None
    assert parent_of("a.b.c", None) is None and parent_of("a.b.2", None) == "a"


async def test_a_tuple_a_date_and_a_call_result_show_as_python_never_as_codec_tags(tmp_path: Path) -> None:
    """The codec's ``{"$type": "tuple", "v": ["A", 4]}`` is ``('A', 4)`` on the page (issue 39)."""
    async with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        await store.create_session(SessionMeta(session_id="S", blueprint_id="b", blueprint_hash="h", model="m"))
        variables = {"best": {"$type": "tuple", "v": ["A", 4]}, "when": {"$type": "date", "v": "2026-01-02"}}
        call = {
            "sequence": 0,
            "session_id": "S",
            "toolkit": "stats",
            "operation": "best_pair",
            "arguments": {},
            "result": {"$type": "tuple", "v": ["A", 4]},
            "error": None,
            "started_at": 0.0,
            "duration_s": 0.0,
        }
        record = RoundRecord(session_id="S", index=1, started_at=0.0, duration_s=0.1, prompt_hash="p", reply="r",
                             code="best = await stats.best_pair()\n", variables=variables, calls=(call,))  # fmt: skip
        await store.append_round(record, segments=[], variables=variables)
        view = await read_session(store, "S")
        assert view is not None
        shown = view.rounds[0]
        assert {c.name: c.after for c in shown.variables} == {"best": "('A', 4)", "when": "datetime.date(2026, 1, 2)"}
        assert [c.result for c in shown.calls] == ["('A', 4)"]


async def test_a_labelled_runs_session_shows_its_tags_metadata_and_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run of ``codeact.Agent`` on the local OpenAI-compatible server, labelled with ``RunConfig``."""
    from codeact import Agent, RunConfig
    from tests.engine.openai_server import serve

    monkeypatch.setenv("CODEACT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    blueprint = tmp_path / "agent.yaml"
    blueprint.write_text(
        "version: codeact.agent/v1\nextend: codeact-base\nid: labelled\n"
        "workflow: {maxTurns: 2, codeact: {thought: 'off'}}\n"
    )
    store = f"sqlite:///{tmp_path / 's.db'}"
    with serve() as model:
        model.push("The shelf holds four boxes.\n```python\nsystem.finish(4)\n```")
        async with Agent.from_blueprint(blueprint, model="openai/test", base_url=model.base_url, store=store) as agent:
            config = RunConfig(tags=["inventory", "eu"], metadata={"ticket": 812})
            result = await agent.invoke("How many boxes?", session_id="labelled-1", config=config)
            view = await read_session(agent.store, "labelled-1")
    assert result.answer == 4 and view is not None
    info = dict(view.info)
    assert (info["tags"], info["metadata"]) == ("inventory, eu", '{"ticket":812}')
    assert len(info["trace"]) == 32
