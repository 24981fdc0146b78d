"""Conformance with the real SDK (``langbot-plugin`` 0.7): manifest, context and every result type."""

from __future__ import annotations

from langbot_plugin.api.entities.builtin.runner import RunnerManifest as SdkManifest

from codeact.engine.events import ArtifactCreated
from codeact.engine.runner import Interactions, ResultMapper, RunnerContext, RunnerResult
from tests.runner.conftest import MakeRunner, code, collect, context, types
from tests.runner.sdk import sdk_check, sdk_context


async def test_manifest_validates_as_the_sdks(make_runner: MakeRunner) -> None:
    runner = make_runner([])
    sdk = SdkManifest.model_validate(runner.manifest.model_dump(mode="json"))
    assert sdk.id == "shop-runner" and sdk.label == {"en_US": "Shop assistant"}
    assert sdk.capabilities.interactions and sdk.capabilities.interrupt and sdk.capabilities.tool_calling
    assert [f.name for f in sdk.config_schema] == ["shop"]


async def test_an_sdk_context_runs(make_runner: MakeRunner) -> None:
    runner = make_runner([code('system.finish("hi")')])
    ctx = RunnerContext.model_validate(sdk_context().model_dump(mode="json"))
    results = await collect(runner, ctx)
    assert results[-1].type == "run.completed"
    for result in results:
        assert sdk_check(result).run_id == "sdk-run-1"


async def test_every_result_type_validates_as_the_sdks(make_runner: MakeRunner) -> None:
    """A run with toolkit calls, a state update, an approval, a completion; a failure; a timeout."""
    runner = make_runner(
        [
            code('n = await inventory.stock(sku="A-1")\nprint(n)', "I check the stock first."),
            code('order = await orders.place(sku="A-1", qty=n)\nsystem.finish(order["order_id"])'),
        ]
    )
    interactions = Interactions()

    async def approve(result: RunnerResult) -> None:
        if result.type == "action.requested":
            (pending,) = interactions.pending()
            assert pending == result.data["payload"]  # the request as it was sent
            interactions.submit(pending["interaction_id"], {"action_id": "approve"})

    results = await collect(runner, context(), interactions=interactions, on_result=approve)
    seen = set(types(results))
    assert {
        "message.delta",
        "message.completed",
        "tool.call.started",
        "tool.call.completed",
        "state.updated",
        "action.requested",
        "run.completed",
    } <= seen, seen
    asking = make_runner([code('system.ask_user("Which size, M or XL?")')])
    asked = await collect(asking, context(run_id="run-4", conversation="chat-ask"))
    assert asked[-1].data["finish_reason"] == "ask_user"
    failing = make_runner([])  # no replies: the model fails
    failed = await collect(failing, context(run_id="run-2", conversation="chat-fail"))
    expired = await collect(runner, context(run_id="run-3", deadline_in=-1))
    assert failed[-1].type == "run.failed" and expired[-1].data["code"] == "runner.timeout"
    for result in [*results, *asked, *failed, *expired]:
        sdk_check(result)


def test_an_artifact_result_is_accepted_by_the_sdk() -> None:
    """``artifact.created`` (a seed type the SDK has no payload for) travels as an unknown type."""
    event = ArtifactCreated(
        run_id="e",
        sequence=1,
        timestamp=0.0,
        round=1,
        session_id="s",
        name="sales.csv",
        mime="text/csv",
        size=12,
        uri="codeact://sessions/s/rounds/1/artifacts/sales.csv",
    )
    (result,) = ResultMapper("run-9").map(event)
    assert result.data["artifact_id"] == event.uri and result.payload() is not None
    assert sdk_check(result).type == "artifact.created"
