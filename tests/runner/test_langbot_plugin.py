"""The LangBot plugin (``codeact[langbot]``): written by ``write_plugin``, discovered and run by the SDK's
own plugin runtime (in-process, over an in-memory connection), against a host that checks every
run-scoped call with codeact's ``AuthorizationRegistry``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from langbot_plugin.api.definition.components.runner.runner import Runner as SdkRunner
from langbot_plugin.api.entities.builtin.runner import RunnerManifest as SdkManifest
from langbot_plugin.api.entities.builtin.runner import RunnerResult as SdkResult
from langbot_plugin.cli.run.controller import PluginRuntimeController
from langbot_plugin.cli.run.handler import PluginRuntimeHandler
from langbot_plugin.entities.io.actions.enums import PluginToRuntimeAction, RuntimeToPluginAction
from langbot_plugin.entities.io.resp import ActionResponse
from langbot_plugin.runtime.io.connection import Connection
from langbot_plugin.runtime.io.handler import Handler
from langbot_plugin.utils.discover.engine import ComponentDiscoveryEngine

from codeact.engine.runner import RunnerAPIError, RunnerContext, RunnerResult
from codeact.engine.runner.langbot import write_plugin
from codeact.engine.runner.proxy import AuthorizationRegistry
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


def test_the_components_permissions_are_the_ones_the_sdk_knows() -> None:
    """The seed's kinds the SDK 0.7 lacks (artifacts, platform_api, binding storage) stay out of the YAML."""
    from codeact.engine.runner.entities import RunnerManifest
    from codeact.engine.runner.langbot import component_manifest

    manifest = RunnerManifest.model_validate(
        {
            "id": "shop-runner",
            "name": "shop-runner",
            "label": {"en_US": "Shop"},
            "permissions": {
                "models": ["invoke"],
                "history": ["page"],
                "artifacts": ["metadata", "read"],
                "storage": ["plugin", "binding"],
                "platform_api": ["message.edit"],
            },
        }
    )
    spec: dict[str, Any] = component_manifest(manifest, runner_name="agent", attr="Agent")["spec"]  # type: ignore[assignment]
    sdk = SdkManifest(
        id="plugin:a/b/agent",
        name="agent",
        label={"en_US": "Shop"},
        usages=spec["usages"],
        capabilities=spec["capabilities"],
        permissions=spec["permissions"],
    )
    assert sdk.permissions.storage == ["plugin"] and sdk.permissions.history == ["page"]


async def test_a_langbot_run_through_the_sdks_plugin_runtime(plugin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's own plugin runtime (controller + handler) loads the plugin and serves RUN_RUNNER; the host
    side answers the run-scoped calls and checks each with codeact's AuthorizationRegistry."""
    monkeypatch.chdir(plugin_dir)
    discovery = ComponentDiscoveryEngine()
    plugin_manifest = discovery.load_component_manifest("manifest.yaml", owner="codeact", no_save=True)
    assert plugin_manifest is not None
    components = discovery.load_blueprint_comp_group(
        plugin_manifest.spec["components"]["Runner"], owner="codeact", no_save=True
    )
    controller = PluginRuntimeController(plugin_manifest, components, stdio=False, ws_debug_url="")
    to_host: asyncio.Queue[str | None] = asyncio.Queue()
    to_plugin: asyncio.Queue[str | None] = asyncio.Queue()
    plugin_side = PluginRuntimeHandler(_Pipe(to_plugin, to_host), controller.initialize)
    controller.handler = plugin_side
    plugin_side.plugin_container = controller.plugin_container
    host_side = _Side(_Pipe(to_host, to_plugin), file_storage_dir=str(plugin_dir / ".files-host"))

    replies = [
        code('w = await host.weather(city="Paris")\nprint(w)', "I ask the platform for the weather."),
        code("system.finish(f\"{w['temp']} degrees in Paris\")"),
    ]
    registry = AuthorizationRegistry()
    caller = "plugin:codeact/shop_runner/agent"
    seen: list[tuple[str, str]] = []

    def refused(action: PluginToRuntimeAction, data: dict[str, Any]) -> ActionResponse | None:
        seen.append((action.value, str(data.get("run_id"))))
        try:
            registry.check(action.value, data, caller=caller)
        except RunnerAPIError as exc:
            return ActionResponse.error(exc.message, {"error": exc.error.model_dump()})
        return None

    @host_side.action(PluginToRuntimeAction.INVOKE_LLM_STREAM)
    async def stream(data: dict[str, Any]) -> AsyncIterator[ActionResponse]:
        error = refused(PluginToRuntimeAction.INVOKE_LLM_STREAM, data)
        if error is not None:
            yield error
            return
        reply = replies.pop(0)
        for i in range(0, len(reply), 16):
            yield ActionResponse.success({"chunk": {"role": "assistant", "content": reply[i : i + 16]}})

    @host_side.action(PluginToRuntimeAction.CALL_TOOL)
    async def call_tool(data: dict[str, Any]) -> ActionResponse:
        error = refused(PluginToRuntimeAction.CALL_TOOL, data)
        if error is not None:
            return error
        return ActionResponse.success({"result": {"city": data["parameters"]["city"], "temp": 19}})

    async def run(ctx: Any) -> list[SdkResult]:
        payload = {"runner_name": "agent", "context": ctx.model_dump(mode="json")}
        stream = host_side.call_action_generator(RuntimeToPluginAction.RUN_RUNNER, payload, 60)
        return [SdkResult.model_validate(item) async for item in stream]

    tasks = [asyncio.create_task(plugin_side.run()), asyncio.create_task(host_side.run())]
    try:
        settings = {"plugin_settings": {"enabled": True, "priority": 0, "plugin_config": {}}}
        await host_side.call_action(RuntimeToPluginAction.INITIALIZE_PLUGIN, settings, 30)
        ctx = sdk_context(
            "Weather in Paris?",
            run_id="lb-1",
            models=[{"model_id": "m-1", "operations": ["invoke", "stream"]}],  # type: ignore[list-item]
            tools=[WEATHER],  # type: ignore[list-item]
        )
        registry.register(RunnerContext.model_validate(ctx.model_dump(mode="json")), runner_id=caller)
        results = await run(ctx)
        unknown = await run(sdk_context("Again?", run_id="lb-2", models=[{"model_id": "m-1"}]))  # type: ignore[list-item]
    finally:
        for container in controller.plugin_container.components:
            if isinstance(container.component_instance, SdkRunner):
                await container.component_instance.aclose()  # type: ignore[attr-defined]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    assert results[-1].type == "run.completed", results[-1].data
    assert [r.sequence for r in results] == list(range(1, len(results) + 1))
    answers = [r.data["message"]["content"] for r in results if r.type == "message.completed"]
    assert answers == ["19 degrees in Paris"]  # show_work is off for a chat: only the answer
    assert seen == [
        ("invoke_llm_stream", "lb-1"),
        ("call_tool", "lb-1"),
        ("invoke_llm_stream", "lb-1"),
        ("invoke_llm_stream", "lb-2"),  # refused by the host: that run was never registered
    ]
    for result in results:
        sdk_check(RunnerResult.model_validate(result.model_dump(mode="json")))
    assert unknown[-1].type == "run.failed" and "no active run 'lb-2'" in unknown[-1].data["error"]
