"""The OpenTelemetry SDK side: the tracer provider, exporters, and the spans of a run."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from codeact.engine.errors import CodeactError
from codeact.engine.telemetry._types import CaptureOptions

__all__ = ["JsonLinesExporter", "Tracing"]

_SCOPE = "codeact"


class JsonLinesExporter(SpanExporter):
    """Writes each span as one JSON line (the SDK's ``to_json`` layout) to a file, for offline use."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = [json.dumps(json.loads(span.to_json(indent=None)), ensure_ascii=False) + "\n" for span in spans]
        with self._lock:
            if self._file.closed:
                return SpanExportResult.FAILURE
            self._file.writelines(lines)
            self._file.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        with self._lock:
            self._file.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class Tracing:
    """A tracer provider of codeact's own (the global one, if the host set one, is left alone)."""

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer(_SCOPE)

    @classmethod
    def build(cls, *, file: Path | None, exporter: str | SpanExporter | None, service: str) -> Tracing:
        """A provider with one exporter (see :func:`codeact.engine.telemetry.configure`)."""
        name = os.environ.get("OTEL_SERVICE_NAME") or service
        provider = TracerProvider(resource=Resource.create({"service.name": name}))
        chosen = exporter
        if chosen is None:
            chosen = "jsonl" if file is not None else (os.environ.get("OTEL_TRACES_EXPORTER") or "otlp")
        if isinstance(chosen, str):
            kind = chosen.split(",")[0].strip().lower()
            if kind in ("jsonl", "file"):
                named = os.environ.get("CODEACT_TRACE_FILE")
                target = file or (Path(named) if named else None)
                if target is None:
                    raise CodeactError(
                        "the jsonl trace exporter needs a file: pass --trace FILE or set CODEACT_TRACE_FILE",
                        code="telemetry.config",
                    )
                provider.add_span_processor(BatchSpanProcessor(JsonLinesExporter(target)))
            elif kind == "console":
                provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
            elif kind == "otlp":
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

                provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
            else:
                raise CodeactError(
                    f"unknown trace exporter {chosen!r}: use otlp, console or jsonl (with a file)",
                    code="telemetry.config",
                )
        else:
            provider.add_span_processor(SimpleSpanProcessor(chosen))
        return cls(provider)

    def shutdown(self) -> None:
        """Flush and close the exporters."""
        self.provider.shutdown()

    def start_run(
        self, *, run_id: str, session_id: str, agent_id: str, model: str, kind: str, capture: CaptureOptions
    ) -> _Trace:
        """The spans of one run (its span starts now, child of the current context)."""
        return _Trace(self.tracer, run_id, session_id, agent_id, model, kind, capture)


class _Call:
    """What a ``with`` block of a model call, execution or tool call gets, to report the outcome."""

    __slots__ = ("span", "trace")

    def __init__(self, trace: _Trace, span: Span) -> None:
        self.trace = trace
        self.span = span

    def finish(self, result: object = None, error: Mapping[str, object] | None = None) -> None:
        """Nothing by default (see the subclasses)."""

    def interceptor_failed(self, name: str) -> None:
        """The interceptor ``name`` raised: the call failed in it (``codeact.interceptor.failed``)."""
        self.span.set_attribute("codeact.interceptor.failed", name)


class _ModelCall(_Call):
    __slots__ = ()

    def finish(self, result: object = None, error: Mapping[str, object] | None = None) -> None:
        if result is None:
            return
        usage = dict(getattr(result, "usage", None) or {})
        tokens_in, tokens_out = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        span = self.span
        span.set_attribute("gen_ai.response.model", str(getattr(result, "model", "") or ""))
        span.set_attribute("gen_ai.usage.input_tokens", tokens_in)
        span.set_attribute("gen_ai.usage.output_tokens", tokens_out)
        finish = getattr(result, "finish_reason", None)
        if finish:
            span.set_attribute("gen_ai.response.finish_reasons", [str(finish)])
        cost = getattr(result, "cost_usd", None)
        if isinstance(cost, int | float):
            span.set_attribute("codeact.cost_usd", float(cost))
        calls = getattr(result, "tool_calls", ()) or ()
        if calls:
            span.set_attribute("codeact.tool_calls", len(calls))
        self.trace.add_usage(tokens_in, tokens_out, cost if isinstance(cost, int | float) else None)


class _Execution(_Call):
    __slots__ = ()

    def finish(self, result: object = None, error: Mapping[str, object] | None = None) -> None:
        if result is None:
            return
        status = str(getattr(result, "status", "ok"))
        span = self.span
        span.set_attribute("codeact.sandbox.status", status)
        span.set_attribute("codeact.sandbox.duration_s", float(getattr(result, "duration_s", 0.0) or 0.0))
        failure = getattr(result, "error", None)
        if failure is not None:
            text = f"{getattr(failure, 'type', 'Error')}: {getattr(failure, 'message', '')}"
            span.set_attribute("error.type", str(getattr(failure, "type", "Error")))
            span.set_status(Status(StatusCode.ERROR, text[:500]))
        elif status != "ok":
            span.set_status(Status(StatusCode.ERROR, status))


class _ToolCall(_Call):
    __slots__ = ()

    def finish(self, result: object = None, error: Mapping[str, object] | None = None) -> None:
        span = self.span
        capture = self.trace.capture
        if error is not None:
            span.set_attribute("codeact.tool.status", "error")
            span.set_attribute("error.type", str(error.get("name") or error.get("code") or "error"))
            span.set_status(Status(StatusCode.ERROR, str(error.get("message", ""))[:500]))
        else:
            span.set_attribute("codeact.tool.status", "ok")
            if capture.results:
                span.set_attribute("codeact.tool.result", _capped(result, capture.max_chars))


def _capped(value: object, limit: int) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Trace:
    """The spans of one run; the run span is current in the task that started it."""

    def __init__(
        self,
        tracer: trace.Tracer,
        run_id: str,
        session_id: str,
        agent_id: str,
        model: str,
        kind: str,
        capture: CaptureOptions,
    ) -> None:
        self.tracer = tracer
        self.capture = capture
        self.ids = {"codeact.run_id": run_id, "codeact.session_id": session_id}
        self.run_span = tracer.start_span(
            f"invoke_agent {agent_id}",
            kind=SpanKind.INTERNAL,
            attributes={
                **self.ids,
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.id": agent_id,
                "gen_ai.agent.name": agent_id,
                "gen_ai.conversation.id": session_id,
                "gen_ai.request.model": model,
                "codeact.agent.kind": kind,
            },
        )
        self._ended = False
        self._token: Any = otel_context.attach(trace.set_span_in_context(self.run_span))
        self.round_span: Span | None = None
        self.exec_span: Span | None = None
        self.totals = [0, 0, 0.0, False]  # input, output, cost, cost known
        self.round_totals = [0, 0, 0.0, False]

    def add_usage(self, tokens_in: int, tokens_out: int, cost: float | None) -> None:
        """Count one model call's tokens (and cost) into the round and the run."""
        for totals in (self.totals, self.round_totals):
            totals[0] += tokens_in
            totals[1] += tokens_out
            if cost is not None:
                totals[2] += cost
                totals[3] = True

    @contextlib.contextmanager
    def round(self, index: int) -> Iterator[Span]:
        """A span around one round, current in the loop's task."""
        self.round_totals = [0, 0, 0.0, False]
        with self.tracer.start_as_current_span(
            f"round {index}", attributes={**self.ids, "codeact.round": index}, end_on_exit=True
        ) as span:
            self.round_span = span
            try:
                yield span
            finally:
                self.round_span = None
                _set_usage(span, self.round_totals)

    @contextlib.contextmanager
    def model_call(
        self, purpose: str, model: str, protocol: str, *, interceptors: Sequence[str] = ()
    ) -> Iterator[_Call]:
        """A span around one model call (``chat`` or ``text_completion``, GenAI conventions) and its interceptors."""
        operation = "text_completion" if protocol == "completion" else "chat"
        system = model.split("/", 1)[0] if "/" in model else "openai"
        attributes: dict[str, Any] = {
            **self.ids,
            "gen_ai.operation.name": operation,
            "gen_ai.system": system,
            "gen_ai.request.model": model,
            "codeact.model.purpose": purpose,
        }
        if interceptors:
            attributes["codeact.interceptors"] = list(interceptors)
        with self.tracer.start_as_current_span(
            f"{operation} {model}", kind=SpanKind.CLIENT, attributes=attributes
        ) as span:
            yield _ModelCall(self, span)

    @contextlib.contextmanager
    def execute(self, backend: str) -> Iterator[_Call]:
        """A span around one sandbox execution (its toolkit calls are its children)."""
        t0 = time.perf_counter()
        with self.tracer.start_as_current_span(
            "sandbox.execute", attributes={**self.ids, "codeact.sandbox.backend": backend}
        ) as span:
            self.exec_span = span
            try:
                yield _Execution(self, span)
            finally:
                self.exec_span = None
                span.set_attribute("codeact.sandbox.wall_s", time.perf_counter() - t0)

    @contextlib.contextmanager
    def tool_call(
        self, toolkit: str, operation: str, arguments: Mapping[str, object], *, interceptors: Sequence[str] = ()
    ) -> Iterator[_Call]:
        """A span around one toolkit call; current while the host side runs (HTTP clients continue it)."""
        parent = self.exec_span or self.round_span or self.run_span
        name = f"{toolkit}.{operation}"
        attributes: dict[str, Any] = {
            **self.ids,
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "codeact.toolkit": toolkit,
            "codeact.operation": operation,
        }
        if interceptors:
            attributes["codeact.interceptors"] = list(interceptors)
        if self.capture.arguments:
            attributes["codeact.tool.arguments"] = _capped(dict(arguments), self.capture.max_chars)
        span = self.tracer.start_span(
            f"execute_tool {name}", context=trace.set_span_in_context(parent), attributes=attributes
        )
        t0 = time.perf_counter()
        try:
            with trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
                yield _ToolCall(self, span)
        finally:
            span.set_attribute("codeact.tool.duration_s", time.perf_counter() - t0)
            span.end()

    def end(self, *, status: str, reason: str = "", error: Mapping[str, object] | None = None, rounds: int = 0) -> None:
        """End the run span with the run's outcome and its token totals (once; later calls do nothing)."""
        if self._ended:
            return
        self._ended = True
        span = self.run_span
        span.set_attribute("codeact.run.status", status)
        span.set_attribute("codeact.run.rounds", rounds)
        if reason:
            span.set_attribute("codeact.run.reason", reason)
        _set_usage(span, self.totals)
        if error is not None:
            span.set_attribute("error.type", str(error.get("code", "error")))
            span.set_status(Status(StatusCode.ERROR, str(error.get("message", ""))[:500]))
        if self._token is not None:
            with contextlib.suppress(ValueError):  # ended from another context (a cancelled task)
                otel_context.detach(self._token)
            self._token = None
        span.end()


def _set_usage(span: Span, totals: list[Any]) -> None:
    span.set_attribute("gen_ai.usage.input_tokens", int(totals[0]))
    span.set_attribute("gen_ai.usage.output_tokens", int(totals[1]))
    if totals[3]:
        span.set_attribute("codeact.cost_usd", float(totals[2]))
