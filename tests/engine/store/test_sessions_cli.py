"""``codeact sessions list`` / ``codeact sessions show`` against real stores."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from codeact.engine.cli import app
from codeact.engine.store import SessionMeta, Store, open_store

from ._helpers import make_meta, make_round, make_segments


async def _record(store: Store) -> None:
    await store.create_session(make_meta(title="Deployments"))
    await store.create_session(make_meta("empty", blueprint_id="other", model="ollama/qwen"))
    first = make_round(1)
    await store.append_round(first, segments=make_segments(1), variables=first.variables)
    failing = make_round(
        2,
        code="deploy = await devops.deploy(app='billing')\nprint(deploy['url'])",
        calls=(
            {
                "toolkit": "devops",
                "operation": "deploy",
                "arguments": {"app": "billing"},
                "error": {"code": "tool_error", "message": "cluster is down"},
            },
        ),
        stdout="\n".join(f"line {n}" for n in range(30)),
        error={"type": "ToolError", "message": "cluster is down", "line": 1, "traceback": ""},
        status="error",
        variables={"x1": 1, "plan": ["a", "b"]},
    )
    await store.append_round(failing, segments=make_segments(2), variables=failing.variables)
    third = make_round(3, variables={"plan": ["a"]}, control={"kind": "finish", "answer": "done"})
    await store.append_round(third, segments=[], variables=third.variables)
    await store.update_session("s1", status="completed")


@pytest.fixture
def store_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    url = f"sqlite:///{tmp_path}/sessions.db"
    monkeypatch.setenv("CODEACT_STORE", url)

    async def fill() -> None:
        async with open_store(url) as store:
            await _record(store)

    asyncio.run(fill())
    yield url


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_list_shows_sessions_newest_first(store_url: str) -> None:
    code, out, _ = _run("sessions", "list")
    assert code == 0
    lines = [line.split() for line in out.splitlines()]
    assert lines[0] == ["ID", "BLUEPRINT", "MODEL", "STATUS", "ROUNDS", "UPDATED"]  # LOCK: only when one is held
    assert [row[:5] for row in lines[1:]] == [
        ["s1", "devops-assistant", "scripted/demo", "completed", "3"],
        # "active" without a run holding its lock: its run is gone, so it is repaired to "interrupted"
        ["empty", "other", "ollama/qwen", "interrupted", "0"],
    ]


def test_list_json(store_url: str) -> None:
    code, out, _ = _run("sessions", "list", "--json", "--limit", "1")
    assert code == 0
    [meta] = [SessionMeta.from_json(item) for item in json.loads(out)]
    assert (meta.session_id, meta.status, meta.rounds, meta.title) == ("s1", "completed", 3, "Deployments")


def test_list_of_an_empty_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/none.db"
    assert _run("sessions", "list", "--store", url)[:2] == (0, f"no sessions in {url}\n")


def test_show_prints_rounds_code_calls_output_errors_and_variable_changes(store_url: str) -> None:
    code, out, _ = _run("sessions", "show", "s1")
    assert code == 0
    assert out.startswith(f"session s1  ({store_url})\n  blueprint devops-assistant (sha256:abc)\n")
    assert "  status    completed, 3 rounds\n" in out
    round2 = out[out.index("round 2") : out.index("round 3")]
    assert round2.splitlines() == [
        "round 2  error  0.25 s  (model 0.20 s, sandbox 0.04 s)  240 tokens",
        "  code:",
        "    deploy = await devops.deploy(app='billing')",
        "    print(deploy['url'])",
        "  calls:",
        '    devops.deploy(app="billing") -> error: cluster is down',
        "  stdout:",
        *[f"    line {n}" for n in range(20)],
        "    ... (10 more lines)",
        "  error: ToolError: cluster is down (program line 1)",  # a record without the model's line
        "  variables:",
        '    + plan = ["a", "b"]',
        "",
    ]
    round3 = out[out.index("round 3") :]
    assert '  control: {"kind": "finish", "answer": "done"}\n' in round3
    assert round3.endswith('  variables:\n    ~ plan = ["a"]\n    - x1\n')


def test_show_json_has_meta_rounds_and_variables(store_url: str) -> None:
    code, out, _ = _run("sessions", "show", "s1", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["session"]["session_id"] == "s1"
    assert [r["index"] for r in data["rounds"]] == [1, 2, 3]
    assert data["rounds"][1]["calls"][0]["error"]["message"] == "cluster is down"
    assert data["variables"] == {"plan": ["a"]}


def test_show_unknown_session_exits_1(store_url: str) -> None:
    assert _run("sessions", "show", "ghost") == (1, "", f"session 'ghost' not found in {store_url}\n")


def test_show_on_redis(redis_url: str, redis_prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"{redis_url}?prefix={redis_prefix}"

    async def fill() -> None:
        async with open_store(url) as store:
            await _record(store)

    async def drop() -> None:
        async with open_store(url) as store:
            for session_id in ("s1", "empty"):
                await store.delete_session(session_id)

    asyncio.run(fill())
    try:
        code, out, _ = _run("sessions", "show", "s1", "--store", url)
        assert code == 0 and "round 3" in out
        code, out, _ = _run("sessions", "list", "--store", url)
        assert [line.split()[0] for line in out.splitlines()] == ["ID", "s1", "empty"]
    finally:
        asyncio.run(drop())


@pytest.mark.parametrize(
    ("store", "code", "message"),
    [
        pytest.param(
            "mongodb://x",
            2,
            "unsupported store URL scheme 'mongodb': use sqlite:///PATH or redis://HOST:PORT/DB "
            "(in --store or CODEACT_STORE)\n",
            id="bad-url",
        ),
        pytest.param("redis://127.0.0.1:1/0", 1, "Redis at redis://127.0.0.1:1/0 is unreachable: ", id="no-redis"),
    ],
)
def test_store_errors_are_printed_without_traceback(store: str, code: int, message: str) -> None:
    exit_code, out, err = _run("sessions", "list", "--store", store)
    assert (exit_code, out) == (code, "")
    assert err.startswith(message)
    assert "Traceback" not in err
