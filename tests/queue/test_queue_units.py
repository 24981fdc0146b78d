"""Parts of the queue below the served paths.

Call digests, the stream -> protocol envelope mapping, the worker CLI's usage errors, and what the service
reads from a run's stream written in a given order (a real Redis, db 13).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from codeact.engine.events import EventSequence, RunCompleted, RunStarted
from codeact.engine.queue._state import call_digest

CODEACT = str(Path(sys.executable).parent / "codeact")


def test_a_call_digest_names_the_call_not_the_order_of_its_arguments() -> None:
    one = call_digest("ledger", "add", {"name": "apple", "count": 2})
    assert one == call_digest("ledger", "add", {"count": 2, "name": "apple"})
    assert one != call_digest("ledger", "add", {"name": "pear", "count": 2})
    assert one != call_digest("ledger", "remove", {"name": "apple", "count": 2})


def test_the_stream_of_a_continued_run_maps_to_one_protocol_run() -> None:
    from codeact.engine.queue import QueueRunManager
    from codeact.engine.runner import ResultMapper

    manager = QueueRunManager({}, queue="redis://127.0.0.1:1/0")  # no connection is made here
    mapper = ResultMapper("run-1")
    started = [False]
    first, second = EventSequence("a"), EventSequence("b")

    def started_event(seq: EventSequence, resumed: bool) -> dict[str, object]:
        event = seq.emit(RunStarted, session_id="s", blueprint_id="b", model="m", input="go", resumed=resumed)
        return event.to_json()

    entries = [
        {"type": "run.queued", "run_id": "run-1", "queue": "codeact"},
        started_event(first, False),
        {"type": "run.paused", "run_id": "run-1", "kind": "approval"},
        {"type": "run.requeued", "run_id": "run-1", "attempt": 2, "reason": "answered"},
        started_event(second, True),
        second.emit(RunCompleted, answer="done", reason="finish", rounds=2).to_json(),
    ]
    envelopes = [e for entry in entries for e in manager._envelopes(mapper, entry, started)]
    assert [e.sequence for e in envelopes] == list(range(1, len(envelopes) + 1))
    assert [e.type for e in envelopes].count("state.updated") == 1  # one run.started for the client
    assert envelopes[-1].type == "run.completed" and envelopes[-1].terminal


def test_queue_level_stops_become_run_failed() -> None:
    from codeact.engine.queue import QueueRunManager
    from codeact.engine.runner import ResultMapper

    manager = QueueRunManager({}, queue="redis://127.0.0.1:1/0")
    cancelled = manager._envelopes(ResultMapper("r"), {"type": "run.cancelled", "run_id": "r"}, [False])
    [failed] = cancelled
    assert failed.type == "run.failed" and failed.model_dump(mode="json")["data"]["code"] == "cancelled"
    deadline = {"type": "run.failed", "run_id": "r", "error": {"code": "queue.deadline", "message": "too long"}}
    [late] = manager._envelopes(ResultMapper("r"), deadline, [False])
    data = late.model_dump(mode="json")["data"]
    assert data["code"] == "runner.timeout" and data["retryable"] is True  # a protocol code (RUNNER_ERROR_CODES)
    assert data["error"].startswith("[queue.deadline] too long")


def test_the_worker_needs_a_redis_queue_url() -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp"}
    out = subprocess.run([CODEACT, "worker", "--queue", "amqp://x"], capture_output=True, text=True, env=env)
    assert out.returncode == 2
    assert "--queue redis://HOST:PORT/DB is required" in out.stderr


def test_a_workers_agents_share_one_store_whose_pool_is_sized_from_its_concurrency(tmp_path: Path) -> None:
    from codeact.engine.queue._task import WorkerConfig
    from codeact.engine.store import SQLiteStore
    from codeact.engine.store.redis_store import RedisStore, pool_size_for

    config = WorkerConfig(name="w", max_sandboxes=200)
    url = "redis://127.0.0.1:1/0?prefix=t"  # a pool is built, no connection is made
    first = config.store_for(url)
    assert first is config.store_for(url)  # every agent of the worker: one pool, not one each
    assert isinstance(first, RedisStore) and first.pool_size == pool_size_for(200) == 50
    small = WorkerConfig(name="w", max_sandboxes=2).store_for(url)
    assert small is not first and small.pool_size == pool_size_for(2)
    sqlite = config.store_for(f"sqlite:///{tmp_path / 's.db'}")
    assert isinstance(sqlite, SQLiteStore)


def test_a_runs_history_is_its_whole_stream_and_counts_its_platform_actions(redis_url: str) -> None:
    import uuid

    from codeact.engine.queue._state import RunState
    from codeact.engine.runner.platform_actions import actions_requested

    state = RunState(redis_url.rsplit("/", 1)[0] + "/13")
    run_id = f"run-history-{uuid.uuid4().hex[:8]}"
    requested = {"requested": True, "action": "message.edit", "target": None, "payload": {"text": "Hi."}}
    done = {"type": "tool.call.completed", "toolkit": "platform_api", "operation": "request_action", "error": None}
    try:
        pinged = {"type": "tool.call.completed", "toolkit": "slow", "operation": "ping", "result": "pong"}
        for index in range(1203):  # more than one page (a read gives 500 at most)
            state.append(run_id, {**pinged, "index": index})
        state.append(run_id, {**done, "result": requested})
        state.append(run_id, {**done, "result": None, "error": {"code": "tool_error", "message": "refused"}})
        state.append(run_id, {**done, "result": {"requested": False}})
        state.append(run_id, {**done, "result": requested, "from_record": "S:1:0"})  # the continuation's same call
        history = state.history(run_id)
        assert [e.get("index") for e in history[:1203]] == list(range(1203)) and len(history) == 1207
        # the refused and the malformed requests are not counted, nor the request answered from the record
        assert actions_requested(history) == 1
    finally:
        state.redis.delete(state.key(run_id), state.stream_key(run_id))
        state.close()


async def test_a_paused_runs_pending_interaction_is_its_approval_not_a_later_platform_action(redis_url: str) -> None:
    # The stream of a queued run that gathered slow.ping() (approval: ask) with platform_api.request_action(...):
    # the platform action's request came after the approval's, before the worker stopped the paused run. The
    # entries are written as the client and the worker write them (QueueClient.enqueue, _Run._pump/_finish),
    # in the shapes a real run's stream held; the order is fixed here, where the served paths can only race for it.
    import json
    import uuid

    from codeact.engine.events import ActionRequested, CodeStarted, ToolCallCompleted, ToolCallStarted
    from codeact.engine.queue import QueueRunManager
    from codeact.engine.queue._state import PREFIX
    from codeact.engine.runner.interactions import approval_request
    from codeact.engine.runner.platform_actions import actions_requested

    manager = QueueRunManager({}, queue=redis_url.rsplit("/", 1)[0] + "/13")
    state = manager.state
    run_id, session_id = f"run-pending-{uuid.uuid4().hex[:8]}", f"conv-{uuid.uuid4().hex[:8]}"
    ping, edit = f"{session_id}:1:0", f"{session_id}:1:1"  # the calls' ids; the approval's is the call's
    edited = {"action": "message.edit", "target": {"message_id": "m-2"}}
    engine = EventSequence()
    events = [
        engine.emit(RunStarted, session_id=session_id, blueprint_id="parity-agent", model="m", input="Ping and edit."),
        engine.emit(CodeStarted, round=1, code="pong, asked = await asyncio.gather(slow.ping(), ...)"),
        engine.emit(ToolCallStarted, call_id=ping, toolkit="slow", operation="ping", arguments={}, round=1),
        engine.emit(ActionRequested, request_id=ping, toolkit="slow", operation="ping", arguments={}, round=1),
        engine.emit(
            ToolCallStarted, call_id=edit, toolkit="platform_api", operation="request_action", arguments=edited, round=1
        ),
        engine.emit(
            ToolCallCompleted,
            call_id=edit,
            toolkit="platform_api",
            operation="request_action",
            result={"requested": True, **edited, "payload": None},
            round=1,
        ),
    ]
    pause = {
        "kind": "approval",
        "request_id": "a-call-digest",
        "interaction_id": ping,
        "toolkit": "slow",
        "operation": "ping",
        "arguments": {},
    }
    try:
        request = {"runner_id": "parity-agent", "session_id": session_id, "queue": "codeact"}
        state.create(run_id, request, event={"type": "run.queued", "run_id": run_id, "queue": "codeact"})
        state.update(run_id, status="running", worker="w")
        for event in events:
            state.append(run_id, event.to_json())
        paused = {"type": "run.paused", "run_id": run_id, "session_id": session_id, **pause}
        state.append(run_id, paused, status="paused", pause=json.dumps(pause))
        assert actions_requested(state.history(run_id)) == 1  # the platform action is in the stream, after the approval
        info = await manager.get(run_id)
        assert info is not None and info.status == "waiting"
        approval = approval_request(ping, toolkit="slow", operation="ping", arguments={}).model_dump(mode="json")
        assert list(info.pending) == [approval]  # before the fix: [{}], the platform action's (empty) payload
    finally:
        state.redis.delete(state.key(run_id), state.stream_key(run_id))
        state.redis.srem(f"{PREFIX}:active", run_id)
        state.redis.zrem(f"{PREFIX}:runs", run_id)
        state.redis.delete(f"{PREFIX}:session:{session_id}:last")
        await manager.close()


COUNTING = """\
version: codeact.agent/v1
extend: codeact-base
id: counting-agent
toolkits:
  - ref: system
extensions:
  runner:
    permissions:
      platform_api: [message.edit]
"""


def test_a_redis_outage_while_the_worker_counts_the_runs_platform_actions_is_not_a_refused_context(
    tmp_path: Path,
) -> None:
    # The worker reads the run's stream to count the platform actions already requested. With the queue's
    # Redis stopped, that read is a store outage, not an invalid request: the attempt stops with
    # store.unavailable (as on any other Redis error of a worker) and writes no failure; the run stays
    # `running`, so once Redis is back the reaper enqueues it again.
    import asyncio
    import uuid

    import pytest

    from codeact.engine.agent import Agent, BuildOptions, assemble
    from codeact.engine.blueprint import load_text
    from codeact.engine.errors import StoreError
    from codeact.engine.queue._state import RunState
    from codeact.engine.queue._task import WorkerConfig, _Run
    from codeact.engine.store import open_store
    from tests.redis_server import PrivateRedis, running
    from tests.service.helpers import context

    server = PrivateRedis(tmp_path)
    lifetime = running(server)
    next(lifetime)
    state = RunState(server.url)
    run_id = f"run-outage-{uuid.uuid4().hex[:8]}"
    request = {"input": "go", "context": context("go", run_id=run_id)}
    state.create(run_id, request, event={"type": "run.queued", "run_id": run_id})
    state.update(run_id, status="running")
    options = BuildOptions(model="openai/test", base_url="http://127.0.0.1:9/v1", store=open_store(str(tmp_path / "s")))
    agent = assemble(Agent, load_text(COUNTING), toolkits=(), options=options)
    try:
        server.kill()
        with pytest.raises(StoreError) as down:
            asyncio.run(_Run(state, WorkerConfig(name="w"), run_id, "1|w")._drive(agent, request))
        assert down.value.code == "store.unavailable"
        assert down.value.message.startswith(f"the queue's Redis at redis://127.0.0.1:{server.port}/0 is unreachable: ")
        assert down.value.message.endswith(
            f"; run {run_id!r}'s events could not be read; check that the server is running and that --queue "
            "points to it"
        )
        server.start()  # the same port and data: nothing was written for the run, which is still running
        assert [e["type"] for e in state.history(run_id)] == ["run.queued"]
        assert state.get(run_id)["status"] == "running"
    finally:
        state.close()
        asyncio.run(agent.aclose())
        next(lifetime, None)
