"""The ``platform_api`` toolkit: the model's code asks the host for a platform action (seed 003 section 6.6).

A runner whose manifest declares platform actions (``permissions.platform_api``, from the blueprint's
``extensions.runner.permissions``) gives each codeact run this toolkit::

    platform_api.request_action(action="message.edit", target={"message_id": "m-1"}, payload={"text": "Done."})

The call is checked on the host side of the bridge, where the code cannot reach:

1. ``action`` is one the manifest declares (else the code gets an error naming the declared ones);
2. ``target`` and ``payload`` are JSON objects (string keys; strings, numbers, booleans, None, lists and
   objects, at most 8 levels deep), at most 16 KiB together as compact JSON;
3. the run has requested fewer than :data:`MAX_ACTIONS_PER_RUN` (20) actions so far (a loop of requests
   must not flood the user's chat; the round's call budget is for cheap calls). The count is the whole
   run's: a direct run's approval waits in place (the same toolkit goes on counting), and a queued run
   continued after an approval, or taken over from a lost worker, starts from the requests its stream
   already holds (:func:`actions_requested`); a new run (the next message, a question's answer) starts at 0;

then it returns ``{"requested": True, "action", "target", "payload"}`` to the code, and the run's
``tool.call.completed`` is followed by the protocol's ``action.requested`` result with ``{action, target,
payload}`` (:func:`requested_action`, used by the result mapper). A queued run's continuation that makes
the same request as the round that paused (before the pause) is answered from that round's record
(``engine.calls.FromRecord``): its ``tool.call.completed`` carries ``from_record``, and it is neither
reported nor counted again. Nothing else goes into it: no context, no
credential, nothing of the host's. Protocol v1 defines only how a runner asks: whether the host performs
the action is its own decision (its platform's capabilities, the binding's policy, an approval).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from codeact.engine.runner.entities import ActionRequestedPayload
from codeact.toolkits import DynamicToolkit, OperationSpec, ToolkitContext

__all__ = [
    "MAX_ACTIONS_PER_RUN",
    "MAX_REQUEST_BYTES",
    "PLATFORM_TOOLKIT",
    "PlatformActions",
    "actions_requested",
    "requested_action",
]

PLATFORM_TOOLKIT: Final = "platform_api"
"""The toolkit's name in the sandbox (the manifest's permission kind; ``platform`` is a standard module)."""
MAX_REQUEST_BYTES: Final = 16 * 1024
"""The largest ``target`` and ``payload`` of one request, together, as compact JSON."""
# Each request is a platform action the host may perform (a message edited, a reaction added): the round's
# call budget (20,000 calls) is for cheap calls, not for that many actions on a user's chat.
MAX_ACTIONS_PER_RUN: Final = 20
"""The most platform actions one run may request (all its attempts together)."""

_OPERATION: Final = "request_action"
_MAX_DEPTH: Final = 8
_MAX_KEY_CHARS: Final = 256


def _plain(value: object, where: str, depth: int = 0) -> None:
    """Check that ``value`` is plain JSON (what a host can take), naming where it is not."""
    if depth > _MAX_DEPTH:
        raise ValueError(f"{where} nests deeper than {_MAX_DEPTH} levels")
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} is {value!r}: JSON has no such number")
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            _plain(item, f"{where}[{index}]", depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str) or len(key) > _MAX_KEY_CHARS:
                raise ValueError(
                    f"{where} has the key {key!r}: keys are strings of at most {_MAX_KEY_CHARS} characters"
                )
            _plain(item, f"{where}[{key!r}]", depth + 1)
        return
    raise ValueError(
        f"{where} is a {type(value).__name__}: send JSON values only (str, int, float, bool, None, list, dict)"
    )


def _object(value: object, name: str) -> dict[str, object] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(
            f"{name} must be a dict (a JSON object such as {{'message_id': '...'}}) or None, not {type(value).__name__}"
        )
    _plain(value, name, 1)
    return value


class PlatformActions(DynamicToolkit):
    """``platform_api.request_action(action, target=None, payload=None)`` for the actions a manifest declares.

    Args:
        actions: The declared actions (``permissions.platform_api``); at least one.
        requested: The actions the run requested before this toolkit was built (an earlier attempt of it).
    """

    name = PLATFORM_TOOLKIT
    description = "Ask the platform this agent runs on to act (edit a message, react, ...)"

    def __init__(self, actions: Sequence[str], *, requested: int = 0) -> None:
        if not actions:
            raise ValueError("a platform_api toolkit needs at least one declared action")
        self.actions = tuple(dict.fromkeys(actions))
        self.requested = max(0, requested)  # one toolkit per run attempt (the runner builds it): the run's count
        listed = ", ".join(repr(a) for a in self.actions)
        self._spec = OperationSpec.from_json_schema(
            _OPERATION,
            description=(
                f"Ask the platform to perform an action. Actions: {listed}. The host decides whether and when "
                "it is done; the call returns the request as sent."
            ),
            schema={
                "type": "object",
                "properties": {
                    "action": {"type": "string", "description": f"The action, one of {listed}."},
                    "target": {
                        "type": "object",
                        "description": "What it acts on, e.g. {'message_id': '...'}.",
                    },
                    "payload": {"type": "object", "description": "Its parameters, e.g. {'text': '...'}."},
                },
                "required": ["action"],
            },
            returns="dict",
            returns_description='{"requested": True, "action", "target", "payload"}.',
        )

    def operations(self) -> list[OperationSpec]:
        """``request_action``."""
        return [self._spec]

    async def execute(self, operation: str, params: dict[str, object], context: ToolkitContext) -> object:
        """Check the request (declared action, plain JSON, size) and return it as requested."""
        action = params.get("action")
        if not isinstance(action, str) or action not in self.actions:
            raise PermissionError(
                f"platform action {action!r} is not declared by this runner; it may request "
                f"{', '.join(repr(a) for a in self.actions)} (its manifest's permissions.platform_api)"
            )
        target = _object(params.get("target"), "target")
        payload = _object(params.get("payload"), "payload")
        size = len(json.dumps([target, payload], separators=(",", ":"), ensure_ascii=False).encode())
        if size > MAX_REQUEST_BYTES:
            raise ValueError(
                f"the request's target and payload are {size} bytes as JSON; at most {MAX_REQUEST_BYTES} are sent"
            )
        if self.requested >= MAX_ACTIONS_PER_RUN:
            raise PermissionError(
                f"this run has requested {MAX_ACTIONS_PER_RUN} platform actions, the most one run may; "
                "do what is left in the answer, or in the next run"
            )
        self.requested += 1
        return {"requested": True, "action": action, "target": target, "payload": payload}


def requested_action(toolkit: str, operation: str, result: object) -> ActionRequestedPayload | None:
    """The ``action.requested`` payload of a completed ``platform_api.request_action`` call, else None.

    ``result`` is the call's plain result (what :class:`PlatformActions` returned after its checks).
    """
    if toolkit != PLATFORM_TOOLKIT or operation != _OPERATION or not isinstance(result, dict):
        return None
    if result.get("requested") is not True:
        return None
    try:
        return ActionRequestedPayload.model_validate(
            {"action": result.get("action"), "target": result.get("target"), "payload": result.get("payload")}
        )
    except ValueError:
        return None


def actions_requested(events: Iterable[Mapping[str, Any]]) -> int:
    """How many platform actions a run's engine events (as JSON: a queued run's stream) show requested.

    Counted as the result mapper counts ``action.requested`` results: each ``platform_api.request_action``
    call that completed without error (:func:`requested_action`) and was not answered from an interrupted
    round's record (``from_record``: the round that made it counted it).
    """
    from codeact.sandbox.runtime.codec import plain

    count = 0
    for event in events:
        if event.get("type") != "tool.call.completed" or event.get("error") is not None or event.get("from_record"):
            continue  # a call answered from an interrupted round's record was counted when that round made it
        toolkit, operation = event.get("toolkit"), event.get("operation")
        if toolkit == PLATFORM_TOOLKIT and operation == _OPERATION:
            count += requested_action(toolkit, operation, plain(event.get("result"))) is not None
    return count
