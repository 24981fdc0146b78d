"""Hostile input: random and malformed frames/params never crash the bridge or run anything ungranted."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codeact.sandbox.channel import Channel
from codeact.sandbox.runtime import protocol as p
from codeact.toolkits import ToolkitBridge, ToolkitRegistry
from tests.toolkits.sample import Calls, Canary, DevOps

GRANTS = {"devops": ["get_project_info", "echo", "search_requirements"]}
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
_names = st.sampled_from(["devops", "canary", "system", "", "__class__", "DevOps"]) | st.text(max_size=12)
_operations = st.sampled_from(
    ["get_project_info", "fail", "trip", "trip_sync_too", "echo", "_op", "__init__", "drop_database"]
) | st.text(max_size=12)
_arguments = st.dictionaries(
    st.sampled_from(["project_id", "value", "note", "message", "__codeact__", "x"]) | st.text(max_size=6),
    _json | st.fixed_dictionaries({"__codeact__": st.text(max_size=8)}, optional={"v": _json}),
    max_size=3,
)
_call_params = st.fixed_dictionaries(
    {}, optional={"toolkit": _names | _json, "operation": _operations | _json, "arguments": _arguments | _json}
)


def _setup() -> tuple[ToolkitBridge, Calls, Canary]:
    calls, canary = Calls(), Canary()
    bridge = ToolkitBridge(ToolkitRegistry([DevOps(calls), canary]), grants=GRANTS, session_id="fuzz")
    return bridge, calls, canary


def _nothing_ungranted_ran(calls: Calls, canary: Canary) -> None:
    assert canary.ran == []
    assert set(calls.names()) <= {"get_project_info", "search_requirements"}


@FUZZ
@given(method=st.sampled_from(["call", "auth", "execute"]) | st.text(max_size=8), params=_call_params | _json)
def test_handler_answers_every_input_with_a_result_or_rpc_error(method: str, params: Any) -> None:
    bridge, calls, canary = _setup()

    async def run() -> None:
        try:
            result = await bridge.handle(method, params)
        except p.RpcError as err:
            assert err.code in p.ERROR_NAMES
            json.dumps(err.to_json())  # always sendable
        else:
            json.dumps(result)

    asyncio.run(run())
    _nothing_ungranted_ran(calls, canary)
    if method == "call":
        assert len(bridge.drain_calls()) == 1


def _frame(message: Any) -> bytes:
    return json.dumps(message).encode() + b"\n"


_request_frames = st.builds(
    lambda id_, method, params: _frame({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}),
    st.integers(0, 10**6) | st.text(max_size=5) | st.none() | st.booleans() | st.lists(st.integers(), max_size=2),
    st.sampled_from(["call", "auth", "execute", "shutdown"]) | st.text(max_size=6) | _json,
    _call_params | _json,
)
_garbage_frames = st.binary(max_size=200).map(lambda b: b.replace(b"\n", b" ") + b"\n")
_odd_json_frames = _json.map(_frame)
_frames = st.lists(_request_frames | _garbage_frames | _odd_json_frames, min_size=1, max_size=12)


async def _read_until(reader: asyncio.StreamReader, sentinel: str) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    while True:
        line = await asyncio.wait_for(reader.readline(), 10)
        assert line.endswith(b"\n"), "the server closed the connection"
        message = json.loads(line)
        assert message.get("jsonrpc") == "2.0"
        assert ("result" in message) != ("error" in message)
        seen.append(message)
        if message.get("id") == sentinel:
            return seen


async def _session(frames: list[bytes], calls: Calls, canary: Canary, bridge: ToolkitBridge) -> None:
    channel = await Channel.open(bridge)
    try:
        reader, writer = await asyncio.open_unix_connection(str(channel.socket_path))
        writer.write(_frame(p.request(0, "auth", {"token": channel.token, "runtime": "fuzz"})))
        auth = json.loads(await reader.readline())
        assert "result" in auth, auth
        assert auth["result"]["manifest"] == bridge.manifest()
        for data in frames:
            writer.write(data)
        sentinel = {"toolkit": "devops", "operation": "echo", "arguments": {"value": "still here"}}
        writer.write(_frame(p.request("sentinel", "call", sentinel)))
        await writer.drain()
        answers = await _read_until(reader, "sentinel")
        assert answers[-1].get("result") == "still here", answers
        await channel.end_round()
        writer.close()
    finally:
        await channel.close()


@FUZZ
@given(frames=_frames)
def test_channel_and_bridge_survive_hostile_frames(frames: list[bytes]) -> None:
    bridge, calls, canary = _setup()
    asyncio.run(_session(frames, calls, canary, bridge))
    _nothing_ungranted_ran(calls, canary)


def test_canary_calls_over_the_socket_are_refused() -> None:
    bridge, calls, canary = _setup()
    frames = [
        _frame(p.request(1, "call", {"toolkit": "canary", "operation": "trip", "arguments": {}})),
        _frame(p.request(2, "call", {"toolkit": "devops", "operation": "fail", "arguments": {"message": "x"}})),
        _frame(p.request(3, "call", {"toolkit": "devops", "operation": "drop_database", "arguments": {"name": "x"}})),
    ]
    asyncio.run(_session(frames, calls, canary, bridge))
    _nothing_ungranted_ran(calls, canary)
    errors = {r.operation: r.error["name"] for r in bridge.drain_calls() if r.error}
    assert errors == {"trip": "unauthorized", "fail": "unauthorized", "drop_database": "unauthorized"}


async def test_unauthenticated_frames_never_execute() -> None:
    bridge, calls, canary = _setup()
    channel = await Channel.open(bridge)
    try:
        reader, writer = await asyncio.open_unix_connection(str(channel.socket_path))
        writer.write(_frame(p.request(0, "auth", {"token": "wrong", "runtime": "fuzz"})))
        writer.write(
            _frame(
                p.request(
                    1, "call", {"toolkit": "devops", "operation": "get_project_info", "arguments": {"project_id": "1"}}
                )
            )
        )
        await writer.drain()
        answer = json.loads(await reader.readline())
        assert answer["error"]["code"] == p.UNAUTHORIZED
        assert await reader.readline() == b""  # closed
        writer.close()
    finally:
        await channel.close()
    assert calls.log == [] and canary.ran == []
    assert bridge.drain_calls() == []


async def test_timeouts_and_concurrency_over_the_socket() -> None:
    calls = Calls()
    bridge = ToolkitBridge(ToolkitRegistry([DevOps(calls)]), session_id="s", default_timeout=5)
    channel = await Channel.open(bridge)
    try:
        reader, writer = await asyncio.open_unix_connection(str(channel.socket_path))
        writer.write(_frame(p.request(0, "auth", {"token": channel.token, "runtime": "test"})))
        await reader.readline()
        for i in range(1, 6):
            writer.write(
                _frame(p.request(i, "call", {"toolkit": "devops", "operation": "slow", "arguments": {"seconds": 0.1}}))
            )
        writer.write(
            _frame(p.request(6, "call", {"toolkit": "devops", "operation": "slow", "arguments": {"seconds": 30}}))
        )
        await writer.drain()
        answers = {}
        for _ in range(6):
            message = json.loads(await asyncio.wait_for(reader.readline(), 10))
            answers[message["id"]] = message
        writer.close()
    finally:
        await channel.close()
    assert [answers[i]["result"] for i in range(1, 6)] == [0.1] * 5
    assert answers[6]["error"] == {
        "code": p.DEADLINE_EXCEEDED,
        "message": "devops.slow() did not finish within its 1 s timeout",
    }
    starts = [start for start, _ in calls.intervals]
    ends = [end for _, end in calls.intervals]
    assert max(starts) < min(ends)
