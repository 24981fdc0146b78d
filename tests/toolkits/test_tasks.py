"""The board of launched tasks (``codeact.toolkits.tasks``) and ``system.tasks()`` over the bridge."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from codeact.sandbox.runtime import codec
from codeact.sandbox.runtime import protocol as p
from codeact.toolkits import ToolkitBridge, ToolkitContext, ToolkitRegistry
from codeact.toolkits.builtin.system import SystemToolkit
from codeact.toolkits.errors import ToolkitError
from codeact.toolkits.tasks import INPUT_CHARS, KEPT_TASKS, MAX_RUNNING_TASKS, TEXT_CHARS, TaskBoard


class MemoryRecord:
    """A record kept in a list (what the engine keeps in the session's metadata)."""

    def __init__(self, entries: Sequence[Mapping[str, object]] = (), *, taken: Sequence[str] = ()) -> None:
        self.saved: list[dict[str, object]] = [dict(e) for e in entries]
        self.taken_ids = set(taken)
        self.writes = 0
        self.fail = False

    async def load(self) -> list[dict[str, object]]:
        return [dict(e) for e in self.saved]

    async def save(self, entries: Sequence[Mapping[str, object]]) -> None:
        if self.fail:
            raise OSError("the store went away")
        self.writes += 1
        self.saved = [dict(e) for e in entries]

    async def taken(self, task_id: str) -> bool:
        return task_id in self.taken_ids

    async def settle(self, entry: Mapping[str, object]) -> dict[str, object]:
        return {**entry, "state": "interrupted", "error": "stopped"}


def _shape(task: Mapping[str, object]) -> tuple[object, ...]:
    return task["id"], task["kind"], task["name"], task["input"], task["state"], task["answer"], task["error"]


async def test_a_task_is_running_in_its_block_and_ends_as_the_toolkit_says() -> None:
    board = TaskBoard()
    async with board.launched(kind="subagent", name="reviewer", input="review it", prefix="s1.reviewer") as launch:
        assert launch.id == "s1.reviewer.1"
        [running] = await board.listing()
        assert _shape(running) == ("s1.reviewer.1", "subagent", "reviewer", "review it", "running", None, None)
        assert running["ended"] is None and str(running["started"]).endswith("+00:00")
        await launch.end("completed", answer={"risk": "low"})
    [done] = await board.listing()
    assert (done["state"], done["answer"]) == ("completed", {"risk": "low"})
    assert done["ended"] is not None


@pytest.mark.parametrize(
    ("raised", "state", "error"),
    [
        pytest.param(RuntimeError("boom"), "failed", "boom", id="exception"),
        pytest.param(
            asyncio.CancelledError(),
            "cancelled",
            "cancelled before it ended: its call timed out, the round that started it ended, or the run stopped",
            id="cancel",
        ),
    ],
)
async def test_a_block_ended_by_an_exception_or_a_cancel(raised: BaseException, state: str, error: str) -> None:
    board = TaskBoard()
    with pytest.raises(type(raised)):
        async with board.launched(kind="subagent", name="a", input="x", prefix="s.a"):
            raise raised
    [task] = await board.listing()
    assert (task["state"], task["error"]) == (state, error)


async def test_the_toolkits_own_end_wins_over_the_exception_it_raises_after() -> None:
    board = TaskBoard()
    with pytest.raises(RuntimeError):
        async with board.launched(kind="subagent", name="a", input="x", prefix="s.a") as launch:
            await launch.end("paused", error="asked the user a question")
            raise RuntimeError("sub-agent 'a' asked the user a question")
    [task] = await board.listing()
    assert (task["state"], task["error"]) == ("paused", "asked the user a question")


async def test_long_inputs_answers_and_errors_are_cut_with_a_note() -> None:
    board = TaskBoard()
    task_id = await board.start(kind="subagent", name="a", input="i" * 1000, prefix="s.a")
    await board.end(task_id, "completed", answer={"rows": list(range(400))})
    [task] = await board.listing()
    assert task["input"] == "i" * INPUT_CHARS + "... [cut: 1000 characters in all]"
    answer = str(task["answer"])
    assert answer.startswith('{"rows": [0, 1, 2,') and answer.endswith(" characters in all]")
    assert len(answer) < TEXT_CHARS + 40
    other = await board.start(kind="subagent", name="a", input={"n": 1}, prefix="s.a")
    await board.end(other, "failed", error="e" * 2000)
    assert (await board.listing())[1]["error"] == "e" * TEXT_CHARS + "... [cut: 2000 characters in all]"
    assert (await board.listing())[1]["input"] == '{"n": 1}'


async def test_ids_skip_what_earlier_runs_and_other_sessions_use() -> None:
    record = MemoryRecord(
        [{"id": "s.a.1", "kind": "subagent", "name": "a", "state": "completed", "started": 1.0, "ended": 2.0}],
        taken=["s.a.2"],
    )
    board = TaskBoard(record)
    assert await board.start(kind="subagent", name="a", input="x", prefix="s.a") == "s.a.3"
    assert await board.start(kind="subagent", name="b", input="x", prefix="s.b") == "s.b.1"
    assert [t["id"] for t in record.saved] == ["s.a.1", "s.a.3", "s.b.1"]


async def test_a_long_lived_board_forgets_the_oldest_ended_tasks_never_an_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("codeact.toolkits.tasks._HELD_TASKS", 3)
    board = TaskBoard()
    running = await board.start(kind="subagent", name="a", input="slow", prefix="s.a")
    for _ in range(4):
        async with board.launched(kind="subagent", name="a", input="x", prefix="s.a"):
            pass
    assert [t["id"] for t in await board.listing()] == ["s.a.1", "s.a.4", "s.a.5"]
    assert running == "s.a.1"
    assert await board.start(kind="subagent", name="a", input="x", prefix="s.a") == "s.a.6"


async def test_an_earlier_runs_running_task_is_settled_by_the_record() -> None:
    record = MemoryRecord([{"id": "s.a.1", "kind": "subagent", "name": "a", "input": "x", "state": "running"}])
    [task] = await TaskBoard(record).listing()
    assert (task["state"], task["error"]) == ("interrupted", "stopped")


async def test_a_record_that_fails_never_fails_the_task(caplog: pytest.LogCaptureFixture) -> None:
    record = MemoryRecord()
    record.fail = True
    board = TaskBoard(record)
    async with board.launched(kind="subagent", name="a", input="x", prefix="s.a") as launch:
        await launch.end("completed", answer="ok")
    assert [t["state"] for t in await board.listing()] == ["completed"]
    assert "the launched tasks could not be recorded: the store went away" in caplog.text


async def test_the_record_keeps_the_latest_entries() -> None:
    record = MemoryRecord()
    board = TaskBoard(record)
    for _ in range(KEPT_TASKS + 5):  # one after the other (at most MAX_RUNNING_TASKS run at once)
        await board.end(await board.start(kind="subagent", name="a", input="x", prefix="s.a"), "completed")
    assert len(record.saved) == KEPT_TASKS
    assert record.saved[0]["id"] == "s.a.6"


# -- system.tasks() over the bridge ------------------------------------------------------------------
def _bridge(board: TaskBoard | None) -> ToolkitBridge:
    context = ToolkitContext(session_id="s", tasks=board)
    return ToolkitBridge(ToolkitRegistry([SystemToolkit()]), grants={"system": ["tasks"]}, context=context)


async def _tasks(bridge: ToolkitBridge, **arguments: Any) -> Any:
    params = {"toolkit": "system", "operation": "tasks", "arguments": arguments}
    return codec.decode(await bridge.handle("call", params))


async def test_a_launch_past_the_running_cap_is_refused_and_one_ending_frees_a_place() -> None:
    board = TaskBoard(MemoryRecord())
    ids = [await board.start(kind="subagent", name="a", input="x", prefix="s.a") for _ in range(MAX_RUNNING_TASKS)]
    with pytest.raises(ToolkitError, match="8 tasks this run launched are still running, the most at once") as refused:
        await board.start(kind="subagent", name="a", input="x", prefix="s.a")
    assert refused.value.code == "tasks.too_many"
    await board.end(ids[0], "completed")
    assert await board.start(kind="subagent", name="a", input="x", prefix="s.a") == "s.a.9"


async def test_system_tasks_lists_filters_and_limits() -> None:
    board = TaskBoard()
    for n in range(3):
        async with board.launched(kind="subagent", name="a", input=f"task {n}", prefix="s.a") as launch:
            if n == 1:
                await launch.end("failed", error="no")
    running = await board.start(kind="subagent", name="b", input="slow", prefix="s.b")
    bridge = _bridge(board)
    listed = await _tasks(bridge)
    assert [(t["id"], t["state"]) for t in listed] == [
        ("s.a.1", "completed"),
        ("s.a.2", "failed"),
        ("s.a.3", "completed"),
        (running, "running"),
    ]
    assert set(listed[0]) == {"id", "kind", "name", "input", "state", "answer", "error", "started", "ended"}
    assert [t["id"] for t in await _tasks(bridge, state="completed")] == ["s.a.1", "s.a.3"]
    assert [t["id"] for t in await _tasks(bridge, limit=2)] == ["s.a.3", "s.b.1"]


@pytest.mark.parametrize(
    ("board", "arguments", "message"),
    [
        pytest.param(TaskBoard(), {"limit": 0}, "tasks() takes a limit from 1 to 100, got 0", id="limit"),
        pytest.param(
            None, {}, "system.tasks() needs the host's record of launched tasks, and this host keeps none", id="none"
        ),
    ],
)
async def test_system_tasks_refusals(board: TaskBoard | None, arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(p.RpcError) as info:
        await _tasks(_bridge(board), **arguments)
    assert (info.value.code, info.value.message) == (p.TOOL_ERROR, message)


async def test_system_tasks_refuses_an_unknown_state() -> None:
    with pytest.raises(p.RpcError) as info:
        await _tasks(_bridge(TaskBoard()), state="done")
    assert info.value.code == p.INVALID_PARAMS
    assert "'running', 'completed', 'failed', 'paused', 'cancelled' or 'interrupted'" in info.value.message


def test_the_stub_shows_the_operation() -> None:
    stubs = _bridge(TaskBoard()).stubs()
    assert (
        "    async def tasks(self, state: Literal['running', 'completed', 'failed', 'paused', 'cancelled', "
        "'interrupted'] | None = None, limit: int = 20) -> list[dict[str, Any]]:\n"
        '        """The tasks this session launched (sub-agent runs), oldest first, each with its state now.\n'
    ) in stubs
