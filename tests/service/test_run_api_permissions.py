"""Manifest permissions as protocol v1 lists them (seed 003 section 3.4), enforced by `codeact serve`'s run-scoped API.

Two runners: ``svc-agent`` declares some of the seed's kinds in ``extensions.runner.permissions`` (history
page, events, artifact metadata, binding storage, a platform action), ``svc-plain`` declares none beyond the
engine's own. Both get contexts granting every context API and storage area: a call the runner's manifest
does not declare is refused (403 ``unauthorized``, naming the permission) whatever the context grants.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langbot_plugin.api.entities.builtin.runner import RunnerManifest as SdkManifest

from codeact.engine.runner import RunnerManifest
from tests.engine.openai_server import OpenAIServer
from tests.service.conftest import BLUEPRINT, REPO, RUNNER
from tests.service.helpers import Served, start_server, stop_server
from tests.service.run_api import api, finish, granted_context, refused, wait_for_approval

PLAIN = "svc-plain"
DECLARING = (
    BLUEPRINT
    + """\
extensions:
  runner:
    permissions:
      history: [page]
      events: [get, page]
      artifacts: [metadata]
      storage: [binding]
      platform_api: [message.edit]
"""
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, model_server: OpenAIServer) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("run-api-permissions")
    declaring, plain = tmp / "agent.yaml", tmp / "plain.yaml"
    declaring.write_text(DECLARING)
    plain.write_text(BLUEPRINT.replace(f"id: {RUNNER}", f"id: {PLAIN}"))
    server = start_server(
        tmp,
        [declaring, plain],
        "--toolkit", "tests.engine.slow_toolkit:Slow",
        "--model", "openai/test-model",
        "--base-url", model_server.base_url,
        env={"PYTHONPATH": str(REPO)},
    )  # fmt: skip
    yield server
    assert stop_server(server) == 0, server.stderr.read_text()


def test_the_manifests_list_the_protocols_permission_kinds(served: Served) -> None:
    with served.client() as client:
        runners = {m["id"]: m for m in client.get("/v1/runners").json()["runners"]}
    declaring = RunnerManifest.model_validate(runners[RUNNER])
    assert declaring.permissions.model_dump(mode="json") == {
        "models": ["invoke", "stream"],
        "tools": ["detail", "call"],
        "knowledge_bases": ["list", "retrieve"],
        "history": ["page"],
        "events": ["get", "page"],
        "artifacts": ["metadata"],
        "storage": ["binding"],
        "platform_api": ["message.edit"],
        "interactions": ["request"],
    }
    assert declaring.metadata["platform_api"] is True
    # the seed's kinds the SDK 0.7 lacks are left out when empty: the plain runner validates as the SDK's too
    plain: dict[str, Any] = runners[PLAIN]
    assert "artifacts" not in plain["permissions"] and "platform_api" not in plain["permissions"]
    assert "platform_api" not in plain["metadata"]
    assert SdkManifest.model_validate(plain).permissions.history == []


def test_a_call_the_manifest_does_not_declare_is_refused_whatever_the_context_grants(
    served: Served, replies: OpenAIServer
) -> None:
    with served.client() as client:
        run_id = wait_for_approval(client, replies, granted_context("Ping, please."))
        try:
            assert api(client, run_id, "history_page", {"limit": 5}).status_code == 200
            assert api(client, run_id, "event_page", {"limit": 1}).status_code == 200
            assert api(client, run_id, "get_binding_storage_keys").json() == {"keys": []}
            assert api(client, run_id, "state_get", {"scope": "conversation", "key": "topic"}).status_code == 200
            # declared: answered (there is no such artifact); the read is not declared
            refused(api(client, run_id, "artifact_metadata", {"artifact_id": "1/x.csv"}), "not_found", 404)
            error = refused(api(client, run_id, "history_search", {"query": "ping"}), "unauthorized", 403)
            assert error.message == (
                "runner 'svc-agent' does not declare the permission history: search in its manifest "
                "(permissions.history: ['page']); a host serves a runner no more than its manifest declares: "
                "add 'search' to permissions.history"
            )
            assert error.details == {"permission": "history", "operation": "search"}
            refused(api(client, run_id, "artifact_read", {"artifact_id": "1/x.csv"}), "unauthorized", 403)
            refused(api(client, run_id, "artifact_open_stream", {"artifact_id": "1/x.csv"}), "unauthorized", 403)
            # the context grants plugin storage; the manifest declares the binding's only
            error = refused(api(client, run_id, "get_plugin_storage", {"key": "k"}), "unauthorized", 403)
            assert error.details == {"permission": "storage", "operation": "plugin"}
            # a platform action through the API: the manifest's action passes to the context's grants (none)
            error = refused(api(client, run_id, "call_platform_api", {"action": "message.edit"}), "unauthorized", 403)
            assert error.message.startswith("platform action 'message.edit' is not authorized")
            error = refused(api(client, run_id, "call_platform_api", {"action": "chat.delete"}), "unauthorized", 403)
            assert error.details == {"permission": "platform_api", "operation": "chat.delete"}
        finally:
            finish(client, run_id)

        run_id = wait_for_approval(client, replies, granted_context("Ping again."), runner=PLAIN)
        try:
            error = refused(api(client, run_id, "history_page", caller=PLAIN), "unauthorized", 403)
            assert error.message == (
                "runner 'svc-plain' does not declare the permission history: page in its manifest "
                "(permissions.history: []); a host serves a runner no more than its manifest declares: "
                "add 'page' to permissions.history"
            )
            refused(api(client, run_id, "get_binding_storage_keys", caller=PLAIN), "unauthorized", 403)
            assert api(client, run_id, "state_list", {"scope": "conversation"}, caller=PLAIN).status_code == 200
        finally:
            finish(client, run_id)
