"""Records and helpers shared by the store tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from codeact.engine.store import RoundRecord, SessionMeta, Store


def make_meta(session_id: str = "s1", **overrides: Any) -> SessionMeta:
    values: dict[str, Any] = {
        "session_id": session_id,
        "blueprint_id": "devops-assistant",
        "blueprint_hash": "sha256:abc",
        "model": "scripted/demo",
        "created_at": 1_700_000_000.0,
        "input": "list the failing deployments",
    }
    values.update(overrides)
    return SessionMeta(**values)


def make_round(index: int, session_id: str = "s1", **overrides: Any) -> RoundRecord:
    values: dict[str, Any] = {
        "session_id": session_id,
        "index": index,
        "started_at": 1_700_000_000.0 + index,
        "duration_s": 0.25,
        "prompt_hash": f"sha256:{index:04d}",
        "segment_ids": (f"seg-{index}-a", f"seg-{index}-b"),
        "reply": f"```python\nx{index} = {index}\n```",
        "code": f"x{index} = {index}",
        "calls": (
            {
                "toolkit": "devops",
                "operation": "get_project_info",
                "arguments": {"project_id": "123"},
                "result": {"name": "billing", "owner": "ana"},
                "started_at": 1.5,
                "duration_s": 0.01,
            },
        ),
        "stdout": f"round {index}\n",
        "variables": {f"x{i}": i for i in range(1, index + 1)},
        "usage": {"total_tokens": 120 * index, "cost": 0.001},
        "timings": {"model": 0.2, "sandbox": 0.04},
    }
    values.update(overrides)
    return RoundRecord(**values)


def make_segments(index: int) -> list[dict[str, Any]]:
    return [
        {"id": f"seg-{index}-a", "kind": "code", "text": f"x{index} = {index}"},
        {"id": f"seg-{index}-b", "kind": "evaluation", "text": f"round {index} ok ✓"},
    ]


async def append(store: Store, index: int, session_id: str = "s1", **overrides: Any) -> RoundRecord:
    record = make_round(index, session_id, **overrides)
    await store.append_round(record, segments=make_segments(index), variables=record.variables)
    return record


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.05)
