from __future__ import annotations

import asyncio
import datetime as dt
from collections import deque
from typing import Any

import pytest

from codeact import prompts
from codeact.sandbox.runtime import codec
from codeact.sandbox.runtime import protocol as p
from codeact.toolkits import ToolkitBridge, ToolkitContext, ToolkitRegistry
from codeact.toolkits.builtin.system import SystemToolkit
from tests.toolkits.sample import DevOps


class ScriptedModel:
    """A queue of replies; remembers the prompts and purposes it was asked with."""

    def __init__(self, *replies: str) -> None:
        self.replies = deque(replies)
        self.prompts: list[tuple[str, str]] = []

    async def complete(self, prompt: str, *, purpose: str = "utility") -> str:
        self.prompts.append((prompt, purpose))
        return self.replies.popleft()


def _bridge(
    model: ScriptedModel | None = None, events: list[tuple[str, dict[str, Any]]] | None = None, **kwargs: Any
) -> ToolkitBridge:
    sink = events.append if events is not None else None
    context = ToolkitContext(
        session_id="s1", model=model, emit=(lambda kind, data: sink((kind, data))) if sink else None
    )
    registry = ToolkitRegistry([SystemToolkit(), DevOps()])
    return ToolkitBridge(registry, grants={"system": "*", "devops": ["get_project_info"]}, context=context, **kwargs)


async def _call(bridge: ToolkitBridge, operation: str, **arguments: Any) -> Any:
    params = {
        "toolkit": "system",
        "operation": operation,
        "arguments": {k: codec.encode(v) for k, v in arguments.items()},
    }
    return await bridge.handle("call", params)


async def _error(bridge: ToolkitBridge, operation: str, **arguments: Any) -> p.RpcError:
    with pytest.raises(p.RpcError) as info:
        await _call(bridge, operation, **arguments)
    return info.value


async def test_send_message_emits_an_express() -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    bridge = _bridge(events=events)
    assert codec.decode(await _call(bridge, "send_message", text="Deploying now")) is None
    assert ("express", {"text": "Deploying now", "session_id": "s1"}) in events
    [record] = bridge.drain_calls()
    assert record.arguments == {"text": codec.encode("Deploying now")}


@pytest.mark.parametrize(
    ("operation", "arguments", "control"),
    [
        pytest.param("finish", {"answer": "done"}, {"kind": "finish", "answer": "done"}, id="finish"),
        pytest.param("finish", {"answer": {"n": 3}}, {"kind": "finish", "answer": {"n": 3}}, id="finish-dict"),
        pytest.param(
            "ask_user", {"question": "Which env?"}, {"kind": "ask_user", "question": "Which env?"}, id="ask-user"
        ),
    ],
)
async def test_control_operations(operation: str, arguments: dict[str, Any], control: dict[str, Any]) -> None:
    result = await _call(_bridge(), operation, **arguments)
    assert set(result) == {"$control"}
    assert {k: (v if k == "kind" else codec.decode(v)) for k, v in result["$control"].items()} == control


async def test_sleep_is_bounded_by_the_call_timeout() -> None:
    bridge = _bridge(default_timeout=0.2)
    slept = codec.decode(await _call(bridge, "sleep", seconds=60))
    assert 0 <= slept < 0.2
    assert codec.decode(await _call(bridge, "sleep", seconds=0)) < 0.2


async def test_sleep_rejects_negative_seconds() -> None:
    err = await _error(_bridge(), "sleep", seconds=-1)
    assert (err.code, err.message) == (p.TOOL_ERROR, "sleep() needs seconds >= 0, got -1.0")


async def test_think_uses_the_thought_model() -> None:
    model = ScriptedModel("Use a canary release.")
    result = await _call(_bridge(model), "think", question="How do I deploy safely?")
    assert codec.decode(result) == "Use a canary release."
    [(prompt, purpose)] = model.prompts
    assert purpose == "thought"
    assert prompt == prompts.render("system_think.j2", question="How do I deploy safely?")
    assert "How do I deploy safely?" in prompt


@pytest.mark.parametrize(
    ("reply", "parsed"),
    [
        pytest.param('[{"name": "Ana", "email": "ana@x.org"}]', [{"name": "Ana", "email": "ana@x.org"}], id="json"),
        pytest.param('```json\n{"a": 1}\n```', {"a": 1}, id="fenced-json"),
        pytest.param("  no structure here ", "no structure here", id="text"),
    ],
)
async def test_parse_uses_the_utility_model(reply: str, parsed: Any) -> None:
    model = ScriptedModel(reply)
    result = await _call(_bridge(model), "parse", data="Ana <ana@x.org>", instruction="a list of {name, email}")
    assert codec.decode(result) == parsed
    [(prompt, purpose)] = model.prompts
    assert purpose == "utility"
    assert prompt == prompts.render("system_parse.j2", data="Ana <ana@x.org>", instruction="a list of {name, email}")


class SlowModel(ScriptedModel):
    """A model that takes ``delay`` seconds per reply, as a local model on a busy CPU does."""

    def __init__(self, delay: float, *replies: str) -> None:
        super().__init__(*replies)
        self.delay = delay

    async def complete(self, prompt: str, *, purpose: str = "utility") -> str:
        await asyncio.sleep(self.delay)
        return await super().complete(prompt, purpose=purpose)


async def test_model_operations_outlast_the_default_call_timeout() -> None:
    """The model client bounds its own calls: think and parse are not cut at the bridge's default."""
    bridge = _bridge(SlowModel(0.6, '{"a": 1}', "slowly reasoned"), default_timeout=0.2)
    assert codec.decode(await _call(bridge, "parse", data="a=1", instruction="a dict")) == {"a": 1}
    assert codec.decode(await _call(bridge, "think", question="Why?")) == "slowly reasoned"
    assert codec.decode(await _call(bridge, "sleep", seconds=0.6)) < 0.2  # other operations keep the default


async def test_parse_serialises_structured_data() -> None:
    model = ScriptedModel("{}")
    await _call(_bridge(model), "parse", data={"rows": [1, 2]}, instruction="sum")
    assert '"rows"' in model.prompts[0][0]


@pytest.mark.parametrize("operation", ["think", "parse"])
async def test_model_operations_without_model_access(operation: str) -> None:
    arguments = {"question": "q"} if operation == "think" else {"data": "d", "instruction": "i"}
    err = await _error(_bridge(None), operation, **arguments)
    assert (err.code, err.message) == (
        p.TOOL_ERROR,
        f"system.{operation}() needs the agent's model, but this host gave the toolkits no model access "
        "(ToolkitContext.model is None)",
    )


async def test_get_current_time() -> None:
    bridge = _bridge()
    utc = dt.datetime.fromisoformat(codec.decode(await _call(bridge, "get_current_time")))
    assert utc.utcoffset() == dt.timedelta(0)
    paris = dt.datetime.fromisoformat(codec.decode(await _call(bridge, "get_current_time", tz="Europe/Paris")))
    assert paris.utcoffset() in (dt.timedelta(hours=1), dt.timedelta(hours=2))
    assert abs((paris - utc).total_seconds()) < 60


def test_get_current_time_defaults_to_the_time_zone_it_was_given() -> None:
    tokyo = dt.datetime.fromisoformat(SystemToolkit(timezone="Asia/Tokyo").get_current_time())
    assert tokyo.utcoffset() == dt.timedelta(hours=9)
    utc = dt.datetime.fromisoformat(SystemToolkit(timezone="Asia/Tokyo").get_current_time(tz="UTC"))
    assert utc.utcoffset() == dt.timedelta(0)
    with pytest.raises(ValueError, match="unknown time zone 'Mars/Olympus'"):
        SystemToolkit(timezone="Mars/Olympus")


@pytest.mark.parametrize("tz", ["Mars/Olympus", "../../etc/passwd"])
async def test_get_current_time_unknown_zone(tz: str) -> None:
    err = await _error(_bridge(), "get_current_time", tz=tz)
    assert (err.code, err.message) == (
        p.TOOL_ERROR,
        f"unknown time zone {tz!r}: use an IANA name such as 'UTC', 'Europe/Paris' or 'Asia/Shanghai'",
    )


async def test_list_skills_shows_this_sessions_grants() -> None:
    skills = codec.decode(await _call(_bridge(), "list_skills"))
    assert skills["devops"] == {
        "description": "DevOps platform: projects, requirements, deployments",
        "operations": {"get_project_info": "Basic info of a project."},
    }
    assert sorted(skills["system"]["operations"]) == [
        "ask_user",
        "entities",
        "finish",
        "get_current_time",
        "list_skills",
        "parse",
        "recall",
        "remember",
        "send_message",
        "sleep",
        "tasks",
        "think",
    ]


def test_templates_render() -> None:
    assert prompts.render("system_think.j2", question="Q?").endswith("Question:\nQ?\n")
    assert "Instruction:\nI\n\nData:\nD\n" in prompts.render("system_parse.j2", data="D", instruction="I")
