"""``codeact worker`` (a Celery worker taking queued runs) and ``codeact run FILE --queue URL``."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from codeact.engine.cli._options import (
    MaxRoundBytes,
    MaxRoundCalls,
    MaxRoundSeconds,
    MaxRunBytes,
    MaxRunCalls,
    Toolkits,
    call_budgets,
)

if TYPE_CHECKING:
    from rich.console import Console

    from codeact.engine.agent import RunConfig

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def worker_command(
    queue: Annotated[
        str | None, typer.Option("--queue", help="Broker Redis URL (default $CODEACT_QUEUE or $CODEACT_STORE).")
    ] = None,
    store: Annotated[str | None, typer.Option("--store", help="Default store URL of the runs (redis://...).")] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", help="Runs at once in this worker.")] = 2,
    toolkit: Toolkits = None,
    blueprints: Annotated[
        Path | None, typer.Option("--blueprints", help="Folder of blueprints runs may name by id.")
    ] = None,
    queues: Annotated[
        str, typer.Option("--queues", "-Q", help="Comma-separated Celery queues to consume.")
    ] = "codeact",
    max_sandboxes: Annotated[
        int | None, typer.Option("--max-sandboxes", help="Cap of sandboxes alive at once (default: --concurrency).")
    ] = None,
    run_timeout: Annotated[
        float | None, typer.Option("--run-timeout", help="Run time limit in seconds when a run names none.")
    ] = None,
    max_round_seconds: MaxRoundSeconds = None,
    max_round_calls: MaxRoundCalls = None,
    max_run_calls: MaxRunCalls = None,
    max_round_bytes: MaxRoundBytes = None,
    max_run_bytes: MaxRunBytes = None,
    name: Annotated[str | None, typer.Option("--name", help="Worker name (default codeact-PID@HOST).")] = None,
    loglevel: Annotated[str, typer.Option("--loglevel", help="Celery log level.")] = "WARNING",
    strict: Annotated[
        bool, typer.Option("--strict", help="Fail runs whose blueprint the validator warns about.")
    ] = False,
) -> None:
    """Start a worker that takes queued runs until stopped (SIGTERM: finish the runs, then stop)."""
    import faulthandler

    from codeact.engine.queue import start_worker

    with contextlib.suppress(AttributeError, OSError, ValueError):  # a stderr without a file (tests, embedding)
        faulthandler.enable()  # a long-lived worker: a fatal signal prints every thread's stack to stderr
    from codeact.toolkits import ToolkitError

    url = queue or os.environ.get("CODEACT_QUEUE") or os.environ.get("CODEACT_STORE")
    if not url or not url.startswith(("redis://", "rediss://")):
        typer.echo("codeact worker: --queue redis://HOST:PORT/DB is required (or $CODEACT_QUEUE)", err=True)
        raise typer.Exit(EXIT_USAGE)
    if concurrency < 1:
        typer.echo("codeact worker: --concurrency must be at least 1", err=True)
        raise typer.Exit(EXIT_USAGE)
    try:
        start_worker(
            broker_url=url,
            store=store or os.environ.get("CODEACT_STORE") or url,
            concurrency=concurrency,
            queues=tuple(q.strip() for q in queues.split(",") if q.strip()),
            toolkits=tuple(toolkit or ()),
            blueprints=blueprints,
            max_sandboxes=max_sandboxes,
            run_timeout_s=run_timeout,
            max_round_seconds=max_round_seconds,
            call_budgets=call_budgets(
                round_calls=max_round_calls,
                run_calls=max_run_calls,
                round_bytes=max_round_bytes,
                run_bytes=max_run_bytes,
            ),
            name=name,
            loglevel=loglevel,
            strict=strict,
        )
    except ToolkitError as exc:
        typer.echo(f"codeact worker: --toolkit: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE) from None


def run_queued(
    file: Path,
    input: str,
    *,
    queue: str,
    session: str | None,
    model: str | None,
    base_url: str | None,
    store: str | None,
    detach: bool,
    json_output: bool,
    strict: bool = False,
    user: str | None = None,
    config: RunConfig | None = None,
    context: dict[str, Any] | None = None,
) -> int:
    """``codeact run FILE --queue URL``: enqueue, print the run id, then stream its events (unless detached).

    ``--user``, ``--tag``, ``--meta`` and ``--context`` travel with the run (``config``, ``context``).
    """
    from rich.console import Console

    from codeact.engine.errors import CodeactError
    from codeact.engine.queue import submit

    err = Console(stderr=True, soft_wrap=True)
    refused = _check_blueprint(file, strict=strict)
    if refused is not None:
        return refused
    try:
        handle = submit(
            file,
            input,
            queue=queue,
            session_id=session,
            model=model,
            base_url=base_url,
            store=store,
            user=user,
            config=config,
            context=context,
        )
    except CodeactError as exc:
        typer.echo(f"codeact run --queue: {exc}", err=True)
        return EXIT_USAGE
    if json_output:
        sys.stdout.write(json.dumps({"type": "run.id", "run_id": handle.run_id}) + "\n")
    else:
        err.print(f"run {handle.run_id} queued", markup=False, highlight=False)
    sys.stdout.flush()
    if detach:
        if not json_output:
            sys.stdout.write(handle.run_id + "\n")
        return EXIT_OK
    last: dict[str, Any] = {}
    try:
        for event in handle.events():
            last = event
            if json_output:
                sys.stdout.write(json.dumps(event, ensure_ascii=False) + "\n")
                sys.stdout.flush()
            else:
                _render(event, err)
    finally:
        handle.client.close()
    kind = last.get("type")
    if kind == "run.completed":
        if not json_output and last.get("answer") is not None:
            answer = last["answer"]
            sys.stdout.write((answer if isinstance(answer, str) else json.dumps(answer)) + "\n")
        return EXIT_OK
    if kind == "run.paused" and not json_output:
        err.print(f"paused: run {handle.run_id} waits for {last.get('kind')}", markup=False, highlight=False)
        return EXIT_OK
    return EXIT_OK if kind == "run.paused" else EXIT_FAILED


def _check_blueprint(file: Path, *, strict: bool) -> int | None:
    """Print the validator's warnings before the run is queued; the exit code when the blueprint is refused.

    The worker validates again when it builds the agent; a file that does not load is left to it
    (or to ``submit``) so the message is the one every path gives.
    """
    from codeact.engine.blueprint import (
        format_factory_error,
        load_path,
        print_warnings,
        strict_error,
        validate_blueprint,
    )
    from codeact.engine.errors import CodeactError

    if str(file).startswith("id:"):
        return None  # a blueprint of the workers' folder: they check it
    try:
        report = validate_blueprint(load_path(file))
    except CodeactError:
        return None
    refused = strict_error(report) if strict and report.valid else None
    if refused is not None:
        typer.echo(f"codeact run --queue: {format_factory_error(refused)}", err=True)
        return EXIT_FAILED
    print_warnings(report.warnings)
    return None


def _render(event: dict[str, Any], console: Console) -> None:
    from codeact.engine.events import event_from_json, render_event

    kind = str(event.get("type"))
    if kind in ("run.queued", "run.requeued", "run.cancelled", "run.paused") or event.get("sequence") is None:
        detail = event.get("reason") or event.get("error") or event.get("kind") or ""
        console.print(f"[{kind}] {detail}".rstrip(), markup=False, highlight=False)
        return
    try:
        render_event(event_from_json(event), console)
    except Exception:
        console.print(f"[{kind}]", markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    """Register ``codeact worker`` on ``app``."""
    app.command("worker", help="Start a Celery worker taking queued runs (codeact run --queue).")(worker_command)
