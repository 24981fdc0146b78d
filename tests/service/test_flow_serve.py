"""`codeact serve` serves a flow blueprint (examples/flow/agent.yaml) as a runner: a FlowAgent run per context."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.service.helpers import Served, context, start_server, stop_server, stream_run

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def flow_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("flow-serve")
    served = start_server(
        tmp,
        [REPO / "examples" / "flow" / "agent.yaml"],
        "--toolkit", str(REPO / "examples" / "devops" / "toolkit.py") + ":DevOps",
        cwd=REPO,
    )  # fmt: skip
    yield served
    assert stop_server(served) == 0, served.stderr.read_text()


def test_a_flow_blueprint_is_served_and_its_run_completes_with_its_steps_recorded(flow_service: Served) -> None:
    with flow_service.client() as client:
        [manifest] = client.get("/v1/runners").json()["runners"]
        assert manifest["id"] == "release-flow" and manifest["metadata"]["kind"] == "flow"
        assert manifest["description"]["en_US"].startswith("Plans a release of a project")
        ctx = context("Release P-123")
        events = stream_run(client, "release-flow", ctx)
        types = [e.event for e in events]
        assert types[-1] == "run.completed", events[-1]
        assert types.count("run.completed") == 1  # the steps' own ends are not in the stream
        assert [e.id for e in events] == list(range(1, len(events) + 1))
        assert "tool.call.completed" in types  # the steps' work streams (the DevOps toolkit's calls)
        assert manifest["capabilities"]["streaming"] is True
        assert "message.delta" in types  # as the manifest says (the codeact and the react step both stream)
        run = client.get(f"/v1/runs/{ctx['run_id']}").json()
        assert run["status"] == "completed"
        shown = client.get(f"/v1/sessions/{run['session_id']}").json()
        assert shown["session"]["status"] == "completed"
        children = shown["session"]["extra"].get("children") or []
        assert len(children) == 2, shown["session"]["extra"]
