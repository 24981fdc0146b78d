"""What a run context gives a run, whichever path runs it: the user's locale and clock, its variables, its toolkits.

``BlueprintRunner.run`` (in the server) and a queue worker (``codeact serve --queue``: the run context
travels in the queued request) both build a run from these, so a run sees the same prompt and the same
toolkits on either path:

1. :func:`runtime_notes` checks ``runtime.locale`` and ``runtime.timezone`` and returns them for the
   run's Context segment (``Agent.run(context=...)``);
2. :func:`configured_spec` applies the binding's ``config`` over the blueprint's variables and renders
   the instructions again with them;
3. :func:`runtime_toolkits` adds to the run's registry its ``attachments`` (those of the input, and the
   contents held by a URL: ``compose_input``), ``system`` answering in that time zone (when the agent's
   ``system`` is the built-in one) and ``platform_api`` for the actions the runner declares
   (``permissions.platform_api``, from the blueprint's ``extensions.runner.permissions``).

A flow's steps take neither (docs/runner.md, "A flow blueprint is a runner too").
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from codeact.engine.errors import CodeactError
from codeact.engine.runner.attachments import Attachments
from codeact.engine.runner.entities import RunnerContext
from codeact.engine.runner.platform_actions import PLATFORM_TOOLKIT, PlatformActions
from codeact.toolkits import ToolkitRegistry
from codeact.toolkits.builtin.system import SystemToolkit

if TYPE_CHECKING:
    from codeact.engine.blueprint import AgentSpec

__all__ = ["ATTACHMENTS_TOOLKIT", "configured_spec", "runtime_notes", "runtime_toolkits"]

ATTACHMENTS_TOOLKIT = "attachments"
"""The name of every codeact run's toolkit of its input's attachments (none gives an empty one)."""

_LOCALE = re.compile(r"[A-Za-z]{2,8}(?:[_-][A-Za-z0-9]{1,8}){0,4}")
_MAX_ZONE_CHARS = 64


def runtime_notes(context: RunnerContext) -> dict[str, str]:
    """The user's language and clock from the run context, for the model: ``locale`` and ``timezone``.

    Each is there only when the host gave it (``runtime.locale``, ``runtime.timezone``); the runner shows
    them to the model as the run's Context segment, and ``system.get_current_time()`` answers in the time
    zone. Both are checked, as anything a host sends into a prompt is.

    Raises:
        CodeactError: ``context.invalid`` for a locale that is not a language tag (``fr_FR``, ``zh-Hans``)
            or a time zone that is not an IANA name (``Europe/Paris``).
    """
    notes: dict[str, str] = {}
    locale = context.runtime.locale
    if locale is not None:
        if not _LOCALE.fullmatch(locale):
            raise CodeactError(
                f"runtime.locale {locale[:80]!r} is not a language tag: send one like 'fr_FR', 'en-US' or 'zh_Hans', "
                "or leave it out",
                code="context.invalid",
            )
        notes["locale"] = locale
    zone = context.runtime.timezone
    if zone is not None:
        try:
            if len(zone) > _MAX_ZONE_CHARS:
                raise ValueError(zone)
            zoneinfo.ZoneInfo(zone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise CodeactError(
                f"runtime.timezone {zone[:80]!r} is not an IANA time zone: send a name like 'Europe/Paris' or "
                "'Asia/Shanghai', or leave it out",
                code="context.invalid",
            ) from None
        notes["timezone"] = zone
    return notes


def configured_spec(spec: AgentSpec, context: RunnerContext) -> AgentSpec:
    """``spec`` with the binding's ``config`` over the blueprint's variables (protocol v1), else ``spec`` itself.

    Only the variables the blueprint declares are taken, and only scalar values (str, int, float, bool); the
    instructions are rendered again with them, so the prompt's text and its language line agree.

    Raises:
        BlueprintFactoryError: ``blueprint.instructions.template.*`` when the instructions do not render.
    """
    overrides = {
        k: v for k, v in context.config.items() if k in spec.variables and isinstance(v, str | int | float | bool)
    }
    if not overrides:
        return spec
    from codeact.engine.blueprint import render_instructions

    variables = {**spec.variables, **overrides}
    instructions = render_instructions(spec.blueprint, spec.host, variables=variables)
    return replace(spec, variables=variables, instructions=instructions)


def runtime_toolkits(
    registry: ToolkitRegistry,
    context: RunnerContext,
    *,
    attachments: Attachments,
    platform_actions: Sequence[str],
    actions_requested: int = 0,
) -> list[str]:
    """Register the run's toolkits that ``context`` and the runner give; returns the names to grant.

    ``attachments`` is always registered (an input without attachments gives an empty one, so the prompt
    is the same whatever the input holds). ``system`` is replaced by one whose ``get_current_time()``
    answers in ``runtime.timezone`` (when the context names a zone and the registry's ``system`` is the
    built-in one: a host's own is left alone; the zone is checked by :func:`runtime_notes` first).
    ``platform_actions`` (the runner manifest's ``permissions.platform_api``) gives the run a
    ``platform_api`` toolkit of its own: its cap (``MAX_ACTIONS_PER_RUN``) counts the whole run, so a
    run continued after a pause (a queued run's approval) passes the requests it made before as
    ``actions_requested``.

    Args:
        registry: The run's own registry (a copy of the agent's), changed in place.
        context: The run context.
        attachments: The run's attachments toolkit (``compose_input``'s attachments, with the host's reader).
        platform_actions: The platform actions the runner declares; none gives no ``platform_api``.
        actions_requested: The platform actions this run requested before (an earlier attempt of it).
    """
    registry.register(attachments, replace=True)
    granted: list[str] = [ATTACHMENTS_TOOLKIT]
    zone = context.runtime.timezone
    system = registry.get("system")
    if zone is not None and (system is None or isinstance(system.target, SystemToolkit)):
        registry.register(SystemToolkit(timezone=zone), replace=True)  # get_current_time() in the user's zone
    if platform_actions:  # platform_api.request_action(...): each request becomes an action.requested result
        registry.register(PlatformActions(platform_actions, requested=actions_requested), replace=True)
        granted.append(PLATFORM_TOOLKIT)
    return granted
