"""``codeact sessions list|show|unlock|truncate``: read, unlock and repair recorded sessions.

``list`` and ``show`` repair the status of a session whose run is gone (``active`` without a live
lock becomes ``interrupted``, see ``Store.repair_status``) and show who holds a lock and since when.
An entry that does not decode (round record, variable, segment, session metadata) is printed as its
``CorruptRecordError`` message (session, round, field and the ``truncate`` that repairs it), on stderr,
while everything else is still shown; the command then exits 1. Never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer

if TYPE_CHECKING:
    from codeact.engine.flow import FlowNode
from rich.console import Console
from rich.table import Table
from rich.text import Text

from codeact.engine.errors import StoreError
from codeact.engine.events import error_summary, reply_excerpt, without_frame_error
from codeact.engine.store import CorruptRecordError, LockInfo, RoundEntry, RoundRecord, SessionMeta, Store, open_store
from codeact.sandbox.runtime.codec import has_tags, python_repr

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
    sessions.command("unlock")(unlock_session)
    sessions.command("truncate")(truncate_session)
    app.add_typer(sessions)


def list_sessions(
    store: Annotated[str | None, _STORE_OPTION] = None,
    limit: Annotated[int, typer.Option("--limit", help="Show at most this many sessions.", min=1)] = 50,
    as_json: Annotated[bool, _JSON_OPTION] = False,
    check: Annotated[
        bool, typer.Option("--check/--no-check", help="Read each session whole to name unreadable entries.")
    ] = True,
) -> None:
    """List sessions, most recently updated first: id, blueprint, model, status, rounds, updated, lock.

    Each listed session is read whole (rounds, segments, variables) so an unreadable entry is named;
    ``--no-check`` reads the metadata only.
    """

    async def read(opened: Store) -> list[tuple[SessionMeta | None, str, CorruptRecordError | None, LockInfo | None]]:
        rows: list[tuple[SessionMeta | None, str, CorruptRecordError | None, LockInfo | None]] = []
        for item in await opened.scan_sessions(limit=limit):
            if isinstance(item, CorruptRecordError):
                rows.append((None, item.session_id, item, None))
                continue
            if item.status == "active":
                item = await opened.repair_status(item.session_id) or item
            lock = await opened.lock_info(item.session_id) if item.status == "active" else None
            problem = None
            if check:
                try:
                    await opened.check_session(item.session_id)
                except CorruptRecordError as exc:
                    problem = exc
            rows.append((item, item.session_id, problem, lock))
        return rows

    rows, url = _with_store(store, read)
    out = Console(soft_wrap=True)
    problems = [problem for _, _, problem, _ in rows if problem is not None]
    if as_json:
        items = [
            {
                **(meta.to_json() if meta else {"session_id": sid}),
                "lock": lock.to_json() if lock else None,
                **({"problem": p.message} if p else {}),
            }
            for meta, sid, p, lock in rows
        ]
        out.print_json(json.dumps(items, ensure_ascii=False))
    elif not rows:
        out.print(Text(f"no sessions in {url}"))
    else:
        _print_sessions(out, rows)
    _report_problems(problems)


def _print_sessions(
    out: Console, rows: list[tuple[SessionMeta | None, str, CorruptRecordError | None, LockInfo | None]]
) -> None:
    locked = any(lock is not None for *_, lock in rows)  # the LOCK column only when a run holds one
    columns = ("ID", "BLUEPRINT", "MODEL", "STATUS", "ROUNDS", "UPDATED") + (("LOCK",) if locked else ())
    cells: list[tuple[str, ...]] = []
    for meta, sid, problem, lock in rows:
        if meta is None:
            cells.append((sid, "?", "?", "unreadable", "?", "?", *(("-",) if locked else ())))
            continue
        status = f"{meta.status} (unreadable)" if problem is not None else meta.status
        row = (sid, meta.blueprint_id, meta.model, status, str(meta.rounds), _when(meta.updated_at))
        cells.append((*row, *((_lock_text(lock),) if locked else ())))
    if not out.is_terminal:
        # Piped or redirected: full values, aligned, never cut to "…" to fit a terminal width.
        table_rows = [columns, *cells]
        widths = [max(len(r[i]) for r in table_rows) for i in range(len(columns))]
        for r in table_rows:
            typer.echo(
                "  ".join(
                    cell.rjust(w) if columns[i] == "ROUNDS" else cell.ljust(w)
                    for i, (cell, w) in enumerate(zip(r, widths, strict=True))
                ).rstrip()
            )
        return
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in columns:
        table.add_column(column, justify="right" if column == "ROUNDS" else "left", no_wrap=column in ("ID", "LOCK"))
    for r in cells:
        table.add_row(*r)
    out.print(table)


def _lock_text(lock: LockInfo | None) -> str:
    return "-" if lock is None else f"{lock.owner} since {_when(lock.since)}"


def unlock_session(
    session: Annotated[str, typer.Argument(help="The session id.", show_default=False)],
    store: Annotated[str | None, _STORE_OPTION] = None,
) -> None:
    """Force a session's lock free (when its run is gone); a live holder can then no longer record rounds."""

    async def force(opened: Store) -> tuple[SessionMeta | None, LockInfo | None]:
        meta = await opened.get_session(session)
        if meta is None:
            return None, None
        holder = await opened.force_unlock(session)
        return await opened.get_session(session), holder

    (meta, holder), url = _with_store(store, force)
    if meta is None:
        _fail(f"session {session!r} not found in {url}", exit_code=1)
    err = Console(stderr=True, soft_wrap=True)
    if holder is None:
        err.print(Text(f"session {session} was not locked; its status is {meta.status}"))
        return
    err.print(
        Text(
            f"warning: forced the lock of session {session}, held by {holder.owner} since {_when(holder.since)}. "
            "If that run is still alive it is now fenced out: its next round will not be recorded and it fails. "
            f"Session status: {meta.status}.",
            style="yellow",
        )
    )


def show_session(
    session: Annotated[str, typer.Argument(help="The session id.", show_default=False)],
    store: Annotated[str | None, _STORE_OPTION] = None,
    as_json: Annotated[bool, _JSON_OPTION] = False,
    artifacts: Annotated[
        Path | None, typer.Option("--artifacts", help="Write the session's artifacts (outputs/ files) to this folder.")
    ] = None,
) -> None:
    """Show a session: its metadata, then each round's code, tool calls, output, error, variables, artifacts."""
    from codeact.engine.telemetry import usage_total

    async def read(opened: Store) -> _Shown | None:
        problems: list[CorruptRecordError] = []
        try:
            meta = await opened.repair_status(session)
        except CorruptRecordError as exc:
            meta, problems = None, [exc]
        else:
            if meta is None:
                return None
        read = await opened.read_rounds(session)
        if read.problem is not None:
            problems.append(read.problem)
        problems.extend(p for e in read.entries if (p := e.problem) is not None and p is not read.problem)
        variables: dict[str, Any] = {}
        try:
            await opened.segments(session)
        except CorruptRecordError as exc:
            problems.append(exc)
        try:
            variables = await opened.variables(session)
        except CorruptRecordError as exc:
            problems.append(exc)
        shown = _Shown(meta=meta, entries=list(read.entries), variables=variables, problems=problems)
        if meta is not None and meta.extra.get("kind") == "flow":
            from codeact.engine.flow import flow_tree

            shown.tree = await flow_tree(opened, session)
        return shown

    shown, url = _with_store(store, read)
    if shown is None:
        _fail(f"session {session!r} not found in {url}", exit_code=1)
    meta = shown.meta
    out = Console(soft_wrap=True)
    if artifacts is not None:
        from codeact.engine.cli._artifacts import write_artifacts

        written = write_artifacts(
            artifacts, [a for e in shown.entries if e.record is not None for a in e.record.artifacts]
        )
        Console(stderr=True, soft_wrap=True).print(f"{len(written)} artifacts written to {artifacts}")
    if as_json:
        data: dict[str, Any] = {
            "session": meta.to_json() if meta is not None else None,
            "rounds": [
                {
                    **e.record.to_json(),
                    "artifacts": [{k: v for k, v in a.items() if k != "data_b64"} for a in e.record.artifacts],
                }
                for e in shown.entries
                if e.record is not None and e.trusted
            ],
            "variables": shown.variables,
            "usage": usage_total(e.record.usage for e in shown.entries if e.record is not None).to_json(),
        }
        if shown.tree is not None:
            data["flow"] = shown.tree.to_json()
        if shown.problems:
            data["problems"] = [p.message for p in shown.problems]
        out.print_json(json.dumps(data, ensure_ascii=False))
    else:
        if meta is not None:
            _print_meta(out, meta, url)
        else:
            out.print(Text.assemble(("session ", "bold"), (session, "bold cyan"), f"  ({url})"))
            out.print(Text("  metadata  unreadable (see below)", style="red"))
        if shown.tree is not None:
            from codeact.engine.flow.sessions import tree_lines

            out.print(Text("  flow:", style="bold"))
            for line in tree_lines(shown.tree):
                out.print(Text(f"    {line}"))
        for entry in shown.entries:
            _print_entry(out, entry)
        total = usage_total(e.record.usage for e in shown.entries if e.record is not None)
        if total.input_tokens or total.output_tokens:
            out.print(Text.assemble("\n", ("total", "bold"), f"  {total.describe()}"))
    _report_problems(shown.problems)


class _Shown:
    def __init__(
        self,
        *,
        meta: SessionMeta | None,
        entries: list[RoundEntry],
        variables: dict[str, Any],
        problems: list[CorruptRecordError],
    ) -> None:
        self.meta, self.entries, self.variables, self.problems = meta, entries, variables, problems
        self.tree: FlowNode | None = None  # a flow session's tree


def truncate_session(
    session: Annotated[str, typer.Argument(help="The session id.", show_default=False)],
    after: Annotated[int, typer.Option("--after", help="The last round to keep (0 keeps none).", min=0)],
    store: Annotated[str | None, _STORE_OPTION] = None,
) -> None:
    """Drop the rounds after round N with their segments; restore the variables as of round N.

    Repairs a session with an unreadable entry (the error names the N to use); unreadable metadata
    fields are reset to defaults. Refused while a run holds the session.
    """

    async def run(opened: Store) -> Any:
        async with opened.lock(session):
            return await opened.truncate(session, after=after)

    report, url = _with_store(store, run)
    kept = f"rounds 1-{after}" if after else "no rounds"
    line = (
        f"truncated session {session!r} in {url}: kept {kept}, dropped {report.dropped_rounds} round(s) and "
        f"{report.dropped_segments} segment(s); {report.variables} variable(s) as of round {after}"
    )
    if report.repaired:
        line += f"; reset unreadable metadata field(s): {', '.join(report.repaired)}"
    Console(soft_wrap=True).print(Text(line))


def _report_problems(problems: list[CorruptRecordError]) -> None:
    if not problems:
        return
    err = Console(stderr=True, soft_wrap=True)
    for problem in problems:
        err.print(Text(problem.message, style="red"))
    raise typer.Exit(1)


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


def _short(value: object, limit: int = _VALUE_CHARS) -> str:
    """``value`` as JSON (strings as they are), cut to ``limit`` characters."""
    text = value if isinstance(value, str) else _json(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _value(value: object, limit: int = _VALUE_CHARS) -> str:
    """A value the code sent or kept (codec data): JSON, or Python's repr for one JSON cannot hold (``('A', 4)``)."""
    return _short(python_repr(value, limit=limit + 1) if has_tags(value) else _json(value), limit)


def _json(value: object) -> str:
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


def _print_entry(out: Console, entry: RoundEntry) -> None:
    if entry.record is None:
        out.print(Text.assemble("\n", (f"round {entry.index}", "bold"), "  ", ("unreadable", "red")))
        return
    _print_round(out, entry.record, entry)


def _print_round(out: Console, record: RoundRecord, entry: RoundEntry) -> None:
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
    from codeact.engine.telemetry import usage_of_round

    usage = usage_of_round(record.usage)
    if usage.input_tokens or usage.output_tokens:
        header.append(f"  {usage.describe()}")
    elif record.usage.get("total_tokens") is not None:  # a flat total only (older records)
        header.append(f"  {record.usage['total_tokens']} tokens")
    out.print(header)
    if record.code is not None:
        out.print(Text("  code:", style="bold"))
        _print_code(out, record.code)
    elif record.status in ("parse_error", "no_code") or record.parse_error:
        out.print(Text.assemble(("  model said: ", "bold"), (reply_excerpt(record.reply) or "(an empty reply)", "dim")))
        if record.error:
            out.print(Text.assemble(("  error: ", "bold red"), error_summary(record.error)))
        elif record.parse_error:
            out.print(Text.assemble(("  no code ran: ", "bold red"), record.parse_error))
    if record.calls:
        out.print(Text("  calls:", style="bold"))
        for call in record.calls:
            out.print(_call_line(call))
    stdout = without_frame_error(record.stdout, record.error) if record.error else record.stdout
    if stdout.strip():
        out.print(Text("  stdout:", style="bold"))
        out.print(Text(_indent(_head(stdout)), style="dim"))
    if record.error and record.code is not None:  # (no code: printed above)
        out.print(Text.assemble(("  error: ", "bold red"), error_summary(record.error)))
    if record.control:
        out.print(Text.assemble(("  control: ", "bold"), _value(record.control)))
    changes = _variable_changes(entry)
    if changes:
        out.print(Text("  variables:", style="bold"))
        for change in changes:
            out.print(change)
    for item in record.uncaptured:
        out.print(Text(f"    ! {item.get('name')} ({item.get('type')}) not captured: {item.get('reason')}", "yellow"))
    if record.artifacts:
        out.print(Text("  artifacts:", style="bold"))
        for art in record.artifacts:
            if art.get("refused") is None:
                out.print(Text(f"    {art.get('name')} ({art.get('mime')}, {art.get('size')} bytes)", style="green"))
            else:
                out.print(Text(f"    ! {art.get('name')} refused: {art.get('refused')}", style="yellow"))


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
    args = ", ".join(f"{name}={_value(value, 60)}" for name, value in arguments.items())
    line = Text(f"    {call.get('toolkit')}.{call.get('operation')}({args}) -> ")
    if call.get("error") is not None:
        error = call["error"]
        message = error.get("message", error) if isinstance(error, Mapping) else error
        line.append(f"error: {_short(message)}", style="red")
    else:
        line.append(_value(call.get("result")))
    return line


def _variable_changes(entry: RoundEntry) -> list[Text]:
    assert entry.record is not None  # noqa: S101 - checked by the caller
    after = entry.record.variables
    lines = []
    for name in sorted(entry.changed):
        style, mark = ("green", "+") if name in entry.added else ("yellow", "~")
        lines.append(Text(f"    {mark} {name} = {_value(after.get(name, entry.changed[name]))}", style=style))
    lines.extend(Text(f"    - {name}", style="red") for name in sorted(entry.removed))
    return lines


def _head(text: str) -> str:
    lines = text.rstrip("\n").splitlines()
    if len(lines) <= _STDOUT_LINES:
        return "\n".join(lines)
    return "\n".join([*lines[:_STDOUT_LINES], f"... ({len(lines) - _STDOUT_LINES} more lines)"])


def _indent(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.splitlines())
