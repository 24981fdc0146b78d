"""`codeact serve` over real HTTP: runners, runs (SSE and JSON), sessions, replay, auth and bad input.

One server process per module (tests/service/conftest.py), its model the local OpenAI-compatible
test server; every reply is written the way a model writes one (prose around fenced code).
"""

from __future__ import annotations

import base64
import time

import httpx

from tests.engine.openai_server import OpenAIServer
from tests.service.conftest import RUNNER
from tests.service.helpers import ADMIN, SCOPED, Served, context, read_sse, sandbox_processes, stream_run, wait_until

FENCE = "```"


def code(body: str, prose: str = "Let me compute that.") -> str:
    return f"{prose}\n{FENCE}python\n{body}\n{FENCE}\n"


def test_runners_are_listed_for_the_token(service: Served) -> None:
    with service.client() as client:
        answer = client.get("/v1/runners")
    assert answer.status_code == 200
    [manifest] = answer.json()["runners"]
    assert manifest["id"] == RUNNER
    assert manifest["description"] is not None
    with service.client(SCOPED) as client:
        assert client.get("/v1/runners").json() == {"runners": []}
    with service.client(None) as client:
        assert client.get("/v1/health").json() == {"status": "ok"}


def test_a_streamed_run_completes_and_its_session_can_be_read_and_replayed(
    service: Served, replies: OpenAIServer
) -> None:
    replies.push(
        code("total = sum(range(1, 7))\nprint(total)", "I'll add the numbers first."),
        code("system.finish(f'the total is {total}')", "The total is known, so I finish."),
    )
    ctx = context("Add the numbers from 1 to 6.")
    with service.client() as client:
        events = stream_run(client, RUNNER, ctx)
        assert [e.id for e in events] == list(range(1, len(events) + 1))
        assert all(e.data["sequence"] == e.id and e.data["type"] == e.event for e in events)
        assert all(e.data["run_id"] == ctx["run_id"] for e in events)
        assert events[-1].event == "run.completed"
        assert [e.event for e in events].count("run.completed") == 1
        answers = [e.data["data"]["message"]["content"] for e in events if e.event == "message.completed"]
        assert "the total is 21" in answers

        run = client.get(f"/v1/runs/{ctx['run_id']}").json()
        assert run["status"] == "completed" and run["events"] == len(events) and run["error"] is None
        session_id = run["session_id"]
        listed = client.get("/v1/sessions").json()["sessions"]
        assert session_id in [s["session_id"] for s in listed]
        shown = client.get(f"/v1/sessions/{session_id}").json()
        assert shown["session"]["status"] == "completed"
        assert [r["index"] for r in shown["rounds"]] == [1, 2]
        assert shown["rounds"][0]["stdout"] == "21\n"
        assert "total = sum(range(1, 7))" in shown["rounds"][0]["code"]
        assert "total" in shown["variables"]
        assert shown["run"]["run_id"] == ctx["run_id"]
        report = client.post(f"/v1/sessions/{session_id}/replay")
        assert report.status_code == 200, report.text
        assert report.json()["ok"] is True
        assert [r["status"] for r in report.json()["rounds"]] == ["match", "match"]


def test_without_event_stream_the_results_come_as_one_json_answer(service: Served, replies: OpenAIServer) -> None:
    replies.push(code("system.finish(6 * 7)", "Simple arithmetic."))
    ctx = context("What is six times seven?")
    with service.client() as client:
        answer = client.post("/v1/runs", json={"runner_id": RUNNER, "context": ctx})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["run"]["status"] == "completed", body["results"][-1]
        assert answer.headers["location"] == f"/v1/runs/{ctx['run_id']}"
        assert [r["sequence"] for r in body["results"]] == list(range(1, len(body["results"]) + 1))
        assert body["results"][-1]["type"] == "run.completed"
        assert ctx["run_id"] in [r["run_id"] for r in client.get("/v1/runs").json()["runs"]]


async def test_artifacts_are_listed_and_served_safely(service: Served) -> None:
    # A round with artifacts, recorded in the server's store as a run of its runner would record it.
    from codeact.engine.store import RoundRecord, SessionMeta, open_store

    store = open_store(service.store)
    try:
        await store.create_session(
            SessionMeta(session_id="with-artifacts", blueprint_id=RUNNER, blueprint_hash="h", model="m")
        )
        files = [("report.csv", "text/csv", b"a,b\n1,2\n"), ("page.html", "text/html", b"<script>alert(1)</script>")]
        artifacts = tuple(
            {"name": n, "mime": m, "size": len(d), "refused": None, "data_b64": base64.b64encode(d).decode()}
            for n, m, d in files
        )
        record = RoundRecord(
            session_id="with-artifacts", index=1, started_at=time.time(), duration_s=0.1, prompt_hash="p",
            reply="...", code="...", artifacts=artifacts,
        )  # fmt: skip
        await store.append_round(record, segments=[], variables={})
    finally:
        await store.close()
    async with httpx.AsyncClient(base_url=service.url, headers={"Authorization": f"Bearer {ADMIN}"}) as client:
        shown = (await client.get("/v1/sessions/with-artifacts")).json()
        assert [(a["round"], a["name"], a["mime"]) for a in shown["artifacts"]] == [
            (1, "report.csv", "text/csv"),
            (1, "page.html", "text/html"),
        ]
        assert all("data_b64" not in a for a in shown["artifacts"] + shown["rounds"][0]["artifacts"])
        csv = await client.get("/v1/sessions/with-artifacts/artifacts/1/report.csv")
        assert csv.status_code == 200 and csv.content == b"a,b\n1,2\n"
        assert csv.headers["content-type"].startswith("text/csv")
        html = await client.get("/v1/sessions/with-artifacts/artifacts/1/page.html")
        assert html.content == b"<script>alert(1)</script>"
        assert html.headers["content-type"] == "application/octet-stream"  # a browser never renders it
        assert html.headers["content-disposition"] == 'attachment; filename="page.html"'
        missing = await client.get("/v1/sessions/with-artifacts/artifacts/1/nope.txt")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "service.artifact_not_found"
    async with httpx.AsyncClient(base_url=service.url, headers={"Authorization": f"Bearer {SCOPED}"}) as scoped:
        assert (await scoped.get("/v1/sessions/with-artifacts")).status_code == 404  # not its runner's


def test_a_reused_run_id_or_a_busy_conversation_is_refused(service: Served, replies: OpenAIServer) -> None:
    replies.push(code("r = await slow.ping()", "Ping, which waits for approval."))
    ctx = context("Ping and wait.", conversation="busy-conversation")
    with service.client() as client:
        with client.stream(
            "POST", "/v1/runs", json={"runner_id": RUNNER, "context": ctx}, headers={"Accept": "text/event-stream"}
        ) as stream:
            for event in read_sse(stream):
                if event.event == "action.requested":
                    break
        again = client.post("/v1/runs", json={"runner_id": RUNNER, "context": ctx})
        assert again.status_code == 409 and again.json()["error"]["code"] == "service.run_exists"
        other = client.post(
            "/v1/runs", json={"runner_id": RUNNER, "context": context("Me too.", conversation="busy-conversation")}
        )
        assert other.status_code == 409 and other.json()["error"]["code"] == "service.session_busy"
        assert ctx["run_id"] in other.json()["error"]["message"]
        bad_id = client.post("/v1/runs", json={"runner_id": RUNNER, "context": context("x", run_id="a/b c")})
        assert bad_id.status_code == 422 and bad_id.json()["error"]["code"] == "service.invalid_context"
        assert client.post(f"/v1/runs/{ctx['run_id']}/cancel").json()["status"] == "cancelled"
        assert client.post(f"/v1/runs/{ctx['run_id']}/cancel").json()["status"] == "cancelled"  # idempotent


def test_bad_requests_get_json_errors_with_the_right_status(service: Served, replies: OpenAIServer) -> None:
    def error(answer: httpx.Response) -> tuple[int, str, str]:
        return answer.status_code, answer.json()["error"]["code"], answer.json()["error"]["message"]

    with service.client() as client:
        status, code_, message = error(
            client.post("/v1/runs", content=b'{"runner_id": "svc-agent", "context": {', headers=_JSON)
        )
        assert (status, code_) == (400, "service.invalid_json")
        assert "line 1 column" in message

        without_event = context("hello")
        del without_event["event"]
        answer = client.post("/v1/runs", json={"runner_id": RUNNER, "context": without_event})
        assert error(answer)[:2] == (422, "service.invalid_context")
        assert answer.json()["error"]["errors"] == [
            {"loc": ["context", "event"], "msg": "Field required", "type": "missing"}
        ]
        assert "context.event: Field required" in answer.json()["error"]["message"]

        bad_type = context("hello")
        bad_type["input"]["attachments"] = [{"size": "big"}]
        answer = client.post("/v1/runs", json={"runner_id": RUNNER, "context": bad_type})
        assert answer.status_code == 422
        assert answer.json()["error"]["errors"][0]["loc"] == ["context", "input", "attachments", 0, "size"]

        status, code_, message = error(client.post("/v1/runs", json={"runner_id": "nope", "context": context("hi")}))
        assert (status, code_) == (404, "service.runner_not_found")
        assert "'nope'" in message and RUNNER in message
        assert error(client.post("/v1/runs", json={"context": context("hi")}))[:2] == (422, "service.invalid_request")
        assert error(client.get("/v1/runs/run-missing"))[:2] == (404, "service.run_not_found")
        assert error(client.get("/v1/runs/run-missing/events"))[:2] == (404, "service.run_not_found")
        assert error(client.post("/v1/runs/run-missing/cancel"))[:2] == (404, "service.run_not_found")
        assert error(client.get("/v1/sessions/no-such-session"))[:2] == (404, "service.session_not_found")
        assert error(client.get("/v1/nothing-here"))[:2] == (404, "service.not_found")
        assert error(client.delete("/v1/runners"))[:2] == (405, "service.method_not_allowed")
        huge = {"runner_id": RUNNER, "context": context("x" * (2 << 20))}
        assert error(client.post("/v1/runs", json=huge))[:2] == (413, "service.payload_too_large")

    with service.client(None) as anonymous:
        answer = anonymous.get("/v1/runners")
        assert error(answer)[:2] == (401, "service.unauthorized")
        assert answer.headers["www-authenticate"] == "Bearer"
        assert "Authorization: Bearer TOKEN" in error(answer)[2]
    with service.client("not-a-real-token") as wrong:
        answer = wrong.post("/v1/runs", json={"runner_id": RUNNER, "context": context("hi")})
        assert error(answer)[:2] == (401, "service.unauthorized")
        assert answer.headers["www-authenticate"] == 'Bearer error="invalid_token"'
        assert "not-a-real-token" not in answer.text
    with service.client(SCOPED) as scoped:
        answer = scoped.post("/v1/runs", json={"runner_id": RUNNER, "context": context("hi")})
        assert error(answer)[:2] == (403, "service.forbidden")
        assert scoped.get("/v1/sessions").json() == {"sessions": []}  # none of its runner's
    assert replies.pending == 0


_JSON = {"Content-Type": "application/json"}


def test_the_cookie_authenticates_but_not_a_foreign_page(service: Served) -> None:
    with httpx.Client(base_url=service.url, cookies={"codeact_token": ADMIN}) as browser:
        assert browser.get("/v1/runners").status_code == 200
        answer = browser.post(
            "/v1/runs",
            json={"runner_id": RUNNER, "context": context("hi")},
            headers={"Origin": "https://evil.example"},
        )
        assert answer.status_code == 403 and answer.json()["error"]["code"] == "service.forbidden"


def test_an_expired_deadline_fails_the_run_at_once_without_asking_the_model(
    service: Served, replies: OpenAIServer
) -> None:
    asked = len(replies.requests)
    ctx = context("Too late for this.", deadline_at=time.time() - 5)
    with service.client() as client:
        events = stream_run(client, RUNNER, ctx)
        assert [e.event for e in events] == ["run.failed"]
        failure = events[0].data["data"]
        assert failure["code"] == "runner.timeout" and failure["retryable"] is True
        run = client.get(f"/v1/runs/{ctx['run_id']}").json()
        assert run["status"] == "failed" and run["error"]["code"] == "runner.timeout"
    assert len(replies.requests) == asked


def test_a_cancel_mid_round_kills_the_sandbox_and_the_session_resumes(service: Served, replies: OpenAIServer) -> None:
    replies.push(code("started = 'yes'\nimport time\ntime.sleep(120)", "This takes a while."))
    ctx = context("Do the long job.", conversation="long-job")
    with service.client() as client:
        with client.stream(
            "POST", "/v1/runs", json={"runner_id": RUNNER, "context": ctx}, headers={"Accept": "text/event-stream"}
        ) as stream:
            run_id = stream.headers["x-run-id"]
            session_id = client.get(f"/v1/runs/{run_id}").json()["session_id"]
            wait_until(lambda: sandbox_processes(session_id), what="the sandbox running the round")
            cancelled = client.post(f"/v1/runs/{run_id}/cancel")
            assert cancelled.status_code == 200
            assert cancelled.json()["status"] == "cancelled"
            assert cancelled.json()["error"]["code"] == "cancelled"
            assert sandbox_processes(session_id) == []  # gone when the cancel answers
            events = list(read_sse(stream))
        assert events[-1].event == "run.failed"
        assert events[-1].data["data"]["code"] == "cancelled"
        assert [e.id for e in events] == list(range(1, len(events) + 1))

        shown = client.get(f"/v1/sessions/{session_id}").json()
        assert shown["session"]["status"] == "interrupted"
        assert [r["status"] for r in shown["rounds"]] == ["interrupted"]

        # The next message of the conversation resumes the same session.
        replies.push(code("system.finish('resumed after the cancel')", "The long job was interrupted; I stop here."))
        again = stream_run(client, RUNNER, context("Just finish.", conversation="long-job"))
        assert again[-1].event == "run.completed"
        shown = client.get(f"/v1/sessions/{session_id}").json()
        assert shown["session"]["status"] == "completed"
        assert [r["index"] for r in shown["rounds"]] == [1, 2]


def test_a_client_that_disconnects_reattaches_without_loss_or_duplicate(service: Served, replies: OpenAIServer) -> None:
    replies.push(
        code("pong = await slow.ping()\nprint(pong)", "First a ping, which needs approval."),
        code("system.finish(pong.upper())", "Approved and done."),
    )
    ctx = context("Ping the slow service.")
    run_id = ctx["run_id"]
    with service.client() as client:
        with client.stream(
            "POST", "/v1/runs", json={"runner_id": RUNNER, "context": ctx}, headers={"Accept": "text/event-stream"}
        ) as stream:
            first = []
            for event in read_sse(stream):
                first.append(event)
                if event.event == "action.requested":
                    break  # the client goes away while the run waits for the approval
        run = client.get(f"/v1/runs/{run_id}").json()
        assert run["status"] == "waiting"  # the run outlived its request
        [pending] = run["pending"]
        answer = client.post(
            f"/v1/runs/{run_id}/interactions",
            json={"interaction_id": pending["interaction_id"], "action_id": "approve", "values": {}},
        )
        assert answer.status_code == 200, answer.text
        last_seen = first[-1].id
        assert last_seen is not None
        with client.stream(
            "GET", f"/v1/runs/{run_id}/events", headers={"Accept": "text/event-stream", "Last-Event-ID": str(last_seen)}
        ) as stream:
            rest = list(read_sse(stream))
        with client.stream("GET", f"/v1/runs/{run_id}/events", headers={"Accept": "text/event-stream"}) as stream:
            everything = list(read_sse(stream))
        again = client.post(
            f"/v1/runs/{run_id}/interactions",
            json={"interaction_id": pending["interaction_id"], "action_id": "approve"},
        )
        assert again.status_code == 409 and again.json()["error"]["code"] == "service.run_finished"
    ids = [e.id for e in first + rest]
    assert ids == list(range(1, len(ids) + 1))  # nothing lost, nothing twice
    assert first + rest == everything
    assert rest[-1].event == "run.completed"
    assert any(e.event == "tool.call.completed" for e in rest)
    assert "PONG" in [e.data["data"]["message"]["content"] for e in rest if e.event == "message.completed"]


def test_an_unknown_interaction_is_refused(service: Served, replies: OpenAIServer) -> None:
    replies.push(code("r = await slow.ping()", "Ping first."), code("system.finish(r)", "Done."))
    ctx = context("Ping.")
    with service.client() as client:
        with client.stream(
            "POST", "/v1/runs", json={"runner_id": RUNNER, "context": ctx}, headers={"Accept": "text/event-stream"}
        ) as stream:
            for event in read_sse(stream):
                if event.event == "action.requested":
                    break
        url = f"/v1/runs/{ctx['run_id']}/interactions"
        answer = client.post(url, json={"interaction_id": "nobody-waits", "action_id": "approve"})
        assert answer.status_code == 404 and answer.json()["error"]["code"] == "runner.interaction_not_found"
        answer = client.post(url, json={"hello": 1})
        assert answer.status_code == 422 and answer.json()["error"]["code"] == "service.invalid_request"
        [pending] = client.get(f"/v1/runs/{ctx['run_id']}").json()["pending"]
        answer = client.post(url, json={"interaction_id": pending["interaction_id"], "action_id": "deny"})
        assert answer.status_code == 200
        wait_until(lambda: client.get(f"/v1/runs/{ctx['run_id']}").json()["status"] != "waiting", what="the run")
        with client.stream("GET", f"/v1/runs/{ctx['run_id']}/events", headers={"Accept": "text/event-stream"}) as s:
            assert list(read_sse(s))[-1].event in ("run.completed", "run.failed")


def test_a_context_built_with_the_langbot_sdk_runs_and_every_envelope_validates_as_its_result(
    service: Served, replies: OpenAIServer
) -> None:
    from langbot_plugin.api.entities.builtin.runner import (
        ActorContext,
        AgentEventContext,
        AgentInput,
        AgentResources,
        AgentRunState,
        AgentRuntimeContext,
        AgentTrigger,
        ContextAccess,
        ConversationContext,
        DeliveryContext,
        RunnerManifest,
    )
    from langbot_plugin.api.entities.builtin.runner.context import RunnerContext
    from langbot_plugin.api.entities.builtin.runner.result import RunnerResult

    sdk_context = RunnerContext(
        run_id="sdk-run-1",
        trigger=AgentTrigger(type="message.received", source="platform"),
        event=AgentEventContext(event_id="evt-1", event_type="message.received", source="telegram"),
        conversation=ConversationContext(conversation_id="sdk-conversation"),
        actor=ActorContext(actor_type="user", actor_id="u-1", actor_name="Alice"),
        input=AgentInput(text="How many letters has 'langbot'?"),
        delivery=DeliveryContext(surface="telegram", supports_streaming=True),
        resources=AgentResources(),
        context=ContextAccess(),
        state=AgentRunState(),
        runtime=AgentRuntimeContext(deadline_at=time.time() + 120),
    )
    replies.push(code("n = len('langbot')\nsystem.finish(f'{n} letters')", "Counting is easy in Python."))
    with service.client() as client:
        [manifest] = client.get("/v1/runners").json()["runners"]
        RunnerManifest.model_validate(manifest)
        events = stream_run(client, RUNNER, sdk_context.model_dump(mode="json"))
    # The stream validates as it comes: `timestamp` is the SDK's int; codeact's `at` (float seconds, the
    # instant to the millisecond) is a field the SDK ignores (docs/runner.md, "Ids and times").
    assert all(isinstance(e.data["timestamp"], int) and isinstance(e.data["at"], float) for e in events)
    results = [RunnerResult.model_validate(e.data) for e in events]
    assert results[-1].type == "run.completed"
    assert [r.sequence for r in results] == list(range(1, len(results) + 1))
    assert "7 letters" in [e.data["data"]["message"]["content"] for e in events if e.event == "message.completed"]
