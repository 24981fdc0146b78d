"""The run-scoped API proxy, both directions: codeact under a host, and codeact as the host."""

from __future__ import annotations

import time

import pytest

from codeact.engine.errors import CodeactError
from codeact.engine.runner import RunnerAPIError, RunnerContext
from codeact.engine.runner.proxy import AuthorizationRegistry, RunAPIProxy
from tests.runner.conftest import MakeRunner, code, collect, context, types
from tests.runner.host import ScriptedHost

WEATHER = {
    "tool_name": "weather",
    "description": "Current weather of a city.",
    "operations": ["call"],
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "The city."}},
        "required": ["city"],
    },
}


def hosted(
    *, models: list[dict[str, object]] | None = None, deadline_in: float = 60.0, **extra: object
) -> RunnerContext:
    resources = {
        "models": models if models is not None else [{"model_id": "m-1", "operations": ["invoke", "stream"]}],
        "tools": [WEATHER],
        "knowledge_bases": [{"kb_id": "kb-faq", "kb_name": "FAQ", "operations": ["retrieve"]}],
        "storage": {"plugin_storage": False},
    }
    return context("Weather in Paris?", run_id="h-1", deadline_in=deadline_in, resources=resources, **extra)


async def test_under_a_host_the_run_uses_its_model_and_its_tools(make_runner: MakeRunner) -> None:
    runner = make_runner([])  # the blueprint's own model is never called
    host = ScriptedHost(
        [
            code('w = await host.weather(city="Paris")\nprint(w)', "I ask the platform's weather tool."),
            code('faq = await knowledge.retrieve(kb_id="kb-faq", query="returns", top_k=1)\nprint(faq)'),
            code("system.finish(f\"{w['temp']} degrees\")"),
        ],
        tools={"weather": lambda city: {"city": city, "temp": 21}},
    )
    results = await collect(runner, hosted(), run_id="h-1", host=host)
    assert results[-1].type == "run.completed", results[-1].data
    assert [r.data["message"]["content"] for r in results if r.type == "message.completed"][-1] == "21 degrees"
    assert [a for a, _, _ in host.calls] == [
        "invoke_llm_stream",
        "call_tool",
        "invoke_llm_stream",
        "retrieve_knowledge_base",
        "invoke_llm_stream",
    ]
    assert all(payload["run_id"] == "h-1" for _, payload, _ in host.calls)
    first_prompt = "\n".join(str(m["content"]) for m in host.calls[0][1]["messages"])
    assert "def weather(" in first_prompt and "city: str" in first_prompt  # a stub from its JSON schema
    assert "def retrieve(" in first_prompt and "'kb-faq' (FAQ)" in first_prompt
    searched = [r.data for r in results if r.type == "tool.call.completed" and r.data["tool_name"] != "python"][1]
    assert searched["tool_name"] == "knowledge.retrieve"
    assert searched["result"] == {"value": [{"content": "kb-faq: returns within 30 days", "score": 0.9}]}
    started = [r.data for r in results if r.type == "tool.call.started" and r.data["tool_name"] != "python"]
    assert started[0]["tool_name"] == "host.weather" and started[0]["parameters"] == {"city": "Paris"}
    assert "message.delta" in types(results)
    assert results[-1].usage is not None and results[-1].usage.prompt_tokens == 33


async def test_a_model_the_run_was_not_given_is_refused_before_the_host_is_called(make_runner: MakeRunner) -> None:
    runner = make_runner([])
    host = ScriptedHost([code('system.finish("never")')])
    results = await collect(runner, hosted(config={"model": "m-9"}), run_id="h-1", host=host)
    assert results[-1].type == "run.failed"
    assert "Model 'm-9' is not authorized. Allowed models: ['m-1']" in results[-1].data["error"]
    assert host.calls == []


async def test_invoke_only_models_are_not_streamed_and_stream_is_refused() -> None:
    ctx = hosted(models=[{"model_id": "m-1", "operations": ["invoke"]}])
    host = ScriptedHost(["x = 1"])
    proxy = RunAPIProxy(ctx, host)
    with pytest.raises(RunnerAPIError) as info:
        async for _ in proxy.stream_llm("m-1", [{"role": "user", "content": "hi"}]):
            pass
    assert info.value.code == "unauthorized"
    assert info.value.message.startswith("model 'm-1' is not authorized for operation 'stream'")
    with pytest.raises(RunnerAPIError, match=r"^Plugin storage is not authorized\.$"):
        await proxy.storage_get("plugin", "k")
    with pytest.raises(RunnerAPIError, match="Tool 'shell' is not authorized"):
        await proxy.call_tool("shell", {})
    assert host.calls == []
    reply = await proxy.invoke_llm("m-1", [{"role": "user", "content": "hi"}])
    assert reply["message"]["content"] == "x = 1"


async def test_timeouts_are_capped_by_the_deadline_and_an_expired_one_calls_nothing() -> None:
    host = ScriptedHost(["a", "b"])
    proxy = RunAPIProxy(hosted(deadline_in=5.0), host)
    await proxy.invoke_llm("m-1", [{"role": "user", "content": "hi"}], timeout=120)
    (_, payload, timeout) = host.calls[0]
    assert 0 < timeout <= 5.0 and payload["timeout"] == timeout
    late = RunAPIProxy(hosted(deadline_in=-1.0), host)
    with pytest.raises(RunnerAPIError) as info:
        await late.invoke_llm("m-1", [{"role": "user", "content": "hi"}])
    assert (info.value.code, info.value.retryable) == ("deadline_exceeded", True)
    assert len(host.calls) == 1


def test_codeact_as_host_checks_each_call_in_the_seeds_order() -> None:
    registry = AuthorizationRegistry()
    ctx = hosted()
    auth = registry.register(ctx, runner_id="shop-runner")
    ctx.resources.models.append(ctx.resources.models[0].model_copy(update={"model_id": "m-late"}))
    assert "m-late" not in auth.operations["model"]  # a frozen deep copy

    def code_of(action: str, payload: dict[str, object], caller: str = "shop-runner") -> str:
        try:
            registry.check(action, payload, caller=caller)
        except CodeactError as exc:
            return f"{exc.code}: {exc.message}"
        return "ok"

    good = {"run_id": "h-1", "llm_model_uuid": "m-1", "messages": []}
    assert code_of("invoke_llm", good) == "ok"
    assert code_of("invoke_llm", {**good, "run_id": "h-2"}).startswith("not_found")
    # the run is checked before the caller, the caller before the resource
    assert code_of("invoke_llm", {**good, "run_id": "h-2"}, caller="other").startswith("not_found")
    assert code_of("invoke_llm", {**good, "llm_model_uuid": "m-9"}, caller="other").startswith("unauthorized: run")
    assert code_of("invoke_llm", {**good, "llm_model_uuid": "m-late"}) == (
        "unauthorized: Model 'm-late' is not authorized. Allowed models: ['m-1']"
    )
    assert code_of("call_tool", {"run_id": "h-1", "tool_name": "weather", "parameters": {}}) == "ok"
    assert code_of("get_tool_detail", {"run_id": "h-1", "tool_name": "weather"}).startswith(
        "unauthorized: tool 'weather' is not authorized for operation 'detail'"
    )
    assert code_of("get_plugin_storage", {"run_id": "h-1", "key": "k"}) == (
        "unauthorized: Plugin storage is not authorized."
    )
    assert code_of("invoke_llm", {**good, "messages": ["x" * (5 * 1024 * 1024)]}).startswith("payload_too_large")
    assert code_of("state_get", {"run_id": "h-1", "scope": "actor", "key": "k"}).startswith("unauthorized: state")
    registry.unregister("h-1")
    assert code_of("invoke_llm", good).startswith("not_found")
    expired = hosted(deadline_in=-1.0)
    registry.register(expired, runner_id="shop-runner")
    assert code_of("invoke_llm", good) == "deadline_exceeded: Agent run deadline has expired"
    assert time.time() > 0


async def test_rerank_kb_list_and_platform_actions_go_through_the_proxy_with_the_seeds_checks() -> None:
    models = [{"model_id": "m-1", "operations": ["invoke"]}, {"model_id": "rr-1", "operations": ["rerank"]}]
    ctx = context(
        "Which refund rule applies?",
        run_id="h-1",
        resources={
            "models": models,
            "knowledge_bases": [
                {"kb_id": "kb-faq", "kb_name": "FAQ", "operations": ["list", "retrieve"]},
                {"kb_id": "kb-internal", "operations": ["retrieve"]},
            ],
            "platform_capabilities": {"actions": ["pin_message"]},
        },
    )
    registry = AuthorizationRegistry()
    registry.register(ctx, runner_id="shop-runner")
    host = ScriptedHost([], registry=registry, caller="shop-runner")
    proxy = RunAPIProxy(ctx, host)

    ranked = await proxy.rerank("rr-1", "refund policy", ["shipping times", "our refund policy", "refund"], top_k=2)
    assert [r["index"] for r in ranked] == [1, 2]
    assert proxy.list_knowledge_bases() == [{"uuid": "kb-faq", "name": "FAQ", "type": None}]
    done = await proxy.request_action("pin_message", target={"message_id": "msg-9"}, payload={"silent": True})
    assert done == {"accepted": True, "action": "pin_message", "target": {"message_id": "msg-9"}}
    assert [(a, p["run_id"]) for a, p, _ in host.calls] == [("invoke_rerank", "h-1"), ("call_platform_api", "h-1")]

    refused = []
    for call in (
        proxy.rerank("m-1", "q", ["d"]),  # an invoke-only model
        proxy.request_action("delete_chat", target="chat-42"),  # not granted
        proxy.storage_list("binding"),
        proxy.history_page(),  # the host offered no context APIs
    ):
        with pytest.raises(RunnerAPIError) as info:
            await call
        refused.append(info.value.code)
    assert refused == ["unauthorized"] * 4
    assert len(host.calls) == 2  # refused before they left

    late = RunAPIProxy(context("Late", run_id="h-1", deadline_in=-1.0, resources={"models": models}), host)
    with pytest.raises(RunnerAPIError) as expired:
        await late.rerank("rr-1", "q", ["d"])
    assert expired.value.code == "deadline_exceeded" and len(host.calls) == 2


def test_the_host_rate_limits_each_run_and_remembers_runs_that_ended_at_their_deadline() -> None:
    from codeact.engine.runner.proxy import RateLimit

    registry = AuthorizationRegistry(rate=RateLimit.parse("3/3600"))
    registry.register(hosted(), runner_id="r")
    registry.register(hosted(deadline_in=60.0).model_copy(update={"run_id": "h-2"}), runner_id="r")
    good = {"run_id": "h-1", "llm_model_uuid": "m-1", "messages": []}
    for _ in range(3):
        registry.check("invoke_llm", good, caller="r")
    with pytest.raises(RunnerAPIError) as limited:
        registry.check("invoke_llm", good, caller="r")
    assert limited.value.code == "rate_limited" and limited.value.retryable
    registry.check("invoke_llm", {**good, "run_id": "h-2"}, caller="r")  # a bucket per run
    with pytest.raises(RunnerAPIError) as first:  # a refusal before the rate check takes no call
        registry.check("invoke_llm", {**good, "llm_model_uuid": "m-9"}, caller="r")
    assert first.value.code == "unauthorized"
    with pytest.raises(ValueError):
        RateLimit.parse("0/60")

    past = AuthorizationRegistry()
    past.register(hosted(deadline_in=-0.5).model_copy(update={"run_id": "h-3"}), runner_id="r")
    past.unregister("h-3")
    for caller, expected in (("r", "deadline_exceeded"), ("other", "not_found")):
        with pytest.raises(RunnerAPIError) as ended:
            past.check("invoke_llm", {**good, "run_id": "h-3"}, caller=caller)
        assert ended.value.code == expected


async def test_the_code_lists_the_knowledge_bases_and_the_manifest_claims_only_that(make_runner: MakeRunner) -> None:
    runner = make_runner([])
    host = ScriptedHost(
        [
            code("bases = await knowledge.list()\nprint(bases)", "Which knowledge bases may I use?"),
            code("system.finish(', '.join(b['name'] for b in bases))"),
        ]
    )
    bases = [
        {"kb_id": "kb-faq", "kb_name": "FAQ", "operations": ["list", "retrieve"]},
        {"kb_id": "kb-internal", "kb_name": "Internal", "operations": ["retrieve"]},
    ]
    ctx = context(
        "Which knowledge bases?", run_id="h-1", resources={"models": [{"model_id": "m-1"}], "knowledge_bases": bases}
    )
    results = await collect(runner, ctx, run_id="h-1", host=host)
    assert results[-1].type == "run.completed", results[-1].data
    assert [r.data["message"]["content"] for r in results if r.type == "message.completed"][-1] == "FAQ"
    assert [a for a, _, _ in host.calls] == ["invoke_llm_stream", "invoke_llm_stream"]  # the list is local
    manifest = runner.manifest
    assert manifest.permissions.knowledge_bases == ["list", "retrieve"]
    policy = manifest.metadata["context_policy"]
    assert policy["supports_history_pull"] is False and policy["supports_artifact_pull"] is False


def test_host_tool_names_become_identifiers_and_odd_schemas_still_give_a_stub() -> None:
    from codeact.engine.runner.entities import ToolResource
    from codeact.engine.runner.proxy import HostTools
    from codeact.toolkits import ToolkitRegistry, render_stubs

    tools = [
        ToolResource(tool_name="web-search", description="Search the web.", parameters={"type": "string"}),
        ToolResource(tool_name="class", operations=["call"]),
        ToolResource(tool_name="secret", operations=["detail"]),  # not callable: left out
    ]
    toolkit = HostTools(RunAPIProxy(hosted(), ScriptedHost([])), tools)
    assert [op.name for op in toolkit.operations()] == ["web_search", "tool_class"]
    registry = ToolkitRegistry()
    registry.register(toolkit)
    stubs = render_stubs(registry)
    assert "def web_search(" in stubs and "def tool_class(" in stubs and "secret" not in stubs
