"""The root of codeact's exception hierarchy.

It lives in ``prompts`` because ``prompts`` is the one package every other package may import
(ARCHITECTURE.md section 2): ``segments`` imports only ``prompts``, and ``sandbox`` and ``toolkits``
never import ``engine``. The whole tree is drawn in ``engine/errors.py``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "EXTRAS",
    "CodeactError",
    "ErrorInfo",
    "MissingExtraError",
    "TemplateError",
    "extra_for_module",
    "require_extra",
]


@dataclass(frozen=True, kw_only=True)
class ErrorInfo:
    """An error as a value: what a run, a flow step, a service call or a queued task reports as failed.

    Its JSON form is the ``{"code", "message", ...}`` object of events (``run.failed``,
    ``flow.step.completed``), records and the service API; ``to_dict`` and ``from_dict`` keep that
    object exactly (key order: ``code``, ``message``, then ``details`` in their order).

    Attributes:
        code: The stable dotted code (``CodeactError.code``: ``run.time_limit``, ``store.unavailable``, ...).
        message: What failed, for a person.
        details: Further JSON members of the object (``retryable``, ``package``, ...), in order.
    """

    code: str
    message: str = ""
    details: Mapping[str, object] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        """``{"code", "message", **details}``: the JSON object events and records carry."""
        return {"code": self.code, "message": self.message, **self.details}

    @classmethod
    def from_dict(cls, data: object) -> ErrorInfo:
        """Read an (untrusted) ``{"code", "message", ...}`` object; a missing or non-string member reads as ``""``.

        A value that is not a mapping reads as an error of code ``""`` whose message is its text.
        """
        if not isinstance(data, Mapping):
            return cls(code="", message="" if data is None else str(data))
        code, message = data.get("code"), data.get("message")
        details = {str(k): v for k, v in data.items() if k not in ("code", "message")}
        return cls(
            code=code if isinstance(code, str) else "" if code is None else str(code),
            message=message if isinstance(message, str) else "" if message is None else str(message),
            details=details,
        )


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

    def info(self) -> ErrorInfo:
        """This error as a value: ``ErrorInfo(code=self.code, message=self.message)``."""
        return ErrorInfo(code=self.code, message=self.message)


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
