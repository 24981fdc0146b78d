"""The run-scoped API's state and storage outlive `codeact serve`: they are kept in its session store.

A run of the binding (the test runner in one conversation) sets state and storage through
``/v1/runs/{run_id}/api/...``; the server is stopped and started again on the same store (the SQLite file,
or the real Redis); the binding's next run reads back what the first one wrote.
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine.agent.conftest import drop_prefix
from tests.engine.openai_server import OpenAIServer
from tests.service.conftest import REPO
from tests.service.helpers import Served, start_server, stop_server
from tests.service.run_api import API_BLUEPRINT, api, finish, granted_context, refused, wait_for_approval

ANA = {"actor_type": "user", "actor_id": "u-ana"}


@pytest.fixture(params=[pytest.param("sqlite", id="sqlite"), pytest.param("redis", id="redis")])
def store_args(request: pytest.FixtureRequest) -> Iterator[list[str]]:
    """``--store`` of both servers: none (the SQLite file of the test's folder, start_server's), or a Redis prefix."""
    if request.param == "sqlite":
        yield []
        return
    redis_url: str = request.getfixturevalue("redis_url")
    prefix = f"codeact-test-kv:{uuid.uuid4().hex[:12]}"
    yield ["--store", f"{redis_url}?prefix={prefix}"]
    asyncio.run(drop_prefix(redis_url, prefix))


def serve(tmp: Path, model_server: OpenAIServer, store_args: list[str]) -> Served:
    blueprint = tmp / "agent.yaml"
    blueprint.write_text(API_BLUEPRINT)
    return start_server(
        tmp,
        [blueprint],
        "--toolkit", "tests.engine.slow_toolkit:Slow",
        "--model", "openai/test-model",
        "--base-url", model_server.base_url,
        *store_args,
        env={"PYTHONPATH": str(REPO)},
    )  # fmt: skip


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_state_and_storage_survive_a_restart_of_codeact_serve(
    tmp_path: Path, replies: OpenAIServer, store_args: list[str]
) -> None:
    chat = f"conv-restart-{uuid.uuid4().hex[:8]}"
    served = serve(tmp_path, replies, store_args)
    try:
        with served.client() as client:
            first = {**granted_context("Remember this.", conversation=chat, state=False), "actor": ANA}
            first["resources"]["storage"]["workspace_storage"] = True
            run_id = wait_for_approval(client, replies, first)
            try:
                for scope, key, value in (
                    ("conversation", "external.session_id", "abc"),
                    ("conversation", "progress", {"step": 2, "of": 5}),
                    ("actor", "lang", "fr"),
                    ("runner", "runs", 1),
                ):
                    payload = {"scope": scope, "key": key, "value": value}
                    assert api(client, run_id, "state_set", payload).json() == {"success": True}
                for area, value in (("binding", b"\x00chat"), ("plugin", b"\x01model"), ("workspace", b"\x02shared")):
                    assert api(client, run_id, f"set_{area}_storage", {"key": "blob", "value_base64": b64(value)})
                # written while the run is going, not when it ends
                assert api(client, run_id, "state_get", {"scope": "conversation", "key": "progress"}).json() == {
                    "value": {"step": 2, "of": 5}
                }
            finally:
                finish(client, run_id)
    finally:
        assert stop_server(served) == 0, served.stderr.read_text()
    # without --audit-log each call is an ``api.call`` line of the service log
    logged = [line for line in served.stderr.read_text().splitlines() if " api.call " in line]
    assert len(logged) == 8 and all("result=ok" in line for line in logged), logged
    assert (tmp_path / "sessions.db").exists() == (store_args == [])  # the store the server was given

    served = serve(tmp_path, replies, store_args)  # the same store, a new process
    try:
        with served.client() as client:
            second = {**granted_context("Where were we?", conversation=chat, state=False), "actor": ANA}
            second["resources"]["storage"]["workspace_storage"] = True
            run_id = wait_for_approval(client, replies, second)
            try:
                got = {
                    (scope, key): api(client, run_id, "state_get", {"scope": scope, "key": key}).json()["value"]
                    for scope, key in (
                        ("conversation", "external.session_id"),
                        ("conversation", "progress"),
                        ("actor", "lang"),
                        ("runner", "runs"),
                    )
                }
                assert got == {
                    ("conversation", "external.session_id"): "abc",
                    ("conversation", "progress"): {"step": 2, "of": 5},
                    ("actor", "lang"): "fr",
                    ("runner", "runs"): 1,
                }
                assert api(client, run_id, "state_list", {"scope": "conversation"}).json() == {
                    "keys": ["external.session_id", "progress"],
                    "has_more": False,
                }
                for area, value in (("binding", b"\x00chat"), ("plugin", b"\x01model"), ("workspace", b"\x02shared")):
                    stored = api(client, run_id, f"get_{area}_storage", {"key": "blob"}).json()
                    assert base64.b64decode(stored["value_base64"]) == value
                    assert api(client, run_id, f"get_{area}_storage_keys").json() == {"keys": ["blob"]}
            finally:
                finish(client, run_id)

            # another conversation of the binding's runner: not this conversation's state or binding storage
            other = granted_context("Hello.", conversation=f"{chat}-other", state=False)
            run_id = wait_for_approval(client, replies, other)
            try:
                assert api(client, run_id, "state_get", {"scope": "conversation", "key": "progress"}).json() == {
                    "value": None
                }
                refused(api(client, run_id, "get_binding_storage", {"key": "blob"}), "not_found", 404)
                plugin = api(client, run_id, "get_plugin_storage", {"key": "blob"}).json()
                assert base64.b64decode(plugin["value_base64"]) == b"\x01model"
            finally:
                finish(client, run_id)
    finally:
        assert stop_server(served) == 0, served.stderr.read_text()
