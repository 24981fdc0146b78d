"""Helpers of the service tests: a `codeact serve` subprocess, run contexts, an SSE reader over httpx."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

BIN = Path(sys.executable).parent
ADMIN = "test-admin-token-1"
SCOPED = "test-scoped-token"  # may use the runner "someone-else" only
_URL = re.compile(r"listening on (http://\S+)")


@dataclass
class Served:
    """A running `codeact serve`."""

    url: str
    process: subprocess.Popen[str]
    store: str
    stderr: Path

    def client(self, token: str | None = ADMIN, **kwargs: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60, **kwargs)


def start_server(
    tmp: Path,
    blueprints: Sequence[Path],
    *extra: str,
    env: dict[str, str] | None = None,
    tokens: str = f"{ADMIN} {SCOPED}=someone-else",
    cwd: Path | None = None,
) -> Served:
    """Start `codeact serve --port 0` and wait for the URL it prints."""
    store = f"sqlite:///{tmp / 'sessions.db'}"
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    full_env = {
        **os.environ,
        "CODEACT_HOME": str(home),
        "CODEACT_API_TOKENS": tokens,
        "OPENAI_API_KEY": "sk-test",
        "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
        **(env or {}),
    }
    full_env.pop("CODEACT_MODEL", None)
    stderr = tmp / "serve.stderr"
    err = stderr.open("w")
    argv = [str(BIN / "codeact"), "serve", "--port", "0", "--store", store]
    for blueprint in blueprints:
        argv += ["--blueprints", str(blueprint)]
    process = subprocess.Popen(
        [*argv, *extra],
        stdout=subprocess.PIPE,
        stderr=err,
        text=True,
        env=full_env,
        cwd=cwd,
        start_new_session=True,
    )
    err.close()  # the child has its own descriptor
    assert process.stdout is not None
    line = process.stdout.readline()
    found = _URL.search(line)
    if found is None:
        process.wait(timeout=30)
        raise AssertionError(f"codeact serve did not start: {line!r}\n{stderr.read_text()}")
    return Served(url=found.group(1), process=process, store=store, stderr=stderr)


def stop_server(served: Served) -> int:
    """SIGTERM the server (a graceful shutdown) and return its exit code."""
    served.process.send_signal(signal.SIGTERM)
    try:
        return served.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        served.process.kill()
        served.process.wait()
        raise
    finally:
        if served.process.stdout is not None:
            served.process.stdout.close()


def context(
    text: str,
    *,
    conversation: str | None = None,
    run_id: str | None = None,
    deadline_at: float | None = None,
) -> dict[str, Any]:
    """A minimal run context as a host sends it (event-first)."""
    run = run_id or f"run-{uuid.uuid4().hex[:12]}"
    body: dict[str, Any] = {
        "run_id": run,
        "trigger": {"type": "message.received", "source": "api"},
        "event": {"event_id": f"evt-{run}", "event_type": "message.received", "source": "test"},
        "conversation": {"conversation_id": conversation or f"conv-{run}"},
        "input": {"text": text},
        "delivery": {"surface": "api", "supports_streaming": True},
    }
    if deadline_at is not None:
        body["runtime"] = {"deadline_at": deadline_at}
    return body


@dataclass(frozen=True)
class SSE:
    """One server-sent event."""

    id: int | None
    event: str | None
    data: dict[str, Any]


def read_sse(response: httpx.Response, *, stop_after: int | None = None) -> Iterator[SSE]:
    """Parse the SSE events of a streaming response (comments and `retry:` skipped)."""
    fields: dict[str, str] = {}
    data: list[str] = []
    seen = 0
    for line in response.iter_lines():
        if line == "":
            if data:
                raw_id = fields.get("id")
                payload = json.loads("\n".join(data))
                yield SSE(id=int(raw_id) if raw_id else None, event=fields.get("event"), data=payload)
                seen += 1
                if stop_after is not None and seen >= stop_after:
                    return
            fields, data = {}, []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            data.append(value)
        elif name in ("id", "event"):
            fields[name] = value


def stream_run(client: httpx.Client, runner_id: str, ctx: dict[str, Any]) -> list[SSE]:
    """POST /v1/runs as SSE and read the whole stream."""
    with client.stream(
        "POST", "/v1/runs", json={"runner_id": runner_id, "context": ctx}, headers={"Accept": "text/event-stream"}
    ) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return list(read_sse(response))


@contextmanager
def serve_blueprint(tmp: Path, blueprint: str, base_url: str, *, env: dict[str, str] | None = None) -> Iterator[Served]:
    """`codeact serve` of one blueprint (written to ``tmp/agent.yaml``) whose model is the OpenAI-compatible
    server at ``base_url``; it must stop cleanly (exit 0) when the block ends."""
    path = tmp / "agent.yaml"
    path.write_text(blueprint)
    repo = str(Path(__file__).resolve().parents[2])
    served = start_server(
        tmp, [path], "--model", "openai/test-model", "--base-url", base_url, env={"PYTHONPATH": repo, **(env or {})}
    )
    yield served
    assert stop_server(served) == 0, served.stderr.read_text()


def run_envelopes(served: Served, runner_id: str, ctx: dict[str, Any]) -> list[dict[str, Any]]:
    """POST one run as SSE to ``served`` and return its envelopes (each event's data)."""
    with served.client() as client:
        return [e.data for e in stream_run(client, runner_id, ctx)]


def sandbox_processes(session_id: str) -> list[int]:
    """Pids of live sandbox runtimes of ``session_id`` (their argv names the session)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "Z":
            continue
        for index, arg in enumerate(argv[:-1]):
            if arg == b"--session" and argv[index + 1] == session_id.encode():
                found.append(int(entry.name))
    return found


def wait_until(predicate: Any, *, timeout: float = 30.0, what: str = "condition") -> None:
    """Poll ``predicate`` until true (behaviour, not timing: the timeout only bounds a hang)."""
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
