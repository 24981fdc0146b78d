"""The ``codeact`` command line (typer + rich).

Each command lives in its own module and registers itself on ``app``; heavy dependencies
(litellm, docker, redis) are imported inside the command functions, never at module level, so
``codeact validate`` does not pay for them.
"""

from __future__ import annotations

import typer

from engine.cli import (
    _a2a,
    _eval,
    _exec,
    _mcp,
    _memory,
    _models,
    _queue,
    _run,
    _sandbox,
    _serve,
    _sessions,
    _toolkits,
    _validate,
)

__all__ = ["app", "main"]

app = typer.Typer(
    name="codeact",
    help="codeact: a code-driven agent engine. The model writes Python; a sandbox runs it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain click help: wraps descriptions instead of cutting option names ("--allow-sandbox-declarat…").
    rich_markup_mode=None,
)

for _module in (
    _validate,
    _run,
    _exec,
    _toolkits,
    _sandbox,
    _sessions,
    _serve,
    _queue,
    _eval,
    _mcp,
    _a2a,
    _memory,
    _models,
):
    _module.register(app)


def main() -> None:
    """Console-script entry point."""
    app()
