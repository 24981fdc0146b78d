"""The command-line options several commands share, declared once (typer ``Annotated`` aliases).

``run``, ``serve``, ``worker``, ``replay``, ``eval``, ``mcp serve`` and ``exec`` take these with the same
name, type and help (each command's own options stay in its module). A new host option is one alias here
and one field of :class:`~codeact.engine.agent.BuildOptions`, mapped in each command's one helper.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from codeact.toolkits import CallBudgets, ToolkitRegistry

__all__ = [
    "AllowSandboxDeclaration",
    "Artifacts",
    "BaseUrl",
    "Isolation",
    "MaxRoundBytes",
    "MaxRoundCalls",
    "MaxRoundSeconds",
    "MaxRunBytes",
    "MaxRunCalls",
    "StoreUrl",
    "Toolkits",
    "Usage",
    "call_budgets",
    "load_toolkits",
]

Toolkits = Annotated[list[str] | None, typer.Option("--toolkit", help="MODULE:OBJECT (repeatable).")]
StoreUrl = Annotated[str | None, typer.Option("--store", help="Store URL (sqlite:///path, redis://...).")]
BaseUrl = Annotated[str | None, typer.Option("--base-url", help="Base URL of the model server.")]
AllowSandboxDeclaration = Annotated[
    bool, typer.Option("--allow-sandbox-declaration", help="Accept the blueprint's sandbox block.")
]
Artifacts = Annotated[
    Path | None, typer.Option("--artifacts", help="Write the files the code put in outputs/ to this folder.")
]
Isolation = Annotated[str, typer.Option("--isolation", help="bwrap (default) or process (weaker).")]
MaxRoundSeconds = Annotated[
    float | None,
    typer.Option(
        "--max-round-seconds",
        help="The most seconds of code per round a blueprint may ask for (default 600).",
        min=0.001,
    ),
]
# The host's caps on toolkit calls and bridge bytes (toolkits.CallBudgets); a blueprint's
# workflow.codeact.budgets may ask for less, never more.
MaxRoundCalls = Annotated[
    int | None,
    typer.Option("--max-round-calls", help="The most toolkit calls per round a blueprint may ask for (20000).", min=1),
]
MaxRunCalls = Annotated[
    int | None,
    typer.Option("--max-run-calls", help="The most toolkit calls per run a blueprint may ask for (200000).", min=1),
]
MaxRoundBytes = Annotated[
    int | None,
    typer.Option("--max-round-bytes", help="The most bridge bytes per round a blueprint may ask for (256 MiB).", min=1),
]
MaxRunBytes = Annotated[
    int | None,
    typer.Option("--max-run-bytes", help="The most bridge bytes per run a blueprint may ask for (2 GiB).", min=1),
]


def call_budgets(
    *, round_calls: int | None, run_calls: int | None, round_bytes: int | None, run_bytes: int | None
) -> CallBudgets | None:
    """The host's caps the ``--max-round-calls``/``--max-run-calls``/``--max-*-bytes`` flags set (None: none set).

    A flag left out keeps its default cap (``toolkits.DEFAULT_BUDGETS``).
    """
    given = {
        name: value
        for name, value in (
            ("round_calls", round_calls),
            ("run_calls", run_calls),
            ("round_bytes", round_bytes),
            ("run_bytes", run_bytes),
        )
        if value is not None
    }
    if not given:
        return None
    from codeact.toolkits import CallBudgets

    return CallBudgets(**given)


class Usage(Exception):
    """A usage or configuration error of a command: printed (and as JSON on stdout under ``--json``), exit 2."""

    def __init__(self, message: str, code: str = "cli.usage") -> None:
        super().__init__(message)
        self.code = code


def load_toolkits(refs: list[str]) -> tuple[ToolkitRegistry, tuple[str, ...]]:
    """The host's registry with the ``--toolkit`` references, and the names those references loaded.

    Raises:
        Usage: A reference cannot be loaded (``--toolkit: ...``).
    """
    from codeact.toolkits import ToolkitError, load_registry, load_toolkit_ref

    try:
        registry = load_registry()
        names = tuple(registry.register(load_toolkit_ref(ref), replace=True).name for ref in refs)
    except ToolkitError as exc:
        raise Usage(f"--toolkit: {exc}", exc.code) from None
    return registry, names
