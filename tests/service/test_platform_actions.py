"""``action.requested`` from the model's code (seed 003 section 6.6), through `codeact serve`'s HTTP API.

``svc-actions`` declares ``platform_api: [message.edit, reaction.add]`` (``extensions.runner.permissions``):
its runs get the ``platform_api`` toolkit, and a request the code makes becomes the protocol's
``action.requested`` result with ``{action, target, payload}``. An undeclared action, a target that is not
an object, a payload too large or not plain JSON are refused to the code with the reason. ``svc-agent``
declares none: its runs have no such toolkit.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langbot_plugin.api.entities.builtin.runner.result import RunnerResult as SdkResult

from codeact.engine.runner.platform_actions import MAX_ACTIONS_PER_RUN
from tests.engine.openai_server import OpenAIServer
from tests.service.conftest import REPO, RUNNER
from tests.service.helpers import Served, context, start_server, stop_server, stream_run
from tests.service.run_api import code

ACTIONS = "svc-actions"
BLUEPRINT = """\
version: codeact.agent/v1
extend: codeact-base
id: {id}
description: A test agent that edits messages.
workflow: {{maxTurns: 3, codeact: {{thought: 'off'}}}}
toolkits:
  - ref: system
"""
DECLARING = (
    BLUEPRINT.format(id=ACTIONS)
    + """\
extensions:
  runner:
    permissions:
      platform_api: [message.edit, reaction.add]
"""
)
REQUESTS = """\
done = platform_api.request_action(action="message.edit", target={"message_id": "m-1"}, payload={"text": "Edited."})
print(done)
try:
    platform_api.request_action(action="chat.delete", target={"chat_id": "c-1"})
except Exception as exc:
    print("refused:", exc)
try:
    platform_api.request_action(action="reaction.add", target="m-1")
except Exception as exc:
    print("refused:", exc)
try:
    platform_api.request_action(action="reaction.add", payload={"blob": "x" * 20000})
except Exception as exc:
    print("refused:", exc)
try:
    platform_api.request_action(action="reaction.add", payload={"raw": b"secret"})
except Exception as exc:
    print("refused:", exc)
platform_api.request_action(action="reaction.add", target={"message_id": "m-1"}, payload={"emoji": "+1"})
system.finish("edited")"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, model_server: OpenAIServer) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("platform-actions")
    declaring, plain = tmp / "actions.yaml", tmp / "agent.yaml"
    declaring.write_text(DECLARING)
    plain.write_text(BLUEPRINT.format(id=RUNNER))
    server = start_server(
        tmp,
        [declaring, plain],
        "--model", "openai/test-model",
        "--base-url", model_server.base_url,
        env={"PYTHONPATH": str(REPO)},
    )  # fmt: skip
    yield server
    assert stop_server(server) == 0, server.stderr.read_text()


def prompt_text(server: OpenAIServer, index: int = -1) -> str:
    return "\n".join(str(m.get("content")) for m in server.requests[index].body["messages"])


def test_the_codes_request_becomes_action_requested_and_undeclared_ones_are_refused(
    served: Served, replies: OpenAIServer
) -> None:
    replies.push(code(REQUESTS, "I edit the message."))
    with served.client() as client:
        events = stream_run(client, ACTIONS, context("Edit my last message, please."))
        run = client.get(f"/v1/runs/{events[0].data['run_id']}").json()
    stub = prompt_text(replies)  # the toolkit, as the model sees it
    assert "class platform_api:" in stub and "Actions: 'message.edit', 'reaction.add'." in stub
    results = [SdkResult.model_validate(e.data) for e in events]  # the SDK reads every envelope
    assert results[-1].type == "run.completed"
    asked = [r.data for r in results if r.type == "action.requested"]
    assert asked == [
        {"action": "message.edit", "target": {"message_id": "m-1"}, "payload": {"text": "Edited."}},
        {"action": "reaction.add", "target": {"message_id": "m-1"}, "payload": {"emoji": "+1"}},
    ]
    # each follows its call's tool.call.completed, under the same parent
    types = [(r.type, (r.data or {}).get("tool_name")) for r in results]
    first = types.index(("action.requested", None))
    assert types[first - 1] == ("tool.call.completed", "platform_api.request_action")
    assert events[first].data["parent_id"] == events[first - 1].data["parent_id"] is not None
    # an action the code requested is no question: the run is simply completed
    assert run["status"] == "completed" and run["pending"] == []

    [python] = [r.data for r in results if r.type == "tool.call.completed" and r.data["tool_name"] == "python"]
    refusals = [line for line in python["result"]["stdout"].splitlines() if line.startswith("refused:")]
    assert refusals[0] == (
        "refused: platform action 'chat.delete' is not declared by this runner; it may request 'message.edit', "
        "'reaction.add' (its manifest's permissions.platform_api)"
    )
    assert refusals[1] == (
        "refused: invalid arguments for platform_api.request_action(): target: Input should be a valid dictionary"
    )
    assert refusals[2] == "refused: the request's target and payload are 20018 bytes as JSON; at most 16384 are sent"
    assert refusals[3] == (
        "refused: payload['raw'] is a bytes: send JSON values only (str, int, float, bool, None, list, dict)"
    )
    assert "secret" not in str([r.data for r in results if r.type == "action.requested"])


FLOOD = """\
refused = set()
for i in range(5000):
    try:
        platform_api.request_action(action="reaction.add", target={"message_id": f"m-{i}"}, payload={"emoji": "+1"})
    except Exception as exc:
        refused.add(str(exc))
print(sorted(refused))
system.finish("flooded")"""


def test_a_loop_of_requests_stops_at_the_runs_action_cap(served: Served, replies: OpenAIServer) -> None:
    """Hostile: code that requests actions in a loop and swallows the refusals floods no platform."""
    replies.push(code(FLOOD, "I react to every message."))
    with served.client() as client:
        events = stream_run(client, ACTIONS, context("React to all my messages."))
    results = [SdkResult.model_validate(e.data) for e in events]
    asked = [r.data for r in results if r.type == "action.requested"]
    assert len(asked) == MAX_ACTIONS_PER_RUN == 20
    assert [a["target"]["message_id"] for a in asked] == [f"m-{i}" for i in range(20)]  # the first ones, in order
    [python] = [r.data for r in results if r.type == "tool.call.completed" and r.data["tool_name"] == "python"]
    assert python["result"]["stdout"].strip() == (
        "['this run has requested 20 platform actions, the most one run may; "
        "do what is left in the answer, or in the next run']"
    )
    assert results[-1].type == "run.completed"


def test_a_runner_declaring_no_platform_action_has_no_such_toolkit(served: Served, replies: OpenAIServer) -> None:
    probe = "try:\n    platform_api\n    system.finish('yes')\nexcept NameError:\n    system.finish('no')"
    replies.push(code(probe, "Do I have it?"))
    first = len(replies.requests)
    with served.client() as client:
        events = stream_run(client, RUNNER, context("Edit my last message, please."))
    assert "platform_api" not in prompt_text(replies, first)
    done: list[dict[str, Any]] = [e.data["data"] for e in events if e.event == "message.completed"]
    assert done[-1]["message"]["content"] == "no"
    assert not [e for e in events if e.event == "action.requested"]
