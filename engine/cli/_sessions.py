"""``codeact sessions list`` / ``codeact sessions show SESSION``: read recorded sessions from the store."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from engine.errors import StoreError
from engine.store import RoundRecord, SessionMeta, Store, open_store

__all__ = ["register"]

_T = TypeVar("_T")

_STORE_OPTION = typer.Option(
    "--store",
    help="Store URL (sqlite:///PATH or redis://HOST:PORT/DB); default $CODEACT_STORE, else ~/.codeact/sessions.db.",
    show_default=False,
)
_JSON_OPTION = typer.Option("--json", help="Print JSON instead of text.")
_STDOUT_LINES = 20
_VALUE_CHARS = 160


def register(app: typer.Typer) -> None:
    """Register the ``sessions`` command group on ``app``."""
    sessions = typer.Typer(name="sessions", help="List and inspect recorded sessions.", no_args_is_help=True)
    sessions.command("list")(list_sessions)
    sessions.command("show")(show_session)
    app.add_typer(sessions)


def list_sessions(
    store: Annotated[str | None, _STORE_OPTION] = None,
    limit: Annotated[int, typer.Option("--limit", help="Show at most this many sessions.", min=1)] = 50,
    as_json: Annotated[bool, _JSON_OPTION] = False,
) -> None:
    """List sessions, most recently updated first: id, blueprint, model, status, rounds, updated."""

    async def read(opened: Store) -> list[SessionMeta]:
        return await opened.list_sessions(limit=limit)

    metas, url = _with_store(store, read)
    out = Console(soft_wrap=True)
    if as_json:
        out.print_json(json.dumps([meta.to_json() for meta in metas]))
        return
    if not metas:
        out.print(Text(f"no sessions in {url}"))
        return
    columns = ("ID", "BLUEPRINT", "MODEL", "STATUS", "ROUNDS", "UPDATED")
    if not out.is_terminal:
        # Piped or redirected: full values, aligned, never cut to "…" to fit a terminal width.
        rows = [columns] + [
            (m.session_id, m.blueprint_id, m.model, m.status, str(m.rounds), _when(m.updated_at)) for m in metas
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
        for row in rows:
            cells = [
                cell.rjust(w) if columns[i] == "ROUNDS" else cell.ljust(w)
                for i, (cell, w) in enumerate(zip(row, widths, strict=True))
            ]
            typer.echo("  ".join(cells).rstrip())
        return
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in columns:
        table.add_column(column, justify="right" if column == "ROUNDS" else "left", no_wrap=column == "ID")
    for meta in metas:
        table.add_row(
            meta.session_id, meta.blueprint_id, meta.model, meta.status, str(meta.rounds), _when(meta.updated_at)
        )
    out.print(table)


def show_session(
    session: Annotated[str, typer.Argument(help="The session id.", show_default=False)],
    store: Annotated[str | None, _STORE_OPTION] = None,
    as_json: Annotated[bool, _JSON_OPTION] = False,
) -> None:
    """Show a session: its metadata, then each round's code, tool calls, output, error and variables."""

    async def read(opened: Store) -> tuple[SessionMeta | None, list[RoundRecord], dict[str, Any]]:
        meta = await opened.get_session(session)
        if meta is None:
            return None, [], {}
        return meta, await opened.rounds(session), await opened.variables(session)

    (meta, rounds, variables), url = _with_store(store, read)
    if meta is None:
        _fail(f"session {session!r} not found in {url}", exit_code=1)
    out = Console(soft_wrap=True)
    if as_json:
        data = {"session": meta.to_json(), "rounds": [r.to_json() for r in rounds], "variables": variables}
        out.print_json(json.dumps(data, ensure_ascii=False))
        return
    _print_meta(out, meta, url)
    previous: Mapping[str, Any] = {}
    for record in rounds:
        _print_round(out, record, previous)
        previous = record.variables


def _with_store(url: str | None, read: Callable[[Store], Awaitable[_T]]) -> tuple[_T, str]:
    """Open the store, run ``read(store)`` in an event loop, close it; a StoreError is printed and exits."""

    async def main() -> tuple[_T, str]:
        opened = open_store(url)
        async with opened:
            return await read(opened), opened.url

    try:
        return asyncio.run(main())
    except StoreError as exc:
        _fail(exc.message, exit_code=2 if exc.code == "store.invalid_url" else 1)


def _fail(message: str, *, exit_code: int) -> NoReturn:
    Console(stderr=True, soft_wrap=True).print(Text(message, style="red"))
    raise typer.Exit(exit_code)


def _when(timestamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp))


def _short(value: Any, limit: int = _VALUE_CHARS) -> str:
    """``value`` as JSON (strings as they are), cut to ``limit`` characters."""
    text = value if isinstance(value, str) else _json(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _print_meta(out: Console, meta: SessionMeta, url: str) -> None:
    out.print(Text.assemble(("session ", "bold"), (meta.session_id, "bold cyan"), f"  ({url})"))
    rows = [
        ("blueprint", f"{meta.blueprint_id} ({meta.blueprint_hash})"),
        ("model", meta.model),
        ("status", f"{meta.status}, {meta.rounds} round{'s' if meta.rounds != 1 else ''}"),
        ("created", _when(meta.created_at)),
        ("updated", _when(meta.updated_at)),
    ]
    if meta.title:
        rows.append(("title", meta.title))
    if meta.input:
        rows.append(("input", _short(meta.input, 400)))
    if meta.extra:
        rows.append(("extra", _short(meta.extra, 400)))
    for name, value in rows:
        out.print(Text.assemble(f"  {name:<10}", value))


def _print_round(out: Console, record: RoundRecord, previous: Mapping[str, Any]) -> None:
    style = "green" if record.status == "ok" else "red"
    header = Text.assemble(
        "\n",
        (f"round {record.index}", "bold"),
        "  ",
        (record.status, style),
        f"  {record.duration_s:.2f} s",
    )
    if record.timings:
        header.append("  (" + ", ".join(f"{k} {v:.2f} s" for k, v in record.timings.items()) + ")")
    tokens = record.usage.get("total_tokens")
    if tokens is not None:
        header.append(f"  {tokens} tokens")
    out.print(header)
    if record.code is not None:
        out.print(Text("  code:", style="bold"))
        _print_code(out, record.code)
    elif record.parse_error:
        out.print(Text.assemble(("  no code: ", "bold red"), record.parse_error))
    if record.calls:
        out.print(Text("  calls:", style="bold"))
        for call in record.calls:
            out.print(_call_line(call))
    if record.stdout:
        out.print(Text("  stdout:", style="bold"))
        out.print(Text(_indent(_head(record.stdout)), style="dim"))
    if record.error:
        error = record.error
        line = f" (line {error['line']})" if error.get("line") is not None else ""
        summary = f"{error.get('type', 'Error')}: {error.get('message', '')}{line}"
        out.print(Text.assemble(("  error: ", "bold red"), summary))
    if record.control:
        out.print(Text.assemble(("  control: ", "bold"), _short(record.control)))
    changes = _variable_changes(previous, record.variables)
    if changes:
        out.print(Text("  variables:", style="bold"))
        for change in changes:
            out.print(change)
    for item in record.uncaptured:
        out.print(Text(f"    ! {item.get('name')} ({item.get('type')}) not captured: {item.get('reason')}", "yellow"))


def _print_code(out: Console, code: str) -> None:
    if out.is_terminal:
        from rich.padding import Padding
        from rich.syntax import Syntax

        syntax = Syntax(code, "python", theme="ansi_dark", background_color="default", word_wrap=True)
        out.print(Padding(syntax, (0, 0, 0, 4)))
    else:
        out.print(Text(_indent(code.rstrip("\n"))))


def _call_line(call: Mapping[str, Any]) -> Text:
    arguments = call.get("arguments") or {}
    args = ", ".join(f"{name}={_short(_json(value), 60)}" for name, value in arguments.items())
    line = Text(f"    {call.get('toolkit')}.{call.get('operation')}({args}) -> ")
    if call.get("error") is not None:
        error = call["error"]
        message = error.get("message", error) if isinstance(error, Mapping) else error
        line.append(f"error: {_short(message)}", style="red")
    else:
        line.append(_short(_json(call.get("result"))))
    return line


def _variable_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Text]:
    lines = []
    for name in sorted(after):
        if name not in before:
            lines.append(Text(f"    + {name} = {_short(_json(after[name]))}", style="green"))
        elif after[name] != before[name]:
            lines.append(Text(f"    ~ {name} = {_short(_json(after[name]))}", style="yellow"))
    lines.extend(Text(f"    - {name}", style="red") for name in sorted(set(before) - set(after)))
    return lines


def _head(text: str) -> str:
    lines = text.rstrip("\n").splitlines()
    if len(lines) <= _STDOUT_LINES:
        return "\n".join(lines)
    return "\n".join([*lines[:_STDOUT_LINES], f"... ({len(lines) - _STDOUT_LINES} more lines)"])


def _indent(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.splitlines())
