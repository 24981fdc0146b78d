"""``codeact exec FILE.py``: run one code file as one round in a sandbox.

Exit status: 0 the code ran without raising, 1 it raised, 2 usage error (missing file, bad
option), 3 the sandbox failed or the deadline killed the code.

``--session ID`` carries the captured variables from one invocation to the next. Until the engine
store takes over, they live in ``$CODEACT_HOME/exec-sessions/ID.json`` (``CODEACT_HOME`` defaults
to ``~/.codeact``), in their codec-encoded JSON form.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from sandbox import ExecutionResult, Sandbox
    from sandbox.channel import RpcHandler

__all__ = ["register"]

EXIT_OK = 0
EXIT_RAISED = 1
EXIT_USAGE = 2
EXIT_SANDBOX = 3

_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def _codeact_home() -> Path:
    return Path(os.environ.get("CODEACT_HOME") or Path.home() / ".codeact").expanduser()


def _session_path(session: str) -> Path:
    return _codeact_home() / "exec-sessions" / f"{session}.json"


def _load_session(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _UsageError(f"cannot read the session file {str(path)!r}: {exc}; delete it to start afresh") from None
    variables = data.get("variables") if isinstance(data, dict) else None
    if not isinstance(variables, dict):
        raise _UsageError(f"the session file {str(path)!r} has no 'variables' object; delete it to start afresh")
    return variables


def _save_session(path: Path, session: str, variables: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"session": session, "variables": variables}, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


class _UsageError(Exception):
    """A usage problem: exit status 2."""


def _bridge(toolkit_refs: list[str], session: str) -> RpcHandler | None:
    if not toolkit_refs:
        return None
    from toolkits import ToolkitBridge, ToolkitError, ToolkitRegistry, load_toolkit_ref

    try:
        registry = ToolkitRegistry.from_entry_points()
        for ref in toolkit_refs:
            registry.register(load_toolkit_ref(ref), replace=True)
        return ToolkitBridge(registry, session_id=session)
    except ToolkitError as exc:
        raise _UsageError(str(exc)) from None


def _make_sandbox(kind: str, bridge: RpcHandler | None, isolation: str) -> Sandbox:
    import sandbox

    if kind == "subprocess":
        return sandbox.SubprocessSandbox(bridge=bridge, isolation="process" if isolation == "process" else "bwrap")
    docker_cls = getattr(sandbox, "DockerSandbox", None)
    if docker_cls is None:
        raise sandbox.SandboxError("the Docker sandbox backend is not available in this installation")
    created: Sandbox = docker_cls(bridge=bridge)
    return created


async def _run(
    code: str, *, kind: str, bridge: RpcHandler | None, isolation: str, variables: dict[str, Any], timeout: float
) -> ExecutionResult:
    box = _make_sandbox(kind, bridge, isolation)
    async with box:
        return await box.execute(code, variables=variables, deadline=timeout)


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


def _exit_code(result: ExecutionResult) -> int:
    if result.status == "ok":
        return EXIT_OK
    if result.status == "error":
        return EXIT_RAISED
    return EXIT_SANDBOX


def exec_command(
    file: Annotated[Path, typer.Argument(help="The Python file to run as one round.", show_default=False)],
    sandbox_kind: Annotated[
        str, typer.Option("--sandbox", help="Backend: subprocess (bubblewrap) or docker.", metavar="subprocess|docker")
    ] = "subprocess",
    toolkit: Annotated[
        list[str] | None, typer.Option("--toolkit", help="A toolkit to grant, MODULE:OBJECT (repeatable).")
    ] = None,
    session: Annotated[
        str | None, typer.Option("--session", help="Reuse the variables captured by earlier runs of this session.")
    ] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Wall-clock deadline in seconds.")] = 10.0,
    json_output: Annotated[bool, typer.Option("--json", help="Print the ExecutionResult as one JSON object.")] = False,
    isolation: Annotated[
        str,
        typer.Option(
            "--isolation", help="subprocess only: bwrap (default) or process (explicitly weaker, no namespaces)."
        ),
    ] = "bwrap",
) -> None:
    """Run FILE.py as one round in the sandbox (exit 0 ok, 1 raised, 2 usage, 3 sandbox/deadline)."""
    from sandbox import SandboxError

    try:
        if sandbox_kind not in ("subprocess", "docker"):
            raise _UsageError(f"--sandbox must be 'subprocess' or 'docker', got {sandbox_kind!r}")
        if isolation not in ("bwrap", "process"):
            raise _UsageError(f"--isolation must be 'bwrap' or 'process', got {isolation!r}")
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
        path = _session_path(session) if session is not None else None
        variables = _load_session(path) if path is not None else {}
        bridge = _bridge(list(toolkit or []), session or f"exec-{secrets.token_hex(4)}")
    except _UsageError as exc:
        typer.echo(f"codeact exec: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE) from None

    try:
        result = asyncio.run(
            _run(code, kind=sandbox_kind, bridge=bridge, isolation=isolation, variables=variables, timeout=timeout)
        )
    except SandboxError as exc:
        if json_output:
            error = {"type": type(exc).__name__, "message": str(exc), "line": None, "code": exc.code}
            typer.echo(json.dumps({"ok": False, "status": "sandbox_error", "error": error}))
        typer.echo(f"codeact exec: the sandbox failed: {exc}", err=True)
        raise typer.Exit(EXIT_SANDBOX) from None

    if path is not None and session is not None:
        _save_session(path, session, result.variables)
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
