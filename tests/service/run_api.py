"""Helpers of the run-scoped API tests: a granted context, a run kept waiting for an approval, one API call."""

from __future__ import annotations

from typing import Any

import httpx
from langbot_plugin.api.entities.builtin.runner.errors import AgentAPIError as SDKAgentAPIError

from tests.engine.openai_server import OpenAIServer
from tests.service.conftest import BLUEPRINT, RUNNER
from tests.service.helpers import context, read_sse, wait_until

API_PERMISSIONS = """\
extensions:
  runner:
    permissions:
      history: [page, search]
      events: [get, page]
      artifacts: [metadata, read]
      storage: [plugin, workspace, binding]
"""
API_BLUEPRINT = BLUEPRINT + API_PERMISSIONS
"""The service tests' blueprint, its manifest declaring every run-scoped API codeact serve answers."""

FENCE = "```"
APIS = {
    "history_page": True,
    "history_search": True,
    "event_get": True,
    "event_page": True,
    "artifact_metadata": True,
    "artifact_read": True,
    "state": True,
    "storage": True,
}


def code(body: str, prose: str = "Let me do that.") -> str:
    return f"{prose}\n{FENCE}python\n{body}\n{FENCE}\n"


def granted_context(
    text: str, *, conversation: str | None = None, deadline_at: float | None = None, state: bool = True
) -> dict[str, Any]:
    """A context granting every context API and the plugin and binding storage (``state``: a conversation topic)."""
    ctx = context(text, conversation=conversation, deadline_at=deadline_at)
    ctx["resources"] = {"storage": {"plugin_storage": True, "workspace_storage": False, "binding_storage": True}}
    ctx["context"] = {"conversation_id": ctx["conversation"]["conversation_id"], "available_apis": APIS}
    if state:
        ctx["state"] = {"conversation": {"topic": "refunds"}}
    return ctx


def wait_for_approval(client: httpx.Client, replies: OpenAIServer, ctx: dict[str, Any], *, runner: str = RUNNER) -> str:
    """Start a run of ``ctx`` whose round waits for an approval (so its run-scoped API is served); its id."""
    replies.push(
        code("pong = await slow.ping()", "Now the ping, which needs approval."),
        code("system.finish('done: ' + pong)", "Approved; finishing."),
    )
    with client.stream(
        "POST", "/v1/runs", json={"runner_id": runner, "context": ctx}, headers={"Accept": "text/event-stream"}
    ) as stream:
        assert stream.status_code == 200, stream.read()
        for event in read_sse(stream):
            if event.event == "action.requested":
                break
    run_id: str = ctx["run_id"]
    shown = client.get(f"/v1/runs/{run_id}").json()
    assert shown["status"] == "waiting", shown["error"]
    return run_id


def finish(client: httpx.Client, run_id: str) -> None:
    """Approve the run's pending call and wait for it to complete."""
    [pending] = client.get(f"/v1/runs/{run_id}").json()["pending"]
    client.post(
        f"/v1/runs/{run_id}/interactions",
        json={"interaction_id": pending["interaction_id"], "action_id": "approve", "values": {}},
    )
    wait_until(lambda: client.get(f"/v1/runs/{run_id}").json()["status"] == "completed", what="the run to end")


def api(client: httpx.Client, run_id: str, action: str, payload: dict[str, Any] | None = None,
        *, caller: str = RUNNER) -> httpx.Response:  # fmt: skip
    """``POST /v1/runs/{run_id}/api/{action}`` as the runner ``caller``."""
    return client.post(f"/v1/runs/{run_id}/api/{action}", json=payload or {}, headers={"X-Runner-Id": caller})


def refused(answer: httpx.Response, code: str, status: int) -> SDKAgentAPIError:
    """The answer's ``AgentAPIError`` (the SDK's model), checked to be ``code`` with ``status``."""
    assert answer.status_code == status, answer.text
    error = SDKAgentAPIError.model_validate(answer.json()["error"])
    assert error.code == code, error
    return error
