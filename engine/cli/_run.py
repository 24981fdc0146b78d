"""``codeact run`` (run a blueprint once) and ``codeact replay`` (re-execute a recorded session).

Exit codes of ``run``: 0 the run completed (or paused for user input), 1 it failed, 2 usage,
load, model-configuration or factory errors (printed ai4j-style).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from codeact.engine.cli._resume import resume_command

if TYPE_CHECKING:
    from collections.abc import Callable

    from codeact.engine.events import Event
    from codeact.toolkits import ApprovalDecision, ApprovalRequest, ToolkitRegistry

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
_CONFIGURATION_CODES = frozenset({"model.auth"})
STRICT_CODE = "blueprint.validation.strict"


class _Usage(Exception):
    """A usage/configuration error: printed (and as JSON on stdout under ``--json``), exit 2."""

    def __init__(self, message: str, code: str = "cli.usage") -> None:
        super().__init__(message)
        self.code = code


def _run_options(tags: list[str], meta: list[str], context_file: Path | None) -> dict[str, Any]:
    """``Agent.run``'s ``config`` and ``context`` from ``--tag``, ``--meta KEY=VALUE`` and ``--context FILE``."""
    from codeact.engine.agent import RunConfig
    from codeact.engine.errors import CodeactError

    out: dict[str, Any] = {}
    metadata: dict[str, Any] = {}
    for item in meta:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise _Usage(f"--meta takes KEY=VALUE, not {item!r}")
        try:
            metadata[key.strip()] = json.loads(raw)
        except ValueError:
            metadata[key.strip()] = raw
    if tags or metadata:
        try:
            out["config"] = RunConfig(tags=tags, metadata=metadata)
        except CodeactError as exc:
            raise _Usage(exc.message, exc.code) from None
    if context_file is not None:
        try:
            context = json.loads(context_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise _Usage(f"--context {context_file}: not a readable JSON file: {exc}") from None
        if not isinstance(context, dict):
            raise _Usage(f"--context {context_file}: the file must hold a JSON object, not {type(context).__name__}")
        out["context"] = context
    return out


def _registry(refs: list[str]) -> ToolkitRegistry:
    return _loaded(refs)[0]


def _loaded(refs: list[str]) -> tuple[ToolkitRegistry, tuple[str, ...]]:
    """The host's registry with the ``--toolkit`` references, and the names those references loaded."""
    from codeact.toolkits import ToolkitError, load_registry, load_toolkit_ref

    try:
        registry = load_registry()
        names = tuple(registry.register(load_toolkit_ref(ref), replace=True).name for ref in refs)
    except ToolkitError as exc:
        raise _Usage(f"--toolkit: {exc}", exc.code) from None
    return registry, names


class _Spinner:
    """The terminal spinner of a run (None off a terminal); paused while the user answers a question."""

    def __init__(self) -> None:
        self.status: Any = None


_slow_steps_shown = False


def _show_slow_steps() -> None:
    """Print the model client's slow steps (litellm's import, a local model's load) on stderr after a second."""
    global _slow_steps_shown
    if _slow_steps_shown:  # once per process (the CLI tests run many commands in one)
        return
    from codeact.engine.model import on_slow_step

    def show(line: str) -> None:
        sys.stderr.write(f"[codeact] {line}\n")  # sys.stderr of the moment: a test's capture, the terminal
        sys.stderr.flush()

    on_slow_step(show)
    _slow_steps_shown = True


def _approver(approve_all: bool, deny_all: bool, spinner: _Spinner) -> Any:
    from codeact.toolkits import ApprovalDecision

    # Calls gathered in one round may ask at the same time: one question on the terminal at a time.
    asking = asyncio.Lock()

    async def approve(request: ApprovalRequest) -> ApprovalDecision:
        if approve_all:
            return ApprovalDecision(allow=True, reason="--approve-all")
        if deny_all:
            return ApprovalDecision(allow=False, reason="--deny-all")
        if not sys.stdin.isatty():
            return ApprovalDecision(allow=False, reason="no terminal to ask on (pass --approve-all to allow)")
        question = f"Allow {request.toolkit}.{request.operation}({json.dumps(request.arguments)[:200]})?"
        async with asking:
            for _ in range(3):  # let the renderer print the events queued so far (the tool call) first
                await asyncio.sleep(0)
            status = spinner.status
            if status is not None:
                status.stop()  # a live spinner would overwrite the question
            try:
                allowed = await asyncio.to_thread(_ask, question)
            finally:
                if status is not None:
                    status.start()
        return ApprovalDecision(allow=allowed, reason="the user answered yes" if allowed else "the user answered no")

    return approve


def _ask(question: str) -> bool:
    """Ask a yes/no question on stderr, read the answer from stdin (no, unless ``y``/``yes``).

    Not ``typer.confirm``: click reads with ``input(" ")``, which writes that space to stdout, and
    stdout carries only the final answer.
    """
    sys.stderr.write(f"{question} [y/N]: ")
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def run_command(
    file: Annotated[Path, typer.Argument(help="The blueprint YAML file.", show_default=False)],
    input: Annotated[str, typer.Option("--input", "-i", "--prompt", help="The user's message (alias --prompt).")],
    model: Annotated[str | None, typer.Option("--model", help="litellm model, e.g. openai/gpt-4.1-mini.")] = None,
    provider: Annotated[str | None, typer.Option("--provider", help="Model provider (openai-compatible, ...).")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="Base URL of the model server.")] = None,
    profile: Annotated[str | None, typer.Option("--profile", help="A model profile from profiles.yaml.")] = None,
    protocol: Annotated[
        str | None,
        typer.Option("--protocol", help="chat, completion (raw FIM) or responses (litellm's Responses API route)."),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option("--api-key", help="The model's API key (held by the model client only; never recorded)."),
    ] = None,
    session: Annotated[str | None, typer.Option("--session", help="Continue (or name) this session.")] = None,
    store: Annotated[str | None, typer.Option("--store", help="Store URL (sqlite:///path, redis://...).")] = None,
    sandbox: Annotated[str | None, typer.Option("--sandbox", help="subprocess or docker.")] = None,
    isolation: Annotated[str, typer.Option("--isolation", help="bwrap (default) or process (weaker).")] = "bwrap",
    runtime: Annotated[
        str | None, typer.Option("--runtime", help="docker only: runc or gvisor (default: the blueprint's, runc).")
    ] = None,
    allow_sandbox_declaration: Annotated[
        bool, typer.Option("--allow-sandbox-declaration", help="Accept the blueprint's sandbox block.")
    ] = False,
    max_round_seconds: Annotated[
        float | None,
        typer.Option(
            "--max-round-seconds",
            help="The most seconds of code per round a blueprint may ask for (default 600).",
            min=0.001,
        ),
    ] = None,
    toolkit: Annotated[list[str] | None, typer.Option("--toolkit", help="MODULE:OBJECT (repeatable).")] = None,
    approve_all: Annotated[bool, typer.Option("--approve-all", help="Approve every approval request.")] = False,
    deny_all: Annotated[bool, typer.Option("--deny-all", help="Deny every approval request.")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Print events as JSON lines.")] = False,
    artifacts: Annotated[
        Path | None, typer.Option("--artifacts", help="Write the files the code put in outputs/ to this folder.")
    ] = None,
    trace: Annotated[
        Path | None, typer.Option("--trace", help="Write the run's OpenTelemetry spans to this file (JSON lines).")
    ] = None,
    user: Annotated[
        str | None, typer.Option("--user", help="Who the run is for (memory: history summaries, experiences).")
    ] = None,
    queue: Annotated[
        str | None, typer.Option("--queue", help="Enqueue on this Redis (codeact worker runs it); prints the run id.")
    ] = None,
    detach: Annotated[bool, typer.Option("--detach", help="With --queue: print the run id and return.")] = False,
    strict: Annotated[
        bool, typer.Option("--strict", help="Refuse the blueprint if the validator warns (exit 1), e.g. a typo.")
    ] = False,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="A tag of the run (repeatable).")] = None,
    meta: Annotated[
        list[str] | None,
        typer.Option("--meta", help="Run metadata KEY=VALUE (JSON or text; repeatable)."),
    ] = None,
    context_file: Annotated[
        Path | None,
        typer.Option("--context", help="JSON object file: where the user is, for the prompt."),
    ] = None,
) -> None:
    """Run a blueprint once on --input; the final answer goes to stdout."""
    from rich.console import Console

    try:
        run_options = _run_options(tag or [], meta or [], context_file)
    except _Usage as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(EXIT_USAGE) from None
    if queue is not None and api_key is not None:
        typer.echo(
            "--api-key stays on this machine and does not travel with a queued run: give the workers the key "
            "in their environment (a profile's api_key_env, or the provider's variable such as OPENAI_API_KEY).",
            err=True,
        )
        raise typer.Exit(EXIT_USAGE)
    if queue is not None:
        from codeact.engine.cli._queue import run_queued

        raise typer.Exit(
            run_queued(
                file,
                input,
                queue=queue,
                session=session,
                model=model,
                base_url=base_url,
                store=store,
                detach=detach,
                json_output=json_output,
                strict=strict,
                user=user,
                **run_options,
            )  # fmt: skip
        )
    # Off a terminal (a log file, a pipe) lines are not hard-wrapped at 80 columns: messages stay greppable.
    err = Console(stderr=True)
    if not err.is_terminal:
        err = Console(stderr=True, soft_wrap=True)
    spinner = _Spinner()
    _show_slow_steps()
    try:
        agent = _build(
            file,
            model=model,
            provider=provider,
            base_url=base_url,
            profile=profile,
            protocol=protocol,
            api_key=api_key,
            store=store,
            sandbox=sandbox,
            isolation=isolation,
            runtime=runtime,
            allow=allow_sandbox_declaration,
            max_round_seconds=max_round_seconds,
            toolkits=list(toolkit or []),
            approve_all=approve_all,
            deny_all=deny_all,
            json_output=json_output,
            spinner=spinner,
            user=user,
            strict=strict,
            # --json prints the chunks; a terminal counts them on the spinner while a slow model writes
            stream=json_output or err.is_terminal,
        )
    except _Usage as exc:
        typer.echo(str(exc), err=True)
        if json_output:
            # --json readers get the error on stdout too (one JSON line, like the events).
            error = {"type": "run.error", "error": {"code": exc.code, "message": str(exc)}}
            sys.stdout.write(json.dumps(error, ensure_ascii=False) + "\n")
        # --strict refuses a blueprint the author can fix like any failed check: exit 1, not a usage error.
        raise typer.Exit(EXIT_FAILED if exc.code == STRICT_CODE else EXIT_USAGE) from None
    from codeact.engine.agent import Agent

    if "context" in run_options and not isinstance(agent, Agent):
        _close_servers(getattr(agent, "_owned", ()))
        typer.echo("--context applies to an agent blueprint, not to a flow (--tag and --meta apply to both)", err=True)
        raise typer.Exit(EXIT_USAGE)
    options: list[tuple[str, Any]] = [
        ("--model", model),
        ("--provider", provider),
        ("--base-url", base_url),
        ("--profile", profile),
        ("--protocol", protocol),  # --api-key is never echoed in a printed command
        ("--store", store),
        ("--sandbox", sandbox),
        ("--isolation", None if isolation == "bwrap" else isolation),
        ("--runtime", runtime),
        ("--allow-sandbox-declaration", allow_sandbox_declaration),
        ("--max-round-seconds", f"{max_round_seconds:g}" if max_round_seconds is not None else None),
        ("--toolkit", list(toolkit or [])),
        ("--approve-all", approve_all),
        ("--deny-all", deny_all),
        ("--json", json_output),
        ("--artifacts", str(artifacts) if artifacts is not None else None),
        ("--trace", str(trace) if trace is not None else None),
        ("--user", user),
        ("--tag", list(tag or [])),
        ("--meta", list(meta or [])),
        ("--context", str(context_file) if context_file is not None else None),
    ]

    def again(session_id: str, input_text: str = "ANSWER") -> str:
        return resume_command(file, options, session=session_id, input_text=input_text)

    if trace is not None:
        from codeact.engine import telemetry

        try:
            telemetry.configure(file=trace)
        except BaseException:
            _close_servers(agent._owned)
            raise
    try:
        code = asyncio.run(
            _drive(
                agent,
                input,
                session,
                json_output=json_output,
                console=err,
                spinner=spinner,
                again=again,
                artifacts=artifacts,
                run_options=run_options,
            )
        )
    finally:
        if trace is not None:
            telemetry.shutdown()  # flushes the spans to the file
    raise typer.Exit(code)


def _build(
    file: Path,
    *,
    model: str | None,
    provider: str | None,
    base_url: str | None,
    profile: str | None,
    protocol: str | None,
    store: str | None,
    sandbox: str | None,
    isolation: str,
    allow: bool,
    api_key: str | None = None,
    runtime: str | None = None,
    max_round_seconds: float | None = None,
    toolkits: list[str],
    approve_all: bool,
    deny_all: bool,
    json_output: bool,
    spinner: _Spinner,
    user: str | None = None,
    strict: bool = False,
    stream: bool = False,
) -> Any:
    from codeact.engine.agent import Agent, default_sandbox_factory
    from codeact.engine.agent._assemble import model_routes as _model_routes  # shared with Agent.from_blueprint
    from codeact.engine.blueprint import (
        AgentFactory,
        HostContext,
        format_factory_error,
        format_load_error,
        load_path,
        print_warnings,
    )
    from codeact.engine.errors import BlueprintFactoryError, BlueprintLoadError, ModelError, StoreError
    from codeact.engine.store import open_store

    if sandbox not in (None, "subprocess", "docker"):
        raise _Usage(f"--sandbox must be 'subprocess' or 'docker', got {sandbox!r}")
    if isolation not in ("bwrap", "process"):
        raise _Usage(f"--isolation must be 'bwrap' or 'process', got {isolation!r}")
    if runtime not in (None, "runc", "gvisor"):
        raise _Usage(f"--runtime must be 'runc' or 'gvisor', got {runtime!r}")
    if protocol not in (None, "chat", "completion", "responses"):
        raise _Usage(f"--protocol must be 'chat', 'completion' or 'responses', got {protocol!r}")
    if approve_all and deny_all:
        raise _Usage("--approve-all and --deny-all exclude each other: pass one")
    try:
        bp = load_path(file)
    except BlueprintLoadError as exc:
        raise _Usage(format_load_error(exc), exc.code) from None
    if bp.workflow is not None and (bp.workflow.mode or "").strip() == "flow":
        if protocol == "responses" or api_key is not None:
            raise _Usage(
                "--protocol responses and --api-key apply to an agent blueprint; a flow's agents name their "
                "models (use a profile with api_key_env, or the provider's key variable)"
            )
        return _build_flow(
            bp,
            model=model,
            provider=provider,
            base_url=base_url,
            profile=profile,
            protocol=protocol,
            store=store,
            sandbox=sandbox,
            isolation=isolation,
            runtime=runtime,
            allow=allow,
            registry=_loaded(toolkits),
            approver=_approver(approve_all, deny_all, spinner),
            stream=stream,
            strict=strict,
        )
    try:
        client, bp = _model_routes(
            bp, model=model, provider=provider, base_url=base_url, profile=profile, protocol=protocol, api_key=api_key
        )
    except ModelError as exc:
        raise _Usage(exc.message, exc.code) from None
    registry, offered = _loaded(toolkits)
    mcp = _mcp_toolkits(bp, registry)
    try:
        try:
            opened = open_store(store)
        except StoreError as exc:
            raise _Usage(f"--store: {exc.message}", exc.code) from None
        approver = _approver(approve_all, deny_all, spinner)
        try:
            spec = AgentFactory().create(
                bp,
                HostContext(
                    model_client=client,
                    toolkit_registry=registry,
                    store=opened,
                    approval_callback=approver,
                    allow_sandbox_declaration=allow,
                    max_round_seconds=max_round_seconds,
                    strict=strict,
                    offered_toolkits=offered,
                ),
            )
        except BlueprintFactoryError as exc:
            raise _Usage(format_factory_error(exc), exc.code) from None
        print_warnings(spec.warnings)  # one line each on stderr, before the run
        _prepare_environment(spec, sandbox)
        factory = default_sandbox_factory(backend=sandbox, isolation=isolation, runtime=runtime)  # type: ignore[arg-type]
        agent = Agent(
            spec,
            model=client,
            store=opened,
            registry=registry,
            sandbox_factory=factory,
            approver=approver,
            stream=stream,
            user=user,
        )
    except BaseException:
        _close_servers(mcp)  # started above: the run will not happen, stop them now
        raise
    agent._owned = tuple(mcp)  # the MCP servers stop when the run ends (_drive closes the agent)
    return agent


def _close_servers(servers: Sequence[Any]) -> None:
    """Stop started MCP servers (from synchronous code; one that fails to stop does not keep the others up)."""
    for server in servers:
        with contextlib.suppress(Exception):
            server.close()


def _mcp_toolkits(bp: Any, registry: ToolkitRegistry) -> list[Any]:
    from codeact.engine.agent._assemble import mcp_toolkits
    from codeact.toolkits import ToolkitError

    try:
        return mcp_toolkits(bp, registry)
    except ToolkitError as exc:
        raise _Usage(f"Toolkit error [{exc.code}]: {exc.message}", exc.code) from None


def _build_flow(
    bp: Any, *, store: str | None, registry: tuple[ToolkitRegistry, tuple[str, ...]], allow: bool, **options: Any
) -> Any:
    """A ``workflow: {mode: flow}`` blueprint: its flow (engine.flow), every agent built as above.

    A ``--toolkit`` must be granted by one of the flow's agents (checked once the flow is valid).
    """
    from codeact.engine.blueprint import format_factory_error, format_load_error, ungranted_error, validate_blueprint
    from codeact.engine.errors import BlueprintFactoryError, BlueprintLoadError, ModelError, StoreError
    from codeact.engine.flow import FlowAgent
    from codeact.engine.store import open_store

    loaded, offered = registry
    report = validate_blueprint(bp)
    ungranted = ungranted_error(bp, offered, report) if report.valid else None
    if ungranted is not None:
        raise _Usage(format_factory_error(ungranted), ungranted.code)

    try:
        opened = open_store(store)
    except StoreError as exc:
        raise _Usage(f"--store: {exc.message}", exc.code) from None
    try:
        return FlowAgent.from_blueprint(bp, toolkits=loaded, store=opened, allow_sandbox_declaration=allow, **options)
    except BlueprintLoadError as exc:
        raise _Usage(format_load_error(exc), exc.code) from None
    except BlueprintFactoryError as exc:
        raise _Usage(format_factory_error(exc), exc.code) from None
    except ModelError as exc:
        raise _Usage(exc.message, exc.code) from None


def _prepare_environment(spec: Any, backend: str | None) -> None:
    """Build the declared environment now, with progress on stderr, so the run starts on a cache hit."""
    from codeact.engine.agent.sandboxes import declared_environment
    from codeact.sandbox.errors import EnvironmentBuildError

    chosen = backend or spec.sandbox.backend or "subprocess"
    if any(w.code == "blueprint.sandbox.provider.substituted" for w in spec.warnings):
        typer.echo(f"sandbox: {spec.sandbox.provider} is not available on this host; the run uses {chosen}.", err=True)
    try:
        declared_environment(spec.sandbox, "docker" if chosen == "docker" else "subprocess")
    except EnvironmentBuildError as exc:
        raise _Usage(f"Sandbox environment error [{exc.code}]: {exc.message}") from None


async def _drive(
    agent: Any,
    input: str,
    session: str | None,
    *,
    json_output: bool,
    console: Any,
    spinner: _Spinner,
    again: Callable[..., str],
    artifacts: Path | None = None,
    run_options: Mapping[str, Any] | None = None,
) -> int:
    from codeact.engine.events import ArtifactCreated, RunCompleted, RunFailed, RunStarted, render_event

    last: Event | None = None
    session_id = session
    produced: set[tuple[int, str]] = set()
    status = None if json_output or not console.is_terminal else console.status("working...", spinner="dots")
    written = 0  # characters of the model's reply streamed so far this round (shown on the spinner)
    spinner.status = status
    interrupted = False
    try:
        if status is not None:
            status.start()
        async for event in agent.run(input, session_id=session, **(run_options or {})):
            last = event
            if isinstance(event, RunStarted):
                session_id = event.session_id
            if isinstance(event, ArtifactCreated) and event.refused is None:
                produced.add((event.round, event.name))
            if json_output:
                sys.stdout.write(event.to_json_line() + "\n")
                sys.stdout.flush()
            else:
                if status is not None:
                    written = 0 if event.type == "round.started" else written
                    if event.type == "message.delta":
                        written += len(getattr(event, "text", ""))
                        status.update(f"the model is writing... {written:,} characters")
                    else:
                        status.update(_status_text(event))
                render_event(event, console)
    except asyncio.CancelledError:
        # Ctrl-C (asyncio.run cancels this task): the agent recorded the round in progress as
        # interrupted; say how to go on. Returning normally makes asyncio.run end without a traceback.
        interrupted = True
    finally:
        if status is not None:
            status.stop()
        if artifacts is not None and produced and session_id is not None:
            await _write_run_artifacts(agent.store, session_id, produced, artifacts, console)
        await agent.store.close()
        if agent.model is not None:
            await agent.model.aclose()
        await agent.aclose()  # a flow's model clients, an agent's MCP servers
    if interrupted:
        if session_id is not None:
            command = again(session_id, "continue")
            console.print(
                f"interrupted: session {session_id} was saved with the round in progress marked interrupted "
                f"(the toolkit calls it completed are recorded); resume with:\n  {command}",
                markup=False,
                highlight=False,
            )
        else:
            console.print("interrupted before the session was opened: nothing was recorded", markup=False)
        return EXIT_INTERRUPTED
    if isinstance(last, RunCompleted):
        if not json_output and last.answer is not None:
            sys.stdout.write(f"{_answer_text(last.answer)}\n")
        if not json_output and last.reason == "ask_user":
            console.print(
                f"paused: the agent asks the question above; answer with {again(session_id or '')}",
                markup=False,
                highlight=False,
            )
        if not json_output and last.reason == "interrupt_before":
            command = again(session_id or "", "continue")
            console.print(
                f"paused before the flow's next step (interruptBefore); go on with {command}",
                markup=False,
                highlight=False,
            )
        return EXIT_OK
    if isinstance(last, RunFailed):
        # Missing or refused credentials are the caller's configuration, like a bad option: exit 2.
        return EXIT_USAGE if last.error.get("code") in _CONFIGURATION_CODES else EXIT_FAILED
    return EXIT_FAILED


async def _write_run_artifacts(
    store: Any, session_id: str, produced: set[tuple[int, str]], directory: Path, console: Any
) -> None:
    """Write the artifacts this run produced (read back from the session's round records) to ``directory``."""
    from codeact.engine.cli._artifacts import write_artifacts

    rounds = await store.rounds(session_id)
    chosen = [a for r in rounds for a in r.artifacts if (r.index, a.get("name")) in produced]
    try:
        written = write_artifacts(directory, chosen)
    except OSError as exc:
        console.print(f"cannot write the artifacts to {directory}: {exc}", markup=False, highlight=False)
        return
    console.print(f"{len(written)} artifact(s) written to {directory}", markup=False, highlight=False)


def _answer_text(answer: Any) -> str:
    """A string answer as it is; anything else as plain JSON (never a Python repr, never a codec tag).

    Stdout is for programs too (``| jq``): a tuple answer prints as ``["A", 4]``, a date as its ISO text.
    """
    if isinstance(answer, str):
        return answer
    from codeact.sandbox.runtime.codec import plain

    return json.dumps(plain(answer), ensure_ascii=False, default=str)


def _status_text(event: Event) -> str:
    kind = event.type
    if kind in ("round.started", "segment.created", "message.delta"):
        return "the model is thinking..."
    if kind in ("code.started", "tool.call.started", "tool.call.completed"):
        return "running code in the sandbox..."
    return "working..."


def replay_command(
    session: Annotated[str, typer.Argument(help="The session to replay.", show_default=False)],
    store: Annotated[str | None, typer.Option("--store", help="Store URL (sqlite:///path, redis://...).")] = None,
    live: Annotated[bool, typer.Option("--live", help="Call the tools for real instead of the record.")] = False,
    toolkit: Annotated[list[str] | None, typer.Option("--toolkit", help="MODULE:OBJECT (repeatable).")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Re-execute a recorded session in a fresh sandbox and report per round whether it matches."""
    from codeact.engine.errors import CodeactError
    from codeact.engine.store import open_store

    try:
        registry = _registry(list(toolkit or []))
        opened = open_store(store)
    except (_Usage, CodeactError) as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(EXIT_USAGE) from None
    try:
        report = asyncio.run(_replay(opened, session, registry, live, json_output))
    except _Usage as exc:
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


async def _replay(store: Any, session: str, registry: Any, live: bool, json_output: bool) -> Any:
    from codeact.engine.replay import replay_session

    try:
        meta = await store.get_session(session)
        if live and meta is not None:
            missing = sorted(name for name in meta.extra.get("grants") or {} if name not in registry)
            if missing:
                names = ", ".join(repr(name) for name in missing)
                raise _Usage(
                    f"--live calls the tools for real, but the session's toolkit(s) {names} are not loaded: "
                    "pass --toolkit MODULE:OBJECT for each (or replay without --live to answer from the record)"
                )

        def progress(r: Any) -> None:
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
    """Register ``codeact run`` and ``codeact replay`` on ``app``."""
    app.command("run", help="Run a blueprint once; --json streams events as JSON lines.", no_args_is_help=True)(
        run_command
    )
    app.command("replay", help="Re-execute a recorded session deterministically from the store.", no_args_is_help=True)(
        replay_command
    )
