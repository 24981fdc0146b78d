"""Corrupted store entries are named, never a traceback: replay, show, list, resume, then truncate repairs.

A real ``codeact run`` (the offline demo agent, scripted model) records a 5-round session; each test
breaks one entry by hand (a round record, a variable, a segment, the session metadata) on SQLite and
on a real Redis, then drives the ``codeact`` CLI in subprocesses.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from codeact.engine.store import open_store

REPO = Path(__file__).resolve().parents[3]
DEMO = REPO / "examples" / "devops"
DEVOPS = f"{DEMO / 'toolkit.py'}:DevOps"
CODEACT = str(Path(sys.executable).with_name("codeact"))
INPUT = "Which login requirements of project P-123 are still open? Then deploy version 2.4.0 of its API."


def codeact(*args: str, home: Path) -> tuple[int, str, str]:
    env = {**os.environ, "CODEACT_HOME": str(home), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    for name in ("CODEACT_MODEL", "CODEACT_STORE", "CODEACT_PROFILE"):
        env.pop(name, None)
    done = subprocess.run([CODEACT, *args], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    return done.returncode, done.stdout, done.stderr


def run_demo(store: str, home: Path, *extra: str) -> tuple[int, str, str]:
    return codeact(
        "run", str(DEMO / "agent.yaml"), "--toolkit", DEVOPS, "--store", store, "--session", "demo", "--input", INPUT,
        *extra, home=home,
    )  # fmt: skip


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file holding the demo session ``demo`` (5 rounds), recorded by ``codeact run``."""
    tmp = tmp_path_factory.mktemp("corruption")
    rc, _, err = run_demo(f"sqlite:///{tmp / 'golden.db'}", tmp / "home")
    assert rc == 0, err
    return tmp / "golden.db"


async def _copy(source: str, target: str) -> None:
    """Copy session ``demo`` record by record (the rounds of a real run, into another backend)."""
    async with open_store(source) as src, open_store(target) as dst:
        meta = await src.get_session("demo")
        assert meta is not None
        read = await src.read_rounds("demo")
        segments = await src.segments("demo")
        await dst.create_session(replace(meta, rounds=0))
        done = 0
        for entry in read.entries:
            assert entry.record is not None and entry.table_segments is not None
            part, done = segments[done : entry.table_segments], entry.table_segments
            await dst.append_round(entry.record, segments=part, variables=entry.record.variables)
        await dst.update_session("demo", status=meta.status)


def _redis_command(url: str, *args: str) -> None:
    async def run() -> None:
        import redis.asyncio

        client = redis.asyncio.Redis.from_url(url)
        try:
            await client.execute_command(*args)
        finally:
            await client.aclose()

    asyncio.run(run())


# kind -> (SQLite statement, Redis command (key suffix, args...), expected message start, repair --after)
KINDS = {
    "round": (
        "UPDATE rounds SET record = '{\"v\": 2, broken' WHERE idx = 3",
        ("LSET", ":rounds", "2", '{"v": 2, broken'),
        "round 3 of session 'demo' is unreadable: not JSON",
        2,
    ),
    "variable": (
        "UPDATE variables SET value = '[1, 2' WHERE name = 'project'",
        ("HSET", ":vars", "project", "[1, 2"),
        "variable 'project' of session 'demo' (after round 5) is unreadable: not JSON",
        5,
    ),
    "segment": (
        "UPDATE segments SET body = '<<garbage>>' WHERE pos = 6",
        ("LSET", ":segments", "5", "<<garbage>>"),
        "segment 6 of session 'demo' (added by round 2) is unreadable: not JSON",
        1,
    ),
    "metadata": (
        "UPDATE sessions SET extra = '{\"grants\": ' WHERE session_id = 'demo'",
        ("HSET", "", "extra", '{"grants": '),
        "the metadata of session 'demo' is unreadable: field 'extra': not JSON",
        5,
    ),
}


@pytest.fixture(params=["sqlite", "redis"])
def broken_store(request: pytest.FixtureRequest, recorded: Path, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(store URL, kind): a copy of the recorded session with one entry of ``kind`` broken."""
    kind: str = request.node.callspec.params["kind"]
    statement, command, _, _ = KINDS[kind]
    if request.param == "sqlite":
        path = tmp_path / "sessions.db"
        shutil.copy(recorded, path)
        with sqlite3.connect(path) as conn:
            conn.execute(statement)
        yield f"sqlite:///{path}", kind
        return
    redis_url: str = request.getfixturevalue("redis_url")
    prefix = f"codeact-test:{uuid.uuid4().hex[:12]}"
    url = f"{redis_url}?prefix={prefix}"
    asyncio.run(_copy(f"sqlite:///{recorded}", url))
    verb, suffix, *args = command
    _redis_command(redis_url, verb, f"{prefix}:session:demo{suffix}", *args)
    try:
        yield url, kind
    finally:

        async def drop() -> None:
            async with open_store(url) as store:
                await store.delete_session("demo")

        asyncio.run(drop())


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_corrupted_entry_is_named_everywhere_and_truncate_repairs_it(
    broken_store: tuple[str, str], kind: str, tmp_path: Path
) -> None:
    store, _ = broken_store
    _, _, message, after = KINDS[kind]
    hint = f"codeact sessions truncate demo --after {after}"
    home = tmp_path / "home"

    # show: everything readable is printed, the bad entry is named on stderr.
    rc, out, err = codeact("sessions", "show", "demo", "--store", store, home=home)
    assert rc == 1
    assert message in err and hint in err
    readable = [n for n in range(1, 6) if not (kind == "round" and n == 3)]
    assert all(f"\nround {n}  " in out for n in readable), out
    if kind == "round":
        assert "round 3  unreadable" in out
    if kind != "metadata":
        assert "blueprint devops-demo" in out

    # list: the session is listed and marked, the message names the entry.
    rc, out, err = codeact("sessions", "list", "--store", store, home=home)
    assert rc == 1 and message in err
    assert out.splitlines()[1].startswith("demo ") and "unreadable" in out

    # replay: the rounds before a bad round are replayed, then it stops with the message.
    rc, out, err = codeact("replay", "demo", "--store", store, home=home)
    assert rc == 1 and message in err
    if kind == "round":
        assert out.splitlines() == [
            "round 1: match",
            "round 2: match",
            "replayed 2 round(s) of demo: 2 match, 0 mismatch",
        ]

    # resume: refused before anything runs, with the message and the repair.
    rc, out, err = run_demo(store, home)
    assert rc != 0
    assert message in out + err and hint in out + err
    assert "round 6" not in out

    # exec --session: refused before the code runs.
    script = tmp_path / "more.py"
    script.write_text("print('ran')\n")
    rc, out, err = codeact("exec", str(script), "--session", "demo", "--store", store, home=home)
    assert rc != 0 and message in err and "ran" not in out

    # truncate repairs it: show and replay are clean again.
    rc, out, err = codeact("sessions", "truncate", "demo", "--after", str(after), "--store", store, home=home)
    assert rc == 0, err
    assert out.startswith("truncated session 'demo' in ")
    rc, out, err = codeact("sessions", "show", "demo", "--store", store, home=home)
    assert (rc, err) == (0, "")
    assert f"{after} round" in out
    rc, out, err = codeact("replay", "demo", "--store", store, home=home)
    assert rc == 0, out + err
    assert out.splitlines()[-1] == f"replayed {after} round(s) of demo: {after} match, 0 mismatch"

    if kind == "round":  # and the session goes on from round 2: resumed, recorded, replayable
        rc, out, err = run_demo(store, home)
        assert rc == 0, out + err
        rc, out, err = codeact("replay", "demo", "--store", store, home=home)
        assert rc == 0 and out.splitlines()[-1].endswith(" mismatch") and " 0 mismatch" in out, out + err
