"""`codeact serve`: a run's tags and metadata (``POST /v1/runs`` body), checked, carried and recorded.

One server process per module (tests/service/conftest.py), its model the local OpenAI-compatible
test server; replies written the way a model writes one (prose around fenced code).
"""

from __future__ import annotations

import json
import time

import pytest

from tests.engine.openai_server import OpenAIServer
from tests.service.conftest import RUNNER
from tests.service.helpers import Served, context

FENCE = "```"


def code(body: str, prose: str) -> str:
    return f"{prose}\n{FENCE}python\n{body}\n{FENCE}\n"


def test_tags_and_metadata_reach_the_run_its_record_and_its_continuation(
    service: Served, replies: OpenAIServer
) -> None:
    replies.push(
        code("boxes = 12\nsystem.ask_user('Should I count the damaged boxes too?')", "I need to know one thing."),
        code("system.finish(f'{boxes} boxes')", "Not the damaged ones: the count stands."),
    )
    ctx = context("Count the boxes.", deadline_at=time.time() + 120)
    labels = {"tags": ["inventory", "eu"], "metadata": {"ticket": 812, "shop": {"city": "Lyon"}}}
    with service.client() as client:
        answer = client.post("/v1/runs", json={"runner_id": RUNNER, "context": ctx, **labels})
        assert answer.status_code == 200, answer.text
        run = answer.json()["run"]
        assert (run["tags"], run["metadata"]) == (labels["tags"], labels["metadata"])
        session = client.get(f"/v1/sessions/{run['session_id']}").json()["session"]
        assert session["extra"]["tags"] == ["inventory", "eu"]
        assert session["extra"]["metadata"] == labels["metadata"]
        assert len(session["extra"]["trace_id"]) == 32
        # The answer's run (a new run of the session) keeps the labels of the run that asked.
        [question] = client.get(f"/v1/runs/{ctx['run_id']}").json()["pending"]
        following = client.post(
            f"/v1/runs/{ctx['run_id']}/interactions",
            json={"interaction_id": question["interaction_id"], "action_id": "submit", "values": {"answer": "no"}},
        )
        assert following.status_code == 201, following.text
        assert (following.json()["tags"], following.json()["metadata"]) == (labels["tags"], labels["metadata"])
        deadline = time.monotonic() + 60
        while client.get(f"/v1/runs/{following.json()['run_id']}").json()["status"] == "running":
            assert time.monotonic() < deadline, "the continuation did not end"
            time.sleep(0.1)
        assert client.get(f"/v1/runs/{following.json()['run_id']}").json()["status"] == "completed"
    # The server's log line of the engine's run start names the tags (never the metadata).
    [started] = [
        line
        for line in service.stderr.read_text().splitlines()
        if "run.started request_id" in line and f"run_id={ctx['run_id']} " in line
    ]
    assert started.endswith(" tags=" + json.dumps(json.dumps(["inventory", "eu"]))) and "ticket" not in started


@pytest.mark.parametrize(
    ("labels", "field", "says"),
    [
        pytest.param({"tags": "urgent"}, "tags", "tags: a list of non-empty strings", id="tags-not-a-list"),
        pytest.param({"tags": ["ok", ""]}, "tags", "tags: a list of non-empty strings", id="empty-tag"),
        pytest.param({"tags": [f"t{i}" for i in range(65)]}, "tags", "at most 64 tags", id="too-many-tags"),
        pytest.param({"metadata": ["a"]}, "metadata", "metadata: a JSON object, not list", id="metadata-not-object"),
        pytest.param({"metadata": {"blob": "x" * 9000}}, "metadata", "bytes as JSON; at most 8000", id="too-big"),
    ],
)
def test_bad_labels_are_refused_before_anything_runs(
    service: Served, replies: OpenAIServer, labels: dict[str, object], field: str, says: str
) -> None:
    ctx = context("Count the boxes.")
    with service.client() as client:
        answer = client.post("/v1/runs", json={"runner_id": RUNNER, "context": ctx, **labels})
        assert answer.status_code == 422, answer.text
        error = answer.json()["error"]
        assert error["code"] == "service.invalid_config" and says in error["message"], error
        assert error["errors"][0]["loc"] == [field]
        assert client.get(f"/v1/runs/{ctx['run_id']}").status_code == 404
