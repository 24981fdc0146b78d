"""Input as the protocol sends it (issue 28, item 2), over HTTP against a real `codeact serve`.

A LangBot host's context (built with the SDK's own models) carries text, an image and a CSV file in
``input.contents``. The model's code (scripted replies from the local OpenAI-compatible server) opens
the CSV by name in the sandbox's working directory and the answer holds a value computed from it;
the vision runner's model receives the image as an image part of the user message (the recorded
request), the text-only runner's model does not. A traversal file name and an oversized file end
the run with ``runner.invalid_context`` naming what to change.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
from langbot_plugin.api.entities.builtin.provider.message import ContentElement
from langbot_plugin.api.entities.builtin.runner import AgentInput, RunnerManifest

from codeact.engine.runner import RunnerResult
from tests.engine.openai_server import OpenAIServer
from tests.runner.sdk import sdk_check, sdk_context
from tests.service.conftest import REPO
from tests.service.helpers import Served, start_server, stop_server, stream_run

FILE_LIMIT = 4096
BODY_LIMIT = 64 * 1024
CSV = "region,amount\nnorth,120\nsouth,80\neast,45\n"
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
READ_CSV = (
    "The attached sales file has the amounts; I'll add them up.\n"
    "```python\n"
    "import csv\n"
    "with open('sales.csv', newline='') as f:\n"
    "    rows = list(csv.DictReader(f))\n"
    "total = sum(int(r['amount']) for r in rows)\n"
    "print(len(rows), total)\n"
    "system.finish(f'The total is {total}.')\n"
    "```\n"
)


def blueprint(runner_id: str, vision: bool) -> str:
    return f"""\
version: codeact.agent/v1
extend: codeact-base
id: {runner_id}
description: Reads the files a chat user attaches.
model:
  options:
    vision: {str(vision).lower()}
workflow: {{maxTurns: 3, codeact: {{thought: 'off'}}}}
toolkits:
  - ref: system
"""


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, model_server: OpenAIServer) -> Iterator[Served]:
    """`codeact serve` with a vision runner and a text-only runner; input files capped at 4 KiB, bodies at 64 KiB."""
    tmp = tmp_path_factory.mktemp("inputs")
    paths = []
    for runner_id, vision in (("seeing", True), ("reading", False)):
        path = tmp / f"{runner_id}.yaml"
        path.write_text(blueprint(runner_id, vision))
        paths.append(path)
    served = start_server(
        tmp,
        paths,
        "--model", "openai/test-model",
        "--base-url", model_server.base_url,
        "--max-body-bytes", str(BODY_LIMIT),
        env={"PYTHONPATH": str(REPO), "CODEACT_INPUT_FILE_BYTES": str(FILE_LIMIT)},
    )  # fmt: skip
    yield served
    assert stop_server(served) == 0, served.stderr.read_text()


def host_context(run_id: str, *contents: ContentElement) -> dict[str, Any]:
    """A context as a LangBot host builds it (the SDK's models), with ``contents`` as its input."""
    ctx = sdk_context(run_id=run_id, conversation=f"chat-{run_id}")
    ctx.input = AgentInput(contents=[ContentElement.from_text("What is the total amount?"), *contents])
    return ctx.model_dump(mode="json")


def results(served: Served, runner_id: str, ctx: dict[str, Any]) -> list[RunnerResult]:
    with served.client() as client:
        envelopes = stream_run(client, runner_id, ctx)
    out = [RunnerResult.model_validate(e.data) for e in envelopes]
    for result in out:
        sdk_check(result)
    return out


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def user_content(server: OpenAIServer) -> Any:
    messages = server.requests[-1].body["messages"]
    return [m for m in messages if m["role"] == "user"][-1]["content"]


def test_the_manifest_claims_multimodal_input(service: Served) -> None:
    with service.client() as client:
        runners = client.get("/v1/runners").json()["runners"]
    manifests = {m["id"]: RunnerManifest.model_validate(m) for m in runners}
    assert manifests["seeing"].capabilities.multimodal_input is True
    assert manifests["reading"].capabilities.multimodal_input is True


@pytest.mark.parametrize("runner_id", ["seeing", "reading"])
def test_the_code_reads_the_csv_and_only_a_vision_model_gets_the_image(
    service: Served, model_server: OpenAIServer, runner_id: str
) -> None:
    model_server.push(READ_CSV)
    ctx = host_context(
        f"files-{runner_id}",
        ContentElement.from_file_base64(b64(CSV.encode()), "sales.csv"),
        ContentElement.from_image_base64(b64(PNG)),
    )
    got = results(service, runner_id, ctx)
    assert got[-1].type == "run.completed", got[-1]
    answers = [
        r.data["message"]["content"]
        for r in got
        if r.type == "message.completed" and r.data["message"]["provider_specific_fields"]["purpose"] == "answer"
    ]
    assert answers == ["The total is 245."]
    python = [r for r in got if r.type == "tool.call.completed" and r.data["tool_name"] == "python"]
    assert python[0].data["result"]["stdout"] == "3 245\n"
    content = user_content(model_server)
    text = content if isinstance(content, str) else content[0]["text"]
    assert f"- sales.csv (text/csv, {len(CSV)} bytes)" in text
    assert f"- image-1.png (image/png, {len(PNG)} bytes, image)" in text
    if runner_id == "seeing":
        assert content[1:] == [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(PNG)}"}}]
    else:
        assert isinstance(content, str) and b64(PNG) not in str(model_server.requests[-1].body)


@pytest.mark.parametrize(
    ("element", "message"),
    [
        pytest.param(
            ContentElement.from_file_base64(b64(b"x"), "../../etc/cron.d/job"),
            "[input.file_name] message 0, part 1: file name '../../etc/cron.d/job' is refused: it has a folder in it",
            id="traversal",
        ),
        pytest.param(
            ContentElement.from_file_base64(b64(b"x" * (FILE_LIMIT + 1000)), "big.csv"),
            f"[input.too_large] message 0, part 1: file 'big.csv' is {FILE_LIMIT + 1000} bytes, over the limit of "
            f"{FILE_LIMIT} bytes; send a smaller file, or raise the limit with the environment variable "
            "CODEACT_INPUT_FILE_BYTES",
            id="oversized",
        ),
    ],
)
def test_a_bad_file_fails_the_run_with_a_clear_error(
    service: Served, model_server: OpenAIServer, element: ContentElement, message: str
) -> None:
    got = results(service, "reading", host_context(f"bad-{uuid_like(message)}", element))
    assert got[-1].type == "run.failed"
    assert got[-1].data["code"] == "runner.invalid_context"
    assert got[-1].data["error"].startswith(message)
    assert model_server.pending == 0


def uuid_like(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:12]


def test_a_body_over_the_servers_limit_names_the_option_that_raises_it(service: Served) -> None:
    ctx = host_context("too-big", ContentElement.from_file_base64(b64(b"x" * BODY_LIMIT), "big.csv"))
    with service.client() as client:
        answer = client.post("/v1/runs", json={"runner_id": "reading", "context": ctx})
    assert answer.status_code == 413
    error = answer.json()["error"]
    assert error["code"] == "service.payload_too_large"
    assert f"over the server's limit of {BODY_LIMIT} bytes" in error["message"]
    assert "codeact serve --max-body-bytes" in error["message"]
