"""Inside the sandbox: the bridge client and the toolkit proxies (standard library only).

One blocking Unix socket carries everything. Toolkit calls send their ``call`` frame at once and
return an awaitable; answers are read either by an event-loop reader callback (code that awaits,
so ``asyncio.gather`` over many calls overlaps on the host) or by a blocking read while the loop
is paused (``_codeact_sync_`` inside a plain ``def``). Both paths share one buffer in one thread:
no reader thread, no cross-thread wake-ups, so a call costs one frame each way.

asyncio is not imported here: it costs about a third of a cold start, and the first round of most
sessions runs no event loop. No loop can run before something imported asyncio, so the checks
below look it up in ``sys.modules``; :mod:`codeact.sandbox.runtime._call_future` holds what needs it.
"""

from __future__ import annotations

# `_signal` and `_socket`, not `signal` and `socket`: their enums cost a cold start; the constants suffice.
# `_collections_abc`, not `collections.abc`: the same ABCs without importing `collections` (~1 ms).
import _collections_abc
import _signal  # type: ignore[import-not-found]
import _socket
import _thread  # not `threading` (with functools and collections' helpers): one daemon thread needs no more
import os
import select
import sys
import types

from codeact.sandbox.runtime import artifacts as _artifacts
from codeact.sandbox.runtime import protocol as _p
from codeact.sandbox.runtime._codec_types import JsonObject

TYPE_CHECKING = False  # not typing's: the runtime does not import typing to start (see protocol.py)
if TYPE_CHECKING:
    import asyncio
    from collections import deque
    from collections.abc import Awaitable, Callable, Generator, Mapping
    from typing import Any, Final, Literal, TypedDict, TypeVar

    from codeact.sandbox.runtime._call_future import CallFuture
else:  # `collections` (~1 ms of a cold start) only re-exports its C half's deque
    from _collections import deque

__all__ = [
    "Bridge",
    "watch_host",
    "ControlSignal",
    "HostGone",
    "ToolError",
    "ToolPermissionError",
    "ToolTimeoutError",
    "ToolkitProxy",
    "build_proxies",
]

_RECV: Final = 1 << 20
if TYPE_CHECKING:
    _T = TypeVar("_T")

    class _Layout(TypedDict, total=False):
        """The keyword arguments of ``_Operation`` beyond ``params`` and ``required``."""

        positional: list[str]
        keyword: list[str]
        varargs: str
        varkw: str


_LIST_KEYS: Final[tuple[Literal["positional", "keyword"], ...]] = ("positional", "keyword")
_NAME_KEYS: Final[tuple[Literal["varargs", "varkw"], ...]] = ("varargs", "varkw")
_loads = _p.loads
_dumps = _p.dumps
# asyncio.iscoroutine's
_AWAITABLE_TYPES: Final = (types.CoroutineType, types.GeneratorType, _collections_abc.Coroutine)
_CallFuture: type[CallFuture] | None = None  # set by _call_future_type() once a loop ran a call


def _get_running_loop() -> asyncio.AbstractEventLoop | None:
    """The running event loop of this thread, or None (always None while asyncio was never imported)."""
    aio = sys.modules.get("asyncio")
    return None if aio is None else aio._get_running_loop()


def _call_future_type() -> type[CallFuture]:
    global _CallFuture
    if _CallFuture is None:
        from codeact.sandbox.runtime._call_future import CallFuture

        _CallFuture = CallFuture
    return _CallFuture


_FRAME: Final = '{"jsonrpc":"2.0","id":%d%s%s}}\n'  # id, _call_head(toolkit, operation), arguments


class ToolError(Exception):
    """A toolkit operation failed on the host; catch it like any exception.

    Attributes:
        code: The symbolic bridge error (``"tool_error"``, ``"invalid_params"``, ``"not_found"``, ...).
        message: The tool's message.
        data: Extra details (for example field errors), or None.
    """

    def __init__(self, message: str, *, code: str = "tool_error", data: object = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class ToolPermissionError(ToolError, PermissionError):
    """The session may not call this operation (``unauthorized`` / ``approval_denied``)."""


class ToolTimeoutError(ToolError, TimeoutError):
    """The operation ran past its timeout or the round's deadline."""


class ControlSignal(BaseException):
    """A control signal from the host (``finish``, ``ask_user``): ends the round cleanly.

    Derives from BaseException so that ``except Exception`` in generated code cannot swallow it.

    Attributes:
        control: The ``$control`` object, e.g. ``{"kind": "finish", "answer": ...}``.
    """

    def __init__(self, control: dict[str, object]) -> None:
        super().__init__(f"control signal {control.get('kind')!r}")
        self.control = control


class HostGone(BaseException):
    """The host closed the bridge connection: the runtime exits."""


def _tool_error(error: object) -> ToolError:
    if not isinstance(error, dict):
        return ToolError("malformed error from the host")
    code = error.get("code")
    name = _p.ERROR_NAMES.get(code, "error") if isinstance(code, int) else "error"
    message = error.get("message")
    message = message if isinstance(message, str) else name
    data = error.get("data")
    if name in ("unauthorized", "approval_denied"):
        return ToolPermissionError(message, code=name, data=data)
    if name == "deadline_exceeded":
        return ToolTimeoutError(message, code=name, data=data)
    return ToolError(message, code=name, data=data)


class _Call:
    """A call made while no event loop runs; resolved by a blocking read or awaited later."""

    __slots__ = ("_bridge", "_done", "_exc", "_fut", "_value", "id")

    def __init__(self, bridge: Bridge, id_: int) -> None:
        self._bridge = bridge
        self.id = id_
        self._done = False
        self._value: object = None
        self._exc: BaseException | None = None
        self._fut: asyncio.Future[object] | None = None

    def _resolve(self, value: object, exc: BaseException | None) -> None:
        self._done, self._value, self._exc = True, value, exc
        fut = self._fut
        if fut is not None and not fut.done():
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(value)

    def result(self) -> object:
        if not self._done:
            self._bridge.wait(self)
        if self._exc is not None:
            raise self._exc
        return self._value

    def __await__(self) -> Generator[object, None, object]:
        if not self._done:
            loop = _get_running_loop()
            if loop is None:  # a round run without an event loop (CompiledCode.loop_free): block as sync code does
                return self.result()

            self._fut = loop.create_future()
            self._bridge._watch(loop)
            yield from self._fut.__await__()
        return self.result()

    def __repr__(self) -> str:
        return f"<pending toolkit call #{self.id}>"


def _read_buffer() -> memoryview:
    """Where the bridge's reads land: mapped once, before any code runs, resident only as far as written.

    A fresh ``recv(_RECV)`` buffer per read needs a megabyte of address space at every read, which a
    round that used it all up (a thread bomb's stacks against RLIMIT_AS) leaves no more: the runtime then
    died of a ``MemoryError`` waiting for the next request instead of running it.
    """
    try:
        import mmap  # a C module; an anonymous map is not resident until written (a bytearray is, zeroed)

        # MAP_PRIVATE: a process the code forks gets a copy, not a window onto the runtime's reads.
        return memoryview(mmap.mmap(-1, _RECV, flags=mmap.MAP_PRIVATE))
    except (ImportError, OSError):  # pragma: no cover - CPython on Linux has mmap
        return memoryview(bytearray(_RECV))


class Bridge:
    """The runtime's end of the bridge connection.

    Args:
        sock: A connected, blocking Unix stream socket.
        decode: Turns a codec-encoded result into a value (``codec.decode``).
    """

    def __init__(self, sock: _socket.socket, decode: Callable[[object], object] = lambda v: v) -> None:
        self.sock = sock
        self._fd = sock.fileno()
        self._decode = decode
        self._heads: dict[tuple[str, str], str] = {}
        self._poller: tuple[int, select.poll] | None = None  # (self-pipe fd of the loop, select.poll object)
        self._buf = b""
        self._recv_buf = _read_buffer()
        self._next_id = 0
        self._pending: dict[int, _Call | asyncio.Future[object]] = {}
        self._requests: deque[JsonObject] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.control: dict[str, object] | None = None
        """The first control signal of the current round."""
        self.on_request: Callable[[JsonObject], None] | None = None
        """Called for host requests that arrive while a round runs."""

    # -- frames ----------------------------------------------------------------------------------
    def send(self, message: dict[str, object]) -> None:
        """Send one frame (raises ``RpcError(PAYLOAD_TOO_LARGE)`` over the cap)."""
        self.sock.sendall(_p.encode_frame(message))

    def _feed(self, data: bytes) -> None:
        if not data:
            raise HostGone("the host closed the bridge connection")
        buf = self._buf + data if self._buf else data
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            line = buf[start:nl]
            start = nl + 1
            if line:
                self._frame(line)
        self._buf = buf[start:]
        if len(self._buf) > _p.MAX_FRAME:
            raise HostGone("the host sent an oversized frame")

    def _frame(self, line: bytes) -> None:
        try:
            message = _loads(line)
        except ValueError:
            return
        if not isinstance(message, dict):
            return
        if "method" in message:
            if self.on_request is not None:
                self.on_request(message)
            else:
                self._requests.append(message)
            return
        target = self._pending.pop(message.get("id"), None)  # type: ignore[arg-type]
        if target is None:
            return  # an answer to a call of an earlier round
        value: object = None
        exc: BaseException | None = None
        if "error" in message:
            exc = _tool_error(message["error"])
        else:
            result = message.get("result")
            if type(result) is dict and "$control" in result:
                control = result["$control"]
                control = control if isinstance(control, dict) else {"kind": str(control)}
                if self.control is None:
                    self.control = control
                exc = ControlSignal(control)
            else:
                try:
                    value = self._decode(result)
                except Exception as err:  # a malformed value: the code sees a ToolError
                    exc = ToolError(f"the host sent a result the codec cannot decode: {err}")
                else:
                    _artifacts.keep_files(value)  # files a result carries (an MCP image) go to outputs/
        if isinstance(target, _Call):
            target._resolve(value, exc)
        elif not target.done():
            if exc is not None:
                target.set_exception(exc)
            else:
                target.set_result(value)

    def read_blocking(self) -> None:
        """Block until some bytes arrive and process every complete frame."""
        self._feed(self._recv(0))

    def _recv(self, flags: int) -> bytes:
        """``sock.recv(_RECV, flags)``, read into the preallocated buffer."""
        view = self._recv_buf
        return bytes(view[: self.sock.recv_into(view, _RECV, flags)])

    def next_request(self) -> JsonObject:
        """Block until the host sends a request (``execute``, ``shutdown``)."""
        while not self._requests:
            self.read_blocking()
        return self._requests.popleft()

    # -- calls -----------------------------------------------------------------------------------
    def call(self, toolkit: str, operation: str, arguments: Mapping[str, object]) -> _Call | CallFuture:
        """Send a ``call`` frame now; return an awaitable of its result.

        Args:
            toolkit: The toolkit's name.
            operation: The operation's name.
            arguments: Codec-encoded arguments by name.

        Raises:
            ToolError: ``code == "payload_too_large"`` when the frame would exceed the cap (nothing is sent).
        """
        head = self._heads.get((toolkit, operation))
        if head is None:
            head = self._heads[(toolkit, operation)] = _call_head(toolkit, operation)
        return self._call(head, arguments)

    def _call(self, head: str, arguments: Mapping[str, object]) -> _Call | CallFuture:
        if self.control is not None:
            raise ControlSignal(self.control)  # the round is over: stop code that swallowed the signal
        id_ = self._next_id + 1
        frame = (_FRAME % (id_, head, _dumps(arguments))).encode("utf-8")
        if len(frame) > _p.MAX_FRAME:
            raise ToolError(
                f"the call's arguments take {len(frame)} bytes, over the bridge's {_p.MAX_FRAME}-byte frame limit; "
                "pass less data per call (split it, or send a reference such as a path)",
                code="payload_too_large",
                data={"bytes": len(frame), "limit": _p.MAX_FRAME},
            )
        self._next_id = id_
        loop = _get_running_loop()
        target: _Call | CallFuture
        if loop is None:
            target = _Call(self, id_)
        else:
            target = (_CallFuture or _call_future_type())(loop=loop)
            target._bridge = self
            if self._loop is not loop:
                self._watch(loop)
        self._pending[id_] = target
        self.sock.sendall(frame)
        return target

    def wait(self, target: _Call | asyncio.Future[object]) -> None:
        """Block (the event loop, if any, is paused) until ``target`` is resolved."""
        if isinstance(target, _Call):
            while not target._done:
                self.read_blocking()
        else:
            while not target.done():
                self.read_blocking()

    def sync(self, value: Any) -> object:  # Any: what the code passes, narrowed by `type(value) is`
        """``_codeact_sync_``: the result of a toolkit call made inside a plain ``def``."""
        kind = type(value)
        if kind is _CallFuture and value._bridge is self:
            if not value.done():
                self.wait(value)
            return value.result()
        if kind is _Call:
            return value.result()
        if "asyncio" not in sys.modules:  # then nothing is a future, and a coroutine is rare: import only for one
            if not isinstance(value, _AWAITABLE_TYPES) and not hasattr(value, "__await__"):
                return value
        import asyncio

        if isinstance(value, asyncio.Future):
            if not value.done():
                if not any(t is value for t in self._pending.values()):
                    raise TypeError("cannot wait for this awaitable inside a plain 'def'; use 'async def' and await")
                self.wait(value)
            return value.result()
        if asyncio.iscoroutine(value) or hasattr(value, "__await__"):
            if _get_running_loop() is not None:
                if asyncio.iscoroutine(value):
                    value.close()
                raise TypeError("cannot wait for a coroutine inside a plain 'def'; make the function 'async def'")
            return asyncio.run(_await(value))
        return value

    # -- event loop reader -----------------------------------------------------------------------
    def _watch(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._loop is loop:
            return
        self.unwatch()
        loop.add_reader(self.sock.fileno(), self._on_readable)
        self._loop = loop

    def unwatch(self) -> None:
        """Stop reading from the event loop (end of a round)."""
        loop, self._loop = self._loop, None
        if loop is not None and not loop.is_closed():
            loop.remove_reader(self.sock.fileno())

    def _wait_inline(self, target: CallFuture) -> None:
        """Read answers on the socket until ``target`` is resolved, if the event loop is idle.

        Awaiting a call normally goes round the event loop twice (the reader callback, then the
        task's wake-up). When the loop has nothing else to do (no ready callbacks, no timers, no
        other file descriptors than this socket and its own wake-up pipe), blocking here is the
        same thing without the loop's overhead. It stops as soon as the loop has work again:
        a callback became ready (another task's answer arrived) or the wake-up pipe is readable
        (a signal, another thread). Loops without these (private) attributes take the loop.
        """
        loop = target.get_loop()
        try:
            if loop._ready or loop._scheduled:  # type: ignore[attr-defined]
                return
            ssock: int = loop._ssock.fileno()  # type: ignore[attr-defined]
            watched: dict[int, object] = loop._selector._fd_to_key  # type: ignore[attr-defined]
        except AttributeError:
            return
        fd = self._fd
        for other in watched:
            if other != fd and other != ssock:
                return
        poller = self._poller
        if poller is None or poller[0] != ssock:
            poll = select.poll()
            poll.register(fd, select.POLLIN)
            poll.register(ssock, select.POLLIN)
            poller = self._poller = (ssock, poll)
        poll = poller[1]
        ready = loop._ready  # type: ignore[attr-defined]
        while not target.done():
            if ready:
                return
            for ready_fd, _ in poll.poll():
                if ready_fd != fd:
                    return
            self._on_readable()

    def _on_readable(self) -> None:
        try:
            data = self._recv(_socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return
        self._feed(data)

    def end_round(self) -> None:
        """Forget the round's unanswered calls and its control signal."""
        self.unwatch()
        self._pending.clear()
        self.control = None


def watch_host(sock: _socket.socket, on_gone: Callable[[], None] | None = None) -> int:
    """Start a daemon thread that ends the runtime as soon as the host's end of ``sock`` closes.

    The thread only polls for a hang-up (``POLLRDHUP``/``POLLHUP``/``POLLERR``), never for data,
    so it does not compete with the main thread's reads; it runs whatever the user's code does
    (sleeping, blocked in ``asyncio.sleep``, a loop), as it needs no cooperation from it.

    Args:
        sock: The connected bridge socket.
        on_gone: What to do on a hang-up (default :func:`exit_now`).

    Returns:
        The started thread's identifier. A ``_thread`` thread, which the interpreter never waits for at
        exit (a daemon thread).
    """
    fd = sock.fileno()
    action = on_gone or exit_now

    def watch() -> None:
        poll = select.poll()
        poll.register(fd, select.POLLRDHUP)  # POLLHUP, POLLERR and POLLNVAL are always reported
        while True:
            try:
                events = poll.poll()
            except InterruptedError:  # pragma: no cover - PEP 475 retries
                continue
            except OSError:
                break
            if events:
                break
        action()

    return _thread.start_new_thread(watch, ())


def exit_now(status: int = 70) -> None:
    """Kill the runtime's process group (what the code started) and exit at once, without cleanup.

    As pid 1 of a container (or of a pid namespace) the kernel kills the rest when it exits.
    """
    if os.getpid() != 1:
        try:
            if os.getpgrp() == os.getpid():  # the runtime leads its group: take the code's children too
                os.killpg(0, _signal.SIGKILL)
        except OSError:
            pass
    os._exit(status)


async def _await(value: Awaitable[_T]) -> _T:
    return await value


def _call_head(toolkit: str, operation: str) -> str:
    """The constant middle of a ``call`` frame, between the id and the arguments."""
    return f',"method":"call","params":{{"toolkit":{_dumps(toolkit)},"operation":{_dumps(operation)},"arguments":'


def _answer_text(value: object) -> str:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - the object's own __repr__ is the model's code
        text = f"<{type(value).__name__} object>"
    return text if isinstance(text, str) else f"<{type(value).__name__} object>"


class _Operation:
    """A callable toolkit operation: maps arguments to parameter names and sends the call.

    Python's own rules: positional values fill ``positional`` in order, the rest go to the ``*args``
    parameter (``varargs``) as one list; keywords name ``keyword`` parameters, the others go to the
    ``**kwargs`` parameter (``varkw``) as one object. On the wire every parameter is a name.
    """

    __slots__ = (
        "_bridge",
        "_encode",
        "_head",
        "_keyword",
        "_label",
        "_name",
        "_params",
        "_positional",
        "_required",
        "_toolkit",
        "_varargs",
        "_varkw",
    )

    def __init__(
        self,
        bridge: Bridge,
        encode: Callable[[object], object],
        toolkit: str,
        name: str,
        params: list[str],
        required: list[str],
        *,
        positional: list[str] | None = None,
        keyword: list[str] | None = None,
        varargs: str | None = None,
        varkw: str | None = None,
    ) -> None:
        self._bridge = bridge
        self._encode = encode
        self._toolkit = toolkit
        self._name = name
        self._label = f"{toolkit}.{name}()"
        self._head = _call_head(toolkit, name)
        self._params = tuple(params)
        self._required = tuple(required)
        self._positional = tuple(positional) if positional is not None else self._params
        self._keyword = tuple(keyword) if keyword is not None else self._params
        self._varargs = varargs
        self._varkw = varkw

    def __call__(self, *args: object, **kwargs: object) -> _Call | CallFuture:
        positional = self._positional
        arguments: dict[str, object] = {}
        if len(args) > len(positional) and self._varargs is None:
            raise TypeError(
                f"{self._label} takes {len(positional)} positional argument(s) "
                f"({', '.join(positional) or 'none'}) but {len(args)} were given"
            )
        for name, value in zip(positional, args, strict=False):
            arguments[name] = value
        if len(args) > len(positional):
            arguments[self._varargs] = list(args[len(positional) :])  # type: ignore[index]  # checked above
        extra: dict[str, object] = {}
        for name, value in kwargs.items():
            if name not in self._keyword:
                if self._varkw is not None:
                    extra[name] = value
                    continue
                raise TypeError(
                    f"{self._label} got an unexpected keyword argument {name!r}; "
                    f"parameters: {', '.join(self._keyword) or 'none'}"
                )
            if name in arguments:
                raise TypeError(f"{self._label} got multiple values for argument {name!r}")
            arguments[name] = value
        if extra:
            arguments[self._varkw] = extra  # type: ignore[index]  # extra is only filled when there is one
        missing = [name for name in self._required if name not in arguments]
        if missing:
            raise TypeError(f"{self._label} missing required argument(s): {', '.join(map(repr, missing))}")
        encode = self._encode
        for name, value in arguments.items():
            kind = type(value)
            if kind is str or kind is int or kind is bool or value is None:
                continue  # plain JSON: the codec would return it as is
            try:
                arguments[name] = encode(value)
            except Exception as exc:
                if self._label == "system.finish()" and name == "answer":
                    # The answer is for a person, who reads it as text: an object the codec cannot
                    # carry (an instance of a class the code defined) is answered as its repr().
                    arguments[name] = _answer_text(value)
                    continue
                raise TypeError(f"argument {name!r} of {self._label} cannot be sent to the host: {exc}") from None
        return self._bridge._call(self._head, arguments)

    def __repr__(self) -> str:
        names = [f"*{n}" if n == self._varargs else f"**{n}" if n == self._varkw else n for n in self._params]
        return f"<operation {self._toolkit}.{self._name}({', '.join(names)})>"


class ToolkitProxy:
    """Base class of the per-toolkit proxy classes; operations are class attributes."""

    __slots__ = ()
    _toolkit_name: str = ""
    _operations: tuple[str, ...] = ()
    _elsewhere: Mapping[str, tuple[str, ...]] = {}
    """Operation name -> the other toolkits of the session that have it (for the error's hint)."""

    _forward: Mapping[str, _Operation] = {}
    """Operation name -> the ``system`` toolkit's operation of that name, which this toolkit lacks."""

    def __getattr__(self, name: str) -> _Operation:
        cls = type(self)
        if name.startswith("_"):
            raise AttributeError(f"private attribute {name!r} of toolkit {cls._toolkit_name!r} is not accessible")
        forward = cls._forward.get(name)
        if forward is not None:
            # Real models call the engine's own operations on the toolkit they work with (`browser.parse`,
            # `devops.finish`) and keep doing so after the error named `system.parse` (issue 29): the call
            # is the system toolkit's, under the same grant, and stderr says so.
            print(f"Note: `{cls._toolkit_name}.{name}` is `system.{name}`; it ran as `system.{name}`.", file=sys.stderr)
            return forward
        granted = ", ".join(cls._operations) or "none"
        # Real models put an operation on the wrong toolkit (`browser.parse` for `system.parse`, issue 29).
        owners = cls._elsewhere.get(name, ())
        hint = f"; it is {' or '.join(f'`{owner}.{name}`' for owner in owners)}" if owners else ""
        raise AttributeError(
            f"toolkit {cls._toolkit_name!r} has no operation {name!r} granted to this session{hint}; "
            f"granted operations of {cls._toolkit_name}: {granted}"
        )

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"toolkit {type(self)._toolkit_name!r} is read-only")

    def __dir__(self) -> list[str]:
        return list(type(self)._operations)

    def __repr__(self) -> str:
        cls = type(self)
        return f"<toolkit {cls._toolkit_name}: {', '.join(cls._operations)}>"


def _layout(op_spec: object) -> _Layout:
    """The keyword arguments of ``_Operation`` a manifest entry gives beyond ``params`` and ``required``."""
    if not isinstance(op_spec, dict):
        return {}
    out: _Layout = {}
    for key in _LIST_KEYS:
        names = op_spec.get(key)
        if isinstance(names, list):
            out[key] = [n for n in names if isinstance(n, str)]
    for name_key in _NAME_KEYS:
        if isinstance(op_spec.get(name_key), str):
            out[name_key] = op_spec[name_key]
    return out


def build_proxies(manifest: object, bridge: Bridge, encode: Callable[[object], object]) -> dict[str, ToolkitProxy]:
    """One proxy object per toolkit of the manifest (malformed entries are skipped).

    Args:
        manifest: ``{"toolkits": {name: {"operations": {op: {"params": [...], "required": [...]}}}}}``;
            an operation with keyword-only, positional-only or variadic parameters also has
            ``"positional"`` and ``"keyword"`` (names) and ``"varargs"`` / ``"varkw"`` (a name).
        bridge: Where calls go.
        encode: Encodes an argument value (``codec.encode``).

    Returns:
        ``{toolkit name: proxy}``.
    """
    proxies: dict[str, ToolkitProxy] = {}
    toolkits = manifest.get("toolkits") if isinstance(manifest, dict) else None
    if not isinstance(toolkits, dict):
        return proxies
    for name, spec in toolkits.items():
        if not (isinstance(name, str) and name.isidentifier() and not name.startswith("_")):
            continue
        ops = spec.get("operations") if isinstance(spec, dict) else None
        attrs: dict[str, object] = {"__slots__": (), "_toolkit_name": name}
        names: list[str] = []
        for op, op_spec in (ops or {}).items():
            if not (isinstance(op, str) and op.isidentifier() and not op.startswith("_")):
                continue
            raw_params = op_spec.get("params") if isinstance(op_spec, dict) else None
            raw_required = op_spec.get("required", raw_params) if isinstance(op_spec, dict) else None
            params = [p for p in raw_params or () if isinstance(p, str)]
            required = [p for p in raw_required or () if isinstance(p, str)]
            attrs[op] = _Operation(bridge, encode, name, op, params, required, **_layout(op_spec))
            names.append(op)
        attrs["_operations"] = tuple(sorted(names))
        doc = spec.get("description") if isinstance(spec, dict) else None
        attrs["__doc__"] = doc if isinstance(doc, str) else None
        cls = type(f"{name}_toolkit", (ToolkitProxy,), attrs)
        proxies[name] = cls()
    owners: dict[str, list[str]] = {}
    for name, proxy in proxies.items():
        for op in type(proxy)._operations:
            owners.setdefault(op, []).append(name)
    for name, proxy in proxies.items():
        type(proxy)._elsewhere = {op: tuple(t for t in ts if t != name) for op, ts in owners.items() if name not in ts}
    system = proxies.get("system")
    for name, proxy in proxies.items():
        if system is not None and name != "system":
            own = type(proxy)._operations
            type(proxy)._forward = {op: getattr(system, op) for op in type(system)._operations if op not in own}
    return proxies
