"""What a served flow's codeact step gets of the run context: not its locale and time zone, no ``platform_api``.

This pins a documented design choice (docs/runner.md, "A flow blueprint is a runner too"; docs/flow.md:
``--context`` applies to agent blueprints only): a flow's steps run with their blueprints' own grants
and take no caller context. So even when the flow declares ``platform_api`` actions (its manifest lists
them), a step's code has no ``platform_api`` toolkit, the model is not told the locale or time zone, and
``system.get_current_time()`` answers in UTC. A codeact blueprint served directly or through the queue
gets all three (tests/service/test_run_locale.py, test_platform_actions.py, tests/queue/test_queue_runner_parity.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.engine.openai_server import OpenAIServer
from tests.service.conftest import REPO
from tests.service.helpers import Served, context, start_server, stop_server, stream_run
from tests.service.run_api import code

FLOW = """\
version: codeact.agent/v1
id: clock-flow
workflow: {mode: flow}
flow:
  kind: sequential
  description: Reads the clock in one codeact step.
  agents:
    - path: ./step.yaml
extensions:
  runner:
    permissions:
      platform_api: [message.edit]
"""
STEP = """\
version: codeact.agent/v1
extend: codeact-base
id: clock-step
model: {provider: openai, model: test-model}
workflow: {maxTurns: 3, codeact: {thought: 'off'}}
toolkits:
  - ref: system
"""
PROBE = """\
try:
    platform_api
    has = "platform_api"
except NameError:
    has = "no platform_api"
system.finish(has + " | " + system.get_current_time())"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, model_server: OpenAIServer) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("flow-runtime")
    (tmp / "step.yaml").write_text(STEP)
    flow = tmp / "flow.yaml"
    flow.write_text(FLOW)
    server = start_server(
        tmp, [flow], "--model", "openai/test-model", "--base-url", model_server.base_url,
        env={"PYTHONPATH": str(REPO)},
    )  # fmt: skip
    yield server
    assert stop_server(server) == 0, server.stderr.read_text()


def test_a_flows_step_takes_no_locale_time_zone_or_platform_api(served: Served, replies: OpenAIServer) -> None:
    replies.push(code(PROBE, "I look around."))
    first = len(replies.requests)
    ctx = context("What time is it?")
    ctx["runtime"] = {"locale": "fr_FR", "timezone": "Asia/Tokyo"}
    with served.client() as client:
        [manifest] = client.get("/v1/runners").json()["runners"]
        events = stream_run(client, "clock-flow", ctx)
    assert manifest["permissions"]["platform_api"] == ["message.edit"]  # declared, yet not given to the steps
    assert events[-1].event == "run.completed", events[-1].data
    has, now = [e.data["data"] for e in events if e.event == "message.completed"][-1]["message"]["content"].split(" | ")
    assert has == "no platform_api" and now.endswith("+00:00")
    prompt = "\n".join(str(m.get("content")) for m in replies.requests[first].body["messages"])
    assert "locale:" not in prompt and "timezone:" not in prompt and "platform_api" not in prompt
    assert not [e for e in events if e.event == "action.requested"]
