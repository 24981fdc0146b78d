"""What the ``codeact`` CLI tests share: one command run in-process, its exit code and output."""

from __future__ import annotations

from typer.testing import CliRunner

from codeact.engine.cli import app


def cli(*args: str) -> tuple[int, str, str]:
    """Run ``codeact ARGS`` in-process: ``(exit code, stdout, stderr)``; an unexpected exception is raised."""
    result = CliRunner().invoke(app, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr
