"""The run-scoped API's artifacts (seed 003 section 7.6) over real HTTP: metadata, read_range and open_stream,
with the host's size limit, MIME check, expiry and the run's own scope.

One server (``--artifact-max-bytes 200000 --artifact-mime text/* --artifact-mime image/png --artifact-mime
application/json --artifact-ttl 3600``). A real run is given two files; the conversation's next run streams
one by its ``codeact://`` URI, over HTTP and through the runner's proxy, and is refused the other (a PNG sent
as ``.csv``). Rounds seeded in the store hold artifacts the policy refuses: too large, a type contradicting
the content, a type outside the allow-list, an expired one, one the sandbox kept no content of.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.engine.openai_server import OpenAIServer
from tests.service.conftest import REPO, RUNNER
from tests.service.helpers import ADMIN, Served, start_server, stop_server, stream_run
from tests.service.run_api import API_BLUEPRINT, api, code, finish, granted_context, refused, wait_for_approval

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(range(64))
REPORT = b"".join(b"%06d,refund,%d\n" % (i, i % 97) for i in range(10_000))  # 170,000 bytes: three stream chunks


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, model_server: OpenAIServer) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("run-api-artifacts")
    blueprint = tmp / "agent.yaml"
    blueprint.write_text(API_BLUEPRINT)
    server = start_server(
        tmp,
        [blueprint],
        "--toolkit", "tests.engine.slow_toolkit:Slow",
        "--model", "openai/test-model",
        "--base-url", model_server.base_url,
        "--artifact-max-bytes", "200000",
        "--artifact-mime", "text/*", "--artifact-mime", "image/png", "--artifact-mime", "application/json",
        "--artifact-ttl", "3600",
        "--audit-log", str(tmp / "audit.jsonl"),
        env={"PYTHONPATH": str(REPO)},
    )  # fmt: skip
    yield server
    assert stop_server(server) == 0, server.stderr.read_text()


def artifact(name: str, mime: str, data: bytes | None, *, refused: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "mime": mime, "size": len(data or b""), "refused": refused}
    if data is not None:
        entry["data_b64"] = base64.b64encode(data).decode()
    return entry


async def seed_rounds(served: Served, session_id: str) -> None:
    """Round 1 (two hours ago) and round 2 (now) of the session, each with artifacts."""
    from codeact.engine.store import RoundRecord, SessionMeta, open_store

    store = open_store(served.store)
    rounds = [
        (time.time() - 7200, [artifact("old.csv", "text/csv", b"id\n1\n")]),
        (
            time.time(),
            [
                artifact("report.csv", "text/csv", REPORT),
                artifact("chart.png", "image/png", PNG),
                artifact("fake.csv", "text/csv", PNG),  # a PNG declared as CSV
                artifact("notes.txt", "text/plain", b"line one\x00\x00\x01binary"),
                artifact("data.bin", "application/octet-stream", b"\x01\x02\x03"),
                artifact("big.txt", "text/plain", b"x" * 250_000),
                artifact("huge.log", "text/plain", None, refused="larger than the 2097152-byte artifact cap"),
            ],
        ),
    ]
    try:
        await store.create_session(
            SessionMeta(session_id=session_id, blueprint_id=RUNNER, blueprint_hash="h", model="m")
        )
        for index, (started, artifacts) in enumerate(rounds, start=1):
            record = RoundRecord(
                session_id=session_id, index=index, started_at=started, duration_s=1.0, prompt_hash="p",
                reply="I write the files.", code="write_files()", artifacts=tuple(artifacts),
            )  # fmt: skip
            await store.append_round(record, segments=[], variables={})
    finally:
        await store.close()


def stream_lines(answer: httpx.Response) -> list[dict[str, Any]]:
    return [json.loads(line) for line in answer.text.splitlines()]


def joined(lines: list[dict[str, Any]]) -> bytes:
    assert lines[-1]["eof"] is True and all("data_base64" in line for line in lines[:-1])
    return b"".join(base64.b64decode(line["data_base64"]) for line in lines[:-1])


def test_the_next_run_streams_the_files_a_run_was_given_and_the_type_check_refuses_a_disguised_one(
    served: Served, replies: OpenAIServer
) -> None:
    """A real run's input files are artifacts of its first round (``inputs/<name>``, typed by the host's word)."""
    chat = f"conv-art-{uuid.uuid4().hex[:8]}"
    summary = json.dumps({"total": 42, "refunds": list(range(50))}).encode()
    first = granted_context("Here are the files.", conversation=chat)
    first["input"]["contents"] = [
        {"type": "text", "text": "Here are the files."},
        {"type": "file_base64", "file_base64": base64.b64encode(summary).decode(), "file_name": "summary.json"},
        {"type": "file_base64", "file_base64": base64.b64encode(PNG).decode(), "file_name": "sales.csv"},
    ]
    replies.push(code("print(open('summary.json').read()[:20])\nsystem.finish('read')", "I look at the summary."))
    with served.client() as client:
        events = stream_run(client, RUNNER, first)
        assert events[-1].event == "run.completed", events[-1].data
        session_id = events[0].data["data"]["value"]
        uri = f"codeact://sessions/{session_id}/rounds/1/artifacts/inputs/summary.json"

        run_id = wait_for_approval(client, replies, granted_context("Now ping.", conversation=chat))
        try:
            meta = api(client, run_id, "artifact_metadata", {"artifact_id": uri}).json()
            assert meta["name"] == "inputs/summary.json" and meta["mime_type"] == "application/json"
            assert meta["readable"] is True and meta["refusal"] is None
            assert meta["expires_at"] == pytest.approx(meta["created_at"] + 3600)
            by_id = api(client, run_id, "artifact_metadata", {"artifact_id": "1/inputs/summary.json"}).json()
            assert meta == by_id | {"artifact_id": uri}

            answer = api(client, run_id, "artifact_open_stream", {"artifact_id": uri})
            assert answer.status_code == 200 and answer.headers["content-type"] == "application/x-ndjson"
            lines = stream_lines(answer)
            assert joined(lines) == summary
            assert lines[-1] == {
                "eof": True,
                "size": len(summary),
                "sha256": hashlib.sha256(summary).hexdigest(),
                "mime_type": "application/json",
            }
            proxy_ctx = granted_context("x", conversation=chat)
            assert asyncio.run(read_through_the_proxy(served, run_id, uri, proxy_ctx)) == summary

            # a PNG sent as sales.csv was typed text/csv by its name: the content contradicts it
            error = refused(
                api(client, run_id, "artifact_open_stream", {"artifact_id": "1/inputs/sales.csv"}), "unauthorized", 403
            )
            assert error.message == (
                "artifact '1/inputs/sales.csv' is declared 'text/csv' but its content is image/png (by its magic "
                "bytes): this host serves an artifact only when its declared type matches its content"
            )

            # the authorization scope: a URI of another session is refused, whatever exists there
            other = uri.replace("/sessions/conv-", "/sessions/conv-0", 1)
            error = refused(api(client, run_id, "artifact_open_stream", {"artifact_id": other}), "unauthorized", 403)
            assert error.message.endswith("a run reads the artifacts of its own conversation's session only")
            refused(api(client, run_id, "artifact_metadata", {"artifact_id": "1/missing.json"}), "not_found", 404)
        finally:
            finish(client, run_id)


async def read_through_the_proxy(served: Served, run_id: str, uri: str, ctx: dict[str, Any]) -> bytes:
    """The runner's side: ``RunAPIProxy.artifact_open_stream`` over ``HttpHostTransport``."""
    from codeact.engine.runner import RunAPIProxy, RunnerContext
    from codeact.engine.runner.proxy import HttpHostTransport

    transport = HttpHostTransport(served.url, token=ADMIN, runner_id=RUNNER)
    try:
        proxy = RunAPIProxy(RunnerContext.model_validate({**ctx, "run_id": run_id}), transport)
        return b"".join([chunk async for chunk in proxy.artifact_open_stream(uri)])
    finally:
        await transport.aclose()


def test_the_hosts_size_limit_mime_check_and_expiry(served: Served, replies: OpenAIServer) -> None:
    from codeact.engine.runner import RunnerContext, session_id_for

    ctx = granted_context("Ping the service.")
    asyncio.run(seed_rounds(served, session_id_for(RunnerContext.model_validate(ctx))))
    with served.client() as client:
        run_id = wait_for_approval(client, replies, ctx)
        try:

            def call(action: str, name: str, **extra: Any) -> httpx.Response:
                return api(client, run_id, action, {"artifact_id": name, **extra})

            # served: a range, the whole stream (several chunks), a PNG declared as one
            lines = stream_lines(call("artifact_open_stream", "2/report.csv"))
            assert len(lines) == 4 and [line.get("offset") for line in lines[:-1]] == [0, 65536, 131072]
            assert joined(lines) == REPORT
            chunk = call("artifact_read", "2/report.csv", offset=7, length=6).json()
            assert base64.b64decode(chunk["data_base64"]) == b"refund" and chunk["eof"] is False
            assert joined(stream_lines(call("artifact_open_stream", "2/chart.png"))) == PNG

            # the size limit
            error = refused(call("artifact_read", "2/big.txt", length=10), "payload_too_large", 413)
            assert error.message == (
                "artifact '2/big.txt' is 250000 bytes; this host serves artifacts of at most 200000 bytes"
            )
            refused(call("artifact_open_stream", "2/big.txt"), "payload_too_large", 413)
            big = call("artifact_metadata", "2/big.txt").json()
            assert (big["size_bytes"], big["readable"], big["refusal"]) == (250000, False, error.message)

            # the MIME check: the declared type must match the content, and be one the host serves
            error = refused(call("artifact_open_stream", "2/fake.csv"), "unauthorized", 403)
            assert error.message == (
                "artifact '2/fake.csv' is declared 'text/csv' but its content is image/png (by its magic bytes): "
                "this host serves an artifact only when its declared type matches its content"
            )
            assert error.details["reason"] == "mime_mismatch"
            error = refused(call("artifact_read", "2/notes.txt"), "unauthorized", 403)
            assert "but its content is binary (it holds NUL bytes), not text" in error.message
            error = refused(call("artifact_read", "2/data.bin"), "unauthorized", 403)
            assert error.message == (
                "artifact '2/data.bin' is of type 'application/octet-stream', which this host does not serve; "
                "it serves text/*, image/png, application/json"
            )
            assert call("artifact_metadata", "2/fake.csv").json()["readable"] is False

            # no content (the sandbox refused the file), and expiry
            error = refused(call("artifact_read", "2/huge.log"), "not_found", 404)
            assert error.message == (
                "artifact '2/huge.log' has no content (refused by the sandbox: larger than the 2097152-byte "
                "artifact cap)"
            )
            for action in ("artifact_metadata", "artifact_read", "artifact_open_stream"):
                error = refused(call(action, "1/old.csv"), "not_found", 404)
                assert error.message.startswith("artifact '1/old.csv' expired at ")
                assert error.message.endswith(
                    "this host serves an artifact for 3600 s after its round ended; run the step again to make it anew"
                )
        finally:
            finish(client, run_id)
    audit = [json.loads(line) for line in (Path(served.stderr).parent / "audit.jsonl").read_text().splitlines()]
    streamed = [
        (a["resource"], a["result"]) for a in audit if a["run_id"] == run_id and a["action"] == "artifact_open_stream"
    ]
    assert streamed == [
        ("2/report.csv", "ok"), ("2/chart.png", "ok"), ("2/big.txt", "payload_too_large"),
        ("2/fake.csv", "unauthorized"), ("1/old.csv", "not_found"),
    ]  # fmt: skip
