"""Host side of the bridge: one asyncio Unix-socket server per sandbox runtime.

The runtime inside the sandbox CONNECTS, authenticates with the per-session token, and then both
peers send newline-delimited JSON-RPC 2.0 frames (``codeact.sandbox.runtime.protocol``): the host sends
``execute`` / ``shutdown``; the runtime sends ``call`` (toolkit operations), which are dispatched
to an ``RpcHandler`` in tasks so that gathered calls overlap on the host.

The server never raises on hostile input: garbage or truncated frames get a ``parse_error``
answer, oversized frames a ``payload_too_large`` answer (the rest of the line is discarded and the
stream resynchronises on the next newline), a wrong token or a second connection an
``unauthorized`` answer and a closed connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Protocol, TypeGuard, cast, runtime_checkable

from codeact.prompts.jsontypes import JsonObject
from codeact.sandbox._eager import Runner as _Runner
from codeact.sandbox._eager import release_memory
from codeact.sandbox._owner import dir_prefix
from codeact.sandbox.aio import wait_for
from codeact.sandbox.errors import SandboxError
from codeact.sandbox.runtime import protocol as _p

__all__ = ["AUTH_TIMEOUT_S", "Channel", "ChannelClosedError", "RpcHandler", "release_memory"]

AUTH_TIMEOUT_S: Final = 30.0
"""An unauthenticated connection that has not sent ``auth`` within this time is closed."""

_MAX_IN_FLIGHT: Final = 4096
_REJECT_BUFFER_CAP: Final = 1 << 20  # unread output past which id-less error answers are dropped
_BIG_FRAME: Final = 1 << 20  # a round that moved a frame this large gives its memory back at its end
_RESULT: Final = '{"jsonrpc":"2.0","id":%s,"result":%s}\n'
_SOCKET_NAME: Final = "bridge.sock"
_CONFIG_NAME: Final = "runtime.json"


@runtime_checkable
class RpcHandler(Protocol):
    """What the channel dispatches runtime->host requests to (``codeact.toolkits.bridge.ToolkitBridge``)."""

    def manifest(self) -> JsonObject:
        """The toolkits granted to this session, sent to the runtime in the ``auth`` result.

        Returns:
            ``{"toolkits": {name: {"description": str,
            "operations": {op: {"params": [names in order], "required": [names]}}}}}``; an operation
            with keyword-only, positional-only or variadic parameters adds ``"positional"`` and
            ``"keyword"`` (names) and ``"varargs"`` / ``"varkw"`` (the ``*args`` / ``**kwargs`` name).
        """
        ...

    async def handle(self, method: str, params: JsonObject) -> object:
        """Serve one request from the runtime.

        Runs inside a task, from its very first step (which the channel runs as soon as the frame
        is read, so a handler that does not suspend answers without an event-loop round trip);
        each request gets its own copy of the context.

        Args:
            method: ``"call"`` for toolkit operations.
            params: For ``call``: ``{"toolkit", "operation", "arguments": {name: codec-encoded}}``.

        Returns:
            The codec-encoded result.

        Raises:
            sandbox.runtime.protocol.RpcError: Refusals and tool errors (sent back as JSON-RPC errors).
        """
        ...


class ChannelClosedError(SandboxError):
    """The runtime's connection is gone (the runtime exited, crashed or was killed)."""

    code = "sandbox.channel.closed"


class _Connection(asyncio.Protocol):
    """One accepted connection; becomes the session's peer once authenticated."""

    def __init__(self, channel: Channel) -> None:
        self._channel = channel
        self._transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._discarding = False  # inside an oversized frame: drop bytes up to the next newline
        self._scanned = 0  # leading bytes of the buffer known to hold no newline (a frame in pieces)
        self.authenticated = False
        self._closed = False
        self._auth_timer: asyncio.TimerHandle | None = None
        self._out: list[bytes] | None = None  # answers held while one read's frames are served
        self.rejects_dropped = 0
        self._held_rejects = 0

    # -- asyncio.Protocol ------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        if self._channel._closed:  # accepted as the channel closed (its accept was already under way)
            transport.close()
            return
        self._channel._accepted.add(self)
        self._auth_timer = asyncio.get_running_loop().call_later(self._channel.auth_timeout_s, self._auth_expired)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._channel._accepted.discard(self)
        if self._auth_timer is not None:
            self._auth_timer.cancel()
        if self.authenticated:
            self._channel._peer_lost()

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        limit = _p.MAX_FRAME
        if not buf and not self._discarding and not self._closed and data.find(b"\n") == len(data) - 1 <= limit - 1:
            # The common case, one whole frame: no copy through the buffer.
            if data[:1] == b"{" or data.strip():
                self._frame(data[:-1])
            return
        buf += data
        # Several frames in one read (gathered calls): their answers leave in one write.
        self._out = []
        self._held_rejects = 0
        try:
            self._frames(buf, limit)
        finally:
            out, self._out = self._out, None
            self._held_rejects = 0
            if out and not self._closed and self._transport is not None:
                self._transport.write(b"".join(out))

    def _frames(self, buf: bytearray, limit: int) -> None:
        start = 0  # consumed bytes are dropped once at the end, not frame by frame
        skip, self._scanned = self._scanned, 0
        try:
            while not self._closed:
                nl = buf.find(b"\n", start + skip)
                skip = 0
                if self._discarding:
                    if nl < 0:
                        start = len(buf)
                        return
                    start = nl + 1
                    self._discarding = False
                    continue
                if nl < 0:
                    if len(buf) - start >= limit:
                        start = len(buf)
                        self._discarding = True
                        self._reject(_p.RpcError(_p.PAYLOAD_TOO_LARGE, f"frame exceeds the {limit}-byte limit"))
                    else:
                        self._scanned = len(buf) - start  # a large frame arrives in pieces: search only new bytes
                    return
                if nl + 1 - start > limit:
                    start = nl + 1
                    self._reject(_p.RpcError(_p.PAYLOAD_TOO_LARGE, f"frame exceeds the {limit}-byte limit"))
                    continue
                line = bytes(buf[start:nl])
                start = nl + 1
                if len(line) > _BIG_FRAME:
                    self._channel.big_frames = True
                if line[:1] == b"{" or line.strip():
                    self._frame(line)
        finally:
            del buf[:start]

    def drop_buffer(self) -> None:
        """Free the read buffer (the connection is closed; nothing more is read)."""
        self._buf = bytearray()

    def eof_received(self) -> bool | None:
        if self._buf and not self._discarding and self.authenticated:
            # A truncated last frame (no newline): answer it, then let the connection close.
            self._send(_p.error_response(None, _p.RpcError(_p.PARSE_ERROR, "truncated frame: no newline before EOF")))
        return None

    # -- frames ----------------------------------------------------------------------------------
    def _frame(self, line: bytes) -> None:
        try:
            message = _p.decode_frame(line)
        except _p.RpcError as err:
            self._reject(err)
            return
        if not self.authenticated:
            self._authenticate(message)
            return
        channel = self._channel
        if "method" in message:
            method, id_, params = message.get("method"), message.get("id"), message.get("params", {})
            if not isinstance(method, str) or not isinstance(params, dict) or not _valid_id(id_):
                if _valid_id(id_):
                    self._send(_p.error_response(id_, _p.RpcError(_p.INVALID_REQUEST, "malformed request")))
                return
            if id_ is None:
                return  # notifications are not used by the protocol: ignored
            channel._dispatch(self, id_, method, params)
        elif "result" in message or "error" in message:
            channel._response(message)
        else:
            self._reject(_p.RpcError(_p.INVALID_REQUEST, "frame is neither a request nor a response"))

    def _authenticate(self, message: JsonObject) -> None:
        channel = self._channel
        id_ = message.get("id")
        params = message.get("params")
        token = params.get("token") if isinstance(params, dict) else None
        reply_id = id_ if _valid_id(id_) else None
        if message.get("method") != "auth" or not isinstance(token, str):
            self._refuse(reply_id, "the first frame must be an 'auth' request carrying the session token")
        elif not secrets.compare_digest(token.encode("utf-8", "replace"), channel.token.encode()):
            self._refuse(reply_id, "wrong session token")
        elif channel._peer is not None or channel._closed:
            self._refuse(reply_id, "this session already has a connected runtime")
        else:
            self.authenticated = True
            if self._auth_timer is not None:
                self._auth_timer.cancel()
            channel._peer_connected(self)
            manifest = channel.handler.manifest() if channel.handler is not None else {"toolkits": {}}
            self._send(_p.response(reply_id, {"protocol": _p.PROTOCOL_VERSION, "manifest": manifest}))

    def _refuse(self, id_: int | str | None, message: str) -> None:
        self._send(_p.error_response(id_, _p.RpcError(_p.UNAUTHORIZED, message)))
        self.close()

    def _reject(self, err: _p.RpcError) -> None:
        transport = self._transport
        held = self._held_rejects  # answers of this read not handed to the transport yet
        if transport is not None and transport.get_write_buffer_size() + held > _REJECT_BUFFER_CAP:
            # A runtime that floods garbage without reading the answers: id-less error answers
            # help nobody, so they stop piling up in the host's memory (answers to requests don't).
            self.rejects_dropped += 1
        else:
            self._held_rejects = held + 128 + len(err.message)
            self._send(_p.error_response(None, err))
        if err.code == _p.PAYLOAD_TOO_LARGE:
            self._channel.big_frames = True
        if not self.authenticated:
            self.close()

    def _auth_expired(self) -> None:
        if not self.authenticated:
            self._refuse(None, f"no 'auth' frame within {self._channel.auth_timeout_s} s")

    # -- output ----------------------------------------------------------------------------------
    def _send(self, message: dict[str, Any]) -> None:
        if self._closed or self._transport is None or self._transport.is_closing():
            return
        try:
            frame = _p.encode_frame(message)
        except _p.RpcError as err:  # an oversized result: answer with the error instead
            frame = _p.encode_frame(_p.error_response(message.get("id"), err))
        except (TypeError, ValueError) as exc:  # a handler returned something that is not JSON
            bad = _p.RpcError(_p.INTERNAL_ERROR, f"result is not JSON-serialisable: {type(exc).__name__}")
            frame = _p.encode_frame(_p.error_response(message.get("id"), bad))
        if self._out is not None:
            self._out.append(frame)
        else:
            self._transport.write(frame)

    def _send_result(self, id_: int | str, result: object) -> None:
        """``_send(response(id_, result))``, without building the message first."""
        transport = self._transport
        if self._closed or transport is None or transport.is_closing():
            return
        try:
            frame = (_RESULT % (_p.dumps(id_), _p.dumps(result))).encode("utf-8")
        except (TypeError, ValueError):
            frame = b""
        if len(frame) > _BIG_FRAME:
            self._channel.big_frames = True
        if not frame or len(frame) > _p.MAX_FRAME:
            self._send(_p.response(id_, result))  # says what is wrong with it
        elif self._out is not None:
            self._out.append(frame)
        else:
            transport.write(frame)

    def close(self) -> None:
        """Close the connection (idempotent); answers held back are written first."""
        if self._transport is not None and not self._closed:
            out, self._out = self._out, None
            if out:
                self._transport.write(b"".join(out))
            self._closed = True
            self._transport.close()
            if self.authenticated:
                self._channel._peer_lost()


class Channel:
    """The host end of one runtime's bridge connection.

    Create with ``await Channel.open(handler)``; pass ``socket_path`` and ``token`` to the runtime.

    Args:
        handler: Serves the runtime's ``call`` requests (None: no toolkits are granted).
        directory: The private (0700) directory holding the socket; removed by ``close()``.
        socket_uid: Give the directory and socket to this uid (a container's non-root user).
        auth_timeout_s: How long an unauthenticated connection may stay open.
    """

    def __init__(
        self,
        handler: RpcHandler | None,
        *,
        directory: Path,
        socket_uid: int | None = None,
        auth_timeout_s: float = AUTH_TIMEOUT_S,
    ) -> None:
        self.handler = handler
        self.directory = directory
        self.socket_path = directory / _SOCKET_NAME
        self.token = secrets.token_urlsafe(32)
        self.auth_timeout_s = auth_timeout_s
        self._socket_uid = socket_uid
        self._server: asyncio.AbstractServer | None = None
        self._peer: _Connection | None = None
        self._connected: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending: dict[int, asyncio.Future[object]] = {}
        self._accepted: set[_Connection] = set()  # open connections, authenticated or not (closed at close)
        self._tasks: set[asyncio.Task[None]] = set()
        self._runner: _Runner | None = None
        self._next_id = 0
        self._closed = False
        self._config_file: Path | None = None
        self.big_frames = False
        """A frame over 1 MiB went through since the last ``end_round()`` (its memory is given back then)."""
        self.big_seen = False
        """A frame over 1 MiB went through in this session (its buffers are given back at close too)."""
        self.rpc_count = 0
        """Toolkit calls received since the last ``begin_round()``."""
        # The round clock pauses while the code waits on the host: calls in flight, since when, and the
        # seconds paused so far this round (a counter and an accumulator: nothing more on the call path).
        self.in_flight = 0
        self._paused_at = 0.0
        self._paused_s = 0.0
        self._idle: asyncio.Future[None] | None = None

    @classmethod
    async def open(
        cls,
        handler: RpcHandler | None = None,
        *,
        parent: str | Path | None = None,
        socket_uid: int | None = None,
        auth_timeout_s: float = AUTH_TIMEOUT_S,
    ) -> Channel:
        """Create the private directory and start listening.

        Args:
            handler: Serves the runtime's ``call`` requests (None: no toolkits are granted).
            parent: Where to create the private directory (default: the system temp dir).
            socket_uid: Give the directory and socket to this uid (a container's non-root user).
            auth_timeout_s: How long an unauthenticated connection may stay open.

        Returns:
            The listening channel.
        """
        directory = Path(tempfile.mkdtemp(prefix=dir_prefix("bridge"), dir=parent))
        os.chmod(directory, 0o700)
        channel = cls(handler, directory=directory, socket_uid=socket_uid, auth_timeout_s=auth_timeout_s)
        try:
            loop = asyncio.get_running_loop()
            # Not serving yet: create_unix_server awaits nothing then, so a cancel cannot come between the
            # listening socket's creation and close_now() knowing it (it would leak).
            channel._server = await loop.create_unix_server(
                lambda: _Connection(channel), path=str(channel.socket_path), start_serving=False
            )
            await channel._server.start_serving()
            os.chmod(channel.socket_path, 0o600)
            if socket_uid is not None:
                os.chown(directory, socket_uid, -1)
                os.chown(channel.socket_path, socket_uid, -1)
        except BaseException:
            channel.close_now()
            raise
        return channel

    def write_config(self, config: Mapping[str, object]) -> Path:
        """Write the runtime's configuration (which holds the token) into the private directory.

        For a runtime that cannot read it from stdin (a container): it reads the file at start-up
        and the channel deletes it as soon as a runtime authenticates, before any code can run,
        so the token is in no file, environment or argument the code can read.

        Args:
            config: The JSON-able configuration.

        Returns:
            The file's path on the host (``directory / "runtime.json"``).
        """
        path = self.directory / _CONFIG_NAME
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            if self._socket_uid is not None:
                os.fchown(fd, self._socket_uid, -1)
            os.write(fd, _p.dumps(config).encode("utf-8"))
        finally:
            os.close(fd)
        self._config_file = path
        return path

    def _forget_config(self) -> None:
        path, self._config_file = self._config_file, None
        if path is not None:
            with contextlib.suppress(OSError):
                path.unlink()

    # -- state -----------------------------------------------------------------------------------
    @property
    def connected(self) -> bool:
        """True while an authenticated runtime is connected."""
        return self._peer is not None and not self._lost.done()

    @property
    def lost(self) -> asyncio.Future[None]:
        """Resolves when the authenticated runtime disconnects (or the channel closes)."""
        return self._lost

    async def wait_connected(self, timeout: float) -> None:
        """Wait for the runtime to connect and authenticate.

        Raises:
            TimeoutError: Nobody authenticated in time.
            ChannelClosedError: The channel was closed meanwhile.
        """
        await wait_for(asyncio.shield(self._connected), timeout)

    def _peer_connected(self, conn: _Connection) -> None:
        self._forget_config()
        self._peer = conn
        if not self._connected.done():
            self._connected.set_result(None)

    def _peer_lost(self) -> None:
        if not self._lost.done():
            self._lost.set_result(None)
        if not self._connected.done():
            self._connected.set_exception(ChannelClosedError("the runtime disconnected before authenticating"))
            self._connected.exception()  # mark retrieved
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ChannelClosedError("the sandbox runtime closed its bridge connection"))
                fut.exception()
        self._pending.clear()
        for task in list(self._tasks):
            task.cancel()
        self._drop_runner()

    # -- host -> runtime -------------------------------------------------------------------------
    async def request(self, method: str, params: Mapping[str, object], *, timeout: float | None = None) -> object:
        """Send a request to the runtime and wait for its result.

        Args:
            method: ``"execute"`` or ``"shutdown"``.
            params: The request's params.
            timeout: Seconds to wait (None: forever).

        Returns:
            The ``result`` member of the answer.

        Raises:
            sandbox.runtime.protocol.RpcError: The runtime answered with an error.
            ChannelClosedError: The runtime is not connected or went away.
            TimeoutError: No answer within ``timeout``.
        """
        peer = self._peer
        if peer is None or self._lost.done():
            raise ChannelClosedError("the sandbox runtime is not connected")
        self._next_id += 1
        id_ = self._next_id
        fut: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self._pending[id_] = fut
        try:
            peer._send(_p.request(id_, method, params))
            return await wait_for(fut, timeout)
        finally:
            self._pending.pop(id_, None)

    def _response(self, message: dict[str, Any]) -> None:
        id_ = message.get("id")
        fut = self._pending.pop(id_, None) if isinstance(id_, int) else None
        if fut is None or fut.done():
            return  # late or unknown answer: ignored
        error = message.get("error")
        if error is not None:
            code = error.get("code") if isinstance(error, dict) else None
            text = error.get("message") if isinstance(error, dict) else None
            fut.set_exception(
                _p.RpcError(
                    code if isinstance(code, int) else _p.INTERNAL_ERROR,
                    text if isinstance(text, str) else "malformed error",
                    error.get("data") if isinstance(error, dict) else None,
                )
            )
        else:
            fut.set_result(message.get("result"))

    # -- runtime -> host -------------------------------------------------------------------------
    def begin_round(self) -> None:
        """Start counting toolkit calls, and the time spent waiting on them, for a new round.

        A handler with a ``begin_round()`` method (the toolkit bridge: its per-round budgets) is told too.
        """
        hook = getattr(self.handler, "begin_round", None)
        if callable(hook):
            hook()
        self.rpc_count = 0
        self._paused_s = 0.0
        if self.in_flight:  # a call left over from before (not possible after end_round): paused from now
            self._paused_at = time.monotonic()

    def paused_s(self) -> float:
        """Seconds of this round during which at least one call was in flight on the host (so far)."""
        if self.in_flight:
            return self._paused_s + (time.monotonic() - self._paused_at)
        return self._paused_s

    def when_idle(self) -> asyncio.Future[None]:
        """A future that resolves when no call is in flight any more (at once if none is)."""
        idle = self._idle
        if idle is None or idle.done():
            idle = self._idle = asyncio.get_running_loop().create_future()
        if not self.in_flight:
            idle.set_result(None)
        return idle

    def _call_ended(self) -> None:
        self.in_flight -= 1
        if not self.in_flight:
            self._paused_s += time.monotonic() - self._paused_at
            idle = self._idle
            if idle is not None and not idle.done():
                idle.set_result(None)

    async def end_round(self) -> int:
        """Cancel calls still in flight (they are answered ``cancelled``) and return the round's call count."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self.big_frames:
            self.big_frames, self.big_seen = False, True
            release_memory()
        return self.rpc_count

    def _dispatch(self, conn: _Connection, id_: int | str, method: str, params: JsonObject) -> None:
        if method == "call":
            self.rpc_count += 1
        if self.handler is None:
            conn._send(_p.error_response(id_, _p.RpcError(_p.NOT_FOUND, "no toolkits are granted to this session")))
            return
        if len(self._tasks) >= _MAX_IN_FLIGHT:
            err = _p.RpcError(_p.RATE_LIMITED, f"more than {_MAX_IN_FLIGHT} calls in flight; await some first")
            conn._send(_p.error_response(id_, err))
            return
        coro = self._serve(conn, id_, method, params)
        loop = asyncio.get_running_loop()
        runner = self._runner
        if runner is None:
            if asyncio.current_task(loop) is not None:  # not from a protocol callback: an ordinary task
                task = loop.create_task(coro)
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
                return
            runner = self._runner = _Runner(loop, self._tasks)
        if not runner.start(loop, coro):
            self._runner = None  # it drives this call to its end now; the next call gets a fresh runner

    def _drop_runner(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            runner.task.cancel()

    async def _serve(self, conn: _Connection, id_: int | str, method: str, params: JsonObject) -> None:
        handler = self.handler
        # Counted from the call's first step (a task cancelled before it runs never counts, so never leaks).
        if not self.in_flight:
            self._paused_at = time.monotonic()
        self.in_flight += 1
        try:
            if handler is None:  # closed meanwhile
                raise _p.RpcError(_p.NOT_FOUND, "no toolkits are granted to this session")
            result = await handler.handle(method, params)
        except _p.RpcError as err:
            conn._send(_p.error_response(id_, err))
        except asyncio.CancelledError:
            conn._send(_p.error_response(id_, _p.RpcError(_p.CANCELLED, "the call was cancelled: the round ended")))
        except Exception as exc:  # a handler bug must not kill the server; no host traceback to the sandbox
            failed = _p.RpcError(_p.INTERNAL_ERROR, f"the host failed to serve {method!r}: {type(exc).__name__}")
            conn._send(_p.error_response(id_, failed))
        else:
            conn._send_result(id_, result)
        finally:
            self._call_ended()

    # -- shutdown --------------------------------------------------------------------------------
    async def close(self) -> None:
        """Cancel in-flight calls, close the connection and the server, remove the directory."""
        self._drop_runner()
        for task in list(self._tasks):
            task.cancel()
        try:
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
        finally:  # a cancel arriving while the calls wind down must not leave the sockets open
            self.close_now()
        # A closed transport closes its socket on the loop's next turn, and a connection accepted just before
        # the close is handed over on it: one turn, and close() returns with every socket closed.
        await asyncio.sleep(0)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    def close_now(self) -> None:
        """Synchronous best-effort close (usable outside the event loop)."""
        self._closed = True
        with contextlib.suppress(RuntimeError):  # the loop is closed already
            self._drop_runner()
        for conn in [*self._accepted, *([self._peer] if self._peer is not None else [])]:
            with contextlib.suppress(Exception):
                conn.close()  # the peer, and connections still waiting to authenticate
        self._accepted.clear()
        if self._server is not None:
            with contextlib.suppress(Exception):
                self._server.close()
        with contextlib.suppress(RuntimeError):
            if not self._lost.done():
                self._lost.set_result(None)
            if not self._connected.done():
                self._connected.set_exception(ChannelClosedError("the bridge channel was closed"))
                self._connected.exception()
        shutil.rmtree(self.directory, ignore_errors=True)
        if self.big_frames or self.big_seen:
            # The connection's read buffer grew to the largest frame (or an oversized line's 8 MiB): drop it,
            # then give the heap's free memory back, or the host stays at its peak after bridge abuse.
            if self._peer is not None:
                self._peer.drop_buffer()
            self.big_frames = self.big_seen = False
            release_memory()


def _valid_id(id_: object) -> TypeGuard[int | str | None]:
    return id_ is None or isinstance(id_, str) or (isinstance(id_, int) and not isinstance(id_, bool))
