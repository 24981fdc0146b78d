"""``codeact memory list|show|delete|approve|import|export|prune``: curate stored memories and experiences.

Memories live beside the sessions (the same ``--store``). ``import`` reads JSON lines (or a JSON
list) as ``export`` writes them; ``--approved`` marks imported experiences reviewed, which
blueprints with ``session.memory.config.experience.requireApproval: true`` need before retrieving them.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

if TYPE_CHECKING:
    from codeact.engine.memory import MemoryManager

from codeact.engine.errors import CodeactError

__all__ = ["register"]

_T = TypeVar("_T")

_STORE_OPTION = typer.Option(
    "--store",
    help="Store URL (sqlite:///PATH or redis://HOST:PORT/DB); default $CODEACT_STORE, else ~/.codeact/sessions.db.",
    show_default=False,
)
_JSON_OPTION = typer.Option("--json", help="Print JSON instead of text.")
_KINDS = ("entity", "history", "experience")


def register(app: typer.Typer) -> None:
    """Register the ``memory`` command group on ``app``."""
    memory = typer.Typer(name="memory", help="Curate stored memories and experiences.", no_args_is_help=True)
    memory.command("list")(list_memory)
    memory.command("show")(show_memory)
    memory.command("delete")(delete_memory)
    memory.command("approve")(approve_memory)
    memory.command("import")(import_memory)
    memory.command("export")(export_memory)
    memory.command("prune")(prune_memory)
    app.add_typer(memory)


def _with_manager(store: str | None, action: Callable[[MemoryManager], Awaitable[_T]]) -> _T:
    from codeact.engine.memory import MemoryManager, memory_backend
    from codeact.engine.store import open_store

    async def main() -> _T:
        opened = open_store(store)
        backend = memory_backend(opened)
        try:
            return await action(MemoryManager(backend))
        finally:
            await backend.close()
            await opened.close()

    try:
        return asyncio.run(main())
    except CodeactError as exc:
        typer.echo(f"error: {exc.message if hasattr(exc, 'message') else exc}", err=True)
        raise typer.Exit(1) from None


def _check_kind(kind: str | None) -> Any:
    if kind is not None and kind not in _KINDS:
        typer.echo(f"error: --kind must be one of {', '.join(_KINDS)}, got {kind!r}", err=True)
        raise typer.Exit(2)
    return kind


def _when(at: float) -> str:
    return _dt.datetime.fromtimestamp(at, _dt.UTC).strftime("%Y-%m-%d %H:%M")


def _one_line(text: str, limit: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def list_memory(
    kind: Annotated[str | None, typer.Option("--kind", help="entity, history or experience.")] = None,
    scope: Annotated[str | None, typer.Option("--scope", help="A session id, user:U, agent:ID or project.")] = None,
    store: Annotated[str | None, _STORE_OPTION] = None,
    as_json: Annotated[bool, _JSON_OPTION] = False,
) -> None:
    """List memories, newest first: id, kind, scope, created, approved, title."""
    chosen = _check_kind(kind)
    items = _with_manager(store, lambda m: m.list(chosen, scope))
    if as_json:
        typer.echo(json.dumps([item.to_json() for item in items], ensure_ascii=False, indent=1))
        return
    if not items:
        typer.echo("no memories")
        return
    for item in items:
        mark = "approved" if item.approved else "-"
        typer.echo(
            f"{item.id}  {item.kind:<10}  {item.scope}  {_when(item.created_at)}  {mark}  {_one_line(item.title)}"
        )


def show_memory(
    item_id: Annotated[str, typer.Argument(help="The memory id (from `codeact memory list`).", show_default=False)],
    store: Annotated[str | None, _STORE_OPTION] = None,
    as_json: Annotated[bool, _JSON_OPTION] = False,
) -> None:
    """Show one memory record whole."""
    item = _with_manager(store, lambda m: m.find(item_id))
    if item is None:
        typer.echo(f"error: no memory {item_id!r}: see `codeact memory list`", err=True)
        raise typer.Exit(1)
    fields = {k: v for k, v in item.data.items() if k != "_embedding"}
    data = {**item.to_json(), "data": fields}
    if as_json:
        typer.echo(json.dumps(data, ensure_ascii=False, indent=1))
        return
    typer.echo(f"{item.kind} {item.id} ({item.scope}), created {_when(item.created_at)}, used {_when(item.used_at)}")
    typer.echo(f"approved: {'yes' if item.approved else 'no'}")
    typer.echo(f"title: {item.title}")
    for key, value in fields.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        typer.echo(f"{key}: {text}")


def delete_memory(
    item_ids: Annotated[list[str], typer.Argument(help="Memory ids.", show_default=False)],
    store: Annotated[str | None, _STORE_OPTION] = None,
) -> None:
    """Delete memories by id (exit 1 when one does not exist)."""

    async def run(manager: MemoryManager) -> list[str]:
        return [item_id for item_id in item_ids if not await manager.delete(item_id)]

    missing = _with_manager(store, run)
    typer.echo(f"deleted {len(item_ids) - len(missing)} memory record(s)")
    if missing:
        typer.echo(f"error: no memory {', '.join(missing)}: see `codeact memory list`", err=True)
        raise typer.Exit(1)


def approve_memory(
    item_ids: Annotated[list[str], typer.Argument(help="Memory ids.", show_default=False)],
    revoke: Annotated[bool, typer.Option("--revoke", help="Withdraw the approval instead.")] = False,
    store: Annotated[str | None, _STORE_OPTION] = None,
) -> None:
    """Mark experiences reviewed (retrieved by blueprints that require approval)."""

    async def run(manager: MemoryManager) -> None:
        for item_id in item_ids:
            await manager.approve(item_id, not revoke)

    _with_manager(store, run)
    typer.echo(f"{'revoked' if revoke else 'approved'} {len(item_ids)} memory record(s)")


def export_memory(
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file (default: stdout).")] = None,
    kind: Annotated[str | None, typer.Option("--kind", help="entity, history or experience.")] = None,
    scope: Annotated[str | None, typer.Option("--scope", help="Only this scope.")] = None,
    store: Annotated[str | None, _STORE_OPTION] = None,
) -> None:
    """Export memories as JSON lines (one record a line; `codeact memory import` reads them back)."""
    chosen = _check_kind(kind)
    items = _with_manager(store, lambda m: m.list(chosen, scope))
    text = "".join(item.dumps() + "\n" for item in items)
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")
        typer.echo(f"exported {len(items)} memory record(s) to {output}", err=True)


def import_memory(
    source: Annotated[Path, typer.Argument(help="A file of JSON lines (or a JSON list); - for stdin.")],
    approved: Annotated[
        bool | None,
        typer.Option("--approved/--unapproved", help="Mark every imported record approved (or not)."),
    ] = None,
    store: Annotated[str | None, _STORE_OPTION] = None,
) -> None:
    """Import memories written by `codeact memory export` (records with the same id are replaced)."""
    try:
        text = sys.stdin.read() if str(source) == "-" else source.read_text(encoding="utf-8")
    except OSError as exc:
        typer.echo(f"error: cannot read {source}: {exc.strerror or exc}", err=True)
        raise typer.Exit(2) from None
    records: list[Any]
    try:
        stripped = text.strip()
        if stripped.startswith("["):
            records = json.loads(stripped)
        else:
            records = [json.loads(line) for line in stripped.splitlines() if line.strip()]
    except ValueError as exc:
        typer.echo(f"error: {source} is not JSON lines nor a JSON list: {exc}", err=True)
        raise typer.Exit(2) from None
    if not all(isinstance(record, dict) for record in records):
        typer.echo(f"error: {source}: every record must be a JSON object", err=True)
        raise typer.Exit(2)
    count = _with_manager(store, lambda m: m.import_items(records, approved=approved))
    typer.echo(f"imported {count} memory record(s)")


def prune_memory(
    kind: Annotated[str | None, typer.Option("--kind", help="entity, history or experience.")] = None,
    max_age_days: Annotated[
        float | None, typer.Option("--max-age-days", help="Drop records older than this (every kind).", min=0.001)
    ] = None,
    max_count: Annotated[
        int | None, typer.Option("--max-count", help="Keep at most this many records per scope.", min=1)
    ] = None,
    store: Annotated[str | None, _STORE_OPTION] = None,
) -> None:
    """Apply limits in every scope (default: the blueprint defaults of docs/memory.md); prints how many went."""
    from codeact.engine.memory import MemoryConfig, MemoryManager

    chosen = _check_kind(kind)
    limits: dict[str, Any] = {}
    if max_age_days is not None:
        limits["max_age_days"] = max_age_days
    if max_count is not None:
        limits["max_count"] = max_count
    config = MemoryConfig(
        enabled=True,
        entities=MemoryConfig().entities.model_copy(update=limits),
        history=MemoryConfig().history.model_copy(update=limits),
        experience=MemoryConfig().experience.model_copy(update=limits),
    )

    async def run(manager: MemoryManager) -> int:
        return int(await MemoryManager(manager.backend, config).prune(chosen))

    dropped = _with_manager(store, run)
    typer.echo(f"pruned {dropped} memory record(s)")
