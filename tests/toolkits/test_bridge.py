from __future__ import annotations

import asyncio
from typing import Any

import pytest

from codeact.sandbox.runtime import codec
from codeact.sandbox.runtime import protocol as p
from codeact.toolkits import (
    ApprovalDecision,
    ApprovalRequest,
    CallRecord,
    DynamicToolkit,
    OperationSpec,
    ToolkitBridge,
    ToolkitContext,
    ToolkitNotFoundError,
    ToolkitRegistry,
    operation,
    toolkit,
)
from codeact.toolkits.builtin.system import SystemToolkit
from tests.toolkits.sample import Calls, Canary, DevOps, Weather


def _call(toolkit: str, operation: str, **arguments: Any) -> dict[str, Any]:
    return {"toolkit": toolkit, "operation": operation, "arguments": {k: codec.encode(v) for k, v in arguments.items()}}


def _bridge(calls: Calls | None = None, canary: Canary | None = None, **kwargs: Any) -> ToolkitBridge:
    grants = kwargs.pop("grants", {"devops": "*", "weather": "*", "system": "*"})
    registry = ToolkitRegistry([DevOps(calls), Weather(), SystemToolkit(), canary or Canary()])
    return ToolkitBridge(registry, grants=grants, session_id="s1", **kwargs)


async def _error(bridge: ToolkitBridge, params: Any, method: str = "call") -> p.RpcError:
    with pytest.raises(p.RpcError) as info:
        await bridge.handle(method, params)
    return info.value


def test_manifest_lists_only_granted_operations() -> None:
    bridge = _bridge(grants={"devops": ["get_project_info", "search_requirements"], "weather": "*"})
    assert bridge.manifest() == {
        "toolkits": {
            "devops": {
                "description": "DevOps platform: projects, requirements, deployments",
                "operations": {
                    "get_project_info": {"params": ["project_id"], "required": ["project_id"]},
                    "search_requirements": {
                        "params": ["project_id", "query", "limit"],
                        "required": ["project_id", "query"],
                    },
                },
            },
            "weather": {
                "description": "Weather forecasts (dynamic)",
                "operations": {"forecast": {"params": ["city", "days", "unit"], "required": ["city"]}},
            },
        }
    }
    assert "class canary" not in bridge.stubs()
    assert [t["function"]["name"] for t in bridge.openai_tools()] == [
        "devops__get_project_info",
        "devops__search_requirements",
        "weather__forecast",
    ]


def test_grants_naming_unknown_things_fail_at_construction() -> None:
    with pytest.raises(ToolkitNotFoundError) as info:
        _bridge(grants={"devops": ["get_project_infos"]})
    assert info.value.message.startswith(
        "grant names operation(s) 'get_project_infos' of toolkit 'devops', which it does not have; it has: "
    )
    with pytest.raises(ToolkitNotFoundError) as info:
        _bridge(grants={"devop": "*"})
    assert info.value.message == "grant names toolkit 'devop', which is not available; did you mean 'devops'?"


async def test_a_granted_call_returns_the_encoded_result() -> None:
    calls = Calls()
    bridge = _bridge(calls)
    result = await bridge.handle("call", _call("devops", "get_project_info", project_id="123"))
    assert codec.decode(result) == {"id": "123", "name": "project 123", "status": "active"}
    assert calls.names() == ["get_project_info"]
    assert codec.decode(await bridge.handle("call", _call("weather", "forecast", city="Paris"))) == {
        "city": "Paris",
        "days": 1,
        "temps": [21.5],
    }


@pytest.mark.parametrize(
    ("params", "code", "message"),
    [
        pytest.param(
            _call("canary", "trip"), p.UNAUTHORIZED, "toolkit 'canary' is not granted to this session", id="toolkit"
        ),
        pytest.param(
            _call("devops", "fail", message="x"),
            p.UNAUTHORIZED,
            "operation devops.fail is not granted to this session",
            id="operation",
        ),
        pytest.param(
            _call("nope", "x"),
            p.NOT_FOUND,
            "there is no toolkit 'nope'; toolkits of this session: devops",
            id="unknown-toolkit",
        ),
        pytest.param(
            _call("devops", "get_projet_info", project_id="1"),
            p.NOT_FOUND,
            "toolkit 'devops' has no operation 'get_projet_info'; did you mean 'get_project_info'?",
            id="unknown-operation",
        ),
        pytest.param(
            _call("devops", "__init__"),
            p.NOT_FOUND,
            "toolkit 'devops' has no operation '__init__'; granted: get_project_info",
            id="dunder",
        ),
        pytest.param(
            {"toolkit": 1, "operation": None},
            p.INVALID_PARAMS,
            "call params must be {toolkit: str, operation: str, arguments: object}",
            id="malformed",
        ),
    ],
)
async def test_refusals_never_execute(params: Any, code: int, message: str) -> None:
    calls, canary = Calls(), Canary()
    bridge = _bridge(calls, canary, grants={"devops": ["get_project_info"]})
    err = await _error(bridge, params)
    assert (err.code, err.message) == (code, message)
    assert calls.log == []
    assert canary.ran == []


async def test_unknown_method() -> None:
    err = await _error(_bridge(), {}, method="execute")
    assert (err.code, err.message) == (p.METHOD_NOT_FOUND, "unknown method 'execute': the runtime may only send 'call'")


@pytest.mark.parametrize(
    ("arguments", "message", "errors"),
    [
        pytest.param(
            {},
            "invalid arguments for devops.search_requirements(): project_id: Field required; query: Field required",
            [
                {"field": "project_id", "message": "Field required", "type": "missing"},
                {"field": "query", "message": "Field required", "type": "missing"},
            ],
            id="missing",
        ),
        pytest.param(
            {"project_id": "1", "query": "q", "limit": "many"},
            "invalid arguments for devops.search_requirements(): limit: Input should be a valid integer, unable to "
            "parse string as an integer",
            [
                {
                    "field": "limit",
                    "message": "Input should be a valid integer, unable to parse string as an integer",
                    "type": "int_parsing",
                }
            ],
            id="wrong-type",
        ),
        pytest.param(
            {"project_id": "1", "query": "q", "sort": "asc"},
            "invalid arguments for devops.search_requirements(): sort: Extra inputs are not permitted",
            [{"field": "sort", "message": "Extra inputs are not permitted", "type": "extra_forbidden"}],
            id="extra",
        ),
    ],
)
async def test_invalid_params_carry_field_errors(arguments: dict[str, Any], message: str, errors: list[Any]) -> None:
    calls = Calls()
    err = await _error(_bridge(calls), _call("devops", "search_requirements", **arguments))
    assert (err.code, err.message, err.data) == (p.INVALID_PARAMS, message, {"errors": errors})
    assert calls.log == []


async def test_arguments_are_converted_to_the_annotated_types() -> None:
    calls = Calls()
    bridge = _bridge(calls)
    result = await bridge.handle(
        "call", _call("devops", "create_requirement", project_id="P", requirement={"title": "login"})
    )
    assert codec.decode(result) == "P-login-3"
    assert type(calls.log[0][1]["requirement"]).__name__ == "Requirement"


async def test_tool_errors_carry_the_message_only() -> None:
    err = await _error(_bridge(), _call("devops", "fail", message="project 9 is archived"))
    assert (err.code, err.message, err.data) == (p.TOOL_ERROR, "project 9 is archived", {"type": "RuntimeError"})
    err = await _error(_bridge(), _call("devops", "fail", message="cannot open /srv/secret/config/db.yaml"))
    assert err.message == "cannot open <path>/db.yaml"


async def test_per_call_timeout() -> None:
    calls = Calls()
    bridge = _bridge(calls)
    err = await _error(bridge, _call("devops", "slow", seconds=30))
    assert (err.code, err.message) == (p.DEADLINE_EXCEEDED, "devops.slow() did not finish within its 1 s timeout")
    bridge = _bridge(calls, default_timeout=0.05)
    err = await _error(bridge, _call("devops", "nap", seconds=30))
    assert (err.code, err.message) == (p.DEADLINE_EXCEEDED, "devops.nap() did not finish within its 0.05 s timeout")


async def test_rate_limit() -> None:
    calls = Calls()
    bridge = _bridge(calls, rate_limit=(3, 60.0))
    for _ in range(3):
        await bridge.handle("call", _call("devops", "get_project_info", project_id="1"))
    err = await _error(bridge, _call("devops", "get_project_info", project_id="1"))
    assert (err.code, err.message) == (
        p.RATE_LIMITED,
        "rate limit exceeded: at most 3 calls per 60 s in this session; wait, or do more work per call",
    )
    assert len(calls.log) == 3


async def test_approval_allow() -> None:
    requests: list[ApprovalRequest] = []

    async def approve(request: ApprovalRequest) -> ApprovalDecision:
        requests.append(request)
        return ApprovalDecision(allow=True)

    calls = Calls()
    bridge = _bridge(calls, approval=approve)
    result = await bridge.handle("call", _call("devops", "deploy_app", app_id="web", version="1.2"))
    assert codec.decode(result) == {"deploy_id": "D-web-1.2", "strategy": "rolling"}
    assert requests == [
        ApprovalRequest(
            session_id="s1",
            sequence=0,
            toolkit="devops",
            operation="deploy_app",
            description="Deploy a version of an app.",
            arguments={"app_id": codec.encode("web"), "version": codec.encode("1.2")},
        )
    ]


async def test_approval_deny_with_reason() -> None:
    async def deny(request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision(allow=False, reason="change freeze until Monday")

    calls = Calls()
    err = await _error(_bridge(calls, approval=deny), _call("devops", "deploy_app", app_id="web", version="1.2"))
    assert (err.code, err.message) == (
        p.APPROVAL_DENIED,
        "devops.deploy_app() was not approved: change freeze until Monday",
    )
    assert calls.log == []


async def test_approval_without_approver_and_deny_policy() -> None:
    asked: list[ApprovalRequest] = []

    async def approve(request: ApprovalRequest) -> ApprovalDecision:
        asked.append(request)
        return ApprovalDecision(allow=True)

    calls = Calls()
    err = await _error(_bridge(calls), _call("devops", "deploy_app", app_id="web", version="1"))
    assert (err.code, err.message) == (
        p.APPROVAL_DENIED,
        "devops.deploy_app() needs the user's approval, but this host has no approver: denied",
    )
    err = await _error(_bridge(calls, approval=approve), _call("devops", "drop_database", name="prod"))
    assert (err.code, err.message) == (
        p.APPROVAL_DENIED,
        "devops.drop_database() is denied by the host's policy and never runs",
    )
    assert asked == []
    assert calls.log == []


async def test_context_reaches_operations() -> None:
    context = ToolkitContext(session_id="s1", user="ana", run_id="r1")
    registry = ToolkitRegistry([DevOps()])
    bridge = ToolkitBridge(registry, context=context)
    result = await bridge.handle("call", _call("devops", "whoami"))
    assert codec.decode(result) == {"session_id": "s1", "user": "ana", "has_deadline": True}


async def test_control_results() -> None:
    bridge = _bridge()
    result = await bridge.handle("call", _call("system", "finish", answer="42 deployments"))
    assert result == {"$control": {"kind": "finish", "answer": codec.encode("42 deployments")}}
    assert bridge.drain_calls()[0].control == {"kind": "finish", "answer": codec.encode("42 deployments")}


async def test_result_over_the_cap_is_payload_too_large() -> None:
    bridge = _bridge(max_result_bytes=1000)
    err = await _error(bridge, _call("devops", "echo", value="x" * 5000))
    assert (err.code, err.message) == (
        p.PAYLOAD_TOO_LARGE,
        "the result of devops.echo() exceeds the 1000-byte limit; return less data",
    )


async def test_unregistered_toolkit_is_not_found() -> None:
    registry = ToolkitRegistry([DevOps(), Weather()])
    bridge = ToolkitBridge(registry, session_id="s1")
    registry.unregister("weather")
    err = await _error(bridge, _call("weather", "forecast", city="x"))
    assert (err.code, err.message) == (p.NOT_FOUND, "toolkit 'weather' is no longer available on the host")
    assert "weather" not in bridge.manifest()["toolkits"]


async def test_every_call_is_recorded_in_order() -> None:
    bridge = _bridge(grants={"devops": ["get_project_info", "fail"]})
    await bridge.handle("call", _call("devops", "get_project_info", project_id="7"))
    await _error(bridge, _call("devops", "fail", message="nope"))
    await _error(bridge, _call("canary", "trip"))
    records = bridge.drain_calls()
    assert [(r.sequence, r.toolkit, r.operation, r.ok) for r in records] == [
        (0, "devops", "get_project_info", True),
        (1, "devops", "fail", False),
        (2, "canary", "trip", False),
    ]
    first, second, third = records
    assert first.session_id == "s1"
    assert first.arguments == {"project_id": codec.encode("7")}
    assert codec.decode(first.result) == {"id": "7", "name": "project 7", "status": "active"}
    assert first.error is None and first.duration_s >= 0 and first.started_at > 0
    assert second.error == {
        "code": p.TOOL_ERROR,
        "name": "tool_error",
        "message": "nope",
        "data": {"type": "RuntimeError"},
    }
    assert third.error == {
        "code": p.UNAUTHORIZED,
        "name": "unauthorized",
        "message": "toolkit 'canary' is not granted to this session",
    }
    assert CallRecord.from_json(first.to_json()) == first
    assert bridge.drain_calls() == []


async def test_recording_can_be_switched_off() -> None:
    bridge = _bridge(record=False)
    await bridge.handle("call", _call("devops", "get_project_info", project_id="7"))
    assert bridge.drain_calls() == []


async def test_cancelled_calls_are_recorded() -> None:
    bridge = _bridge()
    task = asyncio.create_task(bridge.handle("call", _call("devops", "nap", seconds=30)))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [record] = bridge.drain_calls()
    assert record.error == {
        "code": p.CANCELLED,
        "name": "cancelled",
        "message": "the call was cancelled: the round ended",
    }


async def test_events_are_emitted() -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    context = ToolkitContext(session_id="s1", emit=lambda kind, data: events.append((kind, data)))
    bridge = ToolkitBridge([DevOps()], context=context)
    await bridge.handle("call", _call("devops", "get_project_info", project_id="1"))
    assert [kind for kind, _ in events] == ["tool.call.started", "tool.call.completed"]
    assert events[0][1] == {
        "sequence": 0,
        "call_id": "s1:0:0",  # without rounds (no engine around the bridge): round 0
        "toolkit": "devops",
        "operation": "get_project_info",
        "arguments": {"project_id": codec.encode("1")},
    }
    assert "error" not in events[1][1]
    assert events[1][1]["call_id"] == "s1:0:0"


async def test_call_events_can_be_left_to_the_host() -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    context = ToolkitContext(session_id="s1", emit=lambda kind, data: events.append((kind, data)))
    bridge = ToolkitBridge([DevOps()], context=context, call_events=False)
    assert await bridge.handle("call", _call("devops", "get_project_info", project_id="1"))
    assert events == []


async def test_gathered_calls_overlap_on_the_host() -> None:
    calls = Calls()
    bridge = _bridge(calls)
    results = await asyncio.gather(*(bridge.handle("call", _call("devops", "slow", seconds=0.1)) for _ in range(5)))
    assert [codec.decode(r) for r in results] == [0.1] * 5
    starts = [start for start, _ in calls.intervals]
    ends = [end for _, end in calls.intervals]
    assert max(starts) < min(ends)  # every call started before any finished: they ran concurrently


async def test_blocking_sync_operations_run_in_threads() -> None:
    calls = Calls()
    bridge = _bridge(calls)
    results = await asyncio.gather(
        *(bridge.handle("call", _call("devops", "search_requirements", project_id=str(i), query="q")) for i in range(4))
    )
    assert len(results) == 4


async def test_replay_answers_from_the_record_without_running_tools() -> None:
    calls = Calls()
    bridge = _bridge(calls)
    first = await bridge.handle("call", _call("devops", "get_project_info", project_id="1"))
    await _error(bridge, _call("devops", "fail", message="boom"))
    records = [CallRecord.from_json(r.to_json()) for r in bridge.drain_calls()]
    calls.log.clear()

    replay = ToolkitBridge.replaying(records, toolkits=[DevOps(calls)])
    assert replay.manifest()["toolkits"]["devops"]["operations"]["get_project_info"]["params"] == ["project_id"]
    assert await replay.handle("call", _call("devops", "get_project_info", project_id="1")) == first
    err = await _error(replay, _call("devops", "fail", message="boom"))
    assert (err.code, err.message) == (p.TOOL_ERROR, "boom")
    assert calls.log == []
    assert replay.replay_remaining == 0
    assert replay.divergence is None
    assert [r.toolkit for r in replay.drain_calls()] == ["devops", "devops"]


async def test_replay_divergence() -> None:
    bridge = _bridge()
    await bridge.handle("call", _call("devops", "get_project_info", project_id="1"))
    replay = ToolkitBridge.replaying(bridge.drain_calls())
    assert replay.manifest() == {
        "toolkits": {
            "devops": {
                "description": "",
                "operations": {"get_project_info": {"params": ["project_id"], "required": []}},
            }
        }
    }
    err = await _error(replay, _call("devops", "get_project_info", project_id="2"))
    expected = (
        "replay diverged at call #0: the code called devops.get_project_info(project_id='2') but the record has "
        "devops.get_project_info(project_id='1') next; the session cannot be replayed deterministically (did the "
        "code or a toolkit change?)"
    )
    assert (err.code, err.message) == (p.INTERNAL_ERROR, expected)
    assert replay.divergence == expected


@toolkit(name="taskcheck", description="Checks how tools are run")
class TaskCheck:
    @operation
    async def in_task(self) -> bool:
        """Whether the tool runs inside an asyncio task (anyio, sniffio and asyncio.timeout need one)."""
        async with asyncio.timeout(5):
            await asyncio.sleep(0)
        return asyncio.current_task() is not None

    @operation
    async def own_timeout(self) -> None:
        """Raise the tool's own TimeoutError."""
        raise TimeoutError("the upstream API timed out")


async def test_tools_run_in_a_task_and_their_own_timeouts_are_tool_errors() -> None:
    bridge = ToolkitBridge([TaskCheck()], session_id="s")
    assert await bridge.handle("call", {"toolkit": "taskcheck", "operation": "in_task", "arguments": {}}) is True
    err = await _error(bridge, {"toolkit": "taskcheck", "operation": "own_timeout", "arguments": {}})
    assert (err.code, err.message, err.data) == (p.TOOL_ERROR, "the upstream API timed out", {"type": "TimeoutError"})


async def test_tools_run_in_a_task_over_the_channel() -> None:
    from codeact.sandbox.channel import Channel

    bridge = ToolkitBridge([TaskCheck()], session_id="s")
    channel = await Channel.open(bridge)
    try:
        reader, writer = await asyncio.open_unix_connection(str(channel.socket_path))
        writer.write(p.encode_frame(p.request(0, "auth", {"token": channel.token, "protocol": p.PROTOCOL_VERSION})))
        await reader.readline()
        for id_, op in ((1, "in_task"), (2, "own_timeout")):
            writer.write(
                p.encode_frame(p.request(id_, "call", {"toolkit": "taskcheck", "operation": op, "arguments": {}}))
            )
        await writer.drain()
        answers = {}
        for _ in range(2):
            message = p.decode_frame(await asyncio.wait_for(reader.readline(), 10))
            answers[message["id"]] = message
        writer.close()
    finally:
        await channel.close()
    assert answers[1]["result"] is True
    assert answers[2]["error"]["code"] == p.TOOL_ERROR


class _Starting(DynamicToolkit):
    """A dynamic toolkit whose server takes longer to (re)start than one call may take."""

    name = "starting"
    description = "Starts slowly, answers fast"

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.started = 0

    def operations(self) -> list[OperationSpec]:
        return [OperationSpec.from_json_schema("ping", description="Ping.", schema={"type": "object"}, timeout=0.1)]

    async def prepare(self, operation: str) -> None:
        await asyncio.sleep(0.3)  # three times the call's timeout
        if self.fail:
            raise RuntimeError("server 'starting' did not start: exit code 1")
        self.started += 1

    async def execute(self, operation: str, params: dict[str, Any], context: ToolkitContext) -> Any:
        return f"pong after {self.started} start(s)"


async def test_a_toolkits_preparation_does_not_count_against_the_calls_timeout() -> None:
    toolkit = _Starting()
    bridge = ToolkitBridge(ToolkitRegistry([toolkit]), grants={"starting": "*"}, session_id="s1")
    assert await bridge.handle("call", _call("starting", "ping")) == "pong after 1 start(s)"
    failing = ToolkitBridge(ToolkitRegistry([_Starting(fail=True)]), grants={"starting": "*"}, session_id="s1")
    err = await _error(failing, _call("starting", "ping"))
    assert (err.code, err.message) == (p.TOOL_ERROR, "server 'starting' did not start: exit code 1")
