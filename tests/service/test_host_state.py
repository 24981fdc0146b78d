"""Which namespace of the store a run-scoped state scope or storage area reaches (engine/service/_host_state.py).

The owner of each namespace is what the run's context identifies; a scope whose owner the context does not
name is refused with the missing field, never mapped to another owner.
"""

from __future__ import annotations

from typing import Any

import pytest

from codeact.engine.runner import RunnerAPIError, RunnerContext
from codeact.engine.service._host_state import state_namespace, storage_namespace


def ctx(**changes: Any) -> RunnerContext:
    body: dict[str, Any] = {
        "run_id": "run-1",
        "trigger": {"type": "message.received"},
        "event": {"event_id": "evt-1", "event_type": "message.received", "source": "test"},
        "conversation": {"conversation_id": "chat-1", "workspace_id": "ws", "bot_id": "bot"},
        "actor": {"actor_type": "user", "actor_id": "u-ana"},
        "subject": {"subject_type": "message", "subject_id": "msg-1"},
        "input": {"text": "hi"},
        "delivery": {"surface": "api"},
    }
    body.update(changes)
    return RunnerContext.model_validate(body)


def state(scope: str, context: RunnerContext, runner_id: str = "svc") -> str:
    return state_namespace(scope, runner_id=runner_id, context=context)


def storage(area: str, context: RunnerContext, runner_id: str = "svc") -> str:
    return storage_namespace(area, runner_id=runner_id, context=context)


def test_each_scope_and_area_has_a_namespace_of_its_own() -> None:
    here = ctx()
    names = [state(s, here) for s in ("conversation", "binding", "actor", "subject", "runner")]
    names += [storage(a, here) for a in ("plugin", "workspace", "binding")]
    assert len(set(names)) == len(names)
    assert [n.split(".")[:2] for n in names] == [
        ["state", "conversation"], ["state", "binding"], ["state", "actor"], ["state", "subject"],
        ["state", "runner"], ["storage", "plugin"], ["storage", "workspace"], ["storage", "binding"],
    ]  # fmt: skip
    assert storage("workspace", here) == "storage.workspace"


@pytest.mark.parametrize(
    ("changes", "differ", "same"),
    [
        pytest.param(
            {"conversation": {"conversation_id": "chat-2", "workspace_id": "ws", "bot_id": "bot"}},
            ["conversation", "binding", "storage:binding"],
            ["actor", "subject", "runner", "storage:plugin"],
            id="another-conversation",
        ),
        pytest.param(
            {"conversation": {"conversation_id": "chat-1", "workspace_id": "ws", "bot_id": "bot", "thread_id": "t"}},
            ["conversation", "binding", "storage:binding"],
            ["actor", "runner"],
            id="another-thread",
        ),
        pytest.param(
            {"conversation": {"conversation_id": "chat-1", "workspace_id": "ws", "bot_id": "other-bot"}},
            ["conversation", "binding", "storage:binding"],
            ["actor", "runner"],
            id="another-bot",
        ),
        pytest.param(
            {"actor": {"actor_type": "user", "actor_id": "u-bob"}},
            ["actor"],
            ["conversation", "subject", "runner", "storage:binding"],
            id="another-actor",
        ),
        pytest.param(
            {"actor": {"actor_type": "system", "actor_id": "u-ana"}},
            ["actor"],
            ["conversation"],
            id="another-actor-type",
        ),
        pytest.param(
            {"subject": {"subject_type": "message", "subject_id": "msg-2"}}, ["subject"], ["actor"], id="subject"
        ),
    ],
)
def test_a_namespace_follows_its_owner_only(changes: dict[str, Any], differ: list[str], same: list[str]) -> None:
    def name(which: str, context: RunnerContext) -> str:
        kind, _, scope = which.rpartition(":")
        return storage(scope, context) if kind == "storage" else state(scope, context)

    here, there = ctx(), ctx(**changes)
    assert [w for w in differ if name(w, here) == name(w, there)] == []
    assert [w for w in same if name(w, here) != name(w, there)] == []


def test_another_runner_has_other_namespaces_but_the_shared_workspace() -> None:
    here = ctx()
    for scope in ("conversation", "binding", "actor", "subject", "runner"):
        assert state(scope, here) != state(scope, here, runner_id="other")
    assert storage("plugin", here) != storage("plugin", here, runner_id="other")
    assert storage("binding", here) != storage("binding", here, runner_id="other")
    assert storage("workspace", here) == storage("workspace", here, runner_id="other")


def test_the_conversation_may_be_named_by_the_context_access_alone() -> None:
    by_access = ctx(conversation=None, context={"conversation_id": "chat-1"})
    assert state("conversation", by_access) == state("conversation", ctx(conversation={"conversation_id": "chat-1"}))


@pytest.mark.parametrize(
    ("which", "changes", "message", "details"),
    [
        pytest.param(
            "conversation",
            {"conversation": None},
            "state scope 'conversation' belongs to the runner in a conversation, and this run has none: start the run "
            "with context.conversation.conversation_id set (the conversation's id on its platform)",
            {"scope": "conversation", "missing": "conversation.conversation_id"},
            id="conversation",
        ),
        pytest.param(
            "storage:binding",
            {"conversation": {"conversation_id": None, "workspace_id": "ws"}},
            "storage area 'binding' belongs to the runner in a conversation, and this run has none: start the run "
            "with context.conversation.conversation_id set (the conversation's id on its platform)",
            {"area": "binding", "missing": "conversation.conversation_id"},
            id="binding-storage",
        ),
        pytest.param(
            "actor",
            {"actor": {"actor_type": "user"}},
            "state scope 'actor' belongs to the runner and the run's actor, and this run's context has no "
            "actor.actor_id: start the run with context.actor.actor_id set, or use scope 'runner' or 'conversation'",
            {"scope": "actor", "missing": "actor.actor_id"},
            id="actor",
        ),
        pytest.param(
            "subject",
            {"subject": None},
            "state scope 'subject' belongs to the runner and the run's subject, and this run's context has no "
            "subject.subject_id: start the run with context.subject.subject_id set, or use scope 'runner' or "
            "'conversation'",
            {"scope": "subject", "missing": "subject.subject_id"},
            id="subject",
        ),
    ],
)
def test_a_scope_whose_owner_the_run_does_not_name_is_refused(
    which: str, changes: dict[str, Any], message: str, details: dict[str, str]
) -> None:
    kind, _, scope = which.rpartition(":")
    with pytest.raises(RunnerAPIError) as info:
        storage(scope, ctx(**changes)) if kind == "storage" else state(scope, ctx(**changes))
    assert (info.value.error.code, info.value.error.message, info.value.error.details) == (
        "invalid_argument",
        message,
        details,
    )
    # the scopes it does name still work
    assert state("runner", ctx(**changes)).startswith("state.runner.")
