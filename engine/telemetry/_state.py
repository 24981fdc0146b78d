"""Whether tracing is on, and the null objects the engine uses when it is off (no SDK import here)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from codeact.engine.errors import MissingExtraError
from codeact.engine.telemetry._types import CaptureOptions, SpanHandle

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace.export import SpanExporter

    from codeact.engine.telemetry._sdk import Tracing

__all__ = [
    "CaptureOptions",
    "RunTrace",
    "attached",
    "configure",
    "enabled",
    "extract_context",
    "inject_context",
    "reset",
    "shutdown",
    "start_run",
]

_NULL_CM: contextlib.nullcontext[None] = contextlib.nullcontext()
_Spanned = contextlib.AbstractContextManager[SpanHandle | None]
"""A span around one call; the block gets its handle (None when tracing is off)."""


class RunTrace(Protocol):
    """The spans of one run, as the engine drives them (a no-op object when tracing is off)."""

    def round(self, index: int) -> contextlib.AbstractContextManager[object]:
        """A span around one round (current in the loop's task)."""
        ...

    def model_call(self, purpose: str, model: str, protocol: str, *, interceptors: Sequence[str] = ()) -> _Spanned:
        """A span around one model call and its interceptors; the body calls ``.finish(reply)`` on what it yields.

        What it yields (None when tracing is off) also takes ``.interceptor_failed(name)``.
        """
        ...

    def execute(self, backend: str) -> _Spanned:
        """A span around one sandbox execution; the body calls ``.finish(result)`` on what it yields."""
        ...

    def tool_call(
        self, toolkit: str, operation: str, arguments: Mapping[str, object], *, interceptors: Sequence[str] = ()
    ) -> _Spanned:
        """A span around one toolkit call, current while the host side runs; ``.finish(result, error)``."""
        ...

    def end(self, *, status: str, reason: str = "", error: Mapping[str, object] | None = None, rounds: int = 0) -> None:
        """End the run's span."""
        ...


class _NullTrace:
    """Tracing is off: every hook does nothing (the cost of one method call)."""

    __slots__ = ()

    def round(self, index: int) -> contextlib.AbstractContextManager[object]:
        return _NULL_CM

    def model_call(self, purpose: str, model: str, protocol: str, *, interceptors: Sequence[str] = ()) -> _Spanned:
        return _NULL_CM

    def execute(self, backend: str) -> _Spanned:
        return _NULL_CM

    def tool_call(
        self, toolkit: str, operation: str, arguments: Mapping[str, object], *, interceptors: Sequence[str] = ()
    ) -> _Spanned:
        return _NULL_CM

    def end(self, *, status: str, reason: str = "", error: Mapping[str, object] | None = None, rounds: int = 0) -> None:
        return None


NULL_TRACE = _NullTrace()


class _State:
    tracing: Tracing | None = None
    env_checked: bool = False


_STATE = _State()

_TRUE = frozenset({"1", "true", "yes", "on"})


def _env_wants_tracing() -> bool:
    env = os.environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() in _TRUE:
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none"
    return bool(env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def _active() -> Tracing | None:
    tracing = _STATE.tracing
    if tracing is not None or _STATE.env_checked:
        return tracing
    _STATE.env_checked = True
    if _env_wants_tracing():
        configure()
    return _STATE.tracing


def enabled() -> bool:
    """True when spans are recorded (configured, or asked for by the ``OTEL_*`` environment)."""
    return _active() is not None


def configure(
    *,
    file: str | os.PathLike[str] | None = None,
    exporter: str | SpanExporter | None = None,
    service_name: str = "codeact",
) -> None:
    """Turn tracing on for this process (again: the previous exporter is flushed and replaced).

    Args:
        file: Write spans as JSON lines to this file (appended).
        exporter: ``otlp`` (OTLP over HTTP, ``OTEL_EXPORTER_OTLP_*``), ``console``, ``jsonl`` (needs
            ``file``), or an SDK ``SpanExporter`` object (the tests pass an ``InMemorySpanExporter``);
            default: ``file`` if given, else ``OTEL_TRACES_EXPORTER``, else ``otlp``.
        service_name: The resource's ``service.name`` (``OTEL_SERVICE_NAME`` wins).

    Raises:
        MissingExtraError: The ``otel`` extra is not installed.
        CodeactError: ``telemetry.config`` for an unknown exporter.
    """
    try:
        from codeact.engine.telemetry._sdk import Tracing
    except ImportError as exc:
        raise MissingExtraError("tracing (--trace)", extra="otel", module=str(exc.name)) from None
    old = _STATE.tracing
    path = Path(file) if file is not None else None
    _STATE.tracing = Tracing.build(file=path, exporter=exporter, service=service_name)
    _STATE.env_checked = True
    if old is not None:
        old.shutdown()


def shutdown() -> None:
    """Flush and stop tracing (spans already ended are exported)."""
    tracing, _STATE.tracing = _STATE.tracing, None
    if tracing is not None:
        tracing.shutdown()


def reset() -> None:
    """Stop tracing and read the ``OTEL_*`` environment again on the next run (for tests and hosts)."""
    shutdown()
    _STATE.env_checked = False


def start_run(
    *,
    run_id: str,
    session_id: str,
    agent_id: str,
    model: str,
    kind: str,
    options: Mapping[str, object] | None = None,
) -> RunTrace:
    """The spans of a run starting now (child of the current span, if any); a no-op when tracing is off.

    Args:
        run_id: The run.
        session_id: The session (``gen_ai.conversation.id``).
        agent_id: The blueprint id.
        model: The main model.
        kind: ``codeact`` or ``react``.
        options: The blueprint's ``extensions.telemetry`` mapping, if any (may turn tracing on).
    """
    tracing = _active()
    capture = CaptureOptions()
    if options:
        if tracing is None and options.get("enabled"):
            exporter = options.get("exporter")
            file = options.get("file")
            configure(file=None if file is None else str(file), exporter=str(exporter) if exporter else None)
            tracing = _STATE.tracing
        capture = _capture(options.get("capture"))
    if tracing is None:
        return NULL_TRACE
    return tracing.start_run(
        run_id=run_id, session_id=session_id, agent_id=agent_id, model=model, kind=kind, capture=capture
    )


def _capture(raw: object) -> CaptureOptions:
    if raw is True:
        return CaptureOptions(arguments=True, results=True)
    if not isinstance(raw, Mapping):
        return CaptureOptions()
    limit = raw.get("maxChars", raw.get("max_chars", 1000))
    return CaptureOptions(
        arguments=bool(raw.get("arguments", False)),
        results=bool(raw.get("results", False)),
        max_chars=max(16, min(int(limit), 100_000)) if isinstance(limit, int) else 1000,
    )


def inject_context() -> dict[str, str]:
    """The current trace context as a W3C carrier (``traceparent``...), empty when tracing is off.

    Put it in a queued run's metadata; the worker continues the trace with :func:`attached`.
    """
    if _active() is None:
        return {}
    from opentelemetry import propagate

    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


def extract_context(carrier: Mapping[str, object] | None) -> Context | None:
    """An OpenTelemetry ``Context`` from a carrier of :func:`inject_context` (None when off or empty)."""
    if not carrier or _active() is None:
        return None
    from opentelemetry import propagate

    clean = {str(k): str(v) for k, v in carrier.items() if isinstance(v, str) and len(v) <= 512}
    return propagate.extract(clean)


@contextlib.contextmanager
def attached(carrier: Mapping[str, object] | None) -> Iterator[None]:
    """Make the carrier's trace context current for the block (start ``agent.run`` inside it)."""
    context = extract_context(carrier)
    if context is None:
        yield
        return
    from opentelemetry import context as otel_context

    token = otel_context.attach(context)
    try:
        yield
    finally:
        otel_context.detach(token)
