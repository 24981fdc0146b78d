"""The protocol entities: strict where the seed is strict, forward compatible where it is."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from codeact.engine.runner import RunnerContext, RunnerManifest, RunnerResult, session_id_for
from codeact.engine.runner._input import compose_input
from codeact.engine.runner.entities import PAYLOADS, RESULT_TYPES
from tests.runner.conftest import context
from tests.segments._snapshot import check_snapshot

SNAPSHOTS = Path(__file__).parent / "snapshots"


def test_manifest_is_strict() -> None:
    with pytest.raises(ValidationError, match="extra"):
        RunnerManifest.model_validate({"id": "a", "name": "a", "label": {"en_US": "A"}, "owner": "me"})
    with pytest.raises(ValidationError):
        RunnerManifest.model_validate(
            {"id": "a", "name": "a", "label": {}, "capabilities": {"streaming": True, "telepathy": True}}
        )


def test_manifest_permissions_take_the_seeds_kinds_and_name_them_when_refusing_another() -> None:
    from langbot_plugin.api.entities.builtin.runner import RunnerManifest as SdkManifest

    from codeact.engine.runner.entities import RunnerPermissions

    seed = {
        "models": ["invoke", "stream", "rerank"],
        "tools": ["detail", "call"],
        "knowledge_bases": ["list", "retrieve"],
        "history": ["page", "search"],
        "events": ["get", "page"],
        "artifacts": ["metadata", "read"],
        "storage": ["plugin", "workspace", "binding"],
        "platform_api": ["message.edit", "reaction.add"],
    }
    manifest = RunnerManifest.model_validate({"id": "a", "name": "a", "label": {"en_US": "A"}, "permissions": seed})
    assert manifest.permissions.model_dump(mode="json") == {**seed, "interactions": []}
    assert manifest.permissions.declares("platform_api", "message.edit")
    assert not manifest.permissions.declares("artifacts", "write") and not manifest.permissions.declares("x", "y")
    with pytest.raises(ValidationError) as unknown:
        RunnerPermissions.model_validate({"history": ["page"], "telepathy": ["read"], "billing": []})
    assert unknown.value.errors()[0]["msg"] == (
        "Value error, unknown permission kinds 'billing', 'telepathy'; the kinds are models, tools, knowledge_bases, "
        "history, events, artifacts, storage, platform_api, interactions"
    )
    with pytest.raises(ValidationError, match="is not an action name"):
        RunnerPermissions.model_validate({"platform_api": ["edit message"]})
    # empty seed kinds the SDK 0.7 lacks are left out of the JSON: a manifest declaring none validates as the SDK's
    plain = RunnerManifest.model_validate({"id": "a", "name": "a", "label": {"en_US": "A"}})
    assert SdkManifest.model_validate(plain.model_dump(mode="json")).id == "a"


def test_context_requires_the_event_and_ignores_unknown_keys() -> None:
    data = context().model_dump(mode="json")
    del data["event"]
    with pytest.raises(ValidationError) as info:
        RunnerContext.model_validate(data)
    assert info.value.errors()[0]["loc"] == ("event",)
    newer = context().model_dump(mode="json") | {"future_field": {"x": 1}}
    newer["runtime"]["new_clock"] = "tai"
    assert RunnerContext.model_validate(newer).run_id == "run-1"


def test_unknown_result_types_are_accepted_and_known_payloads_are_strict() -> None:
    future = RunnerResult.model_validate({"run_id": "r", "type": "message.reaction", "data": {"emoji": "+1"}})
    assert not future.known and future.payload() is None
    assert RESULT_TYPES >= {
        "message.delta",
        "message.completed",
        "tool.call.started",
        "tool.call.completed",
        "artifact.created",
        "state.updated",
        "action.requested",
        "run.completed",
        "run.failed",
    }
    bad = RunnerResult.model_validate({"run_id": "r", "type": "run.failed", "data": {"error": "x", "extra": 1}})
    with pytest.raises(ValidationError, match="extra"):
        bad.payload()
    with pytest.raises(ValidationError):
        RunnerResult.make("r", "state.updated", {"scope": "galaxy", "key": "k", "value": 1})
    assert set(PAYLOADS) == RESULT_TYPES


def test_run_failed_takes_protocol_codes_only() -> None:
    failed = RunnerResult.run_failed("r", "too late", code="runner.timeout", retryable=True, sequence=3)
    assert failed.data == {"error": "too late", "code": "runner.timeout", "retryable": True}
    assert failed.terminal and failed.sequence == 3
    with pytest.raises(ValueError, match="not a protocol code"):
        RunnerResult.run_failed("r", "x", code="oops")


def test_session_id_is_stable_per_conversation() -> None:
    a, b = context(run_id="r1"), context(run_id="r2")
    assert session_id_for(a) == session_id_for(b)
    assert session_id_for(a).startswith("conv-")
    other = context(run_id="r3", conversation="chat-43")
    assert session_id_for(other) != session_id_for(a)
    alone = context(run_id="r/4 x", conversation=None)
    assert session_id_for(alone) == "run-r_4_x"


def test_input_template_snapshot() -> None:
    ctx = context(
        "Summarise the report",
        input={
            "text": "Summarise the report",
            "attachments": [
                {"name": "report.csv", "mime_type": "text/csv", "size": 12, "content": "YSxiCjEsMgo="},
                {"name": "photo.png", "mime_type": "image/png", "url": "https://example.invalid/p.png"},
            ],
        },
    )
    text, attachments, _parts = compose_input(ctx)
    assert [a.name for a in attachments] == ["report.csv", "photo.png"]
    check_snapshot(SNAPSHOTS, "runner_input.txt", text + "\n")
    event_only = context(
        None,
        event={"event_id": "e", "event_type": "group.member_joined", "source": "platform", "data": {"member": "Ada"}},
    )
    check_snapshot(SNAPSHOTS, "runner_input-event.txt", compose_input(event_only)[0] + "\n")


def test_mapper_numbers_results_filters_work_and_maps_codes() -> None:
    from codeact.engine.events import MessageCompleted, MessageDelta, RunFailed, StateUpdated
    from codeact.engine.runner import ResultMapper

    common = {"run_id": "engine-run", "timestamp": 1.5}
    chat = ResultMapper("r1")
    assert chat.map(MessageDelta(sequence=1, text="x = ", purpose="code", **common)) == []
    (said,) = chat.map(
        MessageCompleted(sequence=2, text="On it.", purpose="express", usage={"prompt_tokens": 5}, **common)
    )
    assert said.sequence == 1 and said.run_id == "r1" and said.data["message"]["content"] == "On it."
    assert chat.map(StateUpdated(sequence=3, round=1, **common)) == []  # nothing changed
    (failed,) = chat.map(RunFailed(sequence=4, error={"code": "store.session_busy", "message": "busy"}, **common))
    assert failed.data == {"error": "[store.session_busy] busy", "code": "runner.session_busy", "retryable": True}
    assert failed.usage is not None and failed.usage.prompt_tokens == 5 and failed.sequence == 2
    console = ResultMapper("r2", show_work=True)
    (delta,) = console.map(MessageDelta(sequence=1, text="x = ", purpose="code", **common))
    assert delta.data["chunk"] == {
        "role": "assistant",
        "content": "x = ",
        "name": None,
        "resp_message_id": "r2-m1",  # <protocol run id>-m<n>: the message this chunk builds
        "all_content": None,
        "is_final": False,
        "msg_sequence": 0,
        "provider_specific_fields": {"purpose": "work"},
    }
    assert said.data["message"]["provider_specific_fields"] == {"purpose": "message"}
    assert said.data["message"]["resp_message_id"] == "r1-m1" and (said.timestamp, said.at) == (1, 1.5)
    assert console.failed("gone", code="").data["code"] == "runner.error"


@pytest.mark.parametrize("instant", [1795950912.9996, 1795950912.9991, 1795950912.0004, 1795950912.5])
def test_at_and_timestamp_name_the_same_second(instant: float) -> None:
    """``at`` is ``timestamp``'s instant to the millisecond: rounding 912.9996 up to 913.0 broke it (CI)."""
    result = RunnerResult.make("r", "run.started", {}, sequence=1, timestamp=instant)
    assert result.at is not None
    assert int(result.at) == result.timestamp == 1795950912
    assert 0 <= instant - result.at < 0.001
