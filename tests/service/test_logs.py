"""`codeact serve`'s log: access lines with request ids, run start/end, errors with their code, no token.

A real `codeact serve` (JSON lines with `--log-format json`, plain by default) on a folder that also
holds a scripted replies file (skipped with one warning naming it).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.engine.openai_server import OpenAIServer
from tests.service.conftest import BLUEPRINT, REPO, RUNNER
from tests.service.helpers import ADMIN, Served, context, start_server, stop_server, wait_until


def code(body: str, prose: str) -> str:
    return f"{prose}\n```python\n{body}\n```\n"


def _serve(tmp: Path, model_server: OpenAIServer, *extra: str) -> Served:
    folder = tmp / "blueprints"
    folder.mkdir()
    (folder / "agent.yaml").write_text(BLUEPRINT)
    shutil.copy(REPO / "examples" / "devops" / "replies.yaml", folder / "replies.yaml")  # not a blueprint
    return start_server(
        tmp,
        [folder],
        "--toolkit", "tests.engine.slow_toolkit:Slow",
        "--model", "openai/test-model",
        "--base-url", model_server.base_url,
        *extra,
        env={"PYTHONPATH": str(REPO)},
    )  # fmt: skip


@pytest.fixture
def json_service(tmp_path: Path, model_server: OpenAIServer) -> Iterator[Served]:
    served = _serve(tmp_path, model_server, "--log-format", "json")
    yield served
    assert stop_server(served) == 0, served.stderr.read_text()


def _lines(served: Served) -> list[dict[str, Any]]:
    return [json.loads(line) for line in served.stderr.read_text().splitlines() if line.startswith("{")]


def test_json_log_has_access_run_and_error_lines_and_never_the_token(
    json_service: Served, replies: OpenAIServer
) -> None:
    replies.push(code("print('working')\nsystem.finish('done')", "I finish at once."))
    ctx = context("Finish.")
    with json_service.client() as client:
        answer = client.post("/v1/runs", json={"runner_id": RUNNER, "context": ctx}, headers={"X-Request-Id": "req-1"})
        assert answer.status_code == 200, answer.text
        assert answer.headers["x-request-id"] == "req-1"
        missing = client.get("/v1/runs/no-such-run")
        assert missing.status_code == 404
        generated = missing.headers["x-request-id"]
        assert re.fullmatch(r"req-[0-9a-f]{16}", generated)
        assert client.get("/v1/runners", headers={"Authorization": "Bearer wrong-token-123"}).status_code == 401
    wait_until(lambda: any(line["event"] == "run.ended" for line in _lines(json_service)), what="run.ended")
    stderr = json_service.stderr.read_text()
    assert ADMIN not in stderr and "wrong-token-123" not in stderr
    lines = _lines(json_service)
    assert stderr.splitlines()[0] == json.dumps(lines[0])  # every line is one JSON object (after the banner)
    skipped = [line for line in lines if line["event"] == "blueprint.skipped"]
    assert len(skipped) == 1 and skipped[0]["file"].endswith("blueprints/replies.yaml")
    assert skipped[0]["level"] == "warning"

    by_request = [line for line in lines if line.get("request_id") == "req-1"]
    assert [line["event"] for line in by_request] == ["run.accepted", "run.started", "run.ended", "access"]
    accepted, started, ended, access = by_request
    assert accepted["token"].startswith("sha256:") and accepted["run_id"] == ctx["run_id"]
    assert started["runner_id"] == RUNNER and started["run_id"] == ctx["run_id"]
    assert ended["status"] == "completed" and ended["duration_ms"] > 0 and ended["events"] > 3
    assert "code" not in ended
    assert access["method"] == "POST" and access["path"] == "/v1/runs" and access["status"] == 200
    assert access["duration_ms"] >= ended["duration_ms"] - 1

    by_generated = [line for line in lines if line.get("request_id") == generated]
    assert [(line["event"], line.get("code"), line["status"]) for line in by_generated] == [
        ("error", "service.run_not_found", 404),
        ("access", None, 404),
    ]
    unauthorized = [line for line in lines if line["event"] == "error" and line["status"] == 401]
    assert unauthorized and unauthorized[0]["code"] == "service.unauthorized"
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line["time"]) for line in lines)
    for line in lines:  # `at` is `time` as float unix seconds (the stream's `at`), to the millisecond
        written = datetime.fromisoformat(line["time"].replace("Z", "+00:00")).timestamp()
        assert isinstance(line["at"], float) and abs(line["at"] - written) < 0.0005, line  # the same millisecond


def test_plain_log_is_the_default(tmp_path: Path, model_server: OpenAIServer, replies: OpenAIServer) -> None:
    served = _serve(tmp_path, model_server)
    try:
        with served.client() as client:
            assert client.get("/v1/runners", headers={"X-Request-Id": "plain-1"}).status_code == 200
        wait_until(lambda: "request_id=plain-1" in served.stderr.read_text(), what="the access line")
    finally:
        assert stop_server(served) == 0
    lines = served.stderr.read_text().splitlines()
    assert re.fullmatch(
        r"\S+Z WARNING blueprint\.skipped file=\S+/replies\.yaml reason=\"not an agent or flow blueprint .*\"",
        lines[0],
    )
    access = next(line for line in lines if "request_id=plain-1" in line)
    assert re.fullmatch(
        r"\S+Z INFO access request_id=plain-1 method=GET path=/v1/runners status=200 duration_ms=[\d.]+ "
        r"client=127\.0\.0\.1:\d+",
        access,
    )
