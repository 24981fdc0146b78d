"""Render ``instructions.system`` / ``instructions.developer`` as Jinja templates (codeact.agent/v1).

These are user strings, not the product's prompts (those live in ``prompts/``), so they are
rendered in a sandboxed, immutable Jinja environment with ``StrictUndefined``: a template can
read its variables but not reach into Python. Variables come from ``instructions.variables``
plus the built-ins ``now``, ``work_dir`` and ``os``; the blueprint's own variables win.
"""

from __future__ import annotations

import datetime as _dt
import functools
import platform
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import jinja2
from jinja2 import meta
from jinja2.sandbox import ImmutableSandboxedEnvironment

from codeact.engine.errors import TemplateError

__all__ = ["BUILTIN_VARIABLES", "RenderedInstructions", "builtin_variables", "render_template"]

BUILTIN_VARIABLES = ("now", "os", "work_dir")


@dataclass(frozen=True, kw_only=True)
class RenderedInstructions:
    """The instruction texts after rendering (None when the blueprint has none)."""

    system: str | None = None
    developer: str | None = None


@functools.cache
def _environment() -> ImmutableSandboxedEnvironment:
    return ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)


def builtin_variables(*, now: _dt.datetime | None = None, work_dir: str | Path | None = None) -> dict[str, object]:
    """The built-in template variables: ``now`` (aware datetime), ``work_dir`` (str), ``os`` (e.g. ``Linux``)."""
    return {
        "now": now if now is not None else _dt.datetime.now().astimezone(),
        "work_dir": str(work_dir if work_dir is not None else Path.cwd()),
        "os": platform.system() or "unknown",
    }


def render_template(field: str, text: str, variables: Mapping[str, object]) -> str:
    """Render one instruction template.

    Args:
        field: The blueprint field the text came from (``instructions.system``), used in messages.
        text: The template source.
        variables: Everything the template may use.

    Raises:
        TemplateError: ``template`` is ``field``; ``variable`` names the undefined variable, or
            is None for a syntax or sandbox error.
    """
    env = _environment()
    try:
        parsed = env.parse(text)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(
            f"{field} is not a valid template: {exc.message} (line {exc.lineno}). Fix the Jinja syntax.",
            template=field,
        ) from None
    missing = sorted(meta.find_undeclared_variables(parsed) - set(variables))
    if missing:
        raise _undefined(field, missing[0])
    try:
        return env.from_string(parsed).render(dict(variables))
    except jinja2.UndefinedError as exc:
        raise TemplateError(
            f"{field} uses an undefined value: {exc.message}. Define it under instructions.variables.",
            template=field,
            variable=None,
        ) from None
    except Exception as exc:  # any failure inside a user template (sandbox refusal, ZeroDivisionError, ...)
        reason = str(exc).rstrip(".") or type(exc).__name__
        raise TemplateError(f"{field} failed to render: {reason}. Fix the template.", template=field) from None


def _undefined(field: str, name: str) -> TemplateError:
    return TemplateError(
        f"{field} uses undefined variable {name!r}; define it under instructions.variables "
        f"(built-ins: {', '.join(BUILTIN_VARIABLES)}).",
        template=field,
        variable=name,
    )
