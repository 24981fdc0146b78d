"""``codeact sessions list`` shows who holds a lock and since when; ``codeact sessions unlock S`` forces it."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from pathlib import Path

from typer.testing import CliRunner

from codeact.engine.cli import app
from codeact.engine.store import LockLostError, SQLiteStore
from codeact.engine.store._lock import make_token

from ._helpers import make_meta, make_round, make_segments


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def test_list_shows_the_lock_owner_and_unlock_forces_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    token = make_token()
    since = float(token.split("|")[3])

    async def setup() -> None:
        async with SQLiteStore(tmp_path / "sessions.db") as store:
            await store.create_session(make_meta("busy"))
            await store.create_session(make_meta("idle"))
            assert await store._acquire_lock("busy", token, 600) is None  # a live run: this process

    asyncio.run(setup())
    owner = f"{socket.gethostname()}:{os.getpid()}"
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since))

    code, out, _ = _cli("sessions", "list", "--store", url)
    assert code == 0
    lines = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert out.splitlines()[0].split() == ["ID", "BLUEPRINT", "MODEL", "STATUS", "ROUNDS", "UPDATED", "LOCK"]
    assert lines["busy"].endswith(f"{owner} since {when}")
    assert " active " in lines["busy"]
    assert " interrupted " in lines["idle"]  # active without a run: repaired
    code, out, _ = _cli("sessions", "list", "--store", url, "--json")
    rows = {row["session_id"]: row for row in json.loads(out)}
    assert rows["busy"]["lock"]["owner"] == owner
    assert rows["busy"]["lock"]["since"] == since
    assert rows["idle"]["lock"] is None

    code, _, err = _cli("sessions", "unlock", "busy", "--store", url)
    assert code == 0
    assert err == (
        f"warning: forced the lock of session busy, held by {owner} since {when}. If that run is still alive it "
        "is now fenced out: its next round will not be recorded and it fails. Session status: interrupted.\n"
    )

    async def fenced() -> None:
        async with SQLiteStore(tmp_path / "sessions.db") as store:
            try:
                await store.append_round(make_round(1, "busy"), segments=make_segments(1), variables={}, fence=token)
            except LockLostError:
                return
            raise AssertionError("the forced-out holder recorded a round")

    asyncio.run(fenced())
    code, _, err = _cli("sessions", "unlock", "busy", "--store", url)
    assert (code, err) == (0, "session busy was not locked; its status is interrupted\n")
    code, _, err = _cli("sessions", "unlock", "nope", "--store", url)
    assert code == 1
    assert f"session 'nope' not found in {url}" in err
