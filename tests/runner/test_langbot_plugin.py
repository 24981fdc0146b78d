"""The LangBot plugin (``codeact[langbot]``): written by ``write_plugin``, loaded by the SDK's discovery,
run through the SDK's own ``Runner.invoke`` over the SDK's real connection handler, against a host
that checks every run-scoped call with codeact's ``AuthorizationRegistry``."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from langbot_plugin.api.definition.components.runner.runner import Runner as SdkRunner
from langbot_plugin.api.entities.builtin.runner import RunnerManifest as SdkManifest
from langbot_plugin.api.entities.builtin.runner import RunnerResult as SdkResult
from langbot_plugin.entities.io.actions.enums import PluginToRuntimeAction
from langbot_plugin.entities.io.resp import ActionResponse
from langbot_plugin.runtime.io.connection import Connection
from langbot_plugin.runtime.io.handler import Handler
from langbot_plugin.utils.discover.engine import ComponentDiscoveryEngine

from engine.errors import CodeactError
from engine.runner import RunnerContext
from engine.runner.langbot import write_plugin
from engine.runner.proxy import AuthorizationRegistry
from tests.runner.conftest import BLUEPRINT, code
from tests.runner.sdk import sdk_check, sdk_context

WEATHER = {
    "tool_name": "weather",
    "description": "Current weather of a city.",
    "operations": ["call"],
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


class _Pipe(Connection):
    """One end of an in-memory connection (what stdio/websocket carry between host and plugin)."""

    def __init__(self, inbox: asyncio.Queue[str | None], outbox: asyncio.Queue[str | None]) -> None:
        self.inbox, self.outbox = inbox, outbox

    async def send(self, message: str) -> None:
        await self.outbox.put(message)

    async def receive(self) -> str:
        message = await self.inbox.get()
        if message is None:
            raise ConnectionError("closed")
        return message

    async def close(self) -> None:
        await self.outbox.put(None)


class _Side(Handler):
    name = "test"


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    blueprint = tmp_path / "shop.yaml"
    blueprint.write_text(BLUEPRINT.format(model="scripted/unused.yaml").replace("approval: ask", "approval: auto"))
    monkeypatch.setenv("CODEACT_STORE", f"sqlite:///{tmp_path / 'plugin-sessions.db'}")
    toolkits = ["tests.runner.conftest:Inventory", "tests.runner.conftest:Orders"]
    return write_plugin(tmp_path / "plugin", blueprint, author="codeact", toolkits=toolkits)


def test_the_plugin_is_discovered_by_the_sdk(plugin_dir: Path) -> None:
    engine = ComponentDiscoveryEngine()
    plugin = engine.load_component_manifest(str(plugin_dir / "manifest.yaml"), no_save=True)
    assert plugin is not None and plugin.kind == "Plugin"
    (component,) = engine.load_component_manifests_in_dir(str(plugin_dir / "components" / "runner"), no_save=True)
    spec = component.spec
    # what the SDK's runner service builds for LIST_RUNNERS
    manifest = SdkManifest(
        id=f"plugin:codeact/{plugin.metadata.name}/{component.metadata.name}",
        component_kind=component.kind,
        usages=spec["usages"],
        name=component.metadata.name,
        label=component.metadata.label.to_dict(),
        capabilities=spec["capabilities"],
        permissions=spec["permissions"],
        config_schema=spec["config"],
    )
    assert manifest.capabilities.interactions and [f.name for f in manifest.config_schema] == ["model", "shop"]
    assert yaml.safe_load((plugin_dir / "requirements.txt").read_text()) == "codeact[langbot]"


def _load_component(plugin_dir: Path) -> type[SdkRunner]:
    path = plugin_dir / "components" / "runner" / "agent.py"
    spec = importlib.util.spec_from_file_location("codeact_plugin_agent", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    cls = module.ShopRunnerRunner
    assert issubclass(cls, SdkRunner)
    return cls  # type: ignore[no-any-return]


async def test_a_langbot_run_through_the_sdk_runner_and_its_connection(plugin_dir: Path) -> None:
    cls = _load_component(plugin_dir)
    cls.options = {"isolation": "process"}
    runner = cls()
    replies = [
        code('w = await host.weather(city="Paris")\nprint(w)', "I ask the platform for the weather."),
        code("system.finish(f\"{w['temp']} degrees in Paris\")"),
    ]
    registry = AuthorizationRegistry()
    seen: list[tuple[str, str]] = []
    to_host: asyncio.Queue[str | None] = asyncio.Queue()
    to_plugin: asyncio.Queue[str | None] = asyncio.Queue()
    plugin_side = _Side(_Pipe(to_plugin, to_host), file_storage_dir=str(plugin_dir / ".files-plugin"))
    host_side = _Side(_Pipe(to_host, to_plugin), file_storage_dir=str(plugin_dir / ".files-host"))

    def checked(action: PluginToRuntimeAction, data: dict[str, Any]) -> ActionResponse | None:
        seen.append((action.value, str(data.get("run_id"))))
        try:
            registry.check(action.value, data, caller="plugin:codeact/shop_runner/agent")
        except CodeactError as exc:
            return ActionResponse.error(exc.message, {"error": exc.error.model_dump()})  # type: ignore[attr-defined]
        return None

    @host_side.action(PluginToRuntimeAction.INVOKE_LLM_STREAM)
    async def stream(data: dict[str, Any]) -> AsyncIterator[ActionResponse]:
        refused = checked(PluginToRuntimeAction.INVOKE_LLM_STREAM, data)
        if refused is not None:
            yield refused
            return
        reply = replies.pop(0)
        for i in range(0, len(reply), 16):
            yield ActionResponse.success({"chunk": {"role": "assistant", "content": reply[i : i + 16]}})

    @host_side.action(PluginToRuntimeAction.CALL_TOOL)
    async def call_tool(data: dict[str, Any]) -> ActionResponse:
        refused = checked(PluginToRuntimeAction.CALL_TOOL, data)
        if refused is not None:
            return refused
        return ActionResponse.success({"result": {"city": data["parameters"]["city"], "temp": 19}})

    tasks = [asyncio.create_task(plugin_side.run()), asyncio.create_task(host_side.run())]
    try:
        runner.bind_runtime(plugin_runtime_handler=plugin_side, plugin_identity="codeact/shop_runner")
        ctx = sdk_context(
            "Weather in Paris?",
            run_id="lb-1",
            models=[{"model_id": "m-1", "operations": ["invoke", "stream"]}],  # type: ignore[list-item]
            tools=[WEATHER],  # type: ignore[list-item]
        )
        registry.register(
            RunnerContext.model_validate(ctx.model_dump(mode="json")), runner_id="plugin:codeact/shop_runner/agent"
        )
        results = [r async for r in runner.invoke(ctx)]
        # the same host refuses a run it does not know
        unknown = sdk_context("Again?", run_id="lb-2", models=[{"model_id": "m-1"}])  # type: ignore[list-item]
        refused = [r async for r in runner.invoke(unknown)]
    finally:
        await runner.aclose()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    assert all(isinstance(r, SdkResult) for r in results)
    assert results[-1].type == "run.completed", results[-1].data
    answers = [r.data["message"]["content"] for r in results if r.type == "message.completed"]
    assert answers == ["19 degrees in Paris"]  # show_work is off for a chat: only the answer
    assert seen == [
        ("invoke_llm_stream", "lb-1"),
        ("call_tool", "lb-1"),
        ("invoke_llm_stream", "lb-1"),
        ("invoke_llm_stream", "lb-2"),  # refused by the host: the run was never registered
    ]
    for result in results:
        from engine.runner import RunnerResult

        sdk_check(RunnerResult.model_validate(result.model_dump(mode="json")))
    assert refused[-1].type == "run.failed" and "no active run 'lb-2'" in refused[-1].data["error"]
