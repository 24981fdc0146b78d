"""The host's per-connection memory stays bounded under bridge abuse.

Frames over the cap are refused before they are buffered whole; a runtime that floods garbage
without reading the answers does not make the host pile id-less error answers up without end;
memory a round's large frames took is given back at the end of the round.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from codeact.sandbox.channel import Channel
from codeact.sandbox.runtime import protocol as p
from tests.sandbox.test_channel import EchoHandler, _close_peers, authed  # noqa: F401 - fixture

MiB = 1024 * 1024


def _peer_conn(channel: Channel) -> Any:
    conn = channel._peer
    assert conn is not None
    return conn


async def test_an_oversized_frame_is_never_buffered_whole() -> None:
    channel = await Channel.open(EchoHandler())
    try:
        peer = await authed(channel)
        conn = _peer_conn(channel)
        largest = 0
        chunk = b"a" * MiB
        await peer.send_raw(b'{"jsonrpc": "2.0", "id": 9, "method": "call", "params": {"x": "')
        for _ in range(3 * p.MAX_FRAME // MiB):  # a 24 MiB line
            await peer.send_raw(chunk)
            await asyncio.sleep(0)
            largest = max(largest, len(conn._buf))
        await peer.send_raw(b'"}}\n')
        answer = await peer.recv()
        assert answer["error"]["code"] == p.PAYLOAD_TOO_LARGE
        assert largest <= p.MAX_FRAME + MiB  # at most the cap plus one read, never the whole line
        assert len(conn._buf) == 0
        await peer.send(p.request(10, "call", {"toolkit": "echo", "operation": "echo", "arguments": {"value": "ok"}}))
        assert (await peer.recv())["result"] == "ok"
    finally:
        await channel.close()


async def test_a_garbage_flood_that_never_reads_does_not_pile_up_answers() -> None:
    channel = await Channel.open(EchoHandler())
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    try:
        await loop.sock_connect(sock, str(channel.socket_path))
        await loop.sock_sendall(sock, p.encode_frame(p.request(0, "auth", {"token": channel.token})))
        await channel.wait_connected(10)
        conn = _peer_conn(channel)
        junk = b"not json\n" * 10_000
        for _ in range(30):  # 300,000 garbage frames (~30 MiB of answers); none is read
            await loop.sock_sendall(sock, junk)
        await asyncio.sleep(0.1)
        assert conn._transport.get_write_buffer_size() <= 2 * MiB
        assert conn.rejects_dropped > 0
        assert channel.connected  # garbage never closes an authenticated connection
    finally:
        sock.close()
        await channel.close()


async def test_large_frames_mark_the_round_for_memory_release() -> None:
    channel = await Channel.open(EchoHandler())
    try:
        peer = await authed(channel)
        channel.begin_round()
        value = "x" * (2 * MiB)
        await peer.send(p.request(12, "call", {"toolkit": "echo", "operation": "echo", "arguments": {"value": value}}))
        assert (await peer.recv())["result"] == value
        assert channel.big_frames
        assert await channel.end_round() == 1
        assert not channel.big_frames
    finally:
        await channel.close()
