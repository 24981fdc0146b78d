"""``codeact knowledge list|show BLUEPRINT``: a blueprint's knowledge sources, and what a task would retrieve.

``list`` prints each source (kind, files, chunks, characters); ``show --query TEXT`` prints the
selection a run with that task gets (constraints, then domain chunks with their BM25 scores), as the
run puts it into the prompt (docs/knowledge.md). Exit 1 when the blueprint's knowledge is invalid
(a missing file or folder: the validator's issue, with the fix), 2 when the blueprint cannot be loaded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from codeact.engine.knowledge import KnowledgeBase

_FILE = Annotated[Path, typer.Argument(help="The blueprint YAML file.", show_default=False)]
_JSON = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def register(app: typer.Typer) -> None:
    """Register the ``knowledge`` command group on ``app``."""
    group = typer.Typer(name="knowledge", help="A blueprint's knowledge sources and retrieval.", no_args_is_help=True)
    group.command("list")(list_knowledge)
    group.command("show")(show_knowledge)
    app.add_typer(group)


def _open(file: Path) -> KnowledgeBase | None:
    from codeact.engine.blueprint import format_load_error, load_path, validate_blueprint
    from codeact.engine.blueprint.factory import knowledge_settings
    from codeact.engine.errors import BlueprintLoadError
    from codeact.engine.knowledge import KnowledgeBase

    try:
        blueprint = load_path(file)
    except BlueprintLoadError as exc:
        typer.echo(format_load_error(exc), err=True)
        raise typer.Exit(2) from None
    issues = [i for i in validate_blueprint(blueprint).errors if i.path.startswith("$.knowledge")]
    if issues:
        for issue in issues:
            typer.echo(issue.format(), err=True)
        raise typer.Exit(1)
    settings = knowledge_settings(blueprint)
    if settings is None:
        return None
    try:
        return KnowledgeBase.from_settings(settings)
    except BlueprintLoadError as exc:
        typer.echo(format_load_error(exc), err=True)
        raise typer.Exit(1) from None


def list_knowledge(file: _FILE, json_output: _JSON = False) -> None:
    """List the blueprint's knowledge sources with their chunk counts."""
    base = _open(file)
    sources = base.sources if base is not None else ()
    if json_output:
        rows = [
            {"source": s.label, "kind": s.kind, "files": s.files, "chunks": s.chunks, "chars": s.chars} for s in sources
        ]
        typer.echo(json.dumps({"budget": base.budget if base else None, "sources": rows}, indent=2))
        return
    if base is None:
        typer.echo(f"{file} declares no knowledge (add knowledge.sources: see docs/knowledge.md).")
        return
    width = max(len(s.label) for s in sources)
    for s in sources:
        files = f"{s.files} file{'s' if s.files != 1 else ''}" if s.files or s.label.endswith("/") else "inline"
        typer.echo(f"{s.label:<{width}}  {s.kind:<10}  {files:>8}  {s.chunks:>3} chunks  {s.chars:>6} chars")
    typer.echo(f"{sum(s.chunks for s in sources)} chunks; budget {base.budget} tokens per task.")


def show_knowledge(
    file: _FILE,
    query: Annotated[str, typer.Option("--query", "-q", help="The task, as `codeact run --input` would get it.")],
    json_output: _JSON = False,
) -> None:
    """Show what a task would retrieve: constraints (always) and the domain chunks that match it."""
    base = _open(file)
    if base is None:
        typer.echo(f"{file} declares no knowledge (add knowledge.sources: see docs/knowledge.md).")
        return
    selection = base.select(query)
    if json_output:
        payload: dict[str, Any] = {
            "query": query,
            "tokens": selection.tokens,
            "budget": base.budget,
            "dropped": selection.dropped,
            "constraints": [{"source": c.source, "title": c.title, "text": c.text} for c in selection.constraints],
            "domain": [
                {"source": c.source, "title": c.title, "text": c.text, "score": round(score, 4)}
                for c, score in selection.domain
            ],
        }
        typer.echo(json.dumps(payload, indent=2, ensure_ascii=False))
        return
    typer.echo(f"constraints ({len(selection.constraints)}, always included):")
    for chunk in selection.constraints:
        typer.echo(f"  [{chunk.source}] {_one_line(chunk.render())}")
    typer.echo(f"domain ({len(selection.domain)} matching the query):")
    for chunk, score in selection.domain:
        typer.echo(f"  {score:6.2f} [{chunk.source}] {_one_line(chunk.render())}")
    dropped = f"; {selection.dropped} left out by the budget" if selection.dropped else ""
    typer.echo(f"~{selection.tokens} of {base.budget} tokens{dropped}.")


def _one_line(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
