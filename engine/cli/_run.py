"""``codeact run``: run a blueprint (an agent or a flow) once.

The flags become one :class:`RunFlags` value; :func:`_options` maps it onto the engine's one
:class:`~codeact.engine.agent.BuildOptions`, and :func:`codeact.engine.builder.build` builds the agent or the
flow. The events are rendered by ``_drive.py``; the terminal's spinner and approval questions live in
``_terminal.py``; ``codeact replay`` in ``_replay.py``.

Exit codes of ``run``: 0 the run completed (or paused for user input), 1 it failed, 2 usage,
load, model-configuration or factory errors (printed ai4j-style).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from codeact.engine.cli import _run_flags as flag
from codeact.engine.cli._drive import EXIT_FAILED, EXIT_USAGE, drive
from codeact.engine.cli._options import (
    AllowSandboxDeclaration,
    Artifacts,
    BaseUrl,
    Isolation,
    MaxRoundBytes,
    MaxRoundCalls,
    MaxRoundSeconds,
    MaxRunBytes,
    MaxRunCalls,
    StoreUrl,
    Toolkits,
    Usage,
    load_toolkits,
)
from codeact.engine.cli._resume import resume_command
from codeact.engine.cli._run_flags import RunFlags, RunKwargs, build_options, run_kwargs
from codeact.engine.cli._terminal import Spinner, approver, show_slow_steps
from codeact.prompts.errors import ErrorInfo

if TYPE_CHECKING:
    from codeact.engine.agent import Agent, BuildOptions
    from codeact.engine.blueprint import AgentSpec, Blueprint
    from codeact.engine.flow import FlowAgent

__all__ = ["STRICT_CODE", "RunFlags", "register", "run_command"]

STRICT_CODE = "blueprint.validation.strict"
_Usage = Usage  # the name this module's errors had (tests import it)
_Spinner = Spinner


def run_command(
    file: Annotated[Path, typer.Argument(help="The blueprint YAML file.", show_default=False)],
    input: flag.Input,
    model: flag.Model = None,
    provider: flag.Provider = None,
    base_url: BaseUrl = None,
    profile: flag.Profile = None,
    protocol: flag.Protocol = None,
    api_key: flag.ApiKey = None,
    session: flag.Session = None,
    store: StoreUrl = None,
    sandbox: flag.Sandbox = None,
    isolation: Isolation = "bwrap",
    runtime: flag.Runtime = None,
    allow: AllowSandboxDeclaration = False,
    max_round_seconds: MaxRoundSeconds = None,
    max_round_calls: MaxRoundCalls = None,
    max_run_calls: MaxRunCalls = None,
    max_round_bytes: MaxRoundBytes = None,
    max_run_bytes: MaxRunBytes = None,
    toolkits: Toolkits = None,
    approve_all: flag.ApproveAll = False,
    deny_all: flag.DenyAll = False,
    json_output: flag.Json = False,
    artifacts: Artifacts = None,
    trace: flag.Trace = None,
    user: flag.User = None,
    queue: flag.Queue = None,
    detach: flag.Detach = False,
    strict: flag.Strict = False,
    tag: flag.Tags = None,
    meta: flag.Meta = None,
    context_file: flag.ContextFile = None,
) -> None:
    """Run a blueprint once on --input; the final answer goes to stdout."""
    flags = RunFlags(**locals())  # every parameter is a flag: from here on they travel as one value
    try:
        run_options = run_kwargs(flags.tag or [], flags.meta or [], flags.context_file)
    except Usage as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(EXIT_USAGE) from None
    if flags.queue is not None:
        raise typer.Exit(_enqueue(flags, run_options))
    raise typer.Exit(_run_here(flags, run_options))


def _enqueue(flags: RunFlags, run_options: RunKwargs) -> int:
    """``--queue URL``: hand the run to a ``codeact worker`` (the key never travels with it)."""
    from codeact.engine.cli._queue import run_queued

    if flags.api_key is not None:
        typer.echo(
            "--api-key stays on this machine and does not travel with a queued run: give the workers the key "
            "in their environment (a profile's api_key_env, or the provider's variable such as OPENAI_API_KEY).",
            err=True,
        )
        return EXIT_USAGE
    assert flags.queue is not None  # noqa: S101 - the caller checked
    return run_queued(
        flags.file,
        flags.input,
        queue=flags.queue,
        session=flags.session,
        model=flags.model,
        base_url=flags.base_url,
        store=flags.store,
        detach=flags.detach,
        json_output=flags.json_output,
        strict=flags.strict,
        user=flags.user,
        **run_options,
    )


def _run_here(flags: RunFlags, run_options: RunKwargs) -> int:
    """Build the agent (or flow) in this process, drive its run, and return the exit code."""
    from rich.console import Console

    # Off a terminal (a log file, a pipe) lines are not hard-wrapped at 80 columns: messages stay greppable.
    err = Console(stderr=True)
    if not err.is_terminal:
        err = Console(stderr=True, soft_wrap=True)
    spinner = Spinner()
    show_slow_steps()
    # --json prints the chunks; a terminal counts them on the spinner while a slow model writes
    agent = _built_or_exit(flags, spinner, stream=flags.json_output or err.is_terminal)
    from codeact.engine.agent import Agent

    if "context" in run_options and not isinstance(agent, Agent):
        agent.close()
        typer.echo("--context applies to an agent blueprint, not to a flow (--tag and --meta apply to both)", err=True)
        return EXIT_USAGE
    options = flags.resume_options()

    def again(session_id: str, input_text: str = "ANSWER") -> str:
        return resume_command(flags.file, options, session=session_id, input_text=input_text)

    with _tracing(flags.trace, agent):
        return asyncio.run(
            drive(
                agent,
                flags.input,
                flags.session,
                json_output=flags.json_output,
                console=err,
                spinner=spinner,
                again=again,
                artifacts=flags.artifacts,
                run_options=run_options,
            )
        )


def _built_or_exit(flags: RunFlags, spinner: Spinner, *, stream: bool) -> Agent | FlowAgent:
    """:func:`_build`, or the usage error printed (and as JSON on stdout under ``--json``) and the exit."""
    try:
        return _build(flags, spinner=spinner, stream=stream)
    except Usage as exc:
        typer.echo(str(exc), err=True)
        if flags.json_output:
            # --json readers get the error on stdout too (one JSON line, like the events).
            error = {"type": "run.error", "error": ErrorInfo(code=exc.code, message=str(exc)).to_dict()}
            sys.stdout.write(json.dumps(error, ensure_ascii=False) + "\n")
        # --strict refuses a blueprint the author can fix like any failed check: exit 1, not a usage error.
        raise typer.Exit(EXIT_FAILED if exc.code == STRICT_CODE else EXIT_USAGE) from None


@contextlib.contextmanager
def _tracing(trace: Path | None, agent: Agent | FlowAgent) -> Iterator[None]:
    """``--trace FILE``: the run's spans written to FILE (flushed when the run ends)."""
    if trace is None:
        yield
        return
    from codeact.engine import telemetry

    try:
        telemetry.configure(file=trace)
    except BaseException:
        agent.close()
        raise
    try:
        yield
    finally:
        telemetry.shutdown()  # flushes the spans to the file


def _build(flags: RunFlags, *, spinner: Spinner, stream: bool = False) -> Agent | FlowAgent:
    """The agent or flow of ``flags.file`` (:func:`codeact.engine.builder.build`), ready to run.

    Raises:
        Usage: What the user must fix (a flag, the blueprint, the model, a toolkit, the store), said once.
    """
    from codeact.engine.agent import Agent
    from codeact.engine.blueprint import is_flow
    from codeact.engine.builder import build

    options = build_options(flags, approver(flags.approve_all, flags.deny_all, spinner), stream=stream)
    with _usage_errors():
        bp = _load(flags.file)
    registry, offered = load_toolkits(list(flags.toolkits or []))
    if is_flow(bp):
        _check_flow(bp, options, offered)
    with _usage_errors():
        # The toolkits --toolkit loaded are offered to the blueprint (refused unless it grants them).
        built = build(bp, toolkits=[registry.get(name) for name in offered], options=options)
    if isinstance(built, Agent):
        try:
            _prepare_environment(built.spec, flags.sandbox)
        except BaseException:
            built.close()  # the MCP servers started: the run will not happen, stop them now
            raise
    return built


def _load(file: Path) -> Blueprint:
    from codeact.engine.blueprint import load_path

    return load_path(file)


def _check_flow(bp: Blueprint, options: BuildOptions, offered: tuple[str, ...]) -> None:
    """What a flow refuses before it is built: agent-only flags, and a ``--toolkit`` none of its agents grants."""
    from codeact.engine.blueprint import format_factory_error, ungranted_error, validate_blueprint

    if options.protocol == "responses" or options.api_key is not None:
        raise Usage(
            "--protocol responses and --api-key apply to an agent blueprint; a flow's agents name their "
            "models (use a profile with api_key_env, or the provider's key variable)"
        )
    report = validate_blueprint(bp)
    ungranted = ungranted_error(bp, offered, report) if report.valid else None
    if ungranted is not None:
        raise Usage(format_factory_error(ungranted), ungranted.code)


@contextlib.contextmanager
def _usage_errors() -> Iterator[None]:
    """The engine's configuration errors as the command's usage errors (each said the way the user fixes it)."""
    from codeact.engine.blueprint import format_factory_error, format_load_error
    from codeact.engine.errors import BlueprintFactoryError, BlueprintLoadError, ModelError, StoreError, ToolkitError

    try:
        yield
    except BlueprintLoadError as exc:
        raise Usage(format_load_error(exc), exc.code) from None
    except BlueprintFactoryError as exc:
        raise Usage(format_factory_error(exc), exc.code) from None
    except ModelError as exc:
        raise Usage(exc.message, exc.code) from None
    except StoreError as exc:
        raise Usage(f"--store: {exc.message}", exc.code) from None
    except ToolkitError as exc:  # a blueprint's MCP server that did not start
        raise Usage(f"Toolkit error [{exc.code}]: {exc.message}", exc.code) from None


def _prepare_environment(spec: AgentSpec, backend: str | None) -> None:
    """Build the declared environment now, with progress on stderr, so the run starts on a cache hit."""
    from codeact.engine.agent.sandboxes import declared_environment
    from codeact.sandbox.errors import EnvironmentBuildError

    chosen = backend or spec.sandbox.backend or "subprocess"
    if any(w.code == "blueprint.sandbox.provider.substituted" for w in spec.warnings):
        typer.echo(f"sandbox: {spec.sandbox.provider} is not available on this host; the run uses {chosen}.", err=True)
    try:
        declared_environment(spec.sandbox, "docker" if chosen == "docker" else "subprocess")
    except EnvironmentBuildError as exc:
        raise Usage(f"Sandbox environment error [{exc.code}]: {exc.message}") from None


def register(app: typer.Typer) -> None:
    """Register ``codeact run`` on ``app``."""
    app.command("run", help="Run a blueprint once; --json streams events as JSON lines.", no_args_is_help=True)(
        run_command
    )
