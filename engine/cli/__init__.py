"""The ``codeact`` command line (typer + rich).

Each command lives in its own module and registers itself on ``app``; heavy dependencies
(litellm, docker, redis) are imported inside the command functions, never at module level, so
``codeact validate`` does not pay for them.
"""

from __future__ import annotations

import sys
from typing import Annotated, NoReturn

import typer

from codeact.engine.cli import (
    _a2a,
    _eval,
    _exec,
    _knowledge,
    _mcp,
    _memory,
    _models,
    _queue,
    _replay,
    _run,
    _sandbox,
    _serve,
    _sessions,
    _toolkits,
    _validate,
)
from codeact.prompts.errors import MissingExtraError, extra_for_module

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


def _print_version(value: bool) -> None:
    if value:
        from codeact import __version__

        typer.echo(f"codeact {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version of codeact and exit."
        ),
    ] = False,
) -> None:
    """codeact: a code-driven agent engine. The model writes Python; a sandbox runs it."""


for _module in (
    _validate,
    _run,
    _replay,
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
    _knowledge,
    _models,
):
    _module.register(app)


def main() -> None:
    """Console-script entry point.

    A missing optional extra ends here wherever it is noticed (an explicit ``MissingExtraError`` or
    the ``ModuleNotFoundError`` of an extra's module): one line naming the extra to install, exit 2.
    """
    try:
        app()
    except MissingExtraError as exc:
        _missing_extra(exc.message)
    except ModuleNotFoundError as exc:
        extra = extra_for_module(exc.name)
        if extra is None:
            raise
        command = " ".join(["codeact", *(a for a in sys.argv[1:3] if not a.startswith("-"))])
        _missing_extra(str(MissingExtraError(command, extra=extra, module=str(exc.name))))


def _missing_extra(message: str) -> NoReturn:
    sys.stderr.write(f"codeact: {message}\n")
    raise SystemExit(2)
