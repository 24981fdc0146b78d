"""Where the run-scoped API's state and storage live: the session store's key-values, one namespace per owner.

``codeact serve`` keeps both in its session store (``--store``: the SQLite file or Redis), so they outlive
the run that wrote them and the server process: the binding's next run, after a restart too, reads them
back. A namespace belongs to an owner that the run's context identifies:

==========================  ==============================================================================
state scope / storage area  owner (``runner`` is the run's runner id)
==========================  ==============================================================================
state ``conversation``      the runner in this conversation (workspace, bot, conversation id and thread:
                            the identity that picks the run's session, ``conversation_of``)
state ``binding``           the same runner and conversation, a namespace of its own
state ``actor``             the runner and ``actor.actor_type`` + ``actor.actor_id``
state ``subject``           the runner and ``subject.subject_type`` + ``subject.subject_id``
state ``runner``            the runner
storage ``plugin``          the runner
storage ``workspace``       everyone (one area shared by every runner of the store)
storage ``binding``         the runner in this conversation
==========================  ==============================================================================

A scope or area whose owner the run's context does not identify (no conversation id, no actor id, no
subject id) is refused with ``invalid_argument`` naming the missing field: it is never mapped to some
other owner. A namespace is ``state.<scope>.<hash>`` / ``storage.<area>.<hash>``, the hash (SHA-256) of
the owner's identifiers, so identifiers of any characters make safe store keys and never run together.

State values are JSON (at most ``MAX_STATE_BYTES`` of compact UTF-8 each); storage values are bytes
(base64 on the wire). Nothing is pickled.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

from codeact.engine.errors import StoreError
from codeact.engine.store import MAX_KEY_CHARS, KeyValues, check_key

if TYPE_CHECKING:
    from codeact.engine.runner import RunnerAPIError, RunnerContext
    from codeact.prompts.jsontypes import JsonValue

__all__ = [
    "MAX_STATE_BYTES",
    "checked_key",
    "decode_state",
    "encode_state",
    "seed_state",
    "state_namespace",
    "state_snapshot",
    "storage_namespace",
]

MAX_STATE_BYTES = 64 * 1024
"""The largest state value (compact JSON)."""


def _error(code: str, message: str, **details: str) -> RunnerAPIError:
    from codeact.engine.runner import AgentAPIError, RunnerAPIError

    return RunnerAPIError(AgentAPIError(code=code, message=message, details=details))


def _namespace(kind: str, name: str, *parts: str) -> str:
    digest = hashlib.sha256(json.dumps([kind, name, *parts], ensure_ascii=False).encode()).hexdigest()[:32]
    return f"{kind}.{name}.{digest}"


def _conversation(kind: str, name: str, context: RunnerContext | None) -> tuple[str, str, str, str]:
    from codeact.engine.runner import conversation_of

    found = conversation_of(context) if context is not None else None
    if found is None:
        raise _error(
            "invalid_argument",
            f"{kind} {name!r} belongs to the runner in a conversation, and this run has none: start the run "
            "with context.conversation.conversation_id set (the conversation's id on its platform)",
            **{"scope" if kind == "state scope" else "area": name, "missing": "conversation.conversation_id"},
        )
    return found


def state_namespace(scope: str, *, runner_id: str, context: RunnerContext | None) -> str:
    """The namespace of the state ``scope`` of a run of ``runner_id`` on ``context`` (see the module's table).

    Raises:
        RunnerAPIError: ``invalid_argument``: an unknown scope, or one whose owner the context does not name.
    """
    if scope in ("conversation", "binding"):
        return _namespace("state", scope, runner_id, *_conversation("state scope", scope, context))
    if scope == "runner":
        return _namespace("state", scope, runner_id)
    if scope in ("actor", "subject"):
        who = getattr(context, scope, None) if context is not None else None
        kind = getattr(who, f"{scope}_type", None) or ""
        ident = getattr(who, f"{scope}_id", None)
        if not ident:
            raise _error(
                "invalid_argument",
                f"state scope {scope!r} belongs to the runner and the run's {scope}, and this run's context has "
                f"no {scope}.{scope}_id: start the run with context.{scope}.{scope}_id set, or use scope 'runner' "
                "or 'conversation'",
                scope=scope,
                missing=f"{scope}.{scope}_id",
            )
        return _namespace("state", scope, runner_id, kind, str(ident))
    raise _error(
        "invalid_argument",
        f"unknown state scope {scope!r}; use conversation, actor, subject, runner or binding",
        scope=scope,
    )


def storage_namespace(area: str, *, runner_id: str, context: RunnerContext | None) -> str:
    """The namespace of the storage ``area`` of a run of ``runner_id`` on ``context`` (see the module's table).

    Raises:
        RunnerAPIError: ``invalid_argument``: an unknown area, or ``binding`` for a run without a conversation.
    """
    if area == "plugin":
        return _namespace("storage", area, runner_id)
    if area == "workspace":
        return "storage.workspace"
    if area == "binding":
        return _namespace("storage", area, runner_id, *_conversation("storage area", area, context))
    raise _error("invalid_argument", f"unknown storage area {area!r}; use plugin, workspace or binding", area=area)


def checked_key(key: object, *, field: str = "key") -> str:
    """``key`` if the store can keep it (a non-empty string of at most 256 characters of valid Unicode).

    Raises:
        RunnerAPIError: ``invalid_argument`` naming ``field``.
    """
    try:
        return check_key(key)
    except StoreError:
        raise _error(
            "invalid_argument", f"{field} must be a non-empty string of at most {MAX_KEY_CHARS} characters"
        ) from None


def encode_state(value: object) -> bytes:
    """``value`` as compact JSON bytes.

    Raises:
        RunnerAPIError: ``payload_too_large`` beyond ``MAX_STATE_BYTES``; ``invalid_argument`` for a value
            JSON cannot carry.
    """
    try:
        data = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise _error("invalid_argument", f"a state value must be JSON: {exc}") from None
    if len(data) > MAX_STATE_BYTES:
        raise _error(
            "payload_too_large", f"a state value is at most {MAX_STATE_BYTES} bytes of JSON; this one is {len(data)}"
        )
    return data


def decode_state(key: str, data: bytes | None) -> JsonValue:
    """The stored JSON value of ``key`` (None when unset).

    Raises:
        RunnerAPIError: ``runtime_error`` when the stored value is not JSON.
    """
    if data is None:
        return None
    try:
        value: JsonValue = json.loads(data)
    except ValueError:
        raise _error(
            "runtime_error", f"the stored state value of {key!r} is unreadable (not JSON); set it again"
        ) from None
    return value


def state_snapshot(*, runner_id: str, context: RunnerContext) -> list[tuple[str, str, bytes]]:
    """The writes of the context's ``state`` snapshot: ``(namespace, key, JSON bytes)`` for each value it names.

    Every scope, key and value is checked here, before anything is written (``seed_state`` writes them).

    Raises:
        RunnerAPIError: a scope whose owner the context does not name, a bad key, a value too large.
    """
    writes: list[tuple[str, str, bytes]] = []
    for scope, values in context.state.model_dump(mode="json").items():
        if not values:
            continue
        namespace = state_namespace(scope, runner_id=runner_id, context=context)
        for key, value in values.items():
            writes.append((namespace, checked_key(key, field=f"each key of state.{scope}"), encode_state(value)))
    return writes


async def seed_state(store: KeyValues, writes: list[tuple[str, str, bytes]]) -> None:
    """Write a snapshot (``state_snapshot``) into the store: each value replaces the stored one."""
    for namespace, key, data in writes:
        await store.kv_set(namespace, key, data)
