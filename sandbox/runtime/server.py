"""The runtime's request loop, INSIDE the sandbox (standard library only).

Started by ``main.py`` (the launch script; see it for the command line and the configuration). It
connects to the bridge socket, authenticates with the token, builds one proxy per granted
toolkit from the manifest, then serves ``execute`` requests until ``shutdown`` or until the host
goes away. Each round: restore variables (codec), run the host-compiled prelude and code, capture
stdout/stderr in capped buffers, capture variables, answer with the result frame.

This is a module, not the script, so that it loads from its cached bytecode: a script is compiled
from source on every start, and every sandbox start is a new interpreter.
"""

from __future__ import annotations

# Only C modules (and the runtime's own) at start: no `socket`, `signal`, `json`, `base64` or `threading`,
# whose Python halves import enum, re and functools (~5 ms of CPU at every start); see protocol.py.
import _signal  # type: ignore[import-not-found]
import _socket  # not `socket`: its enums (and enum, ~2 ms) are not needed to connect one Unix socket
import binascii
import marshal
import os
import sys
import time
import types

from codeact.sandbox.runtime.protocol import compact_json, loads

TYPE_CHECKING = False  # not typing's: the runtime does not import typing to start (see protocol.py)
if TYPE_CHECKING:
    import asyncio
    from collections import deque
    from collections.abc import Mapping
    from typing import Any, Final

    from codeact.sandbox.runtime.protocol import (
        ExecuteAnswer,
        ExecuteParams,
        PutFileAnswer,
        WireError,
        WireUncaptured,
    )
else:  # `collections` (~1 ms of a cold start) only re-exports its C half's deque
    from _collections import deque

__all__ = ["CappedWriter", "Runtime", "cut_note", "format_error", "main"]

_MAX_MESSAGE: Final = 16 * 1024
_RLIMITS: Final = ("AS", "FSIZE", "NOFILE", "NPROC", "CORE", "DATA", "STACK")


async def _as_coroutine(awaitable: Any) -> Any:
    """``_codeact_coro_``: a toolkit call (a future) as a coroutine, for ``asyncio.create_task``."""
    return await awaitable


def cut_note(limit: int) -> str:
    """What the cut marker says of the limit that cut (its size and the blueprint key that raises it)."""
    return f": output is capped at {limit} bytes per stream and round, raise sandbox.limits.outputBytes"


class CappedWriter:
    """A text stream keeping the head and the tail of what is written, within a byte budget.

    Args:
        limit: The byte budget (``Limits.output_bytes``); the middle is cut beyond it.
    """

    encoding = "utf-8"
    errors = "replace"

    def __init__(self, limit: int) -> None:
        self.limit = max(int(limit), 0)
        self._head: list[str] = []
        self._head_len = 0
        self._tail: deque[str] = deque()
        self._tail_len = 0
        self._overflow = False
        self._total = 0  # bytes written
        self._kept = 0  # bytes in head + tail

    def write(self, s: str) -> int:
        """Append ``s`` (a str)."""
        if type(s) is not str:
            if not isinstance(s, str):
                raise TypeError(f"write() argument must be str, not {type(s).__name__}")
            s = str(s)
        n = len(s)
        self._total += n if s.isascii() else len(s.encode("utf-8", "replace"))
        if not self._overflow:
            room = self.limit - self._head_len
            if n <= room:
                self._head.append(s)
                self._head_len += n
                return n
            self._overflow = True
            if room > 0:
                self._head.append(s[:room])
                self._head_len += room
                s = s[room:]
        tail = self._tail
        tail.append(s)
        self._tail_len += len(s)
        while len(tail) > 1 and self._tail_len - len(tail[0]) >= self.limit:
            self._tail_len -= len(tail.popleft())
        return n

    def writelines(self, lines: Any) -> None:
        """Write each line."""
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        """Nothing to flush."""

    def isatty(self) -> bool:
        """Never a terminal."""
        return False

    def writable(self) -> bool:
        """Always writable."""
        return True

    def readable(self) -> bool:
        """Never readable."""
        return False

    def getvalue(self) -> str:
        """The captured text; over budget: head, a ``... [N bytes cut: ...the limit and its key] ...`` marker, tail."""
        head = "".join(self._head)
        if not self._overflow:
            text = head
            if self._total <= self.limit:
                return text
            tail = ""
        else:
            tail = "".join(self._tail)
        hb = head.encode("utf-8", "replace")
        tb = tail.encode("utf-8", "replace")
        if self._total <= self.limit:
            return head + tail
        half = self.limit // 2
        t = tb[len(tb) - min(half, len(tb)) :].decode("utf-8", "ignore") if half else ""
        h = hb[: self.limit - len(t.encode())].decode("utf-8", "ignore")
        cut = self._total - len(h.encode()) - len(t.encode())
        return f"{h}\n... [{cut} bytes cut{cut_note(self.limit)}] ...\n{t}"


def format_error(exc: BaseException, *, main_file: str, user_files: set[str], sources: dict[str, str]) -> WireError:
    """The result frame's ``error`` object, traceback trimmed to the user's frames.

    Args:
        exc: The exception the code raised.
        main_file: The filename of the round's code object; ``line`` is its innermost frame.
        user_files: Filenames that are user code (the code and the prelude).
        sources: Source text per filename, to quote lines.

    Returns:
        ``{"type", "message", "line", "traceback"}``.
    """
    frames: list[tuple[str, int, str]] = []
    innermost: tuple[types.FrameType, int, str] | None = None
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename in user_files:
            frames.append((code.co_filename, tb.tb_lineno or 0, code.co_name))
            innermost = (tb.tb_frame, tb.tb_lineno or 0, code.co_filename)
        tb = tb.tb_next
    line: int | None = None
    for filename, lineno, _ in reversed(frames):
        if filename == main_file:
            line = lineno
            break
    if isinstance(exc, SyntaxError) and exc.filename == main_file and exc.lineno:
        line = exc.lineno
    try:
        message = str(exc)
    except Exception:
        message = f"<{type(exc).__name__}: str() failed>"
    if isinstance(exc, KeyError) and len(exc.args) == 1 and innermost is not None:
        frame, lineno, filename = innermost
        source_lines = sources.get(filename, "").splitlines()
        if 0 < lineno <= len(source_lines):
            message += _missing_key_hint(exc.args[0], source_lines[lineno - 1], frame)
    message = message[:_MAX_MESSAGE]
    out = ["Traceback (most recent call last):"]
    split: dict[str, list[str]] = {}
    for filename, lineno, name in frames:
        out.append(f'  File "{filename}", line {lineno}, in {name}')
        lines = split.setdefault(filename, sources.get(filename, "").splitlines())
        if 0 < lineno <= len(lines) and lines[lineno - 1].strip():
            out.append(f"    {lines[lineno - 1].strip()}")
    out.append(f"{type(exc).__name__}: {message}" if message else type(exc).__name__)
    text = "\n".join(out)
    return {"type": type(exc).__name__, "message": message, "line": line, "traceback": text[:_MAX_MESSAGE]}


def _missing_key_hint(key: Any, line: str, frame: types.FrameType) -> str:
    """``; `hotels[0]` is {'name': 'Alfama', 'nightly': 61.0}`` for a KeyError on that line, else "".

    A small dict of plain values is shown whole; a larger one (or one holding other objects) by its keys:
    ``; `hotels[0]` has the keys 'name', 'nightly'``.

    Real models guess the shape of a tool's result (``h["price"]`` where the key is ``nightly``) and
    retry the same guess when told only ``KeyError: 'price'``. The subscripted expression is looked up
    again, read-only: only names and constant subscripts of plain dicts, lists and tuples (nothing that
    runs the code's own methods).
    """
    import ast

    try:
        tree = ast.parse(line.strip())
    except (SyntaxError, ValueError):
        return ""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)):
            continue
        if type(node.slice.value) is not type(key) or node.slice.value != key:
            continue
        found, value = _plain_lookup(node.value, frame)
        if found and type(value) is dict and key not in value:  # not `flights[0]["price"]` on the same line
            keys = list(value)
            where = ast.unparse(node.value)[:80]
            if not keys:
                return f"; `{where}` is empty"
            if all(type(k) in _SCALARS and type(v) in _SCALARS for k, v in value.items()):
                # a small model maps 'price' to 'nightly' from the values it sees, not from the key names
                whole = repr(value)
                if len(whole) <= _WHOLE_DICT_CHARS:
                    return f"; `{where}` is {whole}"
            shown = ", ".join(repr(k)[:40] for k in keys[:20]) + (", ..." if len(keys) > 20 else "")
            return f"; `{where}` has the keys {shown}"
    return ""


_SCALARS = (str, int, float, bool, type(None))  # their repr runs none of the code's own methods
_WHOLE_DICT_CHARS = 240


def _plain_lookup(node: Any, frame: types.FrameType) -> tuple[bool, Any]:
    import ast

    if isinstance(node, ast.Name):
        for scope in (frame.f_locals, frame.f_globals):
            if node.id in scope:
                return True, scope[node.id]
        return False, None
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        found, container = _plain_lookup(node.value, frame)
        index = node.slice.value
        if not found or type(container) not in (dict, list, tuple):
            return False, None
        try:
            return True, container[index]
        except (KeyError, IndexError, TypeError):
            return False, None
    return False, None


class Runtime:
    """Serves ``execute`` requests over one bridge connection.

    Args:
        bridge: The connected, authenticated bridge.
        manifest: The toolkits granted to this session (from the ``auth`` result).
    """

    def __init__(self, bridge: Any, manifest: Any) -> None:
        import codeact.sandbox.runtime.capture as capture
        import codeact.sandbox.runtime.codec as codec
        import codeact.sandbox.runtime.guards as guards
        import codeact.sandbox.runtime.proxy as proxy

        self._capture = capture
        self._codec = codec
        self._guards = guards
        self._proxy = proxy
        self.bridge = bridge
        self.proxies = proxy.build_proxies(manifest, bridge, codec.encode)
        import codeact.sandbox.runtime.artifacts as artifacts

        self._outputs = artifacts.prepare()  # outputs/ and the headless matplotlib backend
        self._loop: asyncio.AbstractEventLoop | None = None
        import codeact.sandbox.runtime.nondet as nondet

        self._views = nondet.Views()
        # The warm namespace: the last round's globals, kept for the next round of the same session.
        # The host continues it by sending back the token of the round that left it (``warm``);
        # any other request starts from a fresh namespace restored from the host's variables.
        self._warm_ns: dict[str, Any] | None = None
        self._warm_base: dict[str, Any] = {}
        self._warm_key: tuple[bool, tuple[str, ...]] | None = None
        self._warm_token: str | None = None

    def serve(self) -> None:
        """Answer host requests until ``shutdown`` or until the host goes away."""
        bridge = self.bridge
        bridge.on_request = None
        while True:
            try:
                request = bridge.next_request()
            except self._proxy.HostGone:
                return
            method, id_ = request.get("method"), request.get("id")
            if method == "shutdown":
                self._reply(id_, {"ok": True})
                return
            params = request.get("params")
            if method == "put_file":
                try:
                    self._reply(id_, _put_file(params if isinstance(params, dict) else {}))
                except (OSError, ValueError, TypeError) as exc:
                    self._reply_error(id_, -32602, f"cannot place the input file: {type(exc).__name__}: {exc}")
                continue
            if method != "execute":
                self._reply_error(id_, -32601, f"unknown method {method!r}")
                continue
            try:
                # The host's own request: each member is read (and checked) where execute() uses it.
                result = self.execute(params if isinstance(params, dict) else {})  # type: ignore[arg-type,typeddict-item]
            except self._proxy.HostGone:
                return
            except Exception as exc:  # a malformed request: answer, keep serving
                self._reply_error(id_, -32602, f"bad execute request: {type(exc).__name__}: {exc}")
                continue
            if _REAP_CHILDREN:
                _reap_children()
            self._reply(id_, result)

    def _reply(self, id_: Any, result: Any) -> None:
        from codeact.sandbox.runtime import protocol

        try:
            self.bridge.send(protocol.response(id_, result))
        except protocol.RpcError as err:  # the result frame is too large: say so instead
            self.bridge.send(protocol.error_response(id_, err))

    def _reply_error(self, id_: Any, code: int, message: str) -> None:
        from codeact.sandbox.runtime import protocol

        self.bridge.send(protocol.error_response(id_, protocol.RpcError(code, message)))

    def _on_request_during_round(self, message: dict[str, Any]) -> None:
        if message.get("method") == "shutdown":
            os._exit(0)
        self._reply_error(message.get("id"), -32600, "busy: a round is running")

    def execute(self, params: ExecuteParams) -> ExecuteAnswer:
        """Run one round and build the result object."""
        started = time.perf_counter()
        limits: dict[str, Any] = dict(params.get("limits") or {})
        output_bytes = int(limits.get("output_bytes", 64 * 1024))
        code = marshal.loads(binascii.a2b_base64(params["code"]))  # base64.b64decode, without the module
        prelude_b64 = params.get("prelude")
        prelude = marshal.loads(binascii.a2b_base64(prelude_b64)) if prelude_b64 else None
        if not isinstance(code, types.CodeType) or (prelude is not None and not isinstance(prelude, types.CodeType)):
            raise TypeError("code and prelude must be marshalled code objects")
        source = str(params.get("source", ""))
        prelude_source = str(params.get("prelude_source") or "")
        allowed = list(params.get("allowed_imports") or [])
        restricted = bool(params.get("restricted", True))
        _set_cpu_limit(limits.get("cpu_s"))

        key = (restricted, tuple(sorted(str(a) for a in allowed)))
        token = params.get("warm")
        warm = self._warm_ns is not None and token is not None and token == self._warm_token and key == self._warm_key
        previous, self._warm_ns, self._warm_token = self._warm_ns, None, None  # never continued twice
        views = self._views
        tape_config = params.get("nondeterminism")
        # {"record": false} turns recording off (the benchmark's baseline); replay gives the recorded tape
        recording = not (isinstance(tape_config, dict) and tape_config.get("record") is False)
        if warm and previous is not None:
            # The same session's next round: everything the code defined is still here, whatever its
            # type; the runtime's own names are put back in case the code rebound them.
            g = previous
            g.update(self._warm_base)
            if recording:
                views.begin(tape_config)
            baseline = self._warm_base
        else:
            del previous  # another session's or an edited state: nothing of it survives
            g = self._fresh_globals(restricted, allowed)
            builtins_ns = g.get("__builtins__")
            if recording:
                views.begin(tape_config)
                if isinstance(builtins_ns, dict) and "__import__" in builtins_ns:
                    builtins_ns["__import__"] = views.importer(builtins_ns["__import__"])
            baseline = dict(g)
            self._warm_base = baseline

        uncaptured: list[WireUncaptured] = []
        decode = self._codec.decode
        for name, encoded in () if warm else (params.get("variables") or {}).items():
            try:
                g[name] = decode(encoded, data=True)
            except Exception as exc:
                uncaptured.append({"name": name, "type": "?", "reason": f"could not be restored: {exc}"[:500]})

        sources = {code.co_filename: source}
        if prelude is not None:
            sources[prelude.co_filename] = prelude_source
        stdout, stderr = CappedWriter(output_bytes), CappedWriter(output_bytes)
        real_out, real_err = sys.stdout, sys.stderr
        bridge = self.bridge
        bridge.on_request = self._on_request_during_round
        error: WireError | None = None
        sys.stdout, sys.stderr = stdout, stderr
        try:
            if prelude is not None and not warm:
                self._run(prelude, g)
                self._redecode(params.get("variables") or {}, g)
            self._run(code, g, loop_free=params.get("loop_free") is True)
        except self._proxy.ControlSignal:
            pass
        except self._proxy.HostGone:
            raise
        except BaseException as exc:  # the code's own failure, including SystemExit / KeyboardInterrupt
            error = format_error(exc, main_file=code.co_filename, user_files=set(sources), sources=sources)
        finally:
            sys.stdout, sys.stderr = real_out, real_err
            control = bridge.control
            bridge.end_round()
            bridge.on_request = None
            self._cancel_leftover_tasks()
            nondeterminism = views.end() if recording else None

        collect = self._capture.collect_definitions
        found = collect(prelude_source, filename=prelude.co_filename) if prelude is not None else []
        found += collect(source, filename=code.co_filename)
        defs = {d.name: d.source for d in found}  # the last definition of a name wins
        caps = {
            "max_var_bytes": int(limits.get("max_var_bytes", 1024 * 1024)),
            "max_total_bytes": int(limits.get("max_total_bytes", 16 * 1024 * 1024)),
        }
        try:
            variables, lost = self._capture.capture(
                g, source_defs=defs, definitions=found, modules=views.modules, baseline=baseline, **caps
            )
        except MemoryError:
            variables, lost, error = self._capture_short_of_memory(g, defs, baseline, caps, error, code, source)
        try:
            produced = self._outputs.collect(limits)
        except Exception as exc:  # the round's result matters more than its files
            produced = [{"name": "outputs/", "size": 0, "refused": f"could not be collected: {exc}"[:500]}]
        uncaptured.extend(_uncaptured_json(lost))
        self._warm_ns, self._warm_key = g, key
        self._warm_token = os.urandom(10).hex()  # opaque to the host
        return {
            "stdout": stdout.getvalue(),
            "stderr": stderr.getvalue(),
            "error": error,
            "variables": variables,
            "uncaptured": uncaptured,
            "control": control,
            "artifacts": produced,
            "duration_s": round(time.perf_counter() - started, 6),
            "nondeterminism": nondeterminism,
            "warm": warm,
            "state": self._warm_token,
        }

    def _fresh_globals(self, restricted: bool, allowed: list[str]) -> dict[str, Any]:
        """A new namespace: the guards (or plain builtins), the toolkit proxies and the runtime's helpers."""
        guards = self._guards
        g: dict[str, Any] = (
            guards.restricted_globals(allowed_imports=allowed)
            if restricted
            else guards.plain_globals(allowed_imports=allowed)
        )
        g.update(self.proxies)
        g["_codeact_sync_"] = self.bridge.sync
        g["_codeact_coro_"] = _as_coroutine
        g["_codeact_show_"] = guards.show_value
        g["ToolError"] = self._proxy.ToolError
        g.setdefault("__name__", "__main__")
        return g

    def _capture_short_of_memory(
        self,
        g: dict[str, Any],
        defs: dict[str, str],
        baseline: dict[str, Any],
        caps: dict[str, int],
        error: WireError | None,
        code: types.CodeType,
        source: str,
    ) -> tuple[dict[str, Any], list[Any], WireError | None]:
        """Capture variable by variable after the memory ran out encoding them all at once.

        The variables whose encoding runs out of memory are left out, and the round reports a
        ``MemoryError`` at the line that last assigned the first of them (unless the code
        failed already), as a MemoryError raised by the code itself would be.
        """
        variables: dict[str, Any] = {}
        lost: list[Any] = []
        failed: list[str] = []
        budget = caps["max_total_bytes"]
        for name, value in list(g.items()):
            if name in baseline or name.startswith("_"):
                continue
            try:
                one, missed = self._capture.capture(
                    {name: value}, source_defs=defs, max_var_bytes=caps["max_var_bytes"], max_total_bytes=budget
                )
            except MemoryError:
                failed.append(name)
                lost.append({"name": name, "type": type(value).__name__, "reason": "out of memory while saving it"})
                continue
            for key, encoded in one.items():
                variables[key] = encoded
                # Its UTF-8 size as compact JSON, as the caps count; no import on this short-of-memory path.
                budget -= len(compact_json(encoded).encode("utf-8", "surrogatepass"))
            lost.extend(missed)
        if failed and error is None:
            names = ", ".join(failed)
            message = (
                f"out of memory while saving {names} after the code ran: the round's variables must fit the "
                "sandbox's memory several times over; keep large data smaller, or write it to a file"
            )
            line = _last_assignment(source, failed[0])
            text = "Traceback (most recent call last):\n"
            if line is not None:
                lines = source.splitlines()
                text += f'  File "{code.co_filename}", line {line}, in <module>\n    {lines[line - 1].strip()}\n'
            error = {
                "type": "MemoryError",
                "message": message,
                "line": line,
                "traceback": text + f"MemoryError: {message}",
            }
        return variables, lost, error

    def _redecode(self, variables: dict[str, Any], g: dict[str, Any]) -> None:
        """Decode tagged instances again once the prelude re-defined their classes.

        A dataclass/model/enum captured in round 1 is restored as an instance of its class (not
        a ``Record``) because the classes the code defined are the decode registry.
        """
        registry = {n: v for n, v in g.items() if isinstance(v, type) and not n.startswith("_")}
        if not registry:
            return
        decode = self._codec.decode
        for name, encoded in variables.items():
            if isinstance(encoded, dict | list):
                try:  # not contextlib.suppress: the runtime does not import contextlib (~1 ms) to start
                    g[name] = decode(encoded, registry=registry)
                except Exception:  # the data restore already kept the value as it was
                    continue

    def _run(self, code: types.CodeType, g: dict[str, Any], *, loop_free: bool = False) -> None:
        result = eval(code, g)  # host-compiled under the policy (top-level await allowed)
        if result is None:  # no top-level await: no event loop, and no asyncio import (a cold start skips it)
            return
        if loop_free and type(result) is types.CoroutineType:
            # Its only awaits are inserted before toolkit calls, and awaiting a call with no loop
            # running blocks on the socket: the coroutine runs to its end in one step, no loop needed.
            try:
                result.send(None)
            except StopIteration:
                return
            result.close()
            raise RuntimeError("the round's code awaited something other than a toolkit call without an event loop")
        import asyncio

        if asyncio.iscoroutine(result):
            loop = self._loop
            if loop is None or loop.is_closed():
                loop = self._loop = asyncio.new_event_loop()
                loop.set_exception_handler(lambda _loop, _context: None)
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(result)
            finally:
                asyncio.set_event_loop(None)

    def _cancel_leftover_tasks(self) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        import asyncio

        tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
        if not tasks:
            return
        for task in tasks:
            task.cancel()
        try:
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        except BaseException:  # a task that refuses to die: drop the loop
            loop.close()
            self._loop = None
        self.bridge.unwatch()


def _last_assignment(source: str, name: str) -> int | None:
    """The line of the last top-level statement of ``source`` that binds ``name``, if any."""
    import ast

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, MemoryError):
        return None
    line: int | None = None
    for stmt in tree.body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store):
                line = stmt.lineno
                break
    return line


def _uncaptured_json(lost: Any) -> list[WireUncaptured]:
    """The values left out of the snapshot; ``live``: still in the namespace the next round continues."""
    from codeact.sandbox.runtime.capture import LIVE_REPR_NOTE, REPR_NOTE

    out: list[WireUncaptured] = []
    for item in lost or ():
        if isinstance(item, dict):
            name, kind, reason = (str(item.get(k, "")) for k in ("name", "type", "reason"))
        else:
            name, kind, reason = (str(getattr(item, k, "")) for k in ("name", "type", "reason"))
        out.append({"name": name, "type": kind, "reason": reason.replace(REPR_NOTE, LIVE_REPR_NOTE), "live": True})
    return out


_REAP_CHILDREN = False
"""Kill every other process after each round (set at start-up: only inside a private pid namespace)."""


def _put_file(params: Mapping[str, object]) -> PutFileAnswer:
    """Write one input file (``{"name", "data"}``: a plain file name, base64 content) into the working directory.

    The host already checked the name; it is checked again here: one path component, no ``..``, no
    leading dot, not ``outputs`` (the artifacts folder). An existing file of that name is replaced.
    """
    name, data = params.get("name"), params.get("data")
    if not isinstance(name, str) or not isinstance(data, str):
        raise TypeError("put_file needs a name and base64 data")
    if (
        not name
        or name != os.path.basename(name)
        or name.startswith(".")
        or "\\" in name
        or "\x00" in name
        or name == "outputs"
    ):
        raise ValueError(f"input file name {name!r} is not a plain file name")
    content = binascii.a2b_base64(data, strict_mode=True)  # base64.b64decode(data, validate=True)
    path = os.path.join(os.getcwd(), name)
    if os.path.islink(path):
        os.unlink(path)
    with open(path, "wb") as handle:  # noqa: PTH123 - the runtime stays on os/open
        handle.write(content)
    return {"name": name, "size": len(content)}


def _reap_children() -> None:
    """SIGKILL every other process of the sandbox's pid namespace and collect them (nothing outlives a round)."""
    for _ in range(1000):
        try:
            os.kill(-1, _signal.SIGKILL)  # every process of this pid namespace but pid 1 and this one
        except OSError:
            pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return
        time.sleep(0.001)


def _set_cpu_limit(cpu_s: Any) -> None:
    """Per-round CPU budget: the soft RLIMIT_CPU is this process's CPU time so far + ``cpu_s``."""
    if not cpu_s:
        return
    try:
        import resource

        used = resource.getrusage(resource.RUSAGE_SELF)
        spent = int(used.ru_utime + used.ru_stime) + 1
        _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
        soft = spent + int(cpu_s)
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    except (ImportError, ValueError, OSError):
        pass


def _die_of_sigxcpu_as_pid_1() -> None:
    """As pid 1 (a container's runtime) exit with 128+SIGXCPU when the round's CPU limit fires.

    The kernel does not deliver SIGXCPU's default action (terminate) to a pid namespace's init, so
    without a handler a busy loop would run on until the round's time limit. The handler runs between
    bytecodes; a long call in C is still bounded by that time limit. The host reads the exit status as
    the CPU limit (``CpuLimitExceeded``). Under bubblewrap the runtime is pid 2: the default action works.
    """
    if os.getpid() != 1 or not hasattr(_signal, "SIGXCPU"):
        return

    def _exit(signum: int, _frame: Any) -> None:
        os._exit(128 + signum)

    _signal.signal(_signal.SIGXCPU, _exit)


def _apply_rlimits(rlimits: dict[str, Any]) -> None:
    """Lower this process's resource limits (soft and hard) before any user code runs."""
    import resource

    for name in _RLIMITS:
        value = rlimits.get(name)
        if value is None:
            continue
        which = getattr(resource, f"RLIMIT_{name}", None)
        if which is None:
            continue
        _soft, hard = resource.getrlimit(which)
        value = int(value)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass


def _read_config(argv: list[str]) -> dict[str, Any]:
    """The configuration: ``--config JSON``, ``--config-file PATH`` or the first line of stdin.

    Other options (``--host PID.START``, which only names the host for ``codeact sandbox gc``) are
    ignored. The Docker backend's config file holds the token: the host deletes it as soon as the
    runtime has authenticated, before any code runs.
    """
    options = dict(zip(argv[::2], argv[1::2], strict=False))
    if "--config" in options:
        raw = options["--config"]
    elif "--config-file" in options:
        with open(options["--config-file"], encoding="utf-8") as handle:
            raw = handle.read()
    else:
        raw = sys.stdin.readline()
    config = loads(raw.strip(" \t\n\r"))  # JSON's whitespace only: loads' fast path takes no other
    if not isinstance(config, dict):
        raise SystemExit("codeact runtime: the configuration must be a JSON object")
    return config


def main(argv: list[str] | None = None) -> int:
    """Connect, authenticate, serve. Returns the process exit status."""
    config = _read_config(sys.argv[1:] if argv is None else argv)
    from codeact.sandbox.runtime import protocol, proxy

    for entry in config.get("sys_path") or ():
        # A declared environment's packages (mounted read-only); after the stdlib, so they cannot shadow it.
        if isinstance(entry, str) and entry not in sys.path:
            sys.path.append(entry)
    global _REAP_CHILDREN
    # kill(-1) reaches exactly the sandbox's processes only inside its own pid namespace: as pid 1
    # (a container) or pid 2 (under bubblewrap's init). Pids 1 and 2 of the host are init and kthreadd.
    _REAP_CHILDREN = bool(config.get("reap_children")) and os.getpid() <= 2
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    sock.connect(str(config["socket"]))
    runtime_bridge = proxy.Bridge(sock)
    # The auth answer is an ordinary response: wait for it like for a call (result not codec-decoded).
    auth = proxy._Call(runtime_bridge, 0)
    runtime_bridge._pending[0] = auth
    runtime_bridge.send(
        protocol.request(0, "auth", {"token": str(config.pop("token", "")), "protocol": protocol.PROTOCOL_VERSION})
    )
    try:
        result = auth.result()
    except proxy.ToolError as exc:
        sys.stderr.write(f"codeact runtime: authentication refused: {exc.message}\n")
        return 2
    except proxy.HostGone:
        sys.stderr.write("codeact runtime: the host closed the bridge during authentication\n")
        return 2
    # From here on the runtime dies with its host, whatever the code does (started before the
    # rlimits: the watcher thread must not count against NPROC).
    proxy.watch_host(sock)
    if config.get("rlimits"):
        _apply_rlimits(config["rlimits"])
    _die_of_sigxcpu_as_pid_1()
    if config.get("cwd"):
        os.chdir(config["cwd"])
    manifest = result.get("manifest") if isinstance(result, dict) else None
    runtime = Runtime(runtime_bridge, manifest or {})
    runtime_bridge._decode = runtime._codec.decode
    import gc

    # The runtime's own objects are never garbage: keep them out of every collection. No full
    # collect() first: it costs ~1 ms of every cold start to free the ~40 objects imports leave behind.
    # main.py started with the collector off (no collection during the imports); on again before any code runs.
    gc.freeze()
    gc.enable()
    runtime.serve()
    return 0
