"""`codeact serve` over real HTTP: a question (``system.ask_user``) answered with POST .../interactions.

The answer starts the continuation run of the same conversation (same session, same variables);
the asking run names it in ``continued_by`` and a second answer is refused.
"""

from __future__ import annotations

import time

from tests.engine.openai_server import OpenAIServer
from tests.service.conftest import RUNNER
from tests.service.helpers import Served, context, read_sse, stream_run

FENCE = "```"


def code(body: str, prose: str) -> str:
    return f"{prose}\n{FENCE}python\n{body}\n{FENCE}\n"


def test_an_answer_to_a_question_starts_the_continuation_on_the_same_session(
    service: Served, replies: OpenAIServer
) -> None:
    replies.push(
        code("shelf_count = 4\nsystem.ask_user('Which aisle should I count, A or B?')", "I need the aisle first."),
        code("system.finish(f'aisle B has {shelf_count} shelves')", "Aisle B, then: I count it."),
    )
    ctx = context("Count the shelves.", deadline_at=time.time() + 120)
    with service.client() as client:
        events = stream_run(client, RUNNER, ctx)
        assert events[-1].event == "run.completed"
        assert events[-1].data["data"]["finish_reason"] == "ask_user"
        asked = client.get(f"/v1/runs/{ctx['run_id']}").json()
        assert asked["status"] == "completed" and asked["continued_by"] is None
        [question] = asked["pending"]
        assert question["kind"] == "form" and "Which aisle" in question["description"]

        bad = client.post(
            f"/v1/runs/{ctx['run_id']}/interactions",
            json={"interaction_id": question["interaction_id"], "action_id": "submit", "values": {}},
        )
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "runner.invalid_interaction"
        wrong = client.post(
            f"/v1/runs/{ctx['run_id']}/interactions",
            json={"interaction_id": "ask-someone-else", "action_id": "submit", "values": {"answer": "B"}},
        )
        assert wrong.status_code == 409 and wrong.json()["error"]["code"] == "service.run_finished"

        answer = client.post(
            f"/v1/runs/{ctx['run_id']}/interactions",
            json={"interaction_id": question["interaction_id"], "action_id": "submit", "values": {"answer": "B"}},
        )
        assert answer.status_code == 201, answer.text
        following = answer.json()
        new_id = following["run_id"]
        assert new_id != ctx["run_id"] and answer.headers["location"] == f"/v1/runs/{new_id}"
        assert following["session_id"] == asked["session_id"] and following["runner_id"] == RUNNER

        with client.stream("GET", f"/v1/runs/{new_id}/events", headers={"Accept": "text/event-stream"}) as stream:
            later = list(read_sse(stream))
        assert later[-1].event == "run.completed", later[-1]
        said = [e.data["data"]["message"]["content"] for e in later if e.event == "message.completed"]
        assert "aisle B has 4 shelves" in said  # the variable of the asking run was there
        prompt = str(replies.requests[-1].body["messages"])
        assert "Which aisle" in prompt and "B" in prompt  # the model saw the question and its answer

        before = client.get(f"/v1/runs/{ctx['run_id']}").json()
        assert before["continued_by"] == new_id and before["pending"] == []
        again = client.post(
            f"/v1/runs/{ctx['run_id']}/interactions",
            json={"interaction_id": question["interaction_id"], "action_id": "submit", "values": {"answer": "A"}},
        )
        assert again.status_code == 409 and new_id in again.json()["error"]["message"]

        session = client.get(f"/v1/sessions/{asked['session_id']}").json()
        assert session["session"]["status"] == "completed"
        assert [r["index"] for r in session["rounds"]] == [1, 2]


def test_a_next_message_instead_of_an_answer_closes_the_question(service: Served, replies: OpenAIServer) -> None:
    replies.push(
        code("system.ask_user('Red or blue?')", "I need a colour."),
        code("system.finish('painting it green then')", "The user chose another colour."),
    )
    ctx = context("Paint the shed.")
    with service.client() as client:
        assert stream_run(client, RUNNER, ctx)[-1].data["data"]["finish_reason"] == "ask_user"
        [question] = client.get(f"/v1/runs/{ctx['run_id']}").json()["pending"]
        conversation = ctx["conversation"]["conversation_id"]
        following = context("Neither: green.", conversation=conversation)
        assert stream_run(client, RUNNER, following)[-1].event == "run.completed"
        asked = client.get(f"/v1/runs/{ctx['run_id']}").json()
        assert asked["pending"] == [] and asked["continued_by"] == following["run_id"]
        late = client.post(
            f"/v1/runs/{ctx['run_id']}/interactions",
            json={"interaction_id": question["interaction_id"], "action_id": "submit", "values": {"answer": "red"}},
        )
        assert late.status_code == 409 and late.json()["error"]["code"] == "service.run_finished"
