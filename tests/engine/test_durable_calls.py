"""Durable toolkit calls (issue 34): a completed call is never lost or done twice, whatever instant the host dies.

A real ``codeact run`` (tests/engine/durable_calls.py) makes five side-effecting calls in round 1 and is
SIGKILLed: by its own toolkit at chosen points (as a call starts, right after a call's effect while it is
still in flight, k ms after a call returned), and from outside at random instants; then the session is
resumed by a model that does what the resumed prompt says. Nothing waits for a background write: the
journal's promise is that what a call did is in the store before anything depends on it.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from codeact.engine.agent.recovery import CallJournal
from codeact.engine.calls import call_bridge
from codeact.engine.store import open_store
from codeact.sandbox.runtime.protocol import RpcError
from codeact.toolkits import DEFAULT_BUDGETS, ToolkitBridge, ToolkitContext, load_toolkit_ref
from codeact.toolkits.context import CALL_ID
from tests.engine.durable_calls import ITEMS, TOOLKIT, Trial, trial
from tests.engine.openai_server import OpenAIServer
from tests.redis_server import PrivateRedis, running


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    directory = tmp_path / "redis"
    directory.mkdir()
    yield from running(PrivateRedis(directory, query="prefix=durable"))


def _store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'sessions.db'}"
    server: PrivateRedis = request.getfixturevalue("own_redis")
    return server.url


def _kept_the_promise(result: Trial) -> None:
    assert result.resume_rc == 0, result.resume_err
    assert result.lost == [], result.prompt
    assert result.duplicated == [], result.after
    assert sorted(item for item, _ in result.after) == list(ITEMS)
    assert "run again" not in result.prompt


@pytest.mark.parametrize(
    ("kind", "kill", "effect"),
    [
        # The host dies as i2 starts: i0 and i1 completed; i2's start is journaled, its effect not made.
        pytest.param("sqlite", "before:i2", False, id="as-a-call-starts-sqlite"),
        # The host dies right after i2's effect, before it returned: in flight, and it did take effect.
        pytest.param("sqlite", "after:i2", True, id="after-the-effect-sqlite"),
        pytest.param("redis", "after:i2", True, id="after-the-effect-redis"),
    ],
)
def test_a_call_in_flight_at_the_kill_is_reported_with_its_id(
    kind: str, kill: str, effect: bool, tmp_path: Path, openai_server: OpenAIServer, request: pytest.FixtureRequest
) -> None:
    result = trial(tmp_path, openai_server, _store(kind, tmp_path, request), kill=kill)
    assert result.said.interrupted
    assert result.said.completed == ("i0", "i1")  # durable before the code saw their results
    assert result.said.in_flight == {"i2": "D:1:2"}  # started, outcome unknown: the call id to check with
    assert ("i2" in [item for item, _ in result.before]) is effect
    _kept_the_promise(result)


def test_a_kill_just_after_a_call_returned_loses_it_nowhere(tmp_path: Path, openai_server: OpenAIServer) -> None:
    # 1 ms after i0's effect: i0 is completed or still in flight, never missing; i1 may have started.
    result = trial(tmp_path, openai_server, f"sqlite:///{tmp_path / 'sessions.db'}", kill="ms:i0:1")
    assert "i0" in result.said.completed or "i0" in result.said.in_flight
    _kept_the_promise(result)


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_kills_at_random_instants_lose_nothing_and_repeat_nothing(
    kind: str, tmp_path: Path, openai_server: OpenAIServer, request: pytest.FixtureRequest
) -> None:
    store = _store(kind, tmp_path, request)
    rng = random.Random(34)
    for n in range(2):
        directory = tmp_path / f"trial-{n}"
        directory.mkdir()
        result = trial(directory, openai_server, store, at=rng.uniform(0, 0.12), delay=0.01, session=f"D{n}")
        _kept_the_promise(result)


def test_a_resumed_round_gives_its_calls_the_ids_they_had(tmp_path: Path, openai_server: OpenAIServer) -> None:
    # Killed as i2 starts; the resumed model runs round 1's program again: each call gets the id it had (the
    # session, round 1, its sequence), so the toolkit that deduplicates on it does i0 and i1 only once.
    result = trial(tmp_path, openai_server, f"sqlite:///{tmp_path / 'sessions.db'}", kill="before:i2", rerun=True)
    assert result.said.in_flight == {"i2": "D:1:2"}
    assert result.before == (("i0", "D:1:0"), ("i1", "D:1:1"))
    assert result.after == tuple((item, f"D:1:{n}") for n, item in enumerate(ITEMS))
    assert result.resume_rc == 0, result.resume_err


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_a_resumed_round_running_the_program_again_does_not_redo_what_completed(
    kind: str, tmp_path: Path, openai_server: OpenAIServer, request: pytest.FixtureRequest
) -> None:
    # Killed as i2 starts; the resumed model runs round 1's program again, and the ledger does NOT deduplicate:
    # i0 and i1 completed, so their calls are answered from round 1's record (engine.calls.FromRecord), not
    # made again; i2 (in flight: its effect was not made) and the rest run.
    store = _store(kind, tmp_path, request)
    result = trial(tmp_path, openai_server, store, kill="before:i2", rerun=True, idempotent=False)
    assert result.resume_rc == 0, result.resume_err
    assert result.before == (("i0", "D:1:0"), ("i1", "D:1:1"))
    assert result.after == tuple((item, f"D:1:{n}") for n, item in enumerate(ITEMS))  # each item once


@pytest.mark.integration
@pytest.mark.docker
def test_a_kill_during_a_call_in_the_docker_sandbox(tmp_path: Path, openai_server: OpenAIServer) -> None:
    store = f"sqlite:///{tmp_path / 'sessions.db'}"
    result = trial(tmp_path, openai_server, store, kill="after:i1", sandbox=("--sandbox", "docker"))
    assert result.said.completed == ("i0",)
    assert result.said.in_flight == {"i1": "D:1:1"}
    _kept_the_promise(result)


def test_the_devops_deploy_deduplicates_on_the_call_id() -> None:
    devops = Path(__file__).resolve().parents[2] / "examples" / "devops" / "toolkit.py"
    bridge = ToolkitBridge([load_toolkit_ref(f"{devops}:DevOps")], session_id="S")

    async def deploy(call_id: str, version: str) -> object:
        token = CALL_ID.set(call_id)
        try:
            params = {
                "toolkit": "devops",
                "operation": "deploy_app",
                "arguments": {"app_id": "checkout-api", "version": version},
            }
            return await bridge.handle("call", params)
        finally:
            CALL_ID.reset(token)

    async def calls() -> list[object]:
        return [
            await deploy("S:1:3", "2.4.0"),
            await deploy("S:1:3", "2.4.0"),  # the same call again (a resumed round running it again)
            await deploy("S:1:3", "2.5.0"),  # the same id with other arguments: another call
            await deploy("S:2:0", "2.4.0"),  # another call
        ]

    first, again, other_args, other_call = asyncio.run(calls())
    assert again == first and first["id"] == "D-1001"  # type: ignore[index]
    assert [other_args["id"], other_call["id"]] == ["D-1002", "D-1003"]  # type: ignore[index]


def test_a_journal_write_that_fails_fails_the_call_and_the_operation_never_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = tmp_path / "ledger.txt"
    monkeypatch.setenv("LEDGER_FILE", str(ledger))

    async def call() -> RpcError:
        store = open_store(f"sqlite:///{tmp_path / 'sessions.db'}")
        journal = CallJournal(store, "S")
        handler = call_bridge(
            [load_toolkit_ref(TOOLKIT)],
            grants=None,
            context=ToolkitContext(session_id="S"),
            budgets=DEFAULT_BUDGETS,
            emit=lambda *a, **k: None,
            round_ref=lambda: 1,
            policies={},
            approver=None,
            journal=lambda: journal,
        )
        await store.close()  # the store is gone: nothing can be journaled
        try:
            await handler.handle("call", {"toolkit": "ledger", "operation": "append", "arguments": {"item": "i0"}})
        except RpcError as exc:
            return exc
        finally:
            await journal.aclose()
        raise AssertionError("the call succeeded without its journal")

    error = asyncio.run(call())
    assert error.message.startswith(
        "store.unavailable: the start of ledger.append (call S:1:0; it did not run) could not be recorded in the "
        "session store"
    )
    assert error.data == {"code": "store.unavailable"}
    assert not ledger.exists()  # write-ahead: no start on record, no effect
