"""``codeact serve``: the HTTP service (docs/service.md) on uvicorn.

It loads each blueprint of ``--blueprints`` as a runner, opens the store, reads the API tokens
(``$CODEACT_API_TOKENS`` and ``--tokens-file``; never a YAML file), binds the socket, prints its URL
on stdout and serves until SIGINT/SIGTERM (running runs are then cancelled, their sessions left
resumable). Without any configured token it makes one for this process and prints it on stderr.

The service logs on stderr (``--log-format plain``, or ``json`` for JSON lines; see
``codeact.engine.service._log``). A folder given to ``--blueprints`` may hold other YAML files (a scripted
replies file, ...): a file that is not an agent or flow document is skipped with one warning naming it.

Exit codes: 0 after a clean shutdown, 2 for a usage or configuration error (printed on stderr).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from codeact.engine.cli._options import (
    BaseUrl,
    MaxRoundBytes,
    MaxRoundCalls,
    MaxRoundSeconds,
    MaxRunBytes,
    MaxRunCalls,
    StoreUrl,
    Toolkits,
    call_budgets,
)
from codeact.engine.errors import MissingExtraError

if TYPE_CHECKING:
    from codeact.engine.queue import QueueRunManager
    from codeact.engine.runner import BlueprintRunner
    from codeact.engine.store import Store
    from codeact.toolkits import CallBudgets, ToolkitRegistry

__all__ = ["register"]

EXIT_OK = 0
EXIT_USAGE = 2
_BLUEPRINT_SUFFIXES = (".yaml", ".yml")


class _Usage(Exception):
    """A usage or configuration error: printed on stderr, exit 2 (1 for ``--strict``'s refusal)."""

    def __init__(self, message: str, code: str = "cli.usage") -> None:
        super().__init__(message)
        self.code = code


def register(app: typer.Typer) -> None:
    """Register ``serve`` on ``app``."""
    app.command("serve")(serve_command)


def serve_command(
    blueprints: Annotated[
        list[Path] | None,
        typer.Option("--blueprints", help="A blueprint file or a folder of *.yaml blueprints (repeatable)."),
    ] = None,
    host: Annotated[str, typer.Option("--host", help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="The port (0: any free port).", min=0, max=65535)] = 8000,
    toolkit: Toolkits = None,
    store: StoreUrl = None,
    tokens_file: Annotated[
        list[Path] | None,
        typer.Option("--tokens-file", help="API tokens, one 'TOKEN' or 'TOKEN=RUNNER,...' a line (repeatable)."),
    ] = None,
    model: Annotated[str | None, typer.Option("--model", help="litellm model for every runner.")] = None,
    base_url: BaseUrl = None,
    max_runs: Annotated[int, typer.Option("--max-runs", help="Runs at once at most (503 beyond).", min=1)] = 256,
    queue: Annotated[
        str | None, typer.Option("--queue", help="Enqueue runs on this Redis for `codeact worker`s (docs/scaling.md).")
    ] = None,
    sandbox: Annotated[
        str | None, typer.Option("--sandbox", help="subprocess or docker: where every runner's code runs.")
    ] = None,
    max_round_seconds: MaxRoundSeconds = None,
    max_round_calls: MaxRoundCalls = None,
    max_run_calls: MaxRunCalls = None,
    max_round_bytes: MaxRoundBytes = None,
    max_run_bytes: MaxRunBytes = None,
    log_format: Annotated[
        str, typer.Option("--log-format", help="plain (key=value lines) or json (JSON lines), on stderr.")
    ] = "plain",
    strict: Annotated[
        bool, typer.Option("--strict", help="Refuse a blueprint the validator warns about (exit 1).")
    ] = False,
    api_rate: Annotated[
        str,
        typer.Option("--api-rate", help="Run-scoped API calls per run: CALLS or CALLS/SECONDS (429 beyond)."),
    ] = "50",
    audit_log: Annotated[
        Path | None,
        typer.Option("--audit-log", help="Append one JSON line per run-scoped API call here (default: the log)."),
    ] = None,
    max_body_bytes: Annotated[
        int,
        typer.Option(
            "--max-body-bytes",
            help="The largest request body (1048576; raise it for inline image and file contents; 413 beyond).",
            min=1024,
        ),
    ] = 1 << 20,
    artifact_max_bytes: Annotated[
        int,
        typer.Option(
            "--artifact-max-bytes", help="The largest artifact a run reads through its API (413 beyond).", min=1
        ),
    ] = 16 * 1024 * 1024,
    artifact_mime: Annotated[
        list[str] | None,
        typer.Option(
            "--artifact-mime", help="Serve artifacts of this MIME type only: image/png or image/* (repeatable)."
        ),
    ] = None,
    artifact_ttl: Annotated[
        float | None,
        typer.Option(
            "--artifact-ttl", help="Serve an artifact this many seconds after its round ended (default: always)."
        ),
    ] = None,
) -> None:
    """Serve blueprints over HTTP as AgentRunner protocol runners (GET /v1/runners, POST /v1/runs, ...)."""
    try:
        import uvicorn

        from codeact.engine.service import (
            ArtifactPolicy,
            AuditLog,
            RunManager,
            ServiceState,
            Tokens,
            configure_logging,
            create_app,
        )
    except ImportError as exc:
        raise MissingExtraError("codeact serve", extra="serve", module=str(exc.name)) from None
    if log_format not in ("plain", "json"):
        typer.echo(f"codeact serve: --log-format must be 'plain' or 'json', got {log_format!r}", err=True)
        raise typer.Exit(EXIT_USAGE)
    configure_logging("json" if log_format == "json" else "plain")
    import faulthandler

    with contextlib.suppress(AttributeError, OSError, ValueError):  # a stderr without a file (tests, embedding)
        faulthandler.enable()  # a long-lived server: a fatal signal prints every thread's stack to stderr
    from codeact.engine.errors import CodeactError
    from codeact.engine.store import open_store

    try:
        tokens = Tokens.load(files=tokens_file or ())
        files = _blueprint_files(blueprints or [])
        registry = _registry(list(toolkit or []))
        opened = open_store(store, concurrency=max_runs)
        from codeact.engine.runner.proxy import RateLimit

        try:
            rate = RateLimit.parse(api_rate)
        except ValueError:
            raise _Usage(f"--api-rate is CALLS or CALLS/SECONDS (e.g. 50 or 600/60), got {api_rate!r}") from None
        if sandbox not in (None, "subprocess", "docker"):
            raise _Usage(f"--sandbox must be 'subprocess' or 'docker', got {sandbox!r}")
        try:
            artifacts = ArtifactPolicy(
                max_bytes=artifact_max_bytes, mime_types=tuple(artifact_mime or ()), ttl_s=artifact_ttl
            )
        except ValueError as exc:
            raise _Usage(f"--artifact-max-bytes/--artifact-mime/--artifact-ttl: {exc}") from None
        runners = _runners(
            files,
            registry=registry,
            store=opened,
            model=model,
            base_url=base_url,
            sandbox=sandbox,
            max_round_seconds=max_round_seconds,
            strict=strict,
            budgets=call_budgets(
                round_calls=max_round_calls,
                run_calls=max_run_calls,
                round_bytes=max_round_bytes,
                run_bytes=max_run_bytes,
            ),
        )
    except _Usage as exc:
        typer.echo(f"codeact serve: {exc}", err=True)
        raise typer.Exit(1 if exc.code == "blueprint.validation.strict" else EXIT_USAGE) from None
    except CodeactError as exc:
        typer.echo(f"codeact serve: {exc.message}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    if not len(tokens):
        import secrets

        token = secrets.token_urlsafe(24)
        tokens = Tokens({token: None})
        typer.echo(
            "codeact serve: no API token configured ($CODEACT_API_TOKENS or --tokens-file); "
            f"this server accepts the token made for this process: {token}",
            err=True,
        )
    state = ServiceState(
        store=opened,
        runners=runners,
        tokens=tokens,
        runs=_queue_runs(queue, runners, store, model, base_url, sandbox)
        if queue
        else RunManager(runners, max_active=max_runs, api_rate=rate),
        registry=registry,
        audit=AuditLog(audit_log),
        max_body_bytes=max_body_bytes,
        artifacts=artifacts,
    )
    state = replace(state, extra_routes=_console_routes(state))
    try:
        sock = _bind(host, port)
    except OSError as exc:
        typer.echo(f"codeact serve: cannot listen on {host}:{port}: {exc.strerror}; pick another --port", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    typer.echo(f"codeact serve: listening on http://{shown}:{bound_port} (runners: {', '.join(sorted(runners))})")
    sys.stdout.flush()
    config = uvicorn.Config(create_app(state), log_level="warning", lifespan="on", timeout_graceful_shutdown=5)
    server = _quiet_server(uvicorn)(config)
    try:
        asyncio.run(_serve(server, sock, opened, list(runners.values())))
    except KeyboardInterrupt:
        pass
    raise typer.Exit(EXIT_OK)


async def _serve(server: Any, sock: socket.socket, store: Store, runners: list[BlueprintRunner]) -> None:
    try:
        await server.serve(sockets=[sock])
    finally:
        for runner in runners:
            await runner.aclose()  # its model client (and litellm's logging task on this loop)
        await store.close()


def _quiet_server(uvicorn: Any) -> Any:
    """The uvicorn Server, minus re-raising SIGTERM/SIGINT after the graceful shutdown (so the exit code is 0)."""

    class _Server(uvicorn.Server):  # type: ignore[misc]
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            handled = (signal.SIGINT, signal.SIGTERM)
            original = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
            try:
                yield
            finally:
                for sig, handler in original.items():
                    signal.signal(sig, handler)

    return _Server


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets that say they are TCP; without it, an
    # SSE event written right after the headers waits ~40 ms for the client's delayed ACK (Nagle).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _blueprint_files(paths: list[Path]) -> list[Path]:
    if not paths:
        raise _Usage("no blueprint to serve: pass --blueprints FILE or --blueprints DIR")
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            yamls = sorted(p for p in path.iterdir() if p.suffix in _BLUEPRINT_SUFFIXES and p.is_file())
            found = [p for p in yamls if _is_blueprint(p)]
            if not found:
                raise _Usage(f"--blueprints {str(path)!r}: the folder holds no *.yaml or *.yml blueprint")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise _Usage(f"--blueprints {str(path)!r}: no such file or folder")
    return files


def _is_blueprint(path: Path) -> bool:
    """True for an agent or flow document (``version``, ``agent`` or ``workflow`` at the top); else one warning.

    Only a folder's files are sniffed: a file named on its own is loaded, and its errors reported.
    A file that does not parse is kept, so its error (with its name) is reported rather than hidden.
    """
    import logging

    from codeact.engine.blueprint import parse_yaml
    from codeact.engine.errors import CodeactError
    from codeact.engine.service import log_event

    try:
        document = parse_yaml(path.read_text(encoding="utf-8"), source=path.name)
    except (CodeactError, OSError, UnicodeDecodeError):
        return True
    if isinstance(document, dict) and {"version", "agent", "workflow"} & set(document):
        return True
    keys = ", ".join(sorted(map(str, document))[:5]) if isinstance(document, dict) else type(document).__name__
    log_event(
        "blueprint.skipped",
        level=logging.WARNING,
        file=str(path),
        reason=f"not an agent or flow blueprint (no version/agent/workflow at the top; it has {keys})",
    )
    return False


def _registry(refs: list[str]) -> ToolkitRegistry:
    from codeact.toolkits import ToolkitError, load_registry

    try:
        return load_registry(refs)
    except ToolkitError as exc:
        raise _Usage(f"--toolkit: {exc}") from None


def _runners(
    files: list[Path],
    *,
    registry: ToolkitRegistry,
    store: Store,
    model: str | None,
    base_url: str | None,
    sandbox: str | None = None,
    max_round_seconds: float | None = None,
    strict: bool = False,
    budgets: CallBudgets | None = None,
) -> dict[str, BlueprintRunner]:
    from codeact.engine.runner import BlueprintRunner

    runners: dict[str, BlueprintRunner] = {}
    origin: dict[str, Path] = {}
    options: dict[str, Any] = {"sandbox": sandbox} if sandbox else {}
    if max_round_seconds is not None:
        options["max_round_seconds"] = max_round_seconds
    if strict:
        options["strict"] = True
    if budgets is not None:
        options["call_budgets"] = budgets
    from codeact.engine.errors import CodeactError

    for file in files:
        try:
            runner = BlueprintRunner.from_blueprint(
                file, toolkits=registry, store=store, model=model, base_url=base_url, **options
            )
        except CodeactError as exc:
            from codeact.engine.blueprint import format_factory_error
            from codeact.engine.errors import BlueprintFactoryError

            detail = format_factory_error(exc) if isinstance(exc, BlueprintFactoryError) else exc.message
            raise _Usage(f"--blueprints {str(file)!r}: {detail}", code=exc.code) from None
        if runner.id in runners:
            raise _Usage(
                f"two blueprints give runner id {runner.id!r}: {str(origin[runner.id])!r} and {str(file)!r}; "
                "give each blueprint its own id"
            )
        runners[runner.id] = runner
        origin[runner.id] = file
    return runners


def _queue_runs(
    queue: str,
    runners: dict[str, BlueprintRunner],
    store: str | None,
    model: str | None,
    base_url: str | None,
    sandbox: str | None = None,
) -> QueueRunManager:
    """``--queue``: the queue's run manager (runs go to ``codeact worker`` processes)."""
    from codeact.engine.queue import QueueRunManager

    return QueueRunManager(runners, queue=queue, store=store, model=model, base_url=base_url, sandbox=sandbox)


def _console_routes(state: Any) -> list[Any]:
    """The console's pages when the console is installed (``codeact.engine.service.console``), else none."""
    try:
        from codeact.engine.service.console import console_routes  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return []
    return list(console_routes(state))
