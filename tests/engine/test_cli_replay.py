"""``codeact replay``: per-round reports, --json, --live, mismatches, unknown sessions, SQLite and Redis stores."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from codeact.engine.cli import app

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "examples" / "devops"
DEVOPS = f"{DEMO / 'toolkit.py'}:DevOps"
DEMO_INPUT = "Which login requirements of project P-123 are still open? Then deploy version 2.4.0 of its API."


def cli(*args: str) -> tuple[int, str, str]:
    """Run ``codeact ARGS`` in-process: (exit code, stdout, stderr)."""
    result = CliRunner().invoke(app, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def _environment(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    monkeypatch.setenv("CODEACT_HOME", str(home))
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    for name in ("CODEACT_MODEL", "CODEACT_STORE", "CODEACT_PROFILE"):
        monkeypatch.delenv(name, raising=False)


def record_demo(store: str, session: str) -> None:
    rc, _, err = cli(
        "run", str(DEMO / "agent.yaml"), "--toolkit", DEVOPS, "--store", store, "--session", session,
        "--input", DEMO_INPUT,
    )  # fmt: skip
    assert rc == 0, err


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A SQLite store holding the demo session ``demo`` (5 rounds); yields the store URL."""
    tmp = tmp_path_factory.mktemp("replay")
    with pytest.MonkeyPatch.context() as monkeypatch:
        _environment(monkeypatch, tmp / "home")
        store = f"sqlite:///{tmp / 'sessions.db'}"
        record_demo(store, "demo")
        yield store


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _environment(monkeypatch, tmp_path / "home")
    monkeypatch.chdir(tmp_path)


def test_replay_reports_every_round(demo: str) -> None:
    rc, out, err = cli("replay", "demo", "--store", demo)
    assert rc == 0, err
    assert out.splitlines() == [
        "round 1: match",
        "round 2: match",
        "round 3: match",
        "round 4: match",
        "round 5: match",
        "replayed 5 round(s) of demo: 5 match, 0 mismatch",
    ]


@pytest.mark.parametrize(
    ("extra", "live"),
    [
        pytest.param((), False, id="from-the-record"),
        pytest.param(("--live", "--toolkit", DEVOPS), True, id="live"),
    ],
)
def test_replay_json(demo: str, extra: tuple[str, ...], live: bool) -> None:
    rc, out, err = cli("replay", "demo", "--store", demo, "--json", *extra)
    assert rc == 0, err
    report = json.loads(out)
    assert set(report) == {"session_id", "live", "ok", "rounds"}
    assert (report["session_id"], report["live"], report["ok"]) == ("demo", live, True)
    assert [(r["round"], r["status"], r["differences"]) for r in report["rounds"]] == [
        (n, "match", []) for n in range(1, 6)
    ]
    assert all(r["duration_s"] >= 0 for r in report["rounds"])


def test_live_replay_without_the_toolkit_is_a_usage_error(demo: str) -> None:
    rc, out, err = cli("replay", "demo", "--store", demo, "--live")
    assert rc == 2
    assert out == ""
    assert err == (
        "codeact replay: --live calls the tools for real, but the session's toolkit(s) 'devops' are not loaded: "
        "pass --toolkit MODULE:OBJECT for each (or replay without --live to answer from the record)\n"
    )


def test_unknown_session_exits_1(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'empty.db'}"
    rc, out, err = cli("replay", "nope", "--store", store)
    assert rc == 1
    assert out == ""
    assert err == f"codeact replay: session 'nope' not found in {store}\n"


def test_bad_store_url_exits_2() -> None:
    rc, _, err = cli("replay", "demo", "--store", "ftp://x")
    assert rc == 2
    assert err == (
        "unsupported store URL scheme 'ftp': use sqlite:///PATH or redis://HOST:PORT/DB (in --store or CODEACT_STORE)\n"
    )


def _blueprint(tmp_path: Path, *codes: str) -> Path:
    (tmp_path / "replies.yaml").write_text(json.dumps(list(codes)))
    path = tmp_path / "agent.yaml"
    path.write_text(
        "version: codeact.agent/v1\nextend: codeact-base\nid: replay-test\n"
        "model: {provider: scripted, model: scripted/replies.yaml}\n"
        "workflow: {maxTurns: 5, codeact: {thought: 'off'}}\n"
    )
    return path


def test_a_nondeterministic_round_is_reported_as_a_mismatch(tmp_path: Path) -> None:
    # random, the clock and uuid4 replay exactly (tests/engine/test_replay_exact.py); a memory
    # address is one of the things replay cannot reproduce (docs/replay.md)
    store = f"sqlite:///{tmp_path / 's.db'}"
    path = _blueprint(
        tmp_path,
        "r = repr(object())\nprint(r)",
        "fixed = 7\nprint(fixed)",
        "system.finish(fixed)",
    )
    rc, _, err = cli("run", str(path), "--input", "x", "--store", store, "--session", "rnd")
    assert rc == 0, err
    rc, out, _ = cli("replay", "rnd", "--store", store, "--json")
    assert rc == 1
    report = json.loads(out)
    assert report["ok"] is False
    first, second, third = report["rounds"]
    assert first["status"] == "mismatch"
    assert first["differences"][0].startswith("stdout: recorded '")
    assert first["differences"][1:] == ["variables: 'r' differs"]
    assert (second["status"], third["status"]) == ("match", "match")
    rc, out, _ = cli("replay", "rnd", "--store", store)
    assert rc == 1
    lines = out.splitlines()
    assert lines[0] == "round 1: mismatch"
    assert lines[1].startswith("    stdout: recorded '")
    assert lines[-1] == "replayed 3 round(s) of rnd: 2 match, 1 mismatch"


@pytest.fixture
def redis_store(redis_url: str) -> Iterator[str]:
    """A Redis store URL with a fresh key prefix (keys expire: nothing is left behind)."""
    prefix = f"codeact-test-{uuid.uuid4().hex[:12]}"
    yield f"{redis_url}?prefix={prefix}&ttl=600"
    import redis

    client: Any = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(match=f"{prefix}*"))
    if keys:
        client.delete(*keys)
    client.close()


def test_run_and_replay_on_redis(redis_store: str) -> None:
    record_demo(redis_store, "demo-redis")
    rc, out, err = cli("replay", "demo-redis", "--store", redis_store, "--json")
    assert rc == 0, err
    report = json.loads(out)
    assert report["ok"] is True
    assert [r["status"] for r in report["rounds"]] == ["match"] * 5
    rc, out, _ = cli("sessions", "show", "demo-redis", "--store", redis_store, "--json")
    assert rc == 0
    assert json.loads(out)["session"]["rounds"] == 5


def test_a_docker_session_replays_in_docker(tmp_path: Path, docker_client: Any) -> None:
    store = f"sqlite:///{tmp_path / 's.db'}"
    path = _blueprint(tmp_path, "v = [n * n for n in range(4)]\nprint(v)", "system.finish(v)")
    rc, out, err = cli("run", str(path), "--input", "x", "--store", store, "--session", "dk", "--sandbox", "docker")
    assert rc == 0, err
    assert out == "[0, 1, 4, 9]\n"
    rc, out, _ = cli("sessions", "show", "dk", "--store", store, "--json")
    assert json.loads(out)["session"]["extra"]["sandbox"]["backend"] == "docker"
    rc, out, err = cli("replay", "dk", "--store", store, "--json")
    assert rc == 0, err
    assert [r["status"] for r in json.loads(out)["rounds"]] == ["match", "match"]
