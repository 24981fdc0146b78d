"""The console on a real `codeact serve`: a live run's rounds appear, an approval is given from the page, replay.

One `codeact serve` subprocess (the console's routes wired by the command itself), the local
OpenAI-compatible model server, and one Chromium for the module.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.console._support import browser, in_thread, screenshot
from tests.engine.openai_server import OpenAIServer, serve
from tests.service.helpers import ADMIN, Served, context, read_sse, start_server, stop_server

REPO = Path(__file__).resolve().parents[2]
RUNNER = "console-live"
BLUEPRINT = f"""\
version: codeact.agent/v1
extend: codeact-base
id: {RUNNER}
description: An agent whose slow toolkit needs approval.
workflow: {{maxTurns: 5, codeact: {{thought: 'off'}}}}
toolkits:
  - ref: system
  - ref: slow
    approval: ask
"""


def code(body: str, prose: str) -> str:
    return f"{prose}\n```python\n{body}\n```\n"


@pytest.fixture(scope="module")
def model() -> Iterator[OpenAIServer]:
    with serve() as server:
        yield server


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, model: OpenAIServer) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("console-live")
    blueprint = tmp / "agent.yaml"
    blueprint.write_text(BLUEPRINT)
    server = start_server(
        tmp,
        [blueprint],
        "--toolkit", "tests.engine.slow_toolkit:Slow",
        "--model", "openai/test-model",
        "--base-url", model.base_url,
        env={"PYTHONPATH": str(REPO)},
        tokens=ADMIN,
    )  # fmt: skip
    yield server
    assert stop_server(server) == 0, server.stderr.read_text()


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with browser() as b:
        yield b


def start_run(client: httpx.Client, text: str) -> str:
    """Start a run and leave it running (the request goes away after the first envelope)."""
    ctx = context(text)
    with client.stream(
        "POST", "/v1/runs", json={"runner_id": RUNNER, "context": ctx}, headers={"Accept": "text/event-stream"}
    ) as stream:
        assert stream.status_code == 200, stream.read()
        next(read_sse(stream))
    return str(ctx["run_id"])


def wait_status(client: httpx.Client, run_id: str, wanted: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        run: dict[str, Any] = client.get(f"/v1/runs/{run_id}").json()
        if run["status"] == wanted:
            return run
        assert run["status"] in ("running", "waiting"), run
        time.sleep(0.1)
    raise AssertionError(f"run {run_id} never became {wanted}")


@pytest.fixture(scope="module")
def approved_session(served: Served, model: OpenAIServer, chromium: Any) -> Iterator[tuple[str, Any]]:
    """A run that waits for an approval, opened in the browser (the page stays open for the module)."""
    model.push(
        code('print("checking the line")\nattempts = 1', "First I note the attempt."),
        code("pong = await slow.ping()\nprint(pong)", "Now the ping, which needs approval."),
        code("system.finish(pong.upper())", "Approved: done."),
    )
    context_ = chromium.new_context(viewport={"width": 1366, "height": 860})
    context_.set_default_timeout(20_000)
    page = context_.new_page()
    with served.client() as client:
        run_id = start_run(client, "Ping the slow service.")
        run = wait_status(client, run_id, "waiting")
    page.goto(f"{served.url}/sessions/{run['session_id']}?token={ADMIN}")
    yield run["session_id"], page
    context_.close()


def test_a_pending_approval_is_given_from_the_page_and_the_run_goes_on_live(
    approved_session: tuple[str, Any], served: Served
) -> None:
    session_id, page = approved_session
    assert page.url.endswith(f"/sessions/{session_id}")  # the token left the address
    assert page.locator("#rounds article.round").count() == 1
    form = page.locator("form.interaction")
    assert "Allow slow.ping?" in form.inner_text()
    assert "waiting for you" in page.locator("#live-status").inner_text().lower()
    screenshot(page, "approval.png")
    page.evaluate("window.__same_page = true")  # gone if the page reloads
    form.get_by_role("button", name="Allow").click()
    page.locator("#round-3").wait_for()
    # The status comes as its own event after the round's: wait for it, the page is not reloaded.
    page.locator("#session-status:text-is('completed')").wait_for()  # no wait_for_function: CSP refuses eval
    assert page.evaluate("window.__same_page === true")  # the rounds came over SSE, no reload
    second = page.locator("#round-2")
    assert second.locator("code.op").inner_text() == "slow.ping"
    assert "pong" in second.locator(".stdout").inner_text()
    assert page.locator("#round-count").inner_text() == "3"
    assert page.locator("form.interaction").count() == 0
    screenshot(page, "live-finished.png")
    with served.client() as client:
        shown = client.get(f"/v1/sessions/{session_id}").json()
    assert shown["session"]["status"] == "completed"


def test_a_session_page_streams_rounds_while_the_run_goes_on(
    served: Served, model: OpenAIServer, chromium: Any
) -> None:
    model.push(
        code("pong = await slow.ping()", "Ping first."),
        code('print("round two ran")\nsystem.finish(pong)', "Then finish."),
    )
    context_ = chromium.new_context()
    context_.set_default_timeout(20_000)
    page = context_.new_page()
    with served.client() as client:
        run_id = start_run(client, "Ping again.")
        run = wait_status(client, run_id, "waiting")
        page.goto(f"{served.url}/sessions/{run['session_id']}?token={ADMIN}")
        assert page.locator("#rounds article.round").count() == 0
        assert page.locator("#no-rounds").count() == 1
        page.evaluate("window.__same_page = true")
        [pending] = run["pending"]  # answered through the API: the page only watches
        answer = client.post(
            f"/v1/runs/{run_id}/interactions",
            json={"interaction_id": pending["interaction_id"], "action_id": "approve", "values": {}},
        )
        assert answer.status_code == 200, answer.text
    page.locator("#round-2").wait_for()
    assert "round two ran" in page.locator("#round-2 .stdout").inner_text()
    assert page.evaluate("window.__same_page === true")
    assert page.locator("form.interaction").count() == 0
    context_.close()


def test_replay_from_the_page_shows_a_match_per_round(approved_session: tuple[str, Any], served: Served) -> None:
    session_id, page = approved_session
    page.goto(f"{served.url}/sessions/{session_id}")
    page.get_by_role("button", name="Replay").click()
    report = page.locator("#replay-report")
    report.wait_for()
    assert "every round matches" in report.locator("h2").inner_text()
    assert [row.get_attribute("class") for row in report.locator("tbody tr").all()] == ["replay-match"] * 3
    screenshot(page, "replay.png")


async def record_tampered(store_url: str) -> str:
    """A session whose record says round 1 printed something its code does not print."""
    from codeact.engine.store import RoundRecord, SessionMeta, open_store

    session_id = "tampered-1"
    code_ = 'stock = {"A-1": 3}\nprint("replayed", stock["A-1"])\n'
    async with open_store(store_url) as store:
        await store.create_session(
            SessionMeta(session_id=session_id, blueprint_id=RUNNER, blueprint_hash="h", model="openai/test-model")
        )
        record = RoundRecord(
            session_id=session_id,
            index=1,
            started_at=time.time(),
            duration_s=0.1,
            prompt_hash="p",
            reply=f"Count.\n```python\n{code_}```",
            code=code_,
            stdout="recorded 4\n",
            variables={"stock": {"A-1": 3}},
        )
        await store.append_round(record, segments=[], variables=record.variables)
        await store.update_session(session_id, status="completed")
    return session_id


def test_replay_shows_what_differed_as_recorded_against_replayed(served: Served, chromium: Any) -> None:
    session_id = in_thread(lambda: asyncio.run(record_tampered(served.store)))
    context_ = chromium.new_context()
    context_.set_default_timeout(30_000)
    page = context_.new_page()
    page.goto(f"{served.url}/sessions/{session_id}?token={ADMIN}")
    page.get_by_role("button", name="Replay").click()
    report = page.locator("#replay-report")
    report.wait_for()
    assert "differs" in report.locator("h2").inner_text()
    row = report.locator("tr.replay-mismatch")
    assert row.count() == 1
    assert "recorded 4" in row.locator("pre.diff .del").first.inner_text()
    assert "replayed 3" in row.locator("pre.diff .add").first.inner_text()
    context_.close()


def test_a_denied_call_shows_as_denied(served: Served, model: OpenAIServer, chromium: Any) -> None:
    model.push(
        code("try:\n    await slow.ping()\nexcept Exception as e:\n    print('refused:', e)", "Ping, if allowed."),
        code("system.finish('no ping')", "Denied: I stop."),
    )
    context_ = chromium.new_context()
    context_.set_default_timeout(20_000)
    page = context_.new_page()
    with served.client() as client:
        run = wait_status(client, start_run(client, "Ping, maybe."), "waiting")
    page.goto(f"{served.url}/sessions/{run['session_id']}?token={ADMIN}")
    page.locator("form.interaction").get_by_role("button", name="Deny").click()
    page.locator("#round-2").wait_for()
    call = page.locator("#round-1 li.call")
    assert call.locator(".badge").inner_text() == "approval: denied"
    assert "refused:" in page.locator("#round-1 .stdout").inner_text()
    context_.close()


def test_a_question_is_answered_from_the_page_and_the_new_run_is_followed_live(
    served: Served, model: OpenAIServer, chromium: Any
) -> None:
    model.push(
        code("shelves = 4\nsystem.ask_user('Which aisle: <A> or B?')", "I need to know the aisle."),
        code("print('counting aisle B')\nsystem.finish(f'aisle B: {shelves} shelves')", "Aisle B it is."),
    )
    context_ = chromium.new_context(viewport={"width": 1366, "height": 860})
    context_.set_default_timeout(20_000)
    page = context_.new_page()
    with served.client() as client:
        ctx = context("Count the shelves.")
        with client.stream(
            "POST", "/v1/runs", json={"runner_id": RUNNER, "context": ctx}, headers={"Accept": "text/event-stream"}
        ) as stream:
            events = list(read_sse(stream))
        assert events[-1].data["data"]["finish_reason"] == "ask_user"
        session_id = client.get(f"/v1/runs/{ctx['run_id']}").json()["session_id"]
    page.goto(f"{served.url}/sessions/{session_id}?token={ADMIN}")
    assert page.locator("#session-status").inner_text() == "paused"
    form = page.locator("form.question-answer")
    assert "Which aisle: <A> or B?" in form.inner_text()  # escaped, shown as text
    form.get_by_label("Your answer").fill("B, please")
    screenshot(page, "question.png")
    form.get_by_role("button", name="Send answer").click()
    page.locator("#round-2").wait_for()
    page.locator("#session-status:text-is('completed')").wait_for()  # no wait_for_function: CSP refuses eval
    assert "counting aisle B" in page.locator("#round-2 .stdout").inner_text()
    assert page.locator("form.question-answer").count() == 0
    with served.client() as client:
        asked = client.get(f"/v1/runs/{ctx['run_id']}").json()
        assert asked["continued_by"] and asked["pending"] == []
        following = client.get(f"/v1/runs/{asked['continued_by']}").json()
        assert following["status"] == "completed" and following["session_id"] == session_id
    prompt = str(model.requests[-1].body["messages"])
    assert "B, please" in prompt  # the answer reached the model
    context_.close()
