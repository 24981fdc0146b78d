"""Tracing overhead per round: the engine's telemetry hooks with tracing off and on.

One simulated round makes the calls a CodeAct round makes (round span, one model call, one sandbox
execution, three toolkit calls, each finished with its result) around no work at all, so the figure
is the hooks' own cost. Off: the no-op trace (goal <= 0.2 ms per round); on: the SDK with an
exporter that drops the spans (goal <= 1 ms per round). The baseline is the same loop without hooks.
"""

from __future__ import annotations

import time
from typing import Any

from codeact.engine import telemetry
from codeact.engine.telemetry._state import NULL_TRACE, start_run


class _Reply:
    usage = {"prompt_tokens": 1200, "completion_tokens": 80}
    model = "openai/gpt-4.1-mini"
    finish_reason = "stop"
    cost_usd = 0.0012
    tool_calls = ()


class _Result:
    status = "ok"
    duration_s = 0.01
    error = None


def _round(trace: Any, index: int) -> None:
    with trace.round(index):
        with trace.model_call("code", "openai/gpt-4.1-mini", "chat") as span:
            if span is not None:
                span.finish(_Reply())
        with trace.execute("subprocess") as span:
            for _ in range(3):
                with trace.tool_call("devops", "deploy_app", {"app": "api", "version": "2.4.0"}) as call:
                    if call is not None:
                        call.finish({"ok": True}, None)
            if span is not None:
                span.finish(_Result())


def _per_round_ms(make_trace: Any, rounds: int) -> float:
    best = float("inf")
    for _ in range(5):
        trace = make_trace()
        t0 = time.perf_counter()
        for i in range(rounds):
            _round(trace, i)
        elapsed = time.perf_counter() - t0
        trace.end(status="completed", rounds=rounds)
        best = min(best, elapsed / rounds * 1000)
    return best


def _baseline_ms(rounds: int) -> float:
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for i in range(rounds):
            _ = (i, _Reply(), _Result())
        best = min(best, (time.perf_counter() - t0) / rounds * 1000)
    return best


def _start() -> Any:
    return start_run(run_id="r", session_id="s", agent_id="bench", model="openai/gpt-4.1-mini", kind="codeact")


def run() -> dict[str, Any]:
    """Per-round overhead in milliseconds, off and on, against a no-hook baseline."""
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class _Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    telemetry.reset()
    rounds = 2000
    baseline = _baseline_ms(rounds)
    assert _start() is NULL_TRACE  # noqa: S101 - the environment must not turn tracing on here
    off = _per_round_ms(_start, rounds)
    telemetry.configure(exporter=_Drop())
    try:
        on = _per_round_ms(_start, 500)
    finally:
        telemetry.reset()
    return {
        "baseline_ms_per_round": round(baseline, 5),
        "off_ms_per_round": round(off, 5),
        "on_ms_per_round": round(on, 4),
        "off_overhead_ms_per_round": round(off - baseline, 5),
        "on_overhead_ms_per_round": round(on - baseline, 4),
        "spans_per_round": 6,
        "goal_off_ms": 0.2,
        "goal_on_ms": 1.0,
        "off_within_goal": off - baseline <= 0.2,
        "on_within_goal": on - baseline <= 1.0,
    }


if __name__ == "__main__":
    print(run())
