"""The session's record of its launched tasks (``engine/agent/launched.py``) on both real stores.

A run that dies while a sub-agent runs leaves that task ``running`` in the record; the next run of the
session reads how it ended from the sub-agent's own session.
"""

from __future__ import annotations

import time

import pytest

from codeact.engine.agent.launched import TASKS_KEY, SessionTasks
from codeact.engine.store import RoundRecord, SessionMeta, Store
from codeact.engine.store import SessionStatus as Status
from codeact.toolkits.tasks import TaskBoard


async def _session(
    store: Store, session_id: str, *, status: Status = "active", extra: dict[str, object] | None = None
) -> None:
    await store.create_session(
        SessionMeta(session_id=session_id, blueprint_id="b", blueprint_hash="h", model="m", extra=extra or {})
    )
    if status != "active":
        await store.update_session(session_id, status=status)


def _running(task_id: str) -> dict[str, object]:
    return {"id": task_id, "kind": "subagent", "name": "checker", "input": "x", "state": "running", "started": 1.0}


async def test_the_record_is_kept_beside_the_sessions_other_metadata(store: Store) -> None:
    await _session(store, "lead", extra={"grants": {"system": "*"}})
    record = SessionTasks(store, "lead")
    assert await record.load() == []
    await record.save([_running("lead.checker.1")])
    meta = await store.get_session("lead")
    assert meta is not None and meta.extra == {"grants": {"system": "*"}, TASKS_KEY: [_running("lead.checker.1")]}
    assert await record.load() == [_running("lead.checker.1")]
    assert not await record.taken("lead.checker.1")
    await _session(store, "lead.checker.1")
    assert await record.taken("lead.checker.1")
    assert not await record.taken("not a session id!")


async def test_a_session_deleted_while_its_run_goes_on_is_not_written_again(store: Store) -> None:
    await SessionTasks(store, "gone").save([_running("gone.a.1")])
    assert await store.get_session("gone") is None


@pytest.mark.parametrize(
    ("status", "state", "error"),
    [
        pytest.param("active", "interrupted", "stopped before it ended", id="active"),
        pytest.param("interrupted", "interrupted", "stopped before it ended", id="interrupted"),
        pytest.param("failed", "failed", "the reason was not recorded", id="failed"),
        pytest.param("paused", "paused", "asked the user a question", id="paused"),
    ],
)
async def test_a_task_an_earlier_run_left_running_is_read_back_from_its_session(
    store: Store, status: Status, state: str, error: str
) -> None:
    await _session(store, "lead", extra={TASKS_KEY: [_running("lead.checker.1")]})
    await _session(store, "lead.checker.1", status=status)
    [task] = await TaskBoard(SessionTasks(store, "lead")).listing()
    assert (task["id"], task["state"], task["answer"]) == ("lead.checker.1", state, None)
    assert error in str(task["error"])
    assert task["ended"] is not None


async def test_a_completed_sub_agent_is_read_back_with_its_answer(store: Store) -> None:
    await _session(store, "lead", extra={TASKS_KEY: [_running("lead.checker.1"), _running("lead.checker.2")]})
    await _session(store, "lead.checker.1")
    record = RoundRecord(
        session_id="lead.checker.1",
        index=1,
        started_at=time.time(),
        duration_s=0.1,
        prompt_hash="",
        reply="",
        status="ok",
        control={"kind": "finish", "answer": {"tents": 12}},
    )
    await store.append_round(record, segments=(), variables={})
    await store.update_session("lead.checker.1", status="completed")
    first, second = await TaskBoard(SessionTasks(store, "lead")).listing()
    assert (first["state"], first["answer"], first["error"]) == ("completed", {"tents": 12}, None)
    # no session at all: the run died before the sub-agent's run opened one
    assert (second["state"], second["answer"]) == ("interrupted", None)
    assert second["ended"] is None
