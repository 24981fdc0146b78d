"""The host side of the bridge: handshake, framing, hostile frames, dispatch, cancellation."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import stat
from collections.abc import AsyncIterator
from typing import Any

import pytest

from codeact.sandbox.channel import Channel, ChannelClosedError, RpcHandler
from codeact.sandbox.runtime import protocol as p


class EchoHandler:
    """A tiny toolkit: ``echo.echo(value)``, ``echo.slow(seconds)``, ``echo.fail()``."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.running = 0
        self.max_running = 0
        self.cancelled = 0

    def manifest(self) -> dict[str, Any]:
        return {
            "toolkits": {
                "echo": {
                    "description": "echo",
                    "operations": {
                        "echo": {"params": ["value"], "required": ["value"]},
                        "slow": {"params": ["seconds"], "required": ["seconds"]},
                        "fail": {"params": [], "required": []},
                    },
                }
            }
        }

    async def handle(self, method: str, params: dict[str, Any]) -> Any:
        self.calls.append(params)
        op = params.get("operation")
        if op == "fail":
            raise p.RpcError(p.TOOL_ERROR, "the tool failed")
        if op == "slow":
            self.running += 1
            self.max_running = max(self.max_running, self.running)
            try:
                await asyncio.sleep(params["arguments"]["seconds"])
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
            finally:
                self.running -= 1
            return "slept"
        return params["arguments"]["value"]


class Peer:
    """A raw client connection speaking newline-delimited JSON."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def send_raw(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_raw(json.dumps(message).encode() + b"\n")

    async def recv(self) -> dict[str, Any]:
        line = await asyncio.wait_for(self.reader.readline(), 10)
        assert line, "connection closed"
        message: dict[str, Any] = json.loads(line)
        return message

    async def closed(self) -> bool:
        data = await asyncio.wait_for(self.reader.read(), 10)
        return data == b""

    async def auth(self, token: str) -> dict[str, Any]:
        await self.send(p.request(0, "auth", {"token": token}))
        return await self.recv()


_PEERS: list[Peer] = []


@pytest.fixture(autouse=True)
async def _close_peers() -> AsyncIterator[None]:
    yield
    while _PEERS:
        writer = _PEERS.pop().writer
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


@pytest.fixture
async def channel() -> AsyncIterator[Channel]:
    ch = await Channel.open(EchoHandler())
    yield ch
    await ch.close()


async def connect(channel: Channel) -> Peer:
    reader, writer = await asyncio.open_unix_connection(str(channel.socket_path), limit=32 * 1024 * 1024)
    peer = Peer(reader, writer)
    _PEERS.append(peer)
    return peer


async def authed(channel: Channel) -> Peer:
    peer = await connect(channel)
    answer = await peer.auth(channel.token)
    assert answer["result"]["protocol"] == p.PROTOCOL_VERSION
    return peer


def handler_of(channel: Channel) -> EchoHandler:
    assert isinstance(channel.handler, EchoHandler)
    return channel.handler


async def test_private_directory_and_socket(channel: Channel) -> None:
    assert stat.S_IMODE(os.stat(channel.directory).st_mode) == 0o700
    assert stat.S_ISSOCK(os.stat(channel.socket_path).st_mode)
    assert isinstance(channel.handler, RpcHandler)


async def test_auth_returns_the_manifest_and_calls_are_dispatched(channel: Channel) -> None:
    peer = await connect(channel)
    answer = await peer.auth(channel.token)
    assert answer["id"] == 0
    assert answer["result"]["manifest"]["toolkits"]["echo"]["operations"]["echo"]["params"] == ["value"]
    await peer.send(p.request(1, "call", {"toolkit": "echo", "operation": "echo", "arguments": {"value": [1, "x"]}}))
    assert await peer.recv() == {"jsonrpc": "2.0", "id": 1, "result": [1, "x"]}
    await peer.send(p.request(2, "call", {"toolkit": "echo", "operation": "fail", "arguments": {}}))
    failed = await peer.recv()
    assert failed == {"jsonrpc": "2.0", "id": 2, "error": {"code": p.TOOL_ERROR, "message": "the tool failed"}}
    assert channel.rpc_count == 2


@pytest.mark.parametrize(
    "first",
    [
        pytest.param(p.request(0, "auth", {"token": "wrong"}), id="wrong-token"),
        pytest.param(p.request(0, "auth", {}), id="no-token"),
        pytest.param(p.request(0, "call", {"toolkit": "echo", "operation": "echo"}), id="call-before-auth"),
    ],
)
async def test_unauthenticated_connections_are_refused_and_the_server_stays_up(
    channel: Channel, first: dict[str, Any]
) -> None:
    intruder = await connect(channel)
    await intruder.send(first)
    answer = await intruder.recv()
    assert answer["error"]["code"] == p.UNAUTHORIZED
    assert await intruder.closed()
    assert handler_of(channel).calls == []
    peer = await authed(channel)
    await peer.send(p.request(1, "call", {"toolkit": "echo", "operation": "echo", "arguments": {"value": 1}}))
    assert (await peer.recv())["result"] == 1


async def test_wrong_token_message(channel: Channel) -> None:
    intruder = await connect(channel)
    answer = await intruder.auth("nope")
    assert answer["error"] == {"code": p.UNAUTHORIZED, "message": "wrong session token"}


async def test_second_connection_is_refused_even_with_the_token(channel: Channel) -> None:
    peer = await authed(channel)
    second = await connect(channel)
    answer = await second.auth(channel.token)
    assert answer["error"] == {"code": p.UNAUTHORIZED, "message": "this session already has a connected runtime"}
    assert await second.closed()
    await peer.send(p.request(5, "call", {"toolkit": "echo", "operation": "echo", "arguments": {"value": "still"}}))
    assert (await peer.recv())["result"] == "still"


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        pytest.param(b"this is not json\n", p.PARSE_ERROR, id="garbage"),
        pytest.param(b'{"jsonrpc": "2.0", "id": 1, "method": "call", "params": {\n', p.PARSE_ERROR, id="truncated"),
        pytest.param(b"\xff\xfe\x00\x01\n", p.PARSE_ERROR, id="binary"),
        pytest.param(b"[1, 2, 3]\n", p.INVALID_REQUEST, id="not-an-object"),
        pytest.param(b'{"id": 1, "method": "call"}\n', p.INVALID_REQUEST, id="no-jsonrpc"),
        pytest.param(b'{"jsonrpc": "2.0", "id": 1}\n', p.INVALID_REQUEST, id="neither"),
    ],
)
async def test_bad_frames_get_an_error_and_the_connection_keeps_working(
    channel: Channel, raw: bytes, code: int
) -> None:
    peer = await authed(channel)
    await peer.send_raw(raw)
    answer = await peer.recv()
    assert answer["error"]["code"] == code
    await peer.send(p.request(7, "call", {"toolkit": "echo", "operation": "echo", "arguments": {"value": "ok"}}))
    assert await peer.recv() == {"jsonrpc": "2.0", "id": 7, "result": "ok"}


async def test_malformed_requests_are_answered(channel: Channel) -> None:
    peer = await authed(channel)
    await peer.send({"jsonrpc": "2.0", "id": 3, "method": 5, "params": {}})
    assert (await peer.recv())["error"]["code"] == p.INVALID_REQUEST
    await peer.send({"jsonrpc": "2.0", "id": 4, "method": "call", "params": [1]})
    assert (await peer.recv())["error"]["code"] == p.INVALID_REQUEST


async def test_garbage_before_auth_closes_the_connection(channel: Channel) -> None:
    intruder = await connect(channel)
    await intruder.send_raw(b"GET / HTTP/1.1\r\n\r\n")
    assert (await intruder.recv())["error"]["code"] == p.PARSE_ERROR
    assert await intruder.closed()
    await authed(channel)


@pytest.mark.parametrize("newline", [pytest.param(True, id="with-newline"), pytest.param(False, id="newline-later")])
async def test_oversized_frame_is_refused_and_the_stream_resyncs(channel: Channel, newline: bool) -> None:
    peer = await authed(channel)
    big = b'{"jsonrpc": "2.0", "id": 9, "method": "call", "params": {"x": "' + b"a" * p.MAX_FRAME + b'"}}'
    await peer.send_raw(big + (b"\n" if newline else b""))
    answer = await peer.recv()
    assert answer["error"]["code"] == p.PAYLOAD_TOO_LARGE
    if not newline:
        await peer.send_raw(b"tail of the oversized frame\n")
    await peer.send(p.request(10, "call", {"toolkit": "echo", "operation": "echo", "arguments": {"value": "after"}}))
    assert await peer.recv() == {"jsonrpc": "2.0", "id": 10, "result": "after"}
    assert [c["arguments"] for c in handler_of(channel).calls] == [{"value": "after"}]


async def test_truncated_frame_at_eof_is_answered(channel: Channel) -> None:
    peer = await authed(channel)
    await peer.send_raw(b'{"jsonrpc": "2.0", "id": 1, "meth')
    peer.writer.write_eof()
    assert (await peer.recv())["error"]["code"] == p.PARSE_ERROR


async def test_host_requests_round_trip(channel: Channel) -> None:
    peer = await authed(channel)
    pending = asyncio.ensure_future(channel.request("execute", {"code": "x"}, timeout=10))
    request = await peer.recv()
    assert request["method"] == "execute" and request["params"] == {"code": "x"}
    await peer.send(p.response(request["id"], {"stdout": "hi"}))
    assert await pending == {"stdout": "hi"}
    pending = asyncio.ensure_future(channel.request("execute", {}, timeout=10))
    request = await peer.recv()
    await peer.send(p.error_response(request["id"], p.RpcError(p.INVALID_PARAMS, "bad")))
    with pytest.raises(p.RpcError, match="bad"):
        await pending


async def test_host_request_fails_when_the_runtime_goes_away(channel: Channel) -> None:
    peer = await authed(channel)
    pending = asyncio.ensure_future(channel.request("execute", {}, timeout=10))
    await peer.recv()
    peer.writer.close()
    with pytest.raises(ChannelClosedError, match="closed its bridge connection"):
        await pending
    await asyncio.wait_for(channel.lost, 5)
    assert not channel.connected
    with pytest.raises(ChannelClosedError, match="not connected"):
        await channel.request("execute", {})


async def test_calls_overlap_and_in_flight_calls_are_cancelled_when_the_round_ends(channel: Channel) -> None:
    peer = await authed(channel)
    channel.begin_round()
    for i in range(5):
        slow = {"toolkit": "echo", "operation": "slow", "arguments": {"seconds": 60}}
        await peer.send(p.request(i + 1, "call", slow))
    handler = handler_of(channel)
    for _ in range(200):
        if handler.running == 5:
            break
        await asyncio.sleep(0.01)
    assert handler.max_running == 5
    assert await channel.end_round() == 5
    answers = [await peer.recv() for _ in range(5)]
    assert {a["error"]["code"] for a in answers} == {p.CANCELLED}
    assert handler.cancelled == 5


async def test_no_handler_means_no_toolkits() -> None:
    ch = await Channel.open(None)
    try:
        peer = await connect(ch)
        answer = await peer.auth(ch.token)
        assert answer["result"]["manifest"] == {"toolkits": {}}
        await peer.send(p.request(1, "call", {"toolkit": "x", "operation": "y", "arguments": {}}))
        assert (await peer.recv())["error"]["code"] == p.NOT_FOUND
    finally:
        await ch.close()
    assert not ch.directory.exists()


async def test_auth_timeout_closes_silent_connections() -> None:
    ch = await Channel.open(EchoHandler(), auth_timeout_s=0.2)
    try:
        silent = await connect(ch)
        assert (await silent.recv())["error"]["code"] == p.UNAUTHORIZED
        assert await silent.closed()
    finally:
        await ch.close()


def _host_sockets(ch: Channel) -> list[object]:
    """The host's end of every connection the channel holds (the peer's and those not yet authenticated)."""
    conns = [*ch._accepted, *([ch._peer] if ch._peer is not None else [])]
    return [c._transport.get_extra_info("socket") for c in conns if c._transport is not None]


async def test_close_returns_with_every_socket_closed() -> None:
    # The host's sockets are closed by the time close() returns, not on a later turn of the loop: a test
    # (or a host) that ends its loop right after close() leaves no socket for the garbage collector.
    ch = await Channel.open(EchoHandler())
    peer = await authed(ch)
    sockets = _host_sockets(ch)
    assert sockets
    await ch.close()
    assert {s.fileno() for s in sockets} == {-1}  # type: ignore[attr-defined]
    assert await peer.closed()
