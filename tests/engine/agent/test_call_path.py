"""One toolkit call of a real run never runs the run's own code (``engine/agent/``).

The run's bridge (``engine.calls.call_bridge``) reads what it needs of the run (its events, round, trace
and call journal) through bound methods and attribute getters, so the host side of a call, from the
bridge's handler to the toolkit method and back, stays in ``toolkits/``, ``engine/calls/`` and the leaves
they use. Measured under a profiler on every frame whose await chain runs through the bridge's handler.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType

import pytest

from codeact.toolkits import ToolkitBridge

from .conftest import BASE, MakeAgent, code

AGENT = Path(__file__).resolve().parents[3] / "engine" / "agent"


def _inside(frame: FrameType | None, handle: object) -> bool:
    while frame is not None:
        if frame.f_code is handle:
            return True
        frame = frame.f_back
    return False


async def test_a_run_s_toolkit_call_never_enters_engine_agent(
    make_agent: MakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    handle_code = ToolkitBridge.handle.__code__
    entered: set[str] = set()
    calls = 0
    original = ToolkitBridge.handle

    async def handle(self: ToolkitBridge, method: str, params: dict[str, object]) -> object:
        nonlocal calls
        calls += 1
        return await original(self, method, params)

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and _inside(frame, handle_code):
            entered.add(frame.f_code.co_filename)

    monkeypatch.setattr(ToolkitBridge, "handle", handle)
    built = make_agent(
        BASE,
        [
            code("info = await devops.get_project_info(project_id='123')\nprint(info)"),
            code("system.finish(answer='done')"),
        ],
    )
    sys.setprofile(profile)
    try:
        events = await built.run("look at project 123")
    finally:
        sys.setprofile(None)

    assert calls >= 1
    assert any(e.type == "tool.call.completed" for e in events)
    assert events[-1].type == "run.completed"
    in_agent = sorted(f for f in entered if Path(f).resolve().is_relative_to(AGENT))
    assert in_agent == [], f"a toolkit call ran the run's code: {in_agent}"
    assert any(Path(f).name == "_wrappers.py" for f in entered)
