"""``codeact replay SESSION``: re-execute a recorded session (an agent's or a flow's) and report per round."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Annotated

import typer

from codeact.engine.cli._options import StoreUrl, Toolkits, Usage, load_toolkits

if TYPE_CHECKING:
    from codeact.engine.flow import FlowReplayReport
    from codeact.engine.replay import ReplayReport, RoundReplay
    from codeact.engine.store import Store
    from codeact.toolkits import ToolkitRegistry

__all__ = ["register", "replay_command"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def replay_command(
    session: Annotated[str, typer.Argument(help="The session to replay.", show_default=False)],
    store: StoreUrl = None,
    live: Annotated[bool, typer.Option("--live", help="Call the tools for real instead of the record.")] = False,
    toolkit: Toolkits = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Re-execute a recorded session in a fresh sandbox and report per round whether it matches."""
    from codeact.engine.errors import CodeactError
    from codeact.engine.store import open_store

    try:
        registry = load_toolkits(list(toolkit or []))[0]
        opened = open_store(store)
    except (Usage, CodeactError) as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(EXIT_USAGE) from None
    try:
        report = asyncio.run(_replay(opened, session, registry, live, json_output))
    except Usage as exc:
        typer.echo(f"codeact replay: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    except CodeactError as exc:
        typer.echo(f"codeact replay: {exc}", err=True)
        raise typer.Exit(EXIT_FAILED) from None
    if json_output:
        typer.echo(json.dumps(report.to_json(), ensure_ascii=False))
    else:
        matched = sum(r.status == "match" for r in report.rounds)
        typer.echo(
            f"replayed {len(report.rounds)} round(s) of {session}: {matched} match, "
            f"{sum(r.status == 'mismatch' for r in report.rounds)} mismatch"
        )
    if report.problem is not None:
        typer.echo(f"codeact replay: stopped: {report.problem}", err=True)
    raise typer.Exit(EXIT_OK if report.ok else EXIT_FAILED)


async def _replay(
    store: Store, session: str, registry: ToolkitRegistry, live: bool, json_output: bool
) -> ReplayReport | FlowReplayReport:
    from codeact.engine.replay import replay_session

    try:
        meta = await store.get_session(session)
        if live and meta is not None:
            missing = sorted(name for name in meta.extra.get("grants") or {} if name not in registry)
            if missing:
                names = ", ".join(repr(name) for name in missing)
                raise Usage(
                    f"--live calls the tools for real, but the session's toolkit(s) {names} are not loaded: "
                    "pass --toolkit MODULE:OBJECT for each (or replay without --live to answer from the record)"
                )

        def progress(r: RoundReplay) -> None:
            if not json_output:
                line = f"round {r.index}: {r.status}"
                typer.echo(line + "".join(f"\n    {d}" for d in r.differences))

        if meta is not None and meta.extra.get("kind") == "flow":
            from codeact.engine.flow import replay_flow

            def step(session_id: str, agent: str) -> None:
                if not json_output:
                    typer.echo(f"{agent} ({session_id}):")

            return await replay_flow(store, session, registry=registry, live=live, on_round=progress, on_step=step)
        return await replay_session(store, session, registry=registry, live=live, on_round=progress)
    finally:
        await store.close()


def register(app: typer.Typer) -> None:
    """Register ``codeact replay`` on ``app``."""
    app.command("replay", help="Re-execute a recorded session deterministically from the store.", no_args_is_help=True)(
        replay_command
    )
