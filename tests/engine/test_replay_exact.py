"""Replay is exact (issue 10, item 3): hash seed per session, recorded clock/random/uuid reads, deadlines.

Sessions are recorded through ``codeact run`` (scripted model, real subprocess sandboxes, SQLite),
then replayed through ``codeact replay`` and :func:`codeact.engine.replay.replay_session`.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from codeact.engine.cli import app
from codeact.engine.replay import ReplayReport, replay_session
from codeact.engine.store import open_store
from codeact.sandbox import SubprocessSandbox
from codeact.sandbox.policy import Policy

SLOW = f"{Path(__file__).parent / 'slow_toolkit.py'}:Slow"

ROUNDS = (
    # sets of strings and hash(): the session's PYTHONHASHSEED
    "tags = {'alpha', 'beta', 'gamma', 'delta', 'epsilon'}\nprint(tags, hash('codeact'), list({'x': 1, 'y': 2}))",
    # random (seeded per round), the clock, uuid4, an unseeded Random, SystemRandom
    "import random\nimport uuid\nfrom datetime import datetime, date, timezone\n"
    "r = random.random()\npicked = random.sample(sorted(tags), 2)\n"
    "stamp = datetime.now()\nutc = datetime.now(timezone.utc)\nday = date.today()\n"
    "token = uuid.uuid4()\nother = random.Random().randint(1, 10**9)\nsys_r = random.SystemRandom().random()\n"
    "print(r, picked, stamp, utc, day, token, other, sys_r, {str(token)[:4], 'k', 'z'})",
    # the next round reads again, and uses what was kept
    "again = (random.random(), datetime.now().isoformat(), str(uuid.uuid4()))\nprint(again, stamp < datetime.now())",
    "system.finish('done')",
)


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEACT_HOME", str(tmp_path / "home"))
    for name in ("CODEACT_MODEL", "CODEACT_STORE", "CODEACT_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def blueprint(tmp_path: Path, *codes: str, body: str = "") -> Path:
    (tmp_path / "replies.yaml").write_text(json.dumps(list(codes)))
    path = tmp_path / "agent.yaml"
    path.write_text(
        "version: codeact.agent/v1\nextend: codeact-base\nid: exact\n"
        "model: {provider: scripted, model: scripted/replies.yaml}\n"
        "workflow: {maxTurns: 6, codeact: {thought: 'off'}}\n" + body
    )
    return path


def session_json(session: str, store: str) -> dict[str, Any]:
    rc, out, err = cli("sessions", "show", session, "--store", store, "--json")
    assert rc == 0, err
    data: dict[str, Any] = json.loads(out)
    return data


def test_sets_hash_random_clock_and_uuid_replay_20_times_out_of_20(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 's.db'}"
    rc, out, err = cli("run", str(blueprint(tmp_path, *ROUNDS)), "--input", "x", "--store", store, "--session", "S")
    assert (rc, out) == (0, "done\n"), err
    data = session_json("S", store)
    assert isinstance(data["session"]["extra"]["sandbox"]["hash_seed"], int)
    second = data["rounds"][1]["nondeterminism"]
    assert isinstance(second["seed"], int)
    kinds = [kind for kind, _ in second["reads"]]
    assert kinds == ["datetime.now", "datetime.now", "date.today", "uuid.uuid4", "random.Random"] + [
        "random.SystemRandom.random"
    ]
    assert data["rounds"][0]["nondeterminism"] == {}  # sets and hash() need no reads: the session's hash seed

    async def twenty() -> list[ReplayReport]:
        reports = []
        for _ in range(20):
            async with open_store(store) as opened:
                reports.append(await replay_session(opened, "S"))
        return reports

    reports = asyncio.run(twenty())
    assert [r.ok for r in reports] == [True] * 20, [r.to_json() for r in reports if not r.ok][:1]
    assert {tuple(x.status for x in r.rounds) for r in reports} == {("match",) * 4}

    rc, out, _ = cli("replay", "S", "--store", store)
    assert rc == 0
    assert out.splitlines()[-1] == "replayed 4 round(s) of S: 4 match, 0 mismatch"


def test_a_resumed_session_keeps_its_hash_seed(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 's.db'}"
    probe = "print(hash('codeact'), {'alpha', 'beta', 'gamma', 'delta'})"
    path = blueprint(tmp_path, probe + "\nfirst = 1", "system.finish('a')")
    assert cli("run", str(path), "--input", "x", "--store", store, "--session", "H")[0] == 0
    path = blueprint(tmp_path, probe + "\nsecond = 2", "system.finish('b')")
    assert cli("run", str(path), "--input", "y", "--store", store, "--session", "H")[0] == 0
    rounds = session_json("H", store)["rounds"]
    assert rounds[0]["stdout"] == rounds[2]["stdout"]  # another process, the same seed


def test_a_tool_call_longer_than_the_round_limit_and_a_killed_round_replay_to_the_same_outcome(
    tmp_path: Path,
) -> None:
    # The round's limit counts the code's own time: the 3 s call completes under a 2 s limit (the clock
    # is paused while it is in flight); the busy loop of round 2 is killed at the limit.
    store = f"sqlite:///{tmp_path / 's.db'}"
    path = blueprint(
        tmp_path,
        # (not `answer`: a round that sets it asks the model whether it is the final one, docs/finishing.md)
        "print(slow.ping())\nwaited = slow.wait(seconds=3)\nprint(waited)",
        "print(waited)\nwhile True:\n    pass",
        "system.finish('after the deadline')",
        body="toolkits: [{ref: system}, {ref: slow}]\nsandbox: {limits: {timeoutSeconds: 2}}\n",
    )
    rc, out, err = cli(
        "run", str(path), "--input", "x", "--store", store, "--session", "D", "--toolkit", SLOW,
        "--allow-sandbox-declaration",
    )  # fmt: skip
    assert (rc, out) == (0, "after the deadline\n"), err
    first, second = session_json("D", store)["rounds"][:2]
    assert (first["status"], first["stdout"]) == ("ok", "pong\nlate\n")
    assert [c["operation"] for c in first["calls"]] == ["ping", "wait"]
    assert second["status"] == "deadline_exceeded"

    for extra in ((), ("--toolkit", SLOW)):  # with the toolkits loaded, and from the record alone
        rc, out, _ = cli("replay", "D", "--store", store, *extra)
        assert rc == 0, out
        assert out.splitlines() == [
            "round 1: match",
            "round 2: match",
            "round 3: match",
            "replayed 3 round(s) of D: 3 match, 0 mismatch",
        ]


async def test_a_replay_that_reads_differently_is_reported() -> None:
    policy = Policy().widen("time")
    async with SubprocessSandbox(policy=policy) as sandbox:
        recorded = await sandbox.execute("import time\nt = time.time()\nprint(t)")
        assert recorded.nondeterminism is not None
        assert [kind for kind, _ in recorded.nondeterminism["reads"]] == ["time.time"]
        same = await sandbox.execute("import time\nt = time.time()\nprint(t)", nondeterminism=recorded.nondeterminism)
        assert (same.stdout, same.nondeterminism) == (recorded.stdout, recorded.nondeterminism)
        other = await sandbox.execute("import uuid\nprint(uuid.uuid4())", nondeterminism=recorded.nondeterminism)
        assert other.nondeterminism is not None
        assert other.nondeterminism["diverged"] == "read 1: the record has 'time.time', the code read 'uuid.uuid4'"
        fewer = await sandbox.execute("x = 1", nondeterminism=recorded.nondeterminism)
        assert fewer.nondeterminism is not None and fewer.nondeterminism["unread"] == 1


async def test_the_views_behave_like_the_modules() -> None:
    policy = Policy().widen("time")
    code = (
        "import datetime as dt\nfrom datetime import datetime\nfrom time import time as now\nimport time\n"
        "checks = [isinstance(datetime.now(), dt.datetime), isinstance(dt.datetime(2020, 1, 2), datetime),\n"
        "          type(datetime(2020, 1, 2)) is type(dt.datetime.fromtimestamp(0)), issubclass(datetime, dt.date),\n"
        "          datetime.fromisoformat('2020-01-02T03:04:05').year,\n"
        "          time.strftime('%Y') == str(dt.date.today().year),\n"
        "          type(now()).__name__]\n"
    )
    async with SubprocessSandbox(policy=policy) as sandbox:
        result = await sandbox.execute(code)
        assert result.error is None, result.error
        assert result.variables["checks"] == [True, True, True, True, 2020, True, "float"]
        assert result.variables["now"] == {"$type": "source", "kind": "import", "v": "from time import time as now"}
        assert result.variables["datetime"]["v"] == "from datetime import datetime"
        later = await sandbox.execute(
            "print(type(now()).__name__, datetime(2021, 1, 1).year)", variables=result.variables
        )
        assert later.stdout == "float 2021\n"


@pytest.mark.integration
@pytest.mark.docker
def test_sets_hash_random_clock_and_uuid_replay_exactly_in_docker(tmp_path: Path, docker_client: Any) -> None:
    from codeact.sandbox.image import ensure_image

    ensure_image(docker_client)
    store = f"sqlite:///{tmp_path / 's.db'}"
    path = blueprint(tmp_path, *ROUNDS)
    rc, out, err = cli("run", str(path), "--input", "x", "--store", store, "--session", "S", "--sandbox", "docker")
    assert (rc, out) == (0, "done\n"), err
    assert session_json("S", store)["session"]["extra"]["sandbox"]["backend"] == "docker"

    async def three() -> list[ReplayReport]:
        reports = []
        for _ in range(3):
            async with open_store(store) as opened:
                reports.append(await replay_session(opened, "S"))
        return reports

    reports = asyncio.run(three())
    assert [r.ok for r in reports] == [True] * 3, [r.to_json() for r in reports if not r.ok][:1]
