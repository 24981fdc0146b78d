"""Spans of real runs (scripted model, real subprocess sandbox, real toolkits) in the SDK's in-memory exporter."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from codeact.engine import telemetry
from codeact.engine.agent import Agent
from codeact.engine.blueprint import AgentFactory, HostContext, load_path
from codeact.engine.model import ModelClient, ModelSettings, ScriptedReplies
from codeact.engine.store import Store
from codeact.toolkits import ToolkitRegistry, operation, toolkit
from tests.engine.agent.conftest import code

PARENT = """\
version: codeact.agent/v1
id: lead
model: {{provider: scripted, model: "{model}"}}
toolkits: [{{ref: system}}, {{ref: probe}}, {{ref: web}}]
subagents:
  code-reviewer:
    path: ./reviewer.yaml
    description: Reviews a plan.
workflow: {{mode: {mode}, maxTurns: {turns}, codeact: {{thought: "off"}}}}
extensions:
  telemetry:
    capture: {{arguments: true, results: true, maxChars: 24}}
"""
CHILD = """\
version: codeact.agent/v1
id: reviewer
model: {{provider: scripted, model: "{model}"}}
toolkits: [{{ref: system}}]
workflow: {{mode: codeact, maxTurns: 2, codeact: {{thought: "off"}}}}
"""


class _Headers(http.server.BaseHTTPRequestHandler):
    seen: list[dict[str, str]] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        _Headers.seen.append({k.lower(): v for k, v in self.headers.items()})
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """A real HTTP server recording the headers it receives."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Headers)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@toolkit(name="web", description="Fetches a URL (the way an HTTP toolkit propagates the trace)")
class Web:
    """Sends the current trace context in its request headers, as an instrumented HTTP client does."""

    @operation
    async def fetch(self, url: str) -> str:
        """GET ``url``; returns the body.

        Args:
            url: The URL.
        """
        import asyncio
        import urllib.request

        request = urllib.request.Request(url, headers=telemetry.inject_context())

        def get() -> str:
            with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 - the test's own server
                return str(response.read().decode())

        return await asyncio.to_thread(get)


def _agent(tmp_path: Path, registry: ToolkitRegistry, store: Store, replies: list[Any], **fmt: Any) -> Agent:
    script = ScriptedReplies(replies)
    fmt = {"mode": "codeact", "turns": 4, **fmt}
    (tmp_path / "lead.yaml").write_text(PARENT.format(model=script.model, **fmt))
    (tmp_path / "reviewer.yaml").write_text(CHILD.format(model=script.model))
    registry.register(Web())
    client = ModelClient(ModelSettings(model=script.model, max_retries=0))
    spec = AgentFactory().create(
        load_path(tmp_path / "lead.yaml"), HostContext(model_client=client, toolkit_registry=registry)
    )
    agent = Agent(spec, model=client, store=store, registry=registry, stream=False)
    agent._keep = script  # type: ignore[attr-defined]  # the scripted replies live as long as the agent
    return agent


def _named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def _children(spans: Sequence[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    return [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]


async def test_a_codeact_run_with_model_sandbox_toolkit_failure_and_subagent(
    tmp_path: Path, registry: ToolkitRegistry, sqlite_store: Store, spans: InMemorySpanExporter, http_url: str
) -> None:
    agent = _agent(
        tmp_path,
        registry,
        sqlite_store,
        [
            code("total = undefined_name + 1"),  # round 1: the code fails in the sandbox
            code(
                f"""
                await probe.record(value="a long value that the capture cuts off")
                try:
                    await probe.fail(message="boom")
                except Exception as exc:
                    print("caught", exc)
                page = await web.fetch(url="{http_url}/page")
                review = await agents.code_reviewer(task="deploy 2.4.0")
                """
            ),
            code('system.finish("no rollback plan")'),  # the sub-agent's round
            code('system.finish(f"reviewed: {review}")'),
        ],
    )
    result = await agent.invoke("Review then report.", session_id="lead-1")
    assert result.status == "completed", result
    done = spans.get_finished_spans()

    assert len({s.context.trace_id for s in done}) == 1  # one trace, sub-agent included
    (run,) = _named(done, "invoke_agent lead")
    assert run.parent is None
    attrs = dict(run.attributes or {})
    assert attrs["codeact.session_id"] == "lead-1" and attrs["gen_ai.conversation.id"] == "lead-1"
    assert attrs["codeact.run_id"] == result.run_id
    assert attrs["codeact.run.status"] == "completed" and attrs["codeact.run.rounds"] == 3
    assert int(attrs["gen_ai.usage.input_tokens"]) > 0 and int(attrs["gen_ai.usage.output_tokens"]) > 0

    rounds = sorted(_children(done, run), key=lambda s: s.start_time or 0)
    assert [s.name for s in rounds] == ["round 1", "round 2", "round 3"]
    for rnd in rounds:
        kinds = sorted(s.name.split(" ")[0] for s in _children(done, rnd))
        assert kinds == ["chat", "sandbox.execute"]
        (model_span,) = [s for s in _children(done, rnd) if s.name.startswith("chat ")]
        m = dict(model_span.attributes or {})
        assert m["gen_ai.operation.name"] == "chat" and m["gen_ai.request.model"].startswith("scripted/")
        assert m["gen_ai.usage.input_tokens"] > 0 and m["gen_ai.response.finish_reasons"] == ("stop",)
        assert m["codeact.session_id"] == "lead-1"
    first_exec = _named(_children(done, rounds[0]), "sandbox.execute")[0]
    assert first_exec.status.status_code is StatusCode.ERROR
    assert dict(first_exec.attributes or {})["codeact.sandbox.backend"] == "subprocess"
    assert dict(first_exec.attributes or {})["error.type"] == "NameError"

    (second_exec,) = _named(_children(done, rounds[1]), "sandbox.execute")
    calls = {s.name: s for s in _children(done, second_exec)}
    assert set(calls) == {
        "execute_tool probe.record",
        "execute_tool probe.fail",
        "execute_tool web.fetch",
        "execute_tool agents.code_reviewer",
    }
    record = dict(calls["execute_tool probe.record"].attributes or {})
    assert record["codeact.toolkit"] == "probe" and record["codeact.operation"] == "record"
    assert record["codeact.tool.status"] == "ok" and record["codeact.tool.duration_s"] >= 0
    assert len(record["codeact.tool.arguments"]) == 24 and record["codeact.tool.arguments"].endswith("...")
    failed = calls["execute_tool probe.fail"]
    assert failed.status.status_code is StatusCode.ERROR and "boom" in (failed.status.description or "")

    # The sub-agent's run is a child of the call that started it, with its own session.
    (child,) = _children(done, calls["execute_tool agents.code_reviewer"])
    assert child.name == "invoke_agent reviewer"
    assert dict(child.attributes or {})["gen_ai.conversation.id"] == "lead-1.code_reviewer.1"
    assert [s.name for s in _children(done, child)] == ["round 1"]

    # Trace context continued inside the toolkit: its HTTP request carries the call span as parent.
    fetch = calls["execute_tool web.fetch"]
    header = _Headers.seen[-1]["traceparent"]
    _, trace_id, parent_id, _ = header.split("-")
    assert int(trace_id, 16) == fetch.context.trace_id and int(parent_id, 16) == fetch.context.span_id


async def test_a_failed_react_run_and_a_continued_context(
    tmp_path: Path, registry: ToolkitRegistry, sqlite_store: Store, spans: InMemorySpanExporter
) -> None:
    agent = _agent(
        tmp_path,
        registry,
        sqlite_store,
        [{"tool_calls": [{"name": "probe__record", "arguments": {"value": 1}}]}],
        mode="react",
        turns=1,
    )
    # A queued run continues the submitter's trace from the carrier in its metadata.
    tracer = telemetry._state._STATE.tracing.tracer  # type: ignore[union-attr]
    with tracer.start_as_current_span("submit"):
        carrier = telemetry.inject_context()
    assert carrier["traceparent"].startswith("00-")
    with telemetry.attached(carrier):
        result = await agent.invoke("Record one.")
    assert result.status == "failed" and result.reason == "run.maxTurns"
    done = spans.get_finished_spans()
    (submit,) = _named(done, "submit")
    (run,) = _named(done, "invoke_agent lead")
    assert run.parent is not None and run.parent.span_id == submit.context.span_id
    assert run.status.status_code is StatusCode.ERROR
    assert dict(run.attributes or {})["error.type"] == "run.maxTurns"
    (rnd,) = _children(done, run)
    names = sorted(s.name for s in _children(done, rnd))
    assert names[0].startswith("chat ") and names[1] == "execute_tool probe.record"
    rounds = await sqlite_store.rounds(result.session_id)
    assert rounds[0].usage["code"]["prompt_tokens"] > 0  # react rounds record their tokens too


async def test_tracing_off_records_nothing(
    tmp_path: Path, registry: ToolkitRegistry, sqlite_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    telemetry.reset()
    assert not telemetry.enabled()
    assert telemetry.inject_context() == {}
    agent = _agent(tmp_path, registry, sqlite_store, [code('system.finish("ok")')])
    assert (await agent.invoke("go")).status == "completed"
    assert not telemetry.enabled()


def test_the_environment_turns_tracing_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "jsonl")
    monkeypatch.setenv("CODEACT_TRACE_FILE", str(tmp_path / "t.jsonl"))
    telemetry.reset()
    try:
        assert telemetry.enabled()
    finally:
        telemetry.reset()
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert not telemetry.enabled()
    telemetry.reset()


def test_the_sdk_is_not_imported_when_tracing_is_off() -> None:
    import subprocess
    import sys

    code = (
        "import sys, asyncio\n"
        "import engine.agent, engine.cli, engine.telemetry as t\n"
        "assert not t.enabled() and t.inject_context() == {}\n"
        "assert not [m for m in sys.modules if m.startswith('opentelemetry')], 'imported'\n"
    )
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr


async def test_a_blueprint_option_turns_tracing_on(
    tmp_path: Path, registry: ToolkitRegistry, sqlite_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    for name in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    telemetry.reset()
    script = ScriptedReplies([code('system.finish("ok")')])
    trace_file = tmp_path / "spans.jsonl"
    (tmp_path / "agent.yaml").write_text(
        "version: codeact.agent/v1\nid: traced\n"
        f'model: {{provider: scripted, model: "{script.model}"}}\n'
        "toolkits: [{ref: system}]\n"
        "workflow: {mode: codeact, maxTurns: 2, codeact: {thought: 'off'}}\n"
        f"extensions: {{telemetry: {{enabled: true, exporter: jsonl, file: {json.dumps(str(trace_file))}}}}}\n"
    )
    client = ModelClient(ModelSettings(model=script.model, max_retries=0))
    spec = AgentFactory().create(
        load_path(tmp_path / "agent.yaml"), HostContext(model_client=client, toolkit_registry=registry)
    )
    agent = Agent(spec, model=client, store=sqlite_store, registry=registry, stream=False)
    try:
        assert (await agent.invoke("go")).status == "completed"
        assert telemetry.enabled()
    finally:
        telemetry.reset()  # flushes the file
    names = [json.loads(line)["name"] for line in trace_file.read_text().splitlines()]
    assert "invoke_agent traced" in names and "round 1" in names and "sandbox.execute" in names


class _Collector(http.server.BaseHTTPRequestHandler):
    posts: list[tuple[str, str, bytes]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        _Collector.posts.append((self.path, self.headers.get("Content-Type", ""), body))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


async def test_otlp_export_to_a_collector_from_the_environment(
    tmp_path: Path, registry: ToolkitRegistry, sqlite_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
        telemetry.reset()
        agent = _agent(tmp_path, registry, sqlite_store, [code('await probe.record(value=2)\nsystem.finish("ok")')])
        try:
            assert (await agent.invoke("go")).status == "completed"
        finally:
            telemetry.reset()  # flushes the batch to the collector
    finally:
        server.shutdown()
        server.server_close()
    (path, content_type, body) = _Collector.posts[-1]
    assert path == "/v1/traces" and content_type == "application/x-protobuf"
    assert (
        b"invoke_agent lead" in body and b"execute_tool probe.record" in body and b"gen_ai.usage.input_tokens" in body
    )
