"""The root of codeact's exception hierarchy.

It lives in ``prompts`` because ``prompts`` is the one package every other package may import
(ARCHITECTURE.md section 2): ``segments`` imports only ``prompts``, and ``sandbox`` and ``toolkits``
never import ``engine``. The whole tree is drawn in ``engine/errors.py``.
"""

from __future__ import annotations

import importlib.util

__all__ = ["EXTRAS", "CodeactError", "MissingExtraError", "TemplateError", "extra_for_module", "require_extra"]


class CodeactError(Exception):
    """Base class of every error codeact raises on purpose.

    Args:
        message: What failed, where, and what to do about it.
        code: A stable, dotted machine-readable code (for example ``blueprint.yaml.invalid``).
    """

    code: str = "codeact.error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class TemplateError(CodeactError):
    """A prompt template failed to load or render (a missing variable names the template)."""

    code = "prompt.template"

    def __init__(self, message: str, *, template: str, variable: str | None = None) -> None:
        super().__init__(message)
        self.template = template
        self.variable = variable


# The optional extras (pyproject's optional-dependencies) by the top-level modules they install.
EXTRAS: dict[str, str] = {
    "a2a": "a2a",
    "bm25s": "memory",
    "celery": "queue",
    "langbot_plugin": "langbot",
    "mcp": "mcp",
    "opentelemetry": "otel",
    "smolagents": "bench",
    "starlette": "serve",
    "uvicorn": "serve",
    "xllamacpp": "local",
}


def extra_for_module(name: str | None) -> str | None:
    """The extra that installs module ``name`` (``mcp.server`` -> ``mcp``), None for a module of no extra."""
    return EXTRAS.get((name or "").split(".")[0])


class MissingExtraError(CodeactError):
    """A feature needs an optional extra that is not installed (the CLI prints one line, exit 2).

    Args:
        feature: What needs it (``codeact mcp serve``, ``tracing``).
        extra: The extra to install (``mcp``).
        module: The module that is missing.
    """

    code = "install.extra"

    def __init__(self, feature: str, *, extra: str, module: str) -> None:
        super().__init__(
            f"{feature} needs the {extra!r} extra ({module} is not installed): pip install 'codeact[{extra}]'"
        )
        self.feature = feature
        self.extra = extra
        self.module = module


def require_extra(feature: str, extra: str, *modules: str) -> None:
    """Raise :class:`MissingExtraError` unless every module of ``modules`` (the extra's) can be imported.

    Args:
        feature: What needs them (``codeact a2a serve``), for the message.
        extra: The extra that installs them.
        modules: Top-level module names.
    """
    for module in modules:
        if importlib.util.find_spec(module) is None:
            raise MissingExtraError(feature, extra=extra, module=module)
