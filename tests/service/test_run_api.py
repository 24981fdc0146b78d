"""The run-scoped API of protocol v1 answered by `codeact serve` (seed 003 section 7), over real HTTP.

One server per module (``--api-rate 40/3600``, ``--audit-log``). A run waits for an approval while the
test calls ``/v1/runs/{run_id}/api/...`` for it: history, events, artifacts, state and storage work
for its own run and are refused with the seed's error codes for another run's id, an ungranted
resource or scope, another caller, an expired deadline and past the rate limit. Payloads are
validated with the LangBot SDK's models; the audit log has one line per call.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langbot_plugin.api.entities.builtin.runner.page_results import (
    AgentEventRecord,
    EventPage,
    HistoryPage,
    HistorySearchResult,
)

from tests.engine.openai_server import OpenAIServer
from tests.service.conftest import REPO, RUNNER
from tests.service.helpers import ADMIN, SCOPED, Served, context, start_server, stop_server, wait_until
from tests.service.run_api import API_BLUEPRINT, APIS, api, code, finish, granted_context, refused, wait_for_approval


@pytest.fixture(scope="module")
def api_service(tmp_path_factory: pytest.TempPathFactory, model_server: OpenAIServer) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("run-api")
    blueprint = tmp / "agent.yaml"
    blueprint.write_text(API_BLUEPRINT)
    served = start_server(
        tmp,
        [blueprint],
        "--toolkit", "tests.engine.slow_toolkit:Slow",
        "--model", "openai/test-model",
        "--base-url", model_server.base_url,
        "--api-rate", "40/3600",
        "--audit-log", str(tmp / "audit.jsonl"),
        env={"PYTHONPATH": str(REPO)},
    )  # fmt: skip
    # one run first, so the model layer is loaded before a test's deadline starts counting
    model_server.push(code("system.finish('ready')", "Ready."))
    with served.client() as client:
        warm = client.post("/v1/runs", json={"runner_id": RUNNER, "context": context("Ready?")}).json()
        assert warm["run"]["status"] == "completed", warm
    yield served
    assert stop_server(served) == 0, served.stderr.read_text()


def audit_lines(served: Served) -> list[dict[str, Any]]:
    path = Path(served.stderr).parent / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def seed_round(served: Served, conversation_id: str) -> None:
    """An earlier round of the conversation, with an artifact, recorded in the server's store (its session)."""
    from codeact.engine.store import RoundRecord, SessionMeta, open_store

    store = open_store(served.store)
    data = b"id,amount\n1,30\n2,12\n"
    try:
        await store.create_session(
            SessionMeta(session_id=conversation_id, blueprint_id=RUNNER, blueprint_hash="h", model="m")
        )
        record = RoundRecord(
            session_id=conversation_id, index=1, started_at=time.time(), duration_s=0.1, prompt_hash="p",
            reply="I write the refunds report.", code="report = make_report()",
            artifacts=({"name": "report.csv", "mime": "text/csv", "size": len(data), "refused": None,
                        "data_b64": base64.b64encode(data).decode()},),
        )  # fmt: skip
        segments = [
            {"kind": "User", "content": "Write the refunds report.", "round_index": 0, "id": "seg-user-1"},
            {"kind": "Code", "content": "report = make_report()", "round_index": 1, "id": "seg-code-1"},
        ]
        await store.append_round(record, segments=segments, variables={})
    finally:
        await store.close()


def start_waiting(served: Served, client: httpx.Client, replies: OpenAIServer, ctx: dict[str, Any]) -> str:
    """Continue a conversation whose first round wrote an artifact; the new round waits for an approval."""
    from codeact.engine.runner import RunnerContext, session_id_for

    asyncio.run(seed_round(served, session_id_for(RunnerContext.model_validate(ctx))))
    return wait_for_approval(client, replies, ctx)


def test_each_call_works_for_its_run(api_service: Served, replies: OpenAIServer) -> None:
    with api_service.client() as client:
        ctx = granted_context("Now ping the service.")
        run_id = start_waiting(api_service, client, replies, ctx)
        try:
            page = HistoryPage.model_validate(api(client, run_id, "history_page", {"limit": 50}).json())
            assert [(i.role, i.content) for i in page.items[:2]] == [
                ("user", "Write the refunds report."),
                ("assistant", "report = make_report()"),
            ]
            assert (
                page.items[1].item_type == "tool_call"
                and page.items[0].conversation_id == ctx["conversation"]["conversation_id"]
            )
            # Each item names its segment's execution chain (these seeded segments have none).
            assert page.items[1].metadata == {"kind": "Code", "round": 1, "exec_id": None, "parent_exec_ids": []}
            latest = HistoryPage.model_validate(api(client, run_id, "history_page", {"limit": 1}).json())
            assert [i.seq for i in latest.items] == [2] and latest.has_more
            older = HistoryPage.model_validate(
                api(client, run_id, "history_page", {"limit": 1, "before_cursor": latest.prev_cursor}).json()
            )
            assert [i.seq for i in older.items] == [1] and not older.has_more
            found = HistorySearchResult.model_validate(
                api(client, run_id, "history_search", {"query": "REFUNDS report"}).json()
            )
            assert found.items and all("refunds report" in (i.content or "").lower() for i in found.items)

            events = EventPage.model_validate(api(client, run_id, "event_page", {"limit": 100}).json())
            types = [e.event_type for e in events.items]
            assert types[-1] == "action.requested" and "run.completed" not in types
            one = AgentEventRecord.model_validate(
                api(client, run_id, "event_get", {"event_id": events.items[0].event_id}).json()
            )
            assert one == events.items[0]
            missing = api(client, run_id, "event_get", {"event_id": f"{run_id}:9999"})
            refused(missing, "not_found", 404)

            meta = api(client, run_id, "artifact_metadata", {"artifact_id": "1/report.csv"}).json()
            assert meta["mime_type"] == "text/csv" and meta["size_bytes"] == 20
            chunk = api(client, run_id, "artifact_read", {"artifact_id": "1/report.csv", "offset": 10, "length": 4})
            assert base64.b64decode(chunk.json()["data_base64"]) == b"1,30" and not chunk.json()["eof"]
            refused(api(client, run_id, "artifact_read", {"artifact_id": "1/nope.csv"}), "not_found", 404)

            assert api(client, run_id, "state_get", {"scope": "conversation", "key": "topic"}).json() == {
                "value": "refunds"
            }
            assert api(client, run_id, "state_set", {"scope": "binding", "key": "ext.step", "value": {"n": 2}}).json()
            assert api(client, run_id, "state_get", {"scope": "binding", "key": "ext.step"}).json() == {
                "value": {"n": 2}
            }
            assert api(client, run_id, "state_list", {"scope": "binding"}).json() == {
                "keys": ["ext.step"],
                "has_more": False,
            }
            assert api(client, run_id, "state_delete", {"scope": "binding", "key": "ext.step"}).json() == {
                "success": True
            }
            refused(api(client, run_id, "state_get", {"scope": "galaxy", "key": "k"}), "invalid_argument", 422)

            value = base64.b64encode(b"\x00binary cache").decode()
            for area in ("plugin", "binding"):
                assert api(client, run_id, f"set_{area}_storage", {"key": "cache", "value_base64": value}).json() == {}
                got = api(client, run_id, f"get_{area}_storage", {"key": "cache"}).json()
                assert base64.b64decode(got["value_base64"]) == b"\x00binary cache"
                assert api(client, run_id, f"get_{area}_storage_keys").json() == {"keys": ["cache"]}
                api(client, run_id, f"delete_{area}_storage", {"key": "cache"})
                refused(api(client, run_id, f"get_{area}_storage", {"key": "cache"}), "not_found", 404)
        finally:
            finish(client, run_id)
        # the ended run is unregistered: its calls are refused
        refused(api(client, run_id, "history_page"), "not_found", 404)
    lines = [line for line in audit_lines(api_service) if line["run_id"] == run_id]
    assert len(lines) == 27  # one line per call, refused ones included
    assert {line["action"] for line in lines} >= {"history_page", "event_get", "artifact_read", "state_set"}
    assert lines[-1]["result"] == "not_found" and lines[0]["result"] == "ok" and lines[0]["caller"] == RUNNER
    text = (Path(api_service.stderr).parent / "audit.jsonl").read_text()
    assert ADMIN not in text and "binary cache" not in text and value not in text and "refunds" not in text


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_state_and_storage_carry_to_the_next_run_and_stay_with_their_owner(
    api_service: Served, replies: OpenAIServer
) -> None:
    """Kept in the server's store: the conversation's next run reads them; another conversation or actor does not."""
    ana = {"actor_type": "user", "actor_id": "u-ana"}
    chat = f"conv-kv-{uuid.uuid4().hex[:8]}"
    with api_service.client() as client:
        first = {**granted_context("Remember this.", conversation=chat, state=False), "actor": ana}
        run_id = wait_for_approval(client, replies, first)
        try:
            for scope, key, value in (
                ("conversation", "step", 1),
                ("actor", "lang", "fr"),
                ("runner", "seen", {"runs": 1}),
                ("conversation", "notes/1", "a"),
                ("conversation", "notes/2", "b"),
                ("conversation", "notes/3", "c"),
            ):
                assert api(client, run_id, "state_set", {"scope": scope, "key": key, "value": value}).json() == {
                    "success": True
                }
            listed = api(client, run_id, "state_list", {"scope": "conversation", "prefix": "notes/", "limit": 2})
            assert listed.json() == {"keys": ["notes/1", "notes/2"], "has_more": True}
            assert api(client, run_id, "state_delete", {"scope": "conversation", "key": "notes/3"}).json() == {
                "success": True
            }
            api(client, run_id, "set_binding_storage", {"key": "cache", "value_base64": b64(b"\x00chat cache")})
            api(client, run_id, "set_plugin_storage", {"key": "model", "value_base64": b64(b"\x01plugin model")})
        finally:
            finish(client, run_id)

        # the conversation's next run: everything is there
        second = {**granted_context("What did I say?", conversation=chat, state=False), "actor": ana}
        run_id = wait_for_approval(client, replies, second)
        try:
            got = {
                scope: api(client, run_id, "state_get", {"scope": scope, "key": key}).json()["value"]
                for scope, key in (("conversation", "step"), ("actor", "lang"), ("runner", "seen"))
            }
            assert got == {"conversation": 1, "actor": "fr", "runner": {"runs": 1}}
            listed = api(client, run_id, "state_list", {"scope": "conversation", "prefix": "notes/", "limit": 2})
            assert listed.json() == {"keys": ["notes/1", "notes/2"], "has_more": False}
            cache = api(client, run_id, "get_binding_storage", {"key": "cache"}).json()
            assert base64.b64decode(cache["value_base64"]) == b"\x00chat cache"
        finally:
            finish(client, run_id)

        # another conversation of another actor: the runner's own values only
        bob = {"actor_type": "user", "actor_id": "u-bob"}
        other = {**granted_context("Hello.", conversation=f"{chat}-other", state=False), "actor": bob}
        run_id = wait_for_approval(client, replies, other)
        try:
            for scope, key in (("conversation", "step"), ("actor", "lang"), ("binding", "step")):
                assert api(client, run_id, "state_get", {"scope": scope, "key": key}).json() == {"value": None}
            assert api(client, run_id, "state_list", {"scope": "conversation"}).json() == {
                "keys": [],
                "has_more": False,
            }
            refused(api(client, run_id, "get_binding_storage", {"key": "cache"}), "not_found", 404)
            assert api(client, run_id, "get_binding_storage_keys").json() == {"keys": []}
            assert api(client, run_id, "state_get", {"scope": "runner", "key": "seen"}).json() == {"value": {"runs": 1}}
            model = api(client, run_id, "get_plugin_storage", {"key": "model"}).json()
            assert base64.b64decode(model["value_base64"]) == b"\x01plugin model"
            # a scope whose owner this run's context does not name is refused, never mapped to another owner
            error = refused(api(client, run_id, "state_get", {"scope": "subject", "key": "k"}), "invalid_argument", 422)
            assert error.message == (
                "state scope 'subject' belongs to the runner and the run's subject, and this run's context has no "
                "subject.subject_id: start the run with context.subject.subject_id set, or use scope 'runner' or "
                "'conversation'"
            )
            assert error.details == {"scope": "subject", "missing": "subject.subject_id"}
        finally:  # the runner's values are shared by every test of the module: leave none behind
            api(client, run_id, "state_delete", {"scope": "runner", "key": "seen"})
            api(client, run_id, "delete_plugin_storage", {"key": "model"})
            finish(client, run_id)
    audited = [line for line in audit_lines(api_service) if line.get("scope") == "subject"]
    assert [(line["action"], line["result"], line["status"]) for line in audited] == [
        ("state_get", "invalid_argument", 422)
    ]


def test_a_context_state_is_written_to_the_store_and_a_scope_without_owner_refuses_the_run(
    api_service: Served, replies: OpenAIServer
) -> None:
    chat = f"conv-seed-{uuid.uuid4().hex[:8]}"
    with api_service.client() as client:
        ctx = granted_context("Hello.", conversation=chat, state=False)
        ctx["state"] = {"actor": {"lang": "fr"}}  # this context names no actor
        answer = client.post("/v1/runs", json={"runner_id": RUNNER, "context": ctx})
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"] == {
            "code": "service.invalid_context",
            "message": "invalid run context: context.state: state scope 'actor' belongs to the runner and the run's "
            "actor, and this run's context has no actor.actor_id: start the run with context.actor.actor_id set, "
            "or use scope 'runner' or 'conversation'",
        }
        assert client.get(f"/v1/runs/{ctx['run_id']}").status_code == 404  # nothing started

        # a context's snapshot sets its keys; the keys it does not name keep their stored values
        first = granted_context("Hello.", conversation=chat, state=False)
        first["state"] = {"conversation": {"topic": "refunds", "tone": "formal"}}
        run_id = wait_for_approval(client, replies, first)
        try:
            api(client, run_id, "state_set", {"scope": "conversation", "key": "topic", "value": "invoices"})
            # a message of the conversation while its run goes on is refused: its snapshot is not written
            busy = granted_context("Hello?", conversation=chat, state=False)
            busy["state"] = {"conversation": {"topic": "clobbered"}}
            answer = client.post("/v1/runs", json={"runner_id": RUNNER, "context": busy})
            assert answer.status_code == 409 and answer.json()["error"]["code"] == "service.session_busy"
            assert api(client, run_id, "state_get", {"scope": "conversation", "key": "topic"}).json() == {
                "value": "invoices"
            }
        finally:
            finish(client, run_id)
        second = granted_context("Hello again.", conversation=chat, state=False)
        second["state"] = {"conversation": {"tone": "casual"}}
        run_id = wait_for_approval(client, replies, second)
        try:
            for key, value in (("topic", "invoices"), ("tone", "casual")):
                assert api(client, run_id, "state_get", {"scope": "conversation", "key": key}).json() == {
                    "value": value
                }
        finally:
            finish(client, run_id)


def test_calls_are_refused_with_the_seeds_codes(api_service: Served, replies: OpenAIServer) -> None:
    with api_service.client() as client:
        ctx = granted_context("Write the report, then ping.")
        ctx["context"]["available_apis"] = {**APIS, "history_search": False}
        run_id = start_waiting(api_service, client, replies, ctx)
        try:
            # another run's id (never started), another caller, a token that may not act as the runner
            refused(api(client, "run-of-someone-else", "history_page"), "not_found", 404)
            refused(api(client, run_id, "history_page", caller="someone-else"), "unauthorized", 403)
            with api_api_client(api_service, SCOPED) as scoped:
                refused(api(scoped, run_id, "history_page"), "unauthorized", 403)
            # ungranted resources and scopes
            refused(api(client, run_id, "history_search", {"query": "x"}), "unauthorized", 403)
            refused(api(client, run_id, "get_workspace_storage", {"key": "k"}), "unauthorized", 403)
            other = {"conversation_id": "conv-of-another-chat"}
            refused(api(client, run_id, "history_page", other), "unauthorized", 403)
            refused(api(client, run_id, "invoke_llm", {"llm_model_uuid": "gpt"}), "unauthorized", 403)
            # size
            big = {"scope": "binding", "key": "k", "value": "x" * (70 * 1024)}
            refused(api(client, run_id, "state_set", big), "payload_too_large", 413)
            # the rate limit: 40 calls per hour for each run; of the calls above, only the state_set passed
            # the checks before the rate (its value is refused by the state's own cap), so 39 are left
            answers = [api(client, run_id, "event_page", {"limit": 1}) for _ in range(42)]
            assert [a.status_code for a in answers[:39]] == [200] * 39
            error = refused(answers[-1], "rate_limited", 429)
            assert error.retryable and int(answers[-1].headers["Retry-After"]) >= 1
        finally:
            finish(client, run_id)


def api_api_client(served: Served, token: str) -> httpx.Client:
    return served.client(token)


def test_a_run_past_its_deadline_is_refused_with_deadline_exceeded(api_service: Served, replies: OpenAIServer) -> None:
    with api_service.client() as client:
        ctx = granted_context("Write the report, then ping.", deadline_at=time.time() + 12)
        run_id = start_waiting(api_service, client, replies, ctx)
        assert api(client, run_id, "history_page").status_code == 200
        wait_until(lambda: client.get(f"/v1/runs/{run_id}").json()["status"] == "failed", what="the deadline")
        error = refused(api(client, run_id, "history_page"), "deadline_exceeded", 504)
        assert error.retryable
        refused(api(client, run_id, "history_page", caller="someone-else"), "not_found", 404)
        while replies.pending:  # the approved round never came
            replies._next()
    assert audit_lines(api_service)[-1]["result"] == "not_found"


async def test_a_runner_calls_its_host_through_the_proxy(api_service: Served, replies: OpenAIServer) -> None:
    """Both sides: codeact's RunAPIProxy (the runner's) over HTTP to codeact serve (the host)."""
    from codeact.engine.runner import RunnerAPIError, RunnerContext
    from codeact.engine.runner.proxy import HttpHostTransport, RunAPIProxy

    ctx = granted_context("Now ping the service.")
    ctx["context"]["available_apis"] = {**APIS, "history_search": False}
    ctx["resources"]["knowledge_bases"] = [
        {"kb_id": "kb-faq", "kb_name": "FAQ", "operations": ["list", "retrieve"]},
        {"kb_id": "kb-hidden", "operations": ["retrieve"]},
    ]
    with api_service.client() as client:
        run_id = await asyncio.to_thread(start_waiting, api_service, client, replies, ctx)
        transport = HttpHostTransport(api_service.url, token=ADMIN, runner_id=RUNNER)
        proxy = RunAPIProxy(RunnerContext.model_validate(ctx), transport)
        before = len(audit_lines(api_service))
        try:
            page = HistoryPage.model_validate(await proxy.history_page(limit=10))
            assert [i.content for i in page.items] == ["Write the refunds report.", "report = make_report()"]
            events = EventPage.model_validate(await proxy.event_page(event_types=["action.requested"]))
            [asked] = events.items
            assert AgentEventRecord.model_validate(await proxy.event_get(asked.event_id)) == asked
            assert (await proxy.artifact_metadata("1/report.csv"))["name"] == "report.csv"
            assert await proxy.artifact_read("1/report.csv", offset=10) == b"1,30\n2,12\n"
            await proxy.state_set("runner", "ext.seen", [1, 2])
            assert await proxy.state_get("runner", "ext.seen") == [1, 2]
            assert await proxy.state_list("runner") == ["ext.seen"]
            assert await proxy.state_delete("runner", "ext.seen") is True
            await proxy.storage_set("binding", "notes/a", b"first")
            await proxy.storage_set("binding", "other", b"second")
            assert await proxy.storage_list("binding", prefix="notes/") == ["notes/a"]
            assert await proxy.storage_get("binding", "notes/a") == b"first"
            assert proxy.list_knowledge_bases() == [{"uuid": "kb-faq", "name": "FAQ", "type": None}]
            served = len(audit_lines(api_service))
            assert served - before == 13  # every call above reached the host, the KB list excepted (local)

            # refused before it leaves: nothing reaches the host
            with pytest.raises(RunnerAPIError) as search:
                await proxy.history_search("refunds")
            with pytest.raises(RunnerAPIError) as other:
                await proxy.history_page(conversation_id="conv-of-another-chat")
            with pytest.raises(RunnerAPIError) as workspace:
                await proxy.storage_list("workspace")
            with pytest.raises(RunnerAPIError) as rerank:
                await proxy.rerank("rerank-1", "refunds", ["a", "b"])
            with pytest.raises(RunnerAPIError) as action:
                await proxy.request_action("pin_message", target="msg-1")
            with pytest.raises(RunnerAPIError) as scope:
                await proxy.state_get("galaxy", "k")
            codes = [e.value.error.code for e in (search, other, workspace, rerank, action, scope)]
            assert codes == ["unauthorized"] * 5 + ["invalid_argument"]
            assert len(audit_lines(api_service)) == served

            # the host's own checks: another runner's proxy is refused there
            intruder = RunAPIProxy(
                RunnerContext.model_validate(ctx), HttpHostTransport(api_service.url, token=ADMIN, runner_id="intruder")
            )
            with pytest.raises(RunnerAPIError) as caller:
                await intruder.history_page()
            assert caller.value.error.code == "unauthorized"
            await intruder.transport.aclose()  # type: ignore[attr-defined]
        finally:
            await transport.aclose()
            await asyncio.to_thread(finish, client, run_id)
