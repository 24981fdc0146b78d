"""A queued run behaves as a direct one: what its run context gives it, and how it pauses for an approval.

Two `codeact serve` processes serve the same blueprint (it declares ``platform_api: [message.edit]`` and
grants ``slow`` with ``approval: ask``): one runs in the server, one hands its runs to a real ``codeact
worker`` through a real Redis (``--queue``). The local OpenAI-compatible test server is every run's model.
The same context goes to both; what must be the same:

- the prompt's locale and time zone, ``system.get_current_time()``'s default zone, the ``action.requested``
  results, and the refusal of a malformed time zone;
- the binding's ``config`` over the blueprint's variables, in the rendered instructions;
- the ``attachments`` toolkit (always there; a URL content listed as an attachment);
- the cap of 20 platform actions, counted over the whole run across an approval;
- the pending interaction of a run waiting for an approval: the approval, not a platform action it requested
  (the stream where one comes after the approval is written in ``test_queue_units.py``: here it would race).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.engine.openai_server import OpenAIServer, serve
from tests.service.helpers import SSE, Served, context, read_sse, start_server, stop_server, stream_run, wait_until
from tests.service.run_api import code

REPO = Path(__file__).resolve().parents[2]
CODEACT = str(Path(sys.executable).parent / "codeact")
RUNNER = "parity-agent"
SLOW = "tests.engine.slow_toolkit:Slow"  # slow.ping() needs an approval (approval: ask)
BLUEPRINT = f"""\
version: codeact.agent/v1
extend: codeact-base
id: {RUNNER}
description: Edits a message and tells the time.
workflow: {{maxTurns: 3, codeact: {{thought: 'off'}}}}
toolkits:
  - ref: system
  - ref: slow
    approval: ask
extensions:
  runner:
    permissions:
      platform_api: [message.edit]
"""
WORK = """\
print(platform_api.request_action(action="message.edit", target={"message_id": "m-1"}, payload={"text": "Edited."}))
system.finish(system.get_current_time() + " | " + system.get_current_time(tz="UTC"))"""


@dataclass
class Paths:
    direct: Served
    queued: Served
    model: OpenAIServer


@pytest.fixture(scope="module")
def paths(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Paths]:
    import redis

    url = redis_url.rsplit("/", 1)[0] + "/14"
    redis.Redis.from_url(url).flushdb()
    tmp = tmp_path_factory.mktemp("parity")
    blueprint = tmp / "agent.yaml"
    blueprint.write_text(BLUEPRINT)
    env = {k: v for k, v in os.environ.items() if k not in ("CODEACT_STORE", "CODEACT_MODEL", "CODEACT_PROFILE")}
    env.update({"CODEACT_HOME": str(tmp / "home"), "OPENAI_API_KEY": "sk-test", "PYTHONPATH": str(REPO)})
    argv = [CODEACT, "worker", "--queue", url, "--store", url, "--concurrency", "1", "--name", "parity-worker"]
    argv += ["--toolkit", SLOW]
    with serve() as model, (tmp / "worker.log").open("wb") as log:
        worker = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        client = redis.Redis.from_url(url)
        deadline = time.monotonic() + 60
        while not client.smembers("_kombu.binding.codeact"):
            assert worker.poll() is None, (tmp / "worker.log").read_text()
            assert time.monotonic() < deadline, "the worker did not start"
            time.sleep(0.05)
        common = ("--model", "openai/test-model", "--base-url", model.base_url, "--toolkit", SLOW)
        (tmp / "direct").mkdir()
        (tmp / "queued").mkdir()
        direct = start_server(tmp / "direct", [blueprint], *common, env={"PYTHONPATH": str(REPO)})
        queued = start_server(
            tmp / "queued", [blueprint], *common, "--store", url, "--queue", url, env={"PYTHONPATH": str(REPO)}
        )
        try:
            yield Paths(direct=direct, queued=queued, model=model)
        finally:
            assert stop_server(direct) == 0, direct.stderr.read_text()
            assert stop_server(queued) == 0, queued.stderr.read_text()
            os.killpg(worker.pid, signal.SIGTERM)
            try:
                worker.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()


@dataclass(frozen=True)
class Seen:
    """What one run showed: its results' types, the actions it requested, its answer, the model's prompt."""

    types: list[str]
    actions: list[dict[str, Any]]
    answer: str
    prompt: str


def run(
    served: Served, model: OpenAIServer, runtime: dict[str, Any], reply: str | None, **fields: Any
) -> tuple[list[SSE], str]:
    """Run a context (its ``runtime`` and other top-level ``fields``) to its end; its results and the prompts sent."""
    if reply is not None:
        model.push(reply)
    asked = len(model.requests)
    ctx = context("Edit my last message and tell me the time.")
    ctx["runtime"] = runtime
    ctx.update(fields)
    with served.client() as client:
        events = stream_run(client, RUNNER, ctx)
    return events, prompts(model, asked)


def prompts(model: OpenAIServer, asked: int) -> str:
    """The messages of every model request after the first ``asked``, as one text."""
    return "\n".join(str(m.get("content")) for request in model.requests[asked:] for m in request.body["messages"])


def seen(events: list[SSE], prompt: str) -> Seen:
    assert events[-1].event == "run.completed", events[-1].data
    done = [e.data["data"] for e in events if e.event == "message.completed"]
    return Seen(
        types=[str(e.event) for e in events],
        actions=[e.data["data"] for e in events if e.event == "action.requested"],
        answer=done[-1]["message"]["content"],
        prompt=prompt,
    )


def test_a_queued_run_sees_the_locale_time_zone_and_platform_api_as_a_direct_run(paths: Paths) -> None:
    runtime = {"locale": "fr_FR", "timezone": "Asia/Tokyo"}
    direct = seen(*run(paths.direct, paths.model, runtime, code(WORK, "I edit it and read the clock.")))
    queued = seen(*run(paths.queued, paths.model, runtime, code(WORK, "I edit it and read the clock.")))
    for path in (direct, queued):
        assert "locale: fr_FR\ntimezone: Asia/Tokyo" in path.prompt  # the run's Context segment
        assert "class platform_api:" in path.prompt  # the toolkit, as the model sees it
        local, utc = path.answer.split(" | ")
        assert local.endswith("+09:00") and utc.endswith("+00:00")  # the default zone is the context's
    edited = {"action": "message.edit", "target": {"message_id": "m-1"}, "payload": {"text": "Edited."}}
    assert queued.actions == direct.actions == [edited]
    # the request's result is followed by its action.requested, on both paths
    for path in (direct, queued):
        assert path.types[path.types.index("action.requested") - 1] == "tool.call.completed"


def test_a_malformed_time_zone_fails_a_queued_run_as_a_direct_one(paths: Paths) -> None:
    runtime = {"timezone": "Mars/Olympus_Mons"}
    asked = len(paths.model.requests)
    failed = [run(served, paths.model, runtime, None)[0] for served in (paths.direct, paths.queued)]
    assert len(paths.model.requests) == asked  # the model was never asked
    direct, queued = ([e.data["data"] for e in events if e.event == "run.failed"] for events in failed)
    refused = {
        "error": "[context.invalid] runtime.timezone 'Mars/Olympus_Mons' is not an IANA time zone: send a name "
        "like 'Europe/Paris' or 'Asia/Shanghai', or leave it out",
        "code": "runner.invalid_context",
        "retryable": False,
    }
    assert queued == direct == [refused]


def test_the_binding_config_overrides_the_blueprints_variables_on_both_paths(paths: Paths) -> None:
    # codeact-base's instructions say "You are {{ agent_name }}, {{ role }}."; the binding's config sets the role
    config = {"role": "a pirate who edits messages", "unknown": "ignored"}
    reply = code("system.finish('Arr.')", "Arr.")
    direct = seen(*run(paths.direct, paths.model, {}, reply, config=config))
    queued = seen(*run(paths.queued, paths.model, {}, reply, config=config))
    for path in (direct, queued):
        assert "You are a CodeAct agent, a pirate who edits messages." in path.prompt
        assert "a careful assistant that checks its results" not in path.prompt  # the blueprint's value
    assert queued.answer == direct.answer == "Arr."


LIST = "system.finish(repr(attachments.list()))"


def test_a_queued_run_gets_the_attachments_toolkit_as_a_direct_run(paths: Paths) -> None:
    # No attachment at all, then a file held by a URL (listed, not fetched): the same toolkit, the same list
    linked = {"text": "Sum the report.", "contents": [{"type": "file_url", "file_url": "https://example.com/q3.csv"}]}
    for fields in ({}, {"input": linked}):
        direct = seen(*run(paths.direct, paths.model, {}, code(LIST, "Listing."), **fields))
        queued = seen(*run(paths.queued, paths.model, {}, code(LIST, "Listing."), **fields))
        for path in (direct, queued):
            assert "class attachments:" in path.prompt  # the toolkit, as the model sees it
        assert queued.answer == direct.answer
    assert "'name': 'q3.csv'" in direct.answer and "'readable': False" in direct.answer


def is_interaction(event: SSE) -> bool:
    """An interaction request (an approval, a question), not a platform action the code requested."""
    return event.event == "action.requested" and event.data["data"]["action"] == "interaction.requested"


def is_platform_action(event: SSE) -> bool:
    return event.event == "action.requested" and event.data["data"]["action"] != "interaction.requested"


def waiting(served: Served, ctx: dict[str, Any], enough: Callable[[list[SSE]], bool]) -> tuple[list[SSE], list[Any]]:
    """Start ``ctx``, read its results until ``enough``, wait until it waits; those results and its pending list."""
    run_id = ctx["run_id"]
    body = {"runner_id": RUNNER, "context": ctx}
    with served.client() as client:
        with client.stream("POST", "/v1/runs", json=body, headers={"Accept": "text/event-stream"}) as stream:
            first: list[SSE] = []
            for event in read_sse(stream):
                first.append(event)
                if enough(first):
                    break
        wait_until(lambda: client.get(f"/v1/runs/{run_id}").json()["status"] == "waiting", what="the approval")
        return first, client.get(f"/v1/runs/{run_id}").json()["pending"]


def approve(served: Served, run_id: str, interaction_id: str) -> list[SSE]:
    """Approve the run's pending call; the run's whole result stream, to its end."""
    with served.client() as client:
        answer = {"interaction_id": interaction_id, "action_id": "approve", "values": {}}
        answered = client.post(f"/v1/runs/{run_id}/interactions", json=answer)
        assert answered.status_code == 200, answered.text
        with client.stream("GET", f"/v1/runs/{run_id}/events", headers={"Accept": "text/event-stream"}) as stream:
            return list(read_sse(stream))


BEFORE = """\
for i in range(15):
    platform_api.request_action(action="message.edit", target={"message_id": str(i)})
"""
AFTER = """\
pong = slow.ping()
ok = refused = 0
for i in range(15, 25):
    try:
        platform_api.request_action(action="message.edit", target={"message_id": str(i)})
        ok += 1
    except Exception:
        refused += 1
system.finish(pong + ": " + str(ok) + " requested, " + str(refused) + " refused")"""


def test_the_platform_action_cap_counts_the_whole_run_across_an_approval(paths: Paths) -> None:
    # 15 requests, a call that waits for an approval, 10 more: the run's cap (20) refuses the last 5 on both paths.
    # A direct run's round waits in place; a queued one pauses and its continuation asks the model again,
    # which writes the rest of the work (the round that paused is recorded as interrupted, docs/scaling.md).
    answers, actions = [], []
    for served, replies in ((paths.direct, [BEFORE + AFTER]), (paths.queued, [BEFORE + AFTER, AFTER])):
        paths.model.push(*(code(reply, "Editing them all.") for reply in replies))
        ctx = context("Edit my last 25 messages.")
        first, pending = waiting(served, ctx, lambda events: any(is_interaction(e) for e in events))
        assert len(pending) == 1 and pending[0]["kind"] == "confirmation", pending
        events = approve(served, ctx["run_id"], pending[0]["interaction_id"])
        assert events[-1].event == "run.completed", events[-1].data
        answers.append([e.data["data"]["message"]["content"] for e in events if e.event == "message.completed"][-1])
        actions.append(sum(is_platform_action(e) for e in events))
    assert answers == ["pong: 5 requested, 5 refused"] * 2
    assert actions == [20, 20]


SEQUENCED = """\
asked = platform_api.request_action(action="message.edit", target={"message_id": "m-2"})
pong = slow.ping()
system.finish(pong + " " + asked["action"])"""


def test_a_run_waiting_for_an_approval_lists_it_as_its_pending_interaction_on_both_paths(paths: Paths) -> None:
    # A platform action is requested, then a call that waits for an approval (one statement after the other:
    # that order holds on every schedule). Both paths list the approval alone as pending, and approving it
    # completes the run with the same answer. A platform action requested after the approval (gathered with
    # the call) races the worker's stop of the paused run, so that stream, the one where the last request is
    # not the pending one, is written and read in test_queue_units.py instead.
    # The platform action is requested once on both paths: a direct run's round waits in place; a queued
    # one pauses, and its continuation's model writes the same program again, whose request of the same
    # action is answered from the interrupted round's record (engine.calls.FromRecord), not made again.
    answers, shown, requested = [], [], []
    for served, replies in ((paths.direct, [SEQUENCED]), (paths.queued, [SEQUENCED, SEQUENCED])):
        paths.model.push(*(code(reply, "One after the other.") for reply in replies))
        ctx = context("Edit and ping.")
        first, pending = waiting(served, ctx, lambda events: any(is_interaction(e) for e in events))
        asked = [e for e in first if e.event == "action.requested"]
        assert [is_platform_action(e) for e in asked] == [True, False], asked
        interaction = asked[1].data["data"]["payload"]
        assert pending == [interaction], pending
        shown.append({k: v for k, v in interaction.items() if k != "interaction_id"})
        events = approve(served, ctx["run_id"], pending[0]["interaction_id"])
        assert events[-1].event == "run.completed", events[-1].data
        answers.append([e.data["data"]["message"]["content"] for e in events if e.event == "message.completed"][-1])
        requested.append([e.data["data"]["target"] for e in events if is_platform_action(e)])
    assert shown[0] == shown[1] and shown[0]["kind"] == "confirmation"
    assert answers == ["pong message.edit"] * 2
    assert requested == [[{"message_id": "m-2"}]] * 2
