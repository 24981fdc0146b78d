"""Bounded call records: big arguments/results and extra calls are digested and noted, never dropped or stored whole."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from codeact.engine.store import open_store
from codeact.toolkits import CallRecord, RecordCaps, ToolkitError, cap_calls

REPO = Path(__file__).resolve().parents[3]
DEVOPS = f"{REPO / 'examples' / 'devops' / 'toolkit.py'}:DevOps"
CODEACT = str(Path(sys.executable).with_name("codeact"))

ABUSE = """
big = "x" * (5 * 1024 * 1024)
try:
    devops.get_project_info(project_id=big)
except Exception as exc:
    print("big:", type(exc).__name__)
ok = 0
for n in range(10_000):
    info = devops.get_project_info(project_id="P-123")
    ok += info["id"] == "P-123"
print("calls:", ok)
"""


def _call(sequence: int, **fields: object) -> CallRecord:
    values: dict[str, object] = {
        "sequence": sequence,
        "session_id": "s",
        "toolkit": "t",
        "operation": "op",
        "arguments": {"n": sequence},
        "result": {"ok": True},
    }
    values.update(fields)
    return CallRecord(**values)  # type: ignore[arg-type]


def test_parts_over_the_cap_keep_their_size_and_digest() -> None:
    big = "y" * 2000
    [small, capped, failed] = cap_calls(
        [_call(0), _call(1, arguments={"text": big}), _call(2, result=None, error={"code": -1, "message": big})],
        RecordCaps(argument_bytes=1000, result_bytes=1000, calls=10),
    )
    assert small == _call(0) and small.capped is None and "capped" not in small.to_json()
    text = json.dumps({"text": big}, separators=(",", ":"), sort_keys=True)
    stub = {"bytes": len(text), "sha256": hashlib.sha256(text.encode()).hexdigest()}
    assert capped.arguments == {"$capped": stub} and capped.result == {"ok": True}
    assert capped.capped == {"arguments": stub, "reason": f"over the per-call record cap (arguments {len(text)} bytes)"}
    assert failed.error is not None and failed.error["$capped"]["bytes"] > 1000
    assert len(failed.error["message"]) == 1000 and failed.error["code"] == -1
    assert CallRecord.from_json(capped.to_json()) == capped


def test_calls_over_the_count_are_folded_into_one_noted_record() -> None:
    calls = [_call(n, error={"code": 1, "message": "no"} if n == 7 else None) for n in range(10)]
    out = cap_calls(calls, RecordCaps(calls=4))
    assert out[:4] == calls[:4]
    [summary] = out[4:]
    assert (summary.sequence, summary.toolkit, summary.arguments, summary.result) == (4, "", {}, None)
    assert summary.capped is not None
    assert summary.capped["reason"] == "6 call(s) over the per-round cap of 4 recorded calls"
    assert (summary.capped["calls"], summary.capped["operations"], summary.capped["errors"]) == (6, {"t.op": 6}, 1)
    assert len(summary.capped["sha256"]) == 64


def test_caps_come_from_the_environment() -> None:
    caps = RecordCaps.from_env({"CODEACT_RECORD_CALLS": "5", "CODEACT_RECORD_RESULT_BYTES": "100"})
    assert caps == RecordCaps(calls=5, result_bytes=100)
    with pytest.raises(ToolkitError, match="CODEACT_RECORD_CALLS='many' is not a whole number"):
        RecordCaps.from_env({"CODEACT_RECORD_CALLS": "many"})


def test_the_bridge_abuse_round_is_recorded_bounded_and_replay_says_why_not(tmp_path: Path) -> None:
    script = tmp_path / "abuse.py"
    script.write_text(ABUSE)
    store = f"sqlite:///{tmp_path / 'sessions.db'}"
    env = {**os.environ, "CODEACT_HOME": str(tmp_path / "home")}
    env.pop("CODEACT_STORE", None)
    done = subprocess.run(
        [CODEACT, "exec", str(script), "--toolkit", DEVOPS, "--session", "abuse", "--store", store, "--timeout", "120"],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "calls: 10000" in done.stdout

    with sqlite3.connect(tmp_path / "sessions.db") as conn:
        (size,) = conn.execute("SELECT length(record) FROM rounds WHERE session_id = 'abuse'").fetchone()
    assert size < 512 * 1024, size  # was 54 MB: every call's arguments and results stored whole

    async def read() -> tuple[CallRecord, ...]:
        async with open_store(store) as opened:
            record = await opened.round("abuse", 1)
            assert record is not None
            return tuple(CallRecord.from_json(c) for c in record.calls)

    calls = asyncio.run(read())
    assert len(calls) == 1001
    assert calls[0].capped is not None and calls[0].arguments["$capped"]["bytes"] > 5 * 1024 * 1024
    assert calls[-1].capped is not None and calls[-1].capped["calls"] == 10_001 - 1000
    assert calls[-1].capped["operations"] == {"devops.get_project_info": 9001}

    done = subprocess.run(
        [CODEACT, "replay", "abuse", "--store", store, "--toolkit", DEVOPS],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[:2] == [
        "round 1: skipped",
        "    not replayable: the result of devops.get_project_info (call #0) was not recorded in full (over the "
        f"per-call record cap (arguments {calls[0].arguments['$capped']['bytes']} bytes)); replay with --live to "
        "call the tools",
    ]
    assert "Traceback" not in done.stderr
