"""OpenTelemetry tracing of runs: spans per run, round, model call, sandbox execution and toolkit call.

Off by default, and then nearly free: nothing of the OpenTelemetry SDK is imported and the engine's
hooks are no-ops (see ``bench/bench_telemetry.py``). Tracing turns on with

* the standard environment variables: ``OTEL_TRACES_EXPORTER`` (``otlp``, ``console``, or
  ``jsonl`` / ``file`` with ``CODEACT_TRACE_FILE``) or ``OTEL_EXPORTER_OTLP_ENDPOINT`` /
  ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``; ``OTEL_SDK_DISABLED=true`` keeps it off;
* a blueprint option: ``extensions.telemetry`` (``enabled``, ``exporter``, ``file``, ``capture``);
* ``codeact run ... --trace FILE`` (spans as JSON lines), or :func:`configure` in Python.

The trace context crosses the bridge (a toolkit's host-side call runs inside its call span, so an
HTTP client it uses continues the trace) and can travel with a queued run: :func:`inject_context`
gives a W3C ``traceparent`` carrier, :func:`attached` continues it around ``agent.run(...)``.
Needs the ``otel`` extra (``pip install codeact[otel]``).
"""

from __future__ import annotations

from codeact.engine.telemetry._state import (
    NULL_TRACE,
    CaptureOptions,
    RunTrace,
    attached,
    configure,
    enabled,
    extract_context,
    inject_context,
    reset,
    shutdown,
    start_run,
)
from codeact.engine.telemetry._types import SpanHandle
from codeact.engine.telemetry._usage import Usage, usage_of_round, usage_total

__all__ = [
    "NULL_TRACE",
    "CaptureOptions",
    "RunTrace",
    "SpanHandle",
    "Usage",
    "attached",
    "configure",
    "enabled",
    "extract_context",
    "inject_context",
    "reset",
    "shutdown",
    "start_run",
    "usage_of_round",
    "usage_total",
]
