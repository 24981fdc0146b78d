"""``codeact exec FILE.py``: run one code file as one round in a sandbox.

Exit status: 0 the code ran without raising, 1 it raised, 2 usage error (missing file, bad
option), 3 the sandbox (or the session store) failed or the deadline killed the code.

``--session ID`` runs the file as the next round of a session in the store (``--store``, else
``CODEACT_STORE``, else ``~/.codeact/sessions.db``): its variables are restored, and the round is
recorded, so ``codeact sessions show ID`` and ``codeact replay ID`` work on it too.

``--blueprint FILE --allow-sandbox-declaration`` runs the file in the sandbox the blueprint declares
(backend, ``packages``/``preset``, imports, limits; docs/sandbox.md); the environment is built on
first use. ``--artifacts DIR`` writes the files the code put in ``outputs/`` to DIR.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from codeact.engine.cli._options import AllowSandboxDeclaration, Artifacts, Toolkits
from codeact.prompts.jsontypes import JsonObject

if TYPE_CHECKING:
    from codeact.engine.blueprint import SandboxSettings
    from codeact.sandbox import ExecutionResult, Sandbox
    from codeact.sandbox.channel import RpcHandler
    from codeact.sandbox.env import Environment

__all__ = ["register"]

EXIT_OK = 0
EXIT_RAISED = 1
EXIT_USAGE = 2
EXIT_SANDBOX = 3

_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


class _UsageError(Exception):
    """A usage problem: exit status 2."""


def _bridge(toolkit_refs: list[str], session: str) -> RpcHandler | None:
    if not toolkit_refs:
        return None
    from codeact.toolkits import ToolkitBridge, ToolkitError, load_registry

    try:
        return ToolkitBridge(load_registry(toolkit_refs), session_id=session)
    except ToolkitError as exc:
        raise _UsageError(str(exc)) from None


_Declared = tuple["SandboxSettings", "Environment | None"]


def _make_sandbox(
    kind: str, bridge: RpcHandler | None, isolation: str, declared: _Declared | None = None, runtime: str = "runc"
) -> Sandbox:
    from codeact import sandbox

    backend: Literal["subprocess", "docker"] = "docker" if kind == "docker" else "subprocess"
    chosen_isolation: Literal["bwrap", "process"] = "process" if isolation == "process" else "bwrap"
    if declared is not None:
        from codeact.engine.agent.sandboxes import declared_spec

        settings, env = declared
        # --runtime gvisor wins; else the blueprint's sandbox.runtime (runc when it names none)
        spec = declared_spec(
            settings, backend, env=env, isolation=chosen_isolation, runtime="gvisor" if runtime == "gvisor" else None
        )
    else:
        spec = sandbox.SandboxSpec(
            backend=backend, isolation=chosen_isolation, runtime="gvisor" if runtime == "gvisor" else "runc"
        )
    return sandbox.open_sandbox(spec, bridge=bridge)


async def _run(
    code: str,
    *,
    kind: str,
    bridge: RpcHandler | None,
    isolation: str,
    variables: JsonObject,
    timeout: float,
    declared: _Declared | None = None,
    runtime: str = "runc",
) -> ExecutionResult:
    box = _make_sandbox(kind, bridge, isolation, declared, runtime)
    async with box:
        return await box.execute(code, variables=variables, deadline=timeout)


async def _run_in_session(
    code: str,
    *,
    name: str,
    session: str,
    store_url: str | None,
    kind: str,
    bridge: RpcHandler | None,
    isolation: str,
    timeout: float,
    declared: _Declared | None = None,
    runtime: str = "runc",
) -> ExecutionResult:
    """One round of ``session``: variables restored from the store, the round recorded in it."""
    from codeact.engine.replay import sandbox_note, session_hash_seed
    from codeact.engine.store import RoundRecord, SessionMeta, open_store

    store = open_store(store_url)
    try:
        async with store.lock(session) as lock:
            meta = await store.get_session(session)
            if meta is None:
                grants = {name: "*" for name in getattr(bridge, "grants", {})} if bridge is not None else {}
                meta = SessionMeta(
                    session_id=session,
                    blueprint_id="codeact-exec",
                    blueprint_hash="",
                    model="",
                    title=name,
                    extra={"kind": "exec", "grants": grants or {"system": "*"}},
                )
                await store.create_session(meta)
            else:
                await store.check_session(session)  # nothing runs on top of an unreadable entry
            variables = await store.variables(session)
            started = time.time()
            box = _make_sandbox(kind, bridge, isolation, declared, runtime)
            box.hash_seed = session_hash_seed(meta.extra.get("sandbox"))
            async with box:
                result = await box.execute(code, variables=variables, deadline=timeout)
                note = sandbox_note(box, deadline_s=timeout)
                if declared is not None:
                    from codeact.engine.agent.sandboxes import env_note

                    noted = env_note(declared[0])
                    if noted is not None:
                        note["env"] = noted
            drain = getattr(bridge, "drain_calls", None)
            calls = tuple(c.to_json() for c in drain()) if drain is not None else ()
            record = RoundRecord(
                session_id=session,
                index=meta.rounds + 1,
                started_at=started,
                duration_s=result.duration_s,
                prompt_hash="",
                reply="",
                code=code,
                calls=calls,
                stdout=result.stdout,
                stderr=result.stderr,
                error=result.error.to_json() if result.error is not None else None,
                status=result.status,
                control=result.control,
                variables=result.variables,
                uncaptured=tuple(u.to_json() for u in result.uncaptured),
                nondeterminism=result.nondeterminism or {},
                artifacts=tuple(a.to_json(with_data=True) for a in result.artifacts),
            )
            await store.append_round(record, segments=[], variables=result.variables, fence=lock.token)
            # "completed": an exec session left "active" would read as interrupted once unlocked.
            await store.update_session(session, extra={**meta.extra, "sandbox": note}, status="completed")
            return result
    finally:
        await store.close()


def _declared_settings(path: Path, allow: bool) -> SandboxSettings:
    """The sandbox ``path`` declares (validated, accepted only with ``--allow-sandbox-declaration``)."""
    from codeact.engine.blueprint import AgentFactory, HostContext, format_factory_error, format_load_error, load_path
    from codeact.engine.errors import BlueprintFactoryError, BlueprintLoadError

    try:
        loaded = load_path(path)
    except BlueprintLoadError as exc:
        raise _UsageError(format_load_error(exc)) from None
    try:
        return AgentFactory().sandbox_settings(loaded, HostContext(allow_sandbox_declaration=allow))
    except BlueprintFactoryError as exc:
        raise _UsageError(format_factory_error(exc)) from None


def _print_human(result: ExecutionResult) -> None:
    if result.stdout:
        sys.stdout.write(result.stdout if result.stdout.endswith("\n") else result.stdout + "\n")
    if result.stderr:
        sys.stderr.write(result.stderr if result.stderr.endswith("\n") else result.stderr + "\n")
    if result.error is not None:
        where = f" (line {result.error.line})" if result.error.line is not None else ""
        body = result.error.traceback or f"{result.error.type}: {result.error.message}"
        sys.stderr.write(f"error{where}:\n{body}\n")
    if result.control is not None:
        sys.stderr.write(f"control signal: {json.dumps(result.control, default=str)}\n")
    for item in result.uncaptured:
        sys.stderr.write(f"not captured: {item.name} ({item.type}): {item.reason}\n")
    for art in result.artifacts:
        if art.refused is None:
            sys.stderr.write(f"artifact: {art.name} ({art.mime}, {art.size} bytes)\n")
        else:
            sys.stderr.write(f"artifact refused: {art.name} ({art.refused})\n")


def _exit_code(result: ExecutionResult) -> int:
    if result.status == "ok":
        return EXIT_OK
    if result.status == "error":
        return EXIT_RAISED
    return EXIT_SANDBOX


def exec_command(
    file: Annotated[Path, typer.Argument(help="The Python file to run as one round.", show_default=False)],
    sandbox_kind: Annotated[
        str | None,
        typer.Option(
            "--sandbox",
            help="Backend: subprocess (bubblewrap, the default) or docker; overrides the blueprint's.",
            metavar="subprocess|docker",
        ),
    ] = None,
    toolkit: Toolkits = None,
    session: Annotated[
        str | None,
        typer.Option("--session", help="Run as the next round of this session: variables restored, round recorded."),
    ] = None,
    store: Annotated[
        str | None, typer.Option("--store", help="Session store URL (default: CODEACT_STORE or ~/.codeact).")
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option("--timeout", help="Wall-clock deadline in seconds (default: the blueprint's, else 10)."),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the ExecutionResult as one JSON object.")] = False,
    isolation: Annotated[
        str,
        typer.Option(
            "--isolation", help="subprocess only: bwrap (default) or process (explicitly weaker, no namespaces)."
        ),
    ] = "bwrap",
    blueprint: Annotated[
        Path | None,
        typer.Option("--blueprint", help="Run in the sandbox this blueprint declares (backend, packages, limits)."),
    ] = None,
    allow_sandbox_declaration: AllowSandboxDeclaration = False,
    artifacts: Artifacts = None,
    runtime: Annotated[
        str,
        typer.Option(
            "--runtime", help="docker only: runc (default) or gvisor (gVisor's kernel between the code and the host)."
        ),
    ] = "runc",
) -> None:
    """Run FILE.py as one round in the sandbox (exit 0 ok, 1 raised, 2 usage, 3 sandbox/deadline)."""
    from codeact.sandbox import SandboxError

    declared: _Declared | None = None
    try:
        if sandbox_kind not in (None, "subprocess", "docker"):
            raise _UsageError(f"--sandbox must be 'subprocess' or 'docker', got {sandbox_kind!r}")
        if isolation not in ("bwrap", "process"):
            raise _UsageError(f"--isolation must be 'bwrap' or 'process', got {isolation!r}")
        settings = _declared_settings(blueprint, allow_sandbox_declaration) if blueprint is not None else None
        kind = sandbox_kind or (settings.backend if settings is not None else None) or "subprocess"
        if timeout is None:
            declared_timeout = settings.limits.timeout_seconds if settings is not None else None
            timeout = float(declared_timeout) if declared_timeout is not None else 10.0
        if runtime not in ("runc", "gvisor"):
            raise _UsageError(f"--runtime must be 'runc' or 'gvisor', got {runtime!r}")
        if runtime != "runc" and kind != "docker":
            raise _UsageError(f"--runtime {runtime} runs Docker containers: pass --sandbox docker")
        if not timeout > 0:
            raise _UsageError(f"--timeout must be a positive number of seconds, got {timeout!r}")
        try:
            code = file.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise _UsageError(f"cannot read {str(file)!r}: no such file") from None
        except IsADirectoryError:
            raise _UsageError(f"cannot read {str(file)!r}: it is a directory; pass a .py file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise _UsageError(f"cannot read {str(file)!r}: {exc}") from None
        if session is not None and not _SESSION_ID.match(session):
            raise _UsageError(f"--session {session!r} must be letters, digits, '_', '.' or '-' (at most 128)")
        bridge = _bridge(list(toolkit or []), session or f"exec-{secrets.token_hex(4)}")
    except _UsageError as exc:
        typer.echo(f"codeact exec: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE) from None

    from codeact.engine.errors import StoreError

    try:
        if settings is not None:
            from codeact.engine.agent.sandboxes import declared_environment

            declared = (settings, declared_environment(settings, "docker" if kind == "docker" else "subprocess"))
        if session is None:
            result = asyncio.run(
                _run(
                    code,
                    kind=kind,
                    bridge=bridge,
                    isolation=isolation,
                    variables={},
                    timeout=timeout,
                    declared=declared,
                    runtime=runtime,
                )
            )
        else:
            result = asyncio.run(
                _run_in_session(
                    code,
                    name=file.name,
                    session=session,
                    store_url=store,
                    kind=kind,
                    bridge=bridge,
                    isolation=isolation,
                    timeout=timeout,
                    declared=declared,
                    runtime=runtime,
                )
            )
    except (SandboxError, StoreError) as exc:
        what = "the session store" if isinstance(exc, StoreError) else "the sandbox"
        if json_output:
            error = {"type": type(exc).__name__, "message": str(exc), "line": None, "code": exc.code}
            typer.echo(json.dumps({"ok": False, "status": "sandbox_error", "error": error}))
        typer.echo(f"codeact exec: {what} failed: {exc}", err=True)
        raise typer.Exit(EXIT_SANDBOX) from None

    if artifacts is not None and result.artifacts:
        from codeact.engine.cli._artifacts import write_artifacts

        try:
            written = write_artifacts(artifacts, [a.to_json(with_data=True) for a in result.artifacts])
        except OSError as exc:
            typer.echo(f"codeact exec: cannot write the artifacts to {str(artifacts)!r}: {exc}", err=True)
        else:
            typer.echo(f"{len(written)} artifact(s) written to {artifacts}", err=True)
    if json_output:
        typer.echo(json.dumps(result.to_json(), ensure_ascii=False, default=str))
    else:
        _print_human(result)
    raise typer.Exit(_exit_code(result))


def register(app: typer.Typer) -> None:
    """Register ``codeact exec`` on ``app``."""
    app.command(
        "exec",
        help="Run one Python file as one round in the sandbox; --json prints the ExecutionResult.",
        no_args_is_help=True,
    )(exec_command)
