"""``codeact sandbox ...``: maintenance of the sandbox backends.

``gc`` removes what crashed hosts left (containers, runtimes, directories, a killed queue worker's
unpacked blueprints); ``build`` / ``list`` / ``prune`` manage the cached environments a blueprint's
``sandbox.packages`` / ``sandbox.preset`` declare (``codeact.sandbox.env``); ``image build`` /
``image status`` the Docker backend's base image, built from the recipe the package ships
(``codeact.sandbox.image``).

Exit status of ``build`` and ``image build``: 0 built (or already cached), 2 usage or blueprint error,
3 the build failed. ``image status``: 0 built, 1 not built, 3 Docker failed. ``list`` and ``prune``: 0.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

_sandbox_app = typer.Typer(
    name="sandbox",
    help="Maintain the sandbox backends: the Docker image (image build/status), cached environments "
    "(build/list/prune) and leftovers of crashed hosts (gc).",
    no_args_is_help=True,
)


@_sandbox_app.command("gc")
def gc(
    all_: Annotated[
        bool, typer.Option("--all", help="Remove every codeact sandbox leftover, also those of running hosts.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print what was removed as one JSON array.")] = False,
) -> None:
    """Remove what crashed hosts left behind: containers, runtimes, socket, work and blueprints directories.

    The blueprints directories are those of queue workers that were killed (unpacked blueprint folders).
    Each resource names its host process (container labels, the runtime's command line, the
    directory name); those whose host is no longer alive are removed, with their session. A blueprints
    folder without an owner in its name (made by an older version) goes only with --all.
    Exit 0 when the collection ran (also when nothing was removed), 3 when Docker failed.
    """
    from codeact.sandbox.leftovers import remove_leftovers

    removed, docker_error = remove_leftovers(include_live=all_)
    if as_json:
        typer.echo(
            json.dumps(
                [
                    {
                        "kind": c.kind,
                        "id": c.id,
                        "name": c.name,
                        "session": c.session,
                        "host_pid": c.host_pid,
                        "status": c.status,
                    }
                    for c in removed
                ]
            )
        )
    else:
        for c in removed:
            what = f"{c.id} {c.name}" if c.kind == "container" else f"{_KINDS[c.kind]} {c.id}"
            session = f"session {c.session!r}, " if c.session and c.session != "-" else ""
            typer.echo(f"removed {what} ({session}host pid {c.host_pid or '?'}, {c.status})")
        scope = "sandbox leftovers" if all_ else "orphan sandbox leftovers"
        typer.echo(f"{len(removed)} {scope} removed")
    if docker_error is not None and not docker_error.startswith("the docker SDK is not installed"):
        typer.echo(f"error: {docker_error}", err=True)
        raise typer.Exit(3)


_KINDS = {
    "runtime": "runtime process",
    "socket_dir": "bridge socket directory",
    "work_dir": "work directory",
    "blueprints_dir": "unpacked blueprints directory",
}


@_sandbox_app.command("build")
def build(
    blueprint: Annotated[Path, typer.Argument(help="The blueprint whose sandbox block declares packages.")],
    backend: Annotated[
        str | None, typer.Option("--sandbox", help="Build for subprocess or docker (default: the blueprint's).")
    ] = None,
    index_url: Annotated[
        str | None, typer.Option("--index-url", help="A package index replacing the host's pip configuration.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the environment as one JSON object.")] = False,
) -> None:
    """Build (or find in the cache) the environment BLUEPRINT declares, showing progress."""
    from codeact.engine.agent.sandboxes import declared_environment
    from codeact.engine.blueprint import AgentFactory, HostContext, format_factory_error, format_load_error, load_path
    from codeact.engine.errors import BlueprintFactoryError, BlueprintLoadError
    from codeact.sandbox.errors import EnvironmentBuildError

    if backend not in (None, "subprocess", "docker"):
        typer.echo(f"codeact sandbox build: --sandbox must be 'subprocess' or 'docker', got {backend!r}", err=True)
        raise typer.Exit(2)
    try:
        loaded = load_path(blueprint)
        block = loaded.sandbox
        own_imports = frozenset(i.strip() for i in (block.imports or []) if i) if block is not None else frozenset()
        # Building runs none of the model's code: the user asked for it, so the declaration is accepted here.
        host = HostContext(allow_sandbox_declaration=True, allowed_imports=own_imports)
        settings = AgentFactory().sandbox_settings(loaded, host)
    except BlueprintLoadError as exc:
        typer.echo(format_load_error(exc), err=True)
        raise typer.Exit(2) from None
    except BlueprintFactoryError as exc:
        typer.echo(format_factory_error(exc), err=True)
        raise typer.Exit(2) from None
    if not settings.packages and settings.preset is None:
        typer.echo(
            f"codeact sandbox build: {str(blueprint)!r} declares no sandbox.packages or sandbox.preset; "
            "nothing to build",
            err=True,
        )
        raise typer.Exit(2)
    chosen = backend or settings.backend or "subprocess"
    import os

    if index_url:
        os.environ["CODEACT_ENV_INDEX_URL"] = index_url
    started = time.perf_counter()
    try:
        env = declared_environment(settings, "docker" if chosen == "docker" else "subprocess")
    except EnvironmentBuildError as exc:
        if as_json:
            typer.echo(
                json.dumps({"ok": False, "error": {"code": exc.code, "message": exc.message, "package": exc.package}})
            )
        typer.echo(f"codeact sandbox build: {exc.message}", err=True)
        raise typer.Exit(3) from None
    assert env is not None  # noqa: S101 - packages or a preset are declared
    elapsed = time.perf_counter() - started
    where = env.image if env.image is not None else str(env.site)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "ok": True,
                    "key": env.key,
                    "backend": env.backend,
                    "label": env.label,
                    "built": env.built,
                    "where": where,
                    "modules": sorted(env.modules),
                    "seconds": round(elapsed, 3),
                }
            )
        )
        return
    state = "built" if env.built else "cached"
    typer.echo(f"{state}: {env.key} ({env.backend}, {env.label}) -> {where}")


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def _ago(ts: float) -> str:
    delta = max(time.time() - ts, 0)
    if delta < 120:
        return f"{delta:.0f} s ago"
    if delta < 7200:
        return f"{delta / 60:.0f} min ago"
    if delta < 172800:
        return f"{delta / 3600:.0f} h ago"
    return f"{delta / 86400:.0f} days ago"


@_sandbox_app.command("list")
def list_(
    as_json: Annotated[bool, typer.Option("--json", help="Print the environments as one JSON array.")] = False,
) -> None:
    """List cached sandbox environments: what they hold, size, last use."""
    from codeact.sandbox.env import cache_root, list_environments

    entries = list_environments()
    if as_json:
        typer.echo(json.dumps([e.to_json() for e in entries]))
        return
    if not entries:
        typer.echo(f"no cached sandbox environments in {cache_root()}")
        return
    for e in entries:
        where = e.image or str(e.path)
        typer.echo(
            f"{e.key}  {e.backend:<10} {_size(e.size_bytes):>10}  used {_ago(e.last_used):<14} "
            f"py{e.python}  {e.label}  [{where}]"
        )
    typer.echo(f"{len(entries)} environments, {_size(sum(e.size_bytes for e in entries))} in {cache_root()}")


@_sandbox_app.command("prune")
def prune(
    keys: Annotated[list[str] | None, typer.Argument(help="Only these environment keys (prefixes).")] = None,
    unused_days: Annotated[
        float | None, typer.Option("--unused-days", help="Only environments not used for this many days.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the removed environments as one JSON array.")] = False,
) -> None:
    """Remove cached sandbox environments (all, or those named, or those unused for --unused-days)."""
    from codeact.sandbox.env import prune_environments

    removed = prune_environments(
        keys=tuple(keys or ()), unused_for_s=unused_days * 86400 if unused_days is not None else None
    )
    if as_json:
        typer.echo(json.dumps([e.to_json() for e in removed]))
        return
    for e in removed:
        typer.echo(f"removed {e.key} ({e.backend}, {e.label}, {_size(e.size_bytes)}, used {_ago(e.last_used)})")
    typer.echo(f"{len(removed)} environments removed, {_size(sum(e.size_bytes for e in removed))} freed")


_image_app = typer.Typer(
    name="image",
    help="The Docker sandbox image: build it from the recipe the package ships (no clone needed), or check it.",
    no_args_is_help=True,
)
_sandbox_app.add_typer(_image_app)


@_image_app.command("build")
def image_build(
    mirror: Annotated[
        str | None,
        typer.Option("--debian-mirror", help="A Debian mirror (default: deb.debian.org, or CODEACT_DEBIAN_MIRROR)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the outcome as one JSON object.")] = False,
) -> None:
    """Build the Docker sandbox image from Debian packages (about a minute; cached by the recipe's hash).

    Needs Docker, bash and debootstrap (apt-get install debootstrap) and root, as the recipe
    bootstraps a Debian root file system; progress goes to stderr. A built image is reused.
    """
    from codeact.sandbox.errors import SandboxError
    from codeact.sandbox.image import build_image

    try:
        done = build_image(progress=lambda line: typer.echo(line, err=True), mirror=mirror)
    except SandboxError as exc:
        _image_failed("build", exc, as_json=as_json)
    if as_json:
        typer.echo(json.dumps({"ok": True, "tag": done.tag, "built": done.built, "seconds": round(done.seconds, 3)}))
        return
    typer.echo(f"{'built' if done.built else 'cached'}: {done.tag} ({done.seconds:.1f} s)")


@_image_app.command("status")
def image_status(
    as_json: Annotated[bool, typer.Option("--json", help="Print the status as one JSON object.")] = False,
) -> None:
    """Say whether the Docker engine has the sandbox image of the installed recipe (exit 0 yes, 1 no)."""
    from codeact.sandbox.docker_sandbox import image_status as status_of
    from codeact.sandbox.errors import SandboxError
    from codeact.sandbox.image import BUILD_COMMAND

    try:
        status = status_of()
    except SandboxError as exc:
        _image_failed("status", exc, as_json=as_json)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "tag": status.tag,
                    "built": status.built,
                    "id": status.image_id,
                    "size_bytes": status.size_bytes,
                    "created": status.created,
                }
            )
        )
    elif status.built:
        typer.echo(f"built: {status.tag} ({status.image_id}, {_size(status.size_bytes)}, created {status.created})")
    else:
        typer.echo(f"not built: {status.tag}; run `{BUILD_COMMAND}` to build it")
    if not status.built:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Register the ``sandbox`` command group on ``app``."""
    app.add_typer(_sandbox_app)


def _image_failed(command: str, exc: Any, *, as_json: bool) -> NoReturn:
    """Report a Docker or recipe failure of ``codeact sandbox image COMMAND`` (JSON too) and exit 3."""
    if as_json:
        typer.echo(json.dumps({"ok": False, "error": {"code": exc.code, "message": exc.message}}))
    typer.echo(f"codeact sandbox image {command}: {exc.message}", err=True)
    raise typer.Exit(3)
