"""The bridge wire protocol: newline-delimited JSON-RPC 2.0 over one Unix socket per session.

Standard library only: both the host (``codeact.sandbox.channel``, ``codeact.toolkits.bridge``) and the runtime
inside the sandbox import this module. The full protocol is documented in ``docs/protocol.md``.

Frames are one JSON object per line (UTF-8, newline-terminated), at most ``MAX_FRAME`` bytes
including the newline, on both sides. Both peers send requests:

* runtime -> host: ``auth`` (first frame, carries the session token), ``call`` (a toolkit
  operation: ``{"toolkit", "operation", "arguments"}``), ``finish``-style signals are ordinary
  calls of the ``system`` toolkit.
* host -> runtime: ``execute`` (run one round: ``ExecuteParams`` -> ``ExecuteAnswer``), ``put_file``
  (``PutFileParams`` -> ``PutFileAnswer``), ``shutdown``.

The host builds the params below and the runtime reads them (``codeact.sandbox.base``,
``codeact.sandbox.runtime.server``); the answer goes the other way and the host still checks every
member's type (the runtime is untrusted). They are ``TypedDict``s: the frame stays the plain JSON
object it always was.
"""

from __future__ import annotations

# `_json`, not `json`: the C scanner and encoder are all the wire needs, and json's Python modules import
# re (with enum and functools: ~5 ms of CPU at every runtime start) for the paths these skip.
import _json

# Not `from typing import TYPE_CHECKING`: every runtime start imports this module, and typing (~3 ms of a
# ~50 ms cold start) is only for the type checker, which reads this constant the same way.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any, Final, Literal, TypeAlias, TypedDict

JsonValue: TypeAlias = "dict[str, JsonValue] | list[JsonValue] | str | int | float | bool | None"
"""A JSON value as ``json.loads`` returns it and the codec's ``encode`` produces it."""

JsonObject: TypeAlias = "dict[str, JsonValue]"
"""A JSON object."""

PROTOCOL_VERSION: Final = "codeact-bridge/1"

# The methods the host sends the runtime.
EXECUTE: Final = "execute"
PUT_FILE: Final = "put_file"
SHUTDOWN: Final = "shutdown"
MAX_FRAME: Final = 8 * 1024 * 1024

# JSON-RPC 2.0 standard codes.
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
# Engine codes (implementation-defined server-error range).
UNAUTHORIZED: Final = -32001
NOT_FOUND: Final = -32002
TOOL_ERROR: Final = -32003
DEADLINE_EXCEEDED: Final = -32004
PAYLOAD_TOO_LARGE: Final = -32005
RATE_LIMITED: Final = -32006
CANCELLED: Final = -32007
APPROVAL_DENIED: Final = -32008

ERROR_NAMES: Final[dict[int, str]] = {
    PARSE_ERROR: "parse_error",
    INVALID_REQUEST: "invalid_request",
    METHOD_NOT_FOUND: "method_not_found",
    INVALID_PARAMS: "invalid_params",
    INTERNAL_ERROR: "internal_error",
    UNAUTHORIZED: "unauthorized",
    NOT_FOUND: "not_found",
    TOOL_ERROR: "tool_error",
    DEADLINE_EXCEEDED: "deadline_exceeded",
    PAYLOAD_TOO_LARGE: "payload_too_large",
    RATE_LIMITED: "rate_limited",
    CANCELLED: "cancelled",
    APPROVAL_DENIED: "approval_denied",
}


class RpcError(Exception):
    """A JSON-RPC error, raised by handlers and re-raised on the calling side.

    Args:
        code: A JSON-RPC error code (see ``ERROR_NAMES``).
        message: Human-readable; shown to the model, so no host paths or tracebacks.
        data: Optional JSON-able details (for example field errors of ``invalid_params``).
    """

    def __init__(self, code: int, message: str, data: object = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    @property
    def name(self) -> str:
        """The symbolic name of ``code`` (``"unauthorized"``, ...)."""
        return ERROR_NAMES.get(self.code, "error")

    def to_json(self) -> dict[str, object]:
        """The JSON-RPC ``error`` member."""
        err: dict[str, object] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err


if TYPE_CHECKING:  # the wire shapes: annotations only (a TypedDict is a plain dict at run time)

    class RoundLimits(TypedDict):
        """The ``limits`` member of ``execute``: the per-round caps (``Limits.runtime_params()``)."""

        output_bytes: int
        cpu_s: float | None
        max_var_bytes: int
        max_total_bytes: int
        artifact_bytes: int
        round_artifact_bytes: int

    class _ExecuteRequired(TypedDict):
        code: str
        """The round's marshalled code object, base64."""

    class ExecuteParams(_ExecuteRequired, total=False):
        """The params of ``execute``, host -> runtime (``code`` is required; the runtime defaults the rest).

        Attributes:
            source: The program's source (for tracebacks).
            prelude: The restored definitions' marshalled code, base64, or None.
            prelude_source: Their source.
            variables: The codec-encoded variables to restore (name -> encoded value).
            restricted: Run under RestrictedPython's guards.
            loop_free: The code has no loop (the runtime may skip its loop guard).
            allowed_imports: The modules the code may import.
            limits: The round's caps.
            nondeterminism: The tape to replay (or ``{"record": false}``); absent: record.
            warm: The ``state`` token of the previous answer: continue that namespace.
        """

        source: str
        prelude: str | None
        prelude_source: str
        variables: JsonObject
        restricted: bool
        loop_free: bool
        allowed_imports: list[str]
        limits: RoundLimits
        nondeterminism: JsonObject
        warm: str

    class WireError(TypedDict):
        """The ``error`` member of an ``execute`` answer: what the code raised."""

        type: str
        message: str
        line: int | None
        traceback: str

    class _UncapturedRequired(TypedDict):
        name: str
        type: str
        reason: str

    class WireUncaptured(_UncapturedRequired, total=False):
        """One member of an answer's ``uncaptured``; ``live``: the value is still in the warm namespace."""

        live: Literal[True]

    class ExecuteAnswer(TypedDict):
        """The result of ``execute``, runtime -> host (the host re-checks every member: it comes from the sandbox).

        Attributes:
            stdout: Printed output (cut at the round's ``output_bytes``).
            stderr: Standard error, likewise.
            error: What the code raised, or None.
            variables: The captured, codec-encoded variables.
            uncaptured: What could not be captured.
            control: The control signal of the round (``{"kind": "finish", ...}``), or None.
            artifacts: The files the round wrote into ``outputs/``.
            duration_s: The round's time inside the runtime.
            nondeterminism: What the code read from the clock and randomness, or None.
            warm: The round continued the previous round's namespace.
            state: The token the next ``execute`` sends as ``warm`` to continue this namespace.
        """

        stdout: str
        stderr: str
        error: WireError | None
        variables: JsonObject
        uncaptured: list[WireUncaptured]
        control: JsonObject | None
        artifacts: Sequence[Mapping[str, object]]
        duration_s: float
        nondeterminism: Mapping[str, object] | None
        warm: bool
        state: str

    class PutFileParams(TypedDict):
        """The params of ``put_file``: a plain file name and its base64 content."""

        name: str
        data: str

    class PutFileAnswer(TypedDict):
        """The result of ``put_file``."""

        name: str
        size: int


def _not_serializable(value: object) -> object:
    """``json.JSONEncoder.default``: the C encoder calls it for what JSON cannot carry."""
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def _compact_encoder(markers: dict[int, Any]) -> Callable[[object, int], Sequence[str]]:
    """``json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)``'s one-shot C encoder.

    The same arguments as ``JSONEncoder.iterencode(_one_shot=True)``; ``markers`` detects cycles.
    """
    make: Any = _json.make_encoder
    return make(markers, _not_serializable, _json.encode_basestring, None, ":", ",", False, False, False)  # type: ignore[no-any-return]


def _make_dumps() -> Callable[[Any], str]:
    """Compact, strict (no NaN) JSON text, with the C encoder built once instead of on every call."""
    # The markers dict is empty again after a successful call, but the C encoder leaves entries behind
    # when it fails.
    markers: dict[int, Any] = {}
    chunks = _compact_encoder(markers)

    def dumps(value: object) -> str:
        try:
            return "".join(chunks(value, 0))
        except BaseException:
            markers.clear()
            raise

    return dumps


dumps: Final = _make_dumps()
"""``json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)``, faster (one thread at a time)."""


def compact_json(value: object) -> str:
    """``json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)``, from any thread.

    Raises:
        TypeError: A value JSON cannot carry. ValueError: NaN or an infinity, or a circular reference.
    """
    return "".join(_compact_encoder({})(value, 0))


class _ScanContext:
    """What ``json.JSONDecoder()`` hands its C scanner (``json.scanner.c_make_scanner``): its defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__


_make_scanner: Any = _json.make_scanner  # typeshed wants a JSONDecoder: any object with its attributes will do
_scan_once: Final[Callable[[str | bytes, int], tuple[object, int]]] = _make_scanner(_ScanContext())


def loads(data: bytes | str) -> object:
    """``json.loads(data)``, with a fast path for UTF-8 text without surrounding whitespace.

    Raises:
        ValueError: Not JSON (``json.JSONDecodeError`` or ``UnicodeDecodeError``), as ``json.loads``.
    """
    try:
        text = data.decode("utf-8") if type(data) is bytes else data
        value, end = _scan_once(text, 0)
    except (StopIteration, ValueError, RecursionError, TypeError, AttributeError):
        return _json_loads(data)  # the exact error (or the rare valid frame the fast path does not take)
    if end != len(text):
        return _json_loads(data)  # trailing whitespace is fine, trailing data an error: json decides
    return value


def _json_loads(data: bytes | str) -> object:
    import json  # only for what the fast path does not take: errors, surrounding whitespace

    return json.loads(data)


def encode_frame(message: dict[str, object]) -> bytes:
    """Serialize one message as a frame; raises ``RpcError(PAYLOAD_TOO_LARGE)`` over ``MAX_FRAME``."""
    data = (dumps(message) + "\n").encode("utf-8")
    if len(data) > MAX_FRAME:
        raise RpcError(PAYLOAD_TOO_LARGE, f"frame of {len(data)} bytes exceeds the {MAX_FRAME}-byte limit")
    return data


def decode_frame(line: bytes) -> dict[str, Any]:
    """Parse one frame; raises ``RpcError`` (parse_error / invalid_request / payload_too_large)."""
    if len(line) > MAX_FRAME:
        raise RpcError(PAYLOAD_TOO_LARGE, f"frame of {len(line)} bytes exceeds the {MAX_FRAME}-byte limit")
    try:
        message = loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise RpcError(PARSE_ERROR, f"frame is not valid JSON: {exc}") from None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        raise RpcError(INVALID_REQUEST, "frame is not a JSON-RPC 2.0 object")
    return message


def request(id_: int | str, method: str, params: Mapping[str, object]) -> dict[str, object]:
    """A request message."""
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


def response(id_: int | str | None, result: object) -> dict[str, object]:
    """A success response."""
    return {"jsonrpc": "2.0", "id": id_, "result": result}


def error_response(id_: int | str | None, error: RpcError) -> dict[str, object]:
    """An error response."""
    return {"jsonrpc": "2.0", "id": id_, "error": error.to_json()}
