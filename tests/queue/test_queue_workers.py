"""The queue end to end: real Redis, two real ``codeact worker`` processes, the scripted model.

Worker A consumes ``codeact`` and ``qa``, worker B ``codeact`` and ``qb`` (so a test can send a run,
or its continuation, to one of them). Each run gets its own script file (``--model scripted/PATH``,
read by the worker), so answers differ per run. The last test SIGKILLs worker B.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from codeact.engine.queue import QueueClient, RunHandle, submit
from codeact.segments import SegmentKind
from tests.engine.openai_server import serve
from tests.service.helpers import sandbox_processes

CODEACT = str(Path(sys.executable).parent / "codeact")
TOOLKIT = f"{Path(__file__).parent / 'queue_toolkit.py'}:Ledger"
BLUEPRINT = """\
version: codeact.agent/v1
extend: codeact-base
id: queue-agent
toolkits:
  - ref: system
  - ref: ledger
    approval: ask
workflow: {maxTurns: 8, codeact: {thought: 'off'}}
"""


def _steps(answer: str, *, rounds: int, sleep: float, mark: int = 0) -> str:
    """A reply that counts rounds in a variable (so a continued run goes on where the record ends)."""
    return (
        f"I count this round, then finish once enough rounds ran.\n```python\n# reply {mark}\n"
        "try:\n    step += 1\nexcept NameError:\n    step = 1\n"
        f"import time\ntime.sleep({sleep})\n"
        f"if step >= {rounds}:\n    system.finish({answer!r} + ':' + str(step))\n```"
    )


@dataclass
class Cluster:
    url: str
    tmp: Path
    blueprint: Path
    workers: dict[str, subprocess.Popen[bytes]]
    env: dict[str, str]

    def script(self, name: str, replies: list[str]) -> str:
        path = self.tmp / f"{name}.json"
        path.write_text(json.dumps(replies))
        return f"scripted/{path}"

    def submit(self, name: str, replies: list[str], **options: Any) -> RunHandle:
        return submit(self.blueprint, f"task {name}", queue=self.url, model=self.script(name, replies), **options)

    def rounds(self, session_id: str) -> list[Any]:
        from codeact.engine.store import open_store

        async def read() -> list[Any]:
            store = open_store(self.url)
            try:
                return list(await store.rounds(session_id))
            finally:
                await store.close()

        return asyncio.run(read())

    def segments(self, session_id: str) -> list[dict[str, Any]]:
        from codeact.engine.store import open_store

        async def read() -> list[dict[str, Any]]:
            store = open_store(self.url)
            try:
                return [dict(s) for s in await store.segments(session_id)]
            finally:
                await store.close()

        return asyncio.run(read())


def _worker(url: str, name: str, queues: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    argv = [CODEACT, "worker", "--queue", url, "--concurrency", "2", "--toolkit", TOOLKIT, "--name", name]
    argv += ["--queues", queues]
    with log.open("wb") as out:
        return subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _wait(predicate: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def cluster(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    import redis

    url = redis_url.rsplit("/", 1)[0] + "/7"
    redis.Redis.from_url(url).flushdb()
    tmp = tmp_path_factory.mktemp("queue")
    blueprint = tmp / "agent.yaml"
    blueprint.write_text(BLUEPRINT)
    env = {k: v for k, v in os.environ.items() if k not in ("CODEACT_STORE", "CODEACT_MODEL", "CODEACT_PROFILE")}
    env.update(
        {
            "CODEACT_HOME": str(tmp / "home"),
            "QUEUE_LEDGER": str(tmp / "ledger.txt"),
            "CODEACT_QUEUE_VISIBILITY_TIMEOUT": "30",
            "OPENAI_API_KEY": "sk-test",  # a run whose model is the local OpenAI-compatible test server
        }
    )
    workers = {
        "A": _worker(url, "worker-a", "codeact,qa", env, tmp / "a.log"),
        "B": _worker(url, "worker-b", "codeact,qb", env, tmp / "b.log"),
    }
    client = redis.Redis.from_url(url)
    # A worker is up once Celery bound its queues (the kombu binding set names them).
    _wait(lambda: len(client.smembers("_kombu.binding.qa")) + len(client.smembers("_kombu.binding.qb")) >= 2, "workers")
    time.sleep(0.5)
    try:
        yield Cluster(url=url, tmp=tmp, blueprint=blueprint, workers=workers, env=env)
    finally:
        for process in workers.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in workers.values():
            try:
                process.wait(timeout=3)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def test_twenty_runs_spread_over_two_workers_all_complete(cluster: Cluster) -> None:
    handles = {i: cluster.submit(f"sum-{i}", [_steps(f"sum={i + 100}", rounds=1, sleep=0.1)]) for i in range(20)}
    for i, handle in handles.items():
        result = handle.result(timeout=120)
        assert result.status == "completed", result
        assert result.answer == f"sum={i + 100}:1"
        assert [r.index for r in cluster.rounds(result.session_id)] == [1]
    workers = {handle.client.state.get(handle.run_id)["worker"] for handle in handles.values()}
    assert workers == {"worker-a", "worker-b"}


def test_a_late_watcher_gets_the_whole_stream_once_in_order(cluster: Cluster) -> None:
    handle = cluster.submit("late", [_steps("late", rounds=2, sleep=0.2, mark=k) for k in range(2)])
    first = handle.result(timeout=60)
    assert first.status == "completed" and first.answer == "late:2"
    # A new client, after the fact: every event from run.queued to run.completed, each once.
    late = QueueClient(cluster.url).handle(handle.run_id)
    events = list(late.events())
    assert events[0]["type"] == "run.queued"
    assert events[1]["type"] == "run.started"
    assert events[-1]["type"] == "run.completed" and events[-1]["answer"] == "late:2"
    sequences = [e["sequence"] for e in events[1:]]
    assert sequences == list(range(1, len(sequences) + 1))
    assert sum(e["type"] == "round.started" for e in events) == 2
    # Re-attaching after a given entry continues from there without repeats.
    again = list(late.events(follow=False))
    assert again == events
    # The state written with run.started and run.completed: the session pinned in the request
    # (a redelivery continues it), the status of the last event.
    info = late.client.state.get(handle.run_id)
    assert info["status"] == "completed" and info["session_id"] == first.session_id
    assert json.loads(info["request"])["session_id"] == first.session_id == events[1]["session_id"]


def test_the_cli_enqueues_prints_the_run_id_and_streams(cluster: Cluster) -> None:
    # One script per run: a worker keeps its scripted model warm, so two runs on one worker share its replies.
    def common(name: str) -> list[str]:
        model = cluster.script(name, [_steps("cli", rounds=1, sleep=0.0)])
        return [str(cluster.blueprint), "-i", "go", "--queue", cluster.url, "--model", model]

    detached = subprocess.run(
        [CODEACT, "run", *common("cli-detached"), "--detach"], env=cluster.env, capture_output=True, text=True
    )
    assert detached.returncode == 0, detached.stderr
    run_id = detached.stdout.strip().splitlines()[-1]
    assert QueueClient(cluster.url).handle(run_id).result(timeout=60).answer == "cli:1"
    streamed = subprocess.run(
        [CODEACT, "run", *common("cli-streamed"), "--json"], env=cluster.env, capture_output=True, text=True
    )
    assert streamed.returncode == 0, streamed.stderr
    lines = [json.loads(line) for line in streamed.stdout.splitlines()]
    assert lines[0]["type"] == "run.id"
    assert lines[-1]["type"] == "run.completed" and lines[-1]["answer"] == "cli:1"


def test_a_run_paused_for_approval_on_a_is_approved_and_finishes_on_b(cluster: Cluster) -> None:
    ledger = Path(cluster.env["QUEUE_LEDGER"])
    reply = "Adding the entry.\n```python\nr = ledger.add(name='apple')\nsystem.finish(r)\n```"
    handle = cluster.submit("approve", [reply], queue_name="qa")
    paused = handle.result(timeout=60)
    assert paused.status == "paused" and paused.pause is not None
    assert paused.pause["kind"] == "approval" and paused.pause["operation"] == "add"
    assert handle.client.state.get(handle.run_id)["worker"] == "worker-a"
    assert handle.client.state.get(handle.run_id)["status"] == "paused"
    assert "added apple" not in (ledger.read_text() if ledger.exists() else "")
    handle.interact({"approve": True, "reason": "fine"}, queue="qb")
    done = handle.result(timeout=60)
    assert done.status == "completed" and done.answer == "added apple"
    assert handle.client.state.get(handle.run_id)["worker"] == "worker-b"
    assert ledger.read_text().count("added apple") == 1
    rounds = cluster.rounds(done.session_id)
    assert [(r.index, r.status) for r in rounds] == [(1, "interrupted"), (2, "ok")]
    # The call the pause waited on (its grant asks) did not run: the interrupted round says so.
    [told] = [s["content"] for s in cluster.segments(done.session_id) if "interrupted" in s["tags"]]
    waited = '- ledger.add(name="apple"): it was waiting for the user\'s approval when the round stopped\n'
    assert "Not performed: these calls did not run, so they had no effect:\n" + waited in told, told


ONCE = """\
version: codeact.agent/v1
extend: codeact-base
id: queue-once
toolkits:
  - ref: system
  - ref: ledger
workflow: {maxTurns: 4, codeact: {thought: 'off'}}
"""


def test_a_call_made_before_the_approval_in_its_round_is_done_once_through_the_queue(cluster: Cluster) -> None:
    # ledger.add runs (the grant does not ask), then ledger.publish waits for an approval: the run pauses and
    # its round is recorded as interrupted. The continuation asks the model again, which writes the program
    # again with one more call: the same add is answered from the record (not done again), the other one runs.
    # The model is the local OpenAI-compatible server: the continuation's prompt is what it received.
    ledger = Path(cluster.env["QUEUE_LEDGER"])
    blueprint = cluster.tmp / "once.yaml"
    blueprint.write_text(ONCE)
    first = "r = ledger.add(name='plum')\np = ledger.publish()\nsystem.finish(r + ' / ' + p)"
    again = first.replace("ledger.add(name='plum')", "ledger.add(name='plum') + ', ' + ledger.add(name='fig')")
    replies = [f"Adding, then publishing.\n```python\n{code}\n```" for code in (first, again)]
    with serve(replies) as model:
        options: dict[str, Any] = {"model": "openai/test-model", "base_url": model.base_url, "queue_name": "qa"}
        handle = submit(blueprint, "add a plum and publish", queue=cluster.url, **options)
        paused = handle.result(timeout=60)
        assert paused.status == "paused" and paused.pause is not None and paused.pause["operation"] == "publish"
        assert ledger.read_text().count("added plum") == 1
        handle.interact({"approve": True, "reason": "fine"}, queue="qa")
        done = handle.result(timeout=60)
    assert len(model.requests) == 2
    # The continuation's prompt: publish waited for the approval and did not run (not completed, not in flight).
    prompt = "\n".join(str(m["content"]) for m in model.requests[1].body["messages"])
    interrupted = prompt[prompt.index("Round 1 was interrupted") :]
    interrupted = interrupted[: interrupted.index("Not started:")]
    assert interrupted.count("ledger.publish") == 1, interrupted
    assert (
        "Not performed: these calls did not run, so they had no effect:\n"
        "- ledger.publish(): it was waiting for the user's approval when the round stopped\n"
        "Make them again if they are still needed.\n"
    ) in interrupted, interrupted
    assert done.status == "completed" and done.answer == "added plum, added fig / published", done
    text = ledger.read_text()
    assert (text.count("added plum"), text.count("added fig"), text.count("published")) == (1, 1, 1)
    rounds = cluster.rounds(done.session_id)
    assert [(r.index, r.status) for r in rounds] == [(1, "interrupted"), (2, "ok")]
    calls = [(c["operation"], c["arguments"], c["result"]) for c in rounds[1].calls if c["toolkit"] == "ledger"]
    assert calls == [
        ("add", {"name": "plum"}, "added plum"),  # as the code got it (from round 1's record)
        ("add", {"name": "fig"}, "added fig"),
        ("publish", {}, "published"),
    ]
    segments = cluster.segments(done.session_id)
    [told] = [s["content"] for s in segments if s["kind"] == SegmentKind.EVALUATION and s["round_index"] == 2]
    note = "Note: this call had already run in round 1 before it was interrupted, so it got its recorded result "
    assert note + 'and was not done again: ledger.add(name="plum") -> "added plum".' in told, told


def test_cancel_of_a_queued_run(cluster: Cluster) -> None:
    import redis

    handle = cluster.submit("queued", [_steps("never", rounds=1, sleep=0.0)], queue_name="qidle")
    handle.cancel()
    assert handle.result(timeout=10).status == "cancelled"
    # A worker that takes the message later leaves it alone.
    handle.client.app.control.add_consumer("qidle", reply=False)
    client = redis.Redis.from_url(cluster.url)
    _wait(lambda: client.llen("qidle") == 0, "the message to be taken")
    time.sleep(0.5)
    handle.client.app.control.cancel_consumer("qidle", reply=False)
    assert handle.status() == "cancelled"
    assert [e["type"] for e in handle.events(follow=False)] == ["run.queued", "run.cancelled"]


def test_cancel_of_a_running_run_stops_its_round(cluster: Cluster) -> None:
    reply = "Waiting a long time.\n```python\nimport time\nnote = 'before'\ntime.sleep(120)\nsystem.finish('x')\n```"
    handle = cluster.submit("running", [reply])
    for event in handle.events():
        if event["type"] == "code.started":
            break
    handle.cancel()
    result = handle.result(timeout=90)
    assert result.status == "cancelled"
    rounds = cluster.rounds(result.session_id)
    assert [(r.index, r.status) for r in rounds] == [(1, "interrupted")]
    assert sandbox_processes(result.session_id) == []  # the worker killed the sandbox


def test_an_ask_user_pause_is_answered_and_the_continuation_gets_the_answer(cluster: Cluster) -> None:
    ask = "I need to know.\n```python\nsystem.ask_user('Which fruit?')\n```"
    done = "Thanks.\n```python\nsystem.finish('noted')\n```"
    handle = cluster.submit("ask", [ask, done], queue_name="qa")
    paused = handle.result(timeout=60)
    assert paused.status == "paused" and paused.answer == "Which fruit?"
    assert handle.status() == "paused"
    handle.interact({"answer": "kiwi"}, queue="qa")  # the same worker: its warm agent goes on with the script
    finished = handle.result(timeout=60)
    assert finished.status == "completed" and finished.answer == "noted"
    assert [r.index for r in cluster.rounds(finished.session_id)] == [1, 2]
    from codeact.engine.store import open_store

    async def segments() -> list[dict[str, Any]]:
        store = open_store(cluster.url)
        try:
            return await store.segments(finished.session_id)
        finally:
            await store.close()

    texts = [s.get("content") for s in asyncio.run(segments()) if str(s.get("kind")).lower() == "user"]
    assert texts == ["task ask", "kiwi"]


def test_the_worker_enforces_the_run_time_limit(cluster: Cluster) -> None:
    reply = "Waiting.\n```python\nimport time\ntime.sleep(120)\nsystem.finish('late')\n```"
    handle = cluster.submit("deadline", [reply], timeout_s=2.0)
    result = handle.result(timeout=60)
    assert result.status == "failed"
    assert result.error is not None and result.error["code"] == "queue.deadline"
    # The round (if it got as far as running code) is recorded as interrupted, never as done.
    assert all(r.status == "interrupted" for r in cluster.rounds(result.session_id))


def test_serve_with_queue_enqueues_runs_and_relays_their_approvals(cluster: Cluster) -> None:
    from tests.service.helpers import context, read_sse, start_server, stop_server

    reply = "Adding the entry.\n```python\nr = ledger.add(name='pear')\nsystem.finish(r)\n```"
    model = cluster.script("serve", [reply, reply])
    served = start_server(
        cluster.tmp, [cluster.blueprint], "--store", cluster.url, "--queue", cluster.url,
        "--toolkit", TOOLKIT, "--model", model, env={"QUEUE_LEDGER": cluster.env["QUEUE_LEDGER"]},
    )  # fmt: skip
    try:
        ctx = context("Add a pear.")
        run_id = ctx["run_id"]
        accept = {"Accept": "text/event-stream"}
        with served.client() as client:
            body = {"runner_id": "queue-agent", "context": ctx}
            with client.stream("POST", "/v1/runs", json=body, headers=accept) as stream:
                first = []
                for event in read_sse(stream):
                    first.append(event)
                    if event.event == "action.requested":
                        break
            _wait(lambda: client.get(f"/v1/runs/{run_id}").json()["status"] == "waiting", "the pause")
            [pending] = client.get(f"/v1/runs/{run_id}").json()["pending"]
            answer = client.post(
                f"/v1/runs/{run_id}/interactions",
                json={"interaction_id": pending["interaction_id"], "action_id": "approve", "values": {}},
            )
            assert answer.status_code == 200, answer.text
            headers = {**accept, "Last-Event-ID": str(first[-1].id)}
            with client.stream("GET", f"/v1/runs/{run_id}/events", headers=headers) as stream:
                rest = list(read_sse(stream))
            with client.stream("GET", f"/v1/runs/{run_id}/events", headers=accept) as stream:
                everything = list(read_sse(stream))
            assert client.get(f"/v1/runs/{run_id}").json()["status"] == "completed"
            with_file = context("Sum the file.")  # queued runs take text only: a file is refused, not dropped
            with_file["input"]["contents"] = [{"type": "file_base64", "file_base64": "eA==", "file_name": "a.csv"}]
            refused = client.post("/v1/runs", json={"runner_id": "queue-agent", "context": with_file})
            assert refused.status_code == 422, refused.text
            assert "serve the runner without --queue to send files" in refused.json()["error"]["message"]
    finally:
        assert stop_server(served) == 0, served.stderr.read_text()
    ids = [e.id for e in first + rest]
    assert ids == list(range(1, len(ids) + 1))
    assert first + rest == everything
    assert rest[-1].event == "run.completed"
    messages = [e.data["data"]["message"]["content"] for e in rest if e.event == "message.completed"]
    assert "added pear" in messages


def test_serve_with_queue_answers_a_question_with_a_new_run_of_the_session(cluster: Cluster) -> None:
    from tests.service.helpers import context, read_sse, start_server, stop_server

    # One reply for either worker (the continuation may land on the one whose script starts over).
    reply = (
        "I read the attached list, ask once, then finish.\n```python\ntry:\n    asked\nexcept NameError:\n"
        "    asked = True\n    fruits = attachments.read_text('fruits.txt').strip()\n"
        "    system.ask_user(f'Which fruit should I add: {fruits}?')\nsystem.finish('noted one of ' + fruits)\n```"
    )
    model = cluster.script("serve-ask", [reply, reply])
    served = start_server(
        cluster.tmp, [cluster.blueprint], "--store", cluster.url, "--queue", cluster.url, "--sandbox", "subprocess",
        "--toolkit", TOOLKIT, "--model", model, env={"QUEUE_LEDGER": cluster.env["QUEUE_LEDGER"]},
    )  # fmt: skip
    try:
        ctx = context("Add a fruit from the attached list.")
        listed = base64.b64encode(b"kiwi, fig\n").decode()  # the worker serves it (inline content)
        ctx["input"]["attachments"] = [{"name": "fruits.txt", "mime_type": "text/plain", "content": listed}]
        accept = {"Accept": "text/event-stream"}
        with served.client() as client:
            body = {"runner_id": "queue-agent", "context": ctx}
            with client.stream("POST", "/v1/runs", json=body, headers=accept) as stream:
                first = list(read_sse(stream))
            assert first[-1].event == "run.completed" and first[-1].data["data"]["finish_reason"] == "ask_user"
            asked = client.get(f"/v1/runs/{ctx['run_id']}").json()
            assert asked["status"] == "completed", asked
            [question] = asked["pending"]
            assert "kiwi, fig" in question["description"]
            kiwi = {"interaction_id": question["interaction_id"], "action_id": "submit", "values": {"answer": "kiwi"}}
            answer = client.post(f"/v1/runs/{ctx['run_id']}/interactions", json=kiwi)
            assert answer.status_code == 201, answer.text
            new_id = answer.json()["run_id"]
            assert new_id != ctx["run_id"] and answer.json()["session_id"] == asked["session_id"]
            with client.stream("GET", f"/v1/runs/{new_id}/events", headers=accept) as stream:
                rest = list(read_sse(stream))
            assert rest[-1].event == "run.completed", rest[-1]
            messages = [e.data["data"]["message"]["content"] for e in rest if e.event == "message.completed"]
            assert "noted one of kiwi, fig" in messages
            before = client.get(f"/v1/runs/{ctx['run_id']}").json()
            assert before["continued_by"] == new_id and before["pending"] == []
            again = client.post(
                f"/v1/runs/{ctx['run_id']}/interactions",
                json={"interaction_id": question["interaction_id"], "action_id": "submit", "values": {"answer": "fig"}},
            )
            assert again.status_code == 409, again.text
    finally:
        assert stop_server(served) == 0, served.stderr.read_text()
    rounds = cluster.rounds(asked["session_id"])
    assert [r.index for r in rounds] == [1, 2]


def test_a_sigkilled_worker_loses_no_run_and_no_round(cluster: Cluster) -> None:
    replies = [_steps("kept", rounds=4, sleep=0.6, mark=k) for k in range(8)]
    handles = [cluster.submit(f"kill-{i}", replies) for i in range(4)]

    def b_mid_run() -> bool:
        for handle in handles:
            info = handle.client.state.get(handle.run_id)
            if info.get("worker") == "worker-b" and info.get("status") == "running" and info.get("session_id"):
                if cluster.rounds(info["session_id"]):
                    return True
        return False

    _wait(b_mid_run, "worker B to be in the middle of a run")
    os.killpg(cluster.workers["B"].pid, signal.SIGKILL)
    cluster.workers["B"].wait()
    for handle in handles:
        result = handle.result(timeout=120)
        assert result.status == "completed", result
        assert result.answer == "kept:4"
        rounds = cluster.rounds(result.session_id)
        indexes = [r.index for r in rounds]
        assert indexes == list(range(1, len(indexes) + 1))  # none lost, none recorded twice
        done = [r for r in rounds if r.status == "ok"]
        assert len(done) == 4  # exactly four completed rounds: step 1..4, none executed twice
    requeued = [e for handle in handles for e in handle.events(follow=False) if e["type"] == "run.requeued"]
    assert requeued, "no run was taken over from the killed worker"
