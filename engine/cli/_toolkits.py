"""CLI commands of this module (filled in by its issue)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Register this module's commands on ``app``."""
    del app
