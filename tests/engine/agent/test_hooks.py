"""Hooks (order, jumps) and interceptors (nesting, refusals) around the model and tool calls."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from codeact.engine.agent import Hook, HookContext, Jump, ModelCall, ToolCall
from codeact.engine.replay import replay_session
from codeact.engine.store import Store
from codeact.sandbox import SubprocessSandbox

from .conftest import BASE, MakeAgent, Probe, code, of_type

PROBE = BASE.replace("  - ref: devops", "  - ref: probe")


class _Recorder(Hook):
    def __init__(self, name: str, log: list[str], jumps: dict[tuple[str, int], Jump] | None = None) -> None:
        self.name = name
        self.log = log
        self.jumps = jumps or {}

    def _at(self, point: str, ctx: HookContext) -> Jump | None:
        self.log.append(f"{self.name}.{point}" + (f":{ctx.purpose}" if ctx.purpose else ""))
        return self.jumps.pop((point, ctx.round), None)

    async def before_agent(self, ctx: HookContext) -> Jump | None:
        return self._at("before_agent", ctx)

    async def after_agent(self, ctx: HookContext) -> Jump | None:
        return self._at("after_agent", ctx)

    async def before_model(self, ctx: HookContext) -> Jump | None:
        return self._at("before_model", ctx)

    async def after_model(self, ctx: HookContext) -> Jump | None:
        return self._at("after_model", ctx)


async def test_hooks_run_in_order_and_after_hooks_in_reverse(make_agent: MakeAgent) -> None:
    log: list[str] = []
    built = make_agent(replies=[code("system.finish(1)")], hooks=[_Recorder("a", log), _Recorder("b", log)])
    events = await built.run("go")

    assert events[-1].type == "run.completed"
    assert log == [
        "a.before_agent",
        "b.before_agent",
        "a.before_model:code",
        "b.before_model:code",
        "b.after_model:code",
        "a.after_model:code",
        "b.after_agent",
        "a.after_agent",
    ]


@pytest.mark.parametrize(
    ("point", "round_index", "rounds"),
    [
        pytest.param("before_agent", 0, 0, id="before-agent"),
        pytest.param("before_model", 2, 1, id="before-model"),
        pytest.param("after_model", 2, 1, id="after-model"),
    ],
)
async def test_a_hook_jump_to_end_ends_the_run_with_its_reason(
    make_agent: MakeAgent, sqlite_store: Store, point: str, round_index: int, rounds: int
) -> None:
    jump = Jump(to="end", reason="budget exhausted")
    hook = _Recorder("h", [], {(point, round_index): jump})
    built = make_agent(replies=[code("x = 1"), code("y = 2"), code("system.finish(3)")], hooks=[hook])
    events = await built.run("go", session_id="s-end")

    last = events[-1]
    assert last.type == "run.completed"
    assert (last.reason, last.answer, last.rounds) == ("hook", "budget exhausted", rounds)  # type: ignore[attr-defined]
    assert not of_type(events, "code.started")[rounds:]
    meta = await sqlite_store.get_session("s-end")
    assert meta is not None and (meta.status, meta.rounds) == ("completed", rounds)


async def test_after_model_jump_to_model_asks_again(make_agent: MakeAgent) -> None:
    hook = _Recorder("h", [], {("after_model", 1): Jump(to="model", reason="try again")})
    built = make_agent(replies=[code("system.finish('first')"), code("system.finish('second')")], hooks=[hook])
    events = await built.run("go")

    assert events[-1].answer == "second"  # type: ignore[attr-defined]
    assert len(built.script.requests) == 2
    assert [e.text for e in of_type(events, "message.completed")] == [  # type: ignore[attr-defined]
        code("system.finish('first')"),
        code("system.finish('second')"),
    ]
    assert len(of_type(events, "code.started")) == 1


class _ModelSpy:
    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log

    async def intercept_model(self, request: ModelCall, call_next: Callable[[ModelCall], Awaitable[Any]]) -> Any:
        self.log.append(f"{self.name}>model:{request.purpose}")
        reply = await call_next(request)
        self.log.append(f"{self.name}<model")
        return reply


class _ToolSpy:
    def __init__(self, name: str, log: list[str], refuse: str | None = None) -> None:
        self.name = name
        self.log = log
        self.refuse = refuse

    async def intercept_tool(self, request: ToolCall, call_next: Callable[[ToolCall], Awaitable[Any]]) -> Any:
        self.log.append(f"{self.name}>{request.toolkit}.{request.operation}")
        if self.refuse is not None and request.operation == self.refuse:
            raise PermissionError(f"{request.toolkit}.{request.operation} is blocked by policy")
        result = await call_next(request)
        self.log.append(f"{self.name}<{request.operation}")
        return result


async def test_interceptors_nest_first_registered_outermost(make_agent: MakeAgent, probe: Probe) -> None:
    log: list[str] = []
    interceptors = [_ModelSpy("m1", log), _ToolSpy("t1", log), _ModelSpy("m2", log), _ToolSpy("t2", log)]
    built = make_agent(PROBE, [code("probe.record(1)\nsystem.finish(2)")], interceptors=interceptors)
    events = await built.run("go")

    assert events[-1].answer == 2  # type: ignore[attr-defined]
    assert probe.calls == [("record", 1)]
    assert log == [
        "m1>model:code",
        "m2>model:code",
        "m2<model",
        "m1<model",
        "t1>probe.record",
        "t2>probe.record",
        "t2<record",
        "t1<record",
        "t1>system.finish",
        "t2>system.finish",
        "t2<finish",
        "t1<finish",
    ]


async def test_a_tool_interceptor_refusal_reaches_the_code_and_replays(
    make_agent: MakeAgent, probe: Probe, sqlite_store: Store
) -> None:
    reply = code(
        """
        try:
            probe.record("secret")
        except Exception as exc:
            refused = str(exc)
        system.finish(refused)
        """
    )
    built = make_agent(PROBE, [reply], interceptors=[_ToolSpy("guard", [], refuse="record")])
    events = await built.run("go", session_id="s-refuse")

    assert events[-1].answer == "probe.record is blocked by policy"  # type: ignore[attr-defined]
    assert probe.calls == []
    done = [e for e in of_type(events, "tool.call.completed") if e.operation == "record"]  # type: ignore[attr-defined]
    assert len(done) == 1
    assert done[0].error["message"] == "probe.record is blocked by policy"  # type: ignore[attr-defined]
    record = await sqlite_store.round("s-refuse", 1)
    assert record is not None
    assert [(c["operation"], c["error"] is not None) for c in record.calls] == [("record", True), ("finish", False)]
    report = await replay_session(
        sqlite_store, "s-refuse", sandbox_factory=lambda h: SubprocessSandbox(bridge=h), registry=built.agent.registry
    )
    assert report.ok, report.to_json()
