"""``codeact eval``: run an evaluation suite against a model, in one or more modes, and report."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from codeact.engine.cli._options import BaseUrl, Isolation

__all__ = ["eval_command", "register"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def _modes(values: list[str] | None) -> tuple[str, ...]:
    from codeact.engine.eval import MODES

    picked: list[str] = []
    for value in values or ["fim-chat"]:
        for item in value.replace(",", " ").split():
            for mode in MODES if item == "all" else (item,):
                if mode not in picked:
                    picked.append(mode)
    return tuple(picked)


def eval_command(
    suite: Annotated[str, typer.Option("--suite", help="A built-in suite (multitool) or a suite folder.")],
    model: Annotated[str, typer.Option("--model", help="oracle (reference solutions) or a litellm model.")] = "oracle",
    modes: Annotated[
        list[str] | None,
        typer.Option(
            "--modes", help="fim-chat, fim-completion, chat-blocks, react or all (comma-separated or repeated)."
        ),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout.")] = False,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, max=64, help="Tasks run at once.")] = 4,
    out: Annotated[Path | None, typer.Option("--out", help="Output folder (default: eval-out/SUITE).")] = None,
    blueprint: Annotated[
        Path | None, typer.Option("--blueprint", help="A blueprint the generated ones extend (instructions, model).")
    ] = None,
    base_url: BaseUrl = None,
    task: Annotated[list[str] | None, typer.Option("--task", help="Only these task ids or id prefixes.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="At most this many tasks.")] = None,
    per_domain: Annotated[int | None, typer.Option("--per-domain", min=1, help="At most N tasks per domain.")] = None,
    fresh: Annotated[bool, typer.Option("--fresh", help="Run tasks again even when a result file exists.")] = False,
    sandbox: Annotated[str, typer.Option("--sandbox", help="subprocess or docker.")] = "subprocess",
    isolation: Isolation = "bwrap",
    max_turns: Annotated[int | None, typer.Option("--max-turns", min=1, help="Rounds per task.")] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Refuse a --blueprint the validator warns about (exit 1).")
    ] = False,
    thought: Annotated[
        str,
        typer.Option(
            "--thought", help="The code modes' thought: off (default), inline (Thought and NextGoal) or separate."
        ),
    ] = "off",
) -> None:
    """Run an eval suite; prints a table (or JSON) and writes report.{json,md,html} to --out."""
    from codeact.engine.eval import EvalConfig, EvalError, load_suite, run_eval
    from codeact.engine.eval.report import render_table, summarize, write_reports

    if sandbox not in ("subprocess", "docker") or isolation not in ("bwrap", "process"):
        typer.echo("--sandbox must be subprocess or docker, --isolation bwrap or process", err=True)
        raise typer.Exit(EXIT_USAGE)
    if thought not in ("off", "inline", "separate"):
        typer.echo(f"--thought must be off, inline or separate, not {thought!r}", err=True)
        raise typer.Exit(EXIT_USAGE)
    try:
        loaded = load_suite(suite)
        tasks = loaded.select(task or (), limit=limit, per_domain=per_domain)
        if not tasks:
            raise EvalError(f"no task of suite {loaded.name} matches --task {' '.join(task or ())}", code="eval.empty")
        config = EvalConfig(
            model=model,
            modes=_modes(modes),
            out=out or Path("eval-out") / loaded.name,
            concurrency=concurrency,
            blueprint=blueprint,
            base_url=base_url,
            fresh=fresh,
            sandbox=sandbox,
            isolation=isolation,
            max_turns=max_turns,
            strict=strict,
            thought=thought,
        )
        if blueprint is not None and _blueprint_refused(blueprint, strict=strict):
            raise typer.Exit(EXIT_FAILED)

        def progress(done: int, total: int, row: dict[str, Any], resumed: bool) -> None:
            mark = "PASS" if row.get("passed") else "FAIL"
            note = " (done before)" if resumed else f"  {row.get('rounds', 0)} rounds  {row.get('wall_s', 0):.1f} s"
            why = f"  {str(row.get('detail', ''))[:100]}" if not row.get("passed") else ""
            if row.get("lost"):
                why += f"  [answer computed, not returned: {row['lost']}]"
            sys.stderr.write(f"[{done}/{total}] {mark} {row.get('mode')} {row.get('task')}{note}{why}\n")
            sys.stderr.flush()

        results = asyncio.run(run_eval(loaded, tasks, config, on_result=progress))
    except EvalError as exc:
        typer.echo(f"eval: {exc.message}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    except KeyboardInterrupt:
        typer.echo("interrupted: finished tasks are kept; run the same command again to resume", err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    summary = summarize(results, suite=loaded.name)
    paths = write_reports(config.out, summary)
    if json_output:
        sys.stdout.write(json.dumps(summary, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(render_table(summary) + "\n")
    typer.echo(f"reports: {paths['markdown']}  {paths['html']}  {paths['json']}", err=True)
    raise typer.Exit(EXIT_OK)


def _blueprint_refused(path: Path, *, strict: bool) -> bool:
    """Print the ``--blueprint``'s warnings before the tasks run; True when ``--strict`` refuses it."""
    from codeact.engine.blueprint import (
        format_factory_error,
        load_path,
        print_warnings,
        strict_error,
        validate_blueprint,
    )
    from codeact.engine.errors import CodeactError

    try:
        report = validate_blueprint(load_path(path))
    except CodeactError:
        return False  # the tasks report it, each with the generated blueprint that extends it
    refused = strict_error(report) if strict and report.valid else None
    if refused is not None:
        typer.echo(f"eval: {format_factory_error(refused)}", err=True)
        return True
    print_warnings(report.warnings)
    return False


def register(app: typer.Typer) -> None:
    """Register ``codeact eval`` on ``app``."""
    app.command("eval", help="Run an evaluation suite (multitool ships; --model oracle).", no_args_is_help=True)(
        eval_command
    )
