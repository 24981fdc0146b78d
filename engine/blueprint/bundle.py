"""A blueprint and the files it references, packed to travel (queued runs) and unpacked elsewhere.

A queued run is built by a worker that may run in another directory or on another machine. Paths in
a blueprint are relative to the file that declares them (``extend``, ``subagents.<name>.path``, flow
agents, a kimi agent's ``system_prompt_path`` and its bases, a ``scripted/FILE`` model, the files of
``knowledge.sources``), so the text
alone is not enough: :func:`pack_blueprint` loads the blueprint as the submitter sees it, records
every file the loader read plus the scripted reply files its models name, and keeps them with their
paths relative to one common folder. :func:`unpack_blueprint` writes that folder again (in a
directory of the worker's) and returns the blueprint's path in it: loading it there resolves every
path as the submitter's load did.

Files shipped with codeact (``engine/blueprint/builtin/``: ``codeact-base``, kimi's default agent)
are not packed: every worker has them. The pack is bounded (:data:`MAX_BUNDLE_BYTES` in all); a
file that does not fit is refused with ``blueprint.bundle.tooLarge`` naming it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Final

from codeact.engine.blueprint.inheritance import BUILTIN_DIR, recording_reads
from codeact.engine.blueprint.models import Blueprint, load_path
from codeact.engine.errors import BlueprintLoadError

__all__ = ["MAX_BUNDLE_BYTES", "bundle_digest", "pack_blueprint", "unpack_blueprint"]

MAX_BUNDLE_BYTES: Final = 1024 * 1024
"""The most a packed blueprint folder may hold (its files' bytes, all together)."""

_SCRIPTED: Final = "scripted/"


def pack_blueprint(path: str | os.PathLike[str], *, model: str | None = None) -> dict[str, object]:
    """The blueprint at ``path`` and the files it references, as JSON-able data.

    Args:
        path: The blueprint file.
        model: The model the run was given (``--model``): a ``scripted/FILE`` that exists next to
            the blueprint is packed too (the same rule as ``codeact run``).

    Returns:
        ``{"root": "<the blueprint's path in the pack>", "files": {"<posix path>": "<text>"}}``.

    Raises:
        BlueprintLoadError: The blueprint does not load (as ``load_path``), a referenced file is not
            UTF-8 (``blueprint.io``), or the files are larger than :data:`MAX_BUNDLE_BYTES`
            (``blueprint.bundle.tooLarge``, naming the file that did not fit).
    """
    source = Path(path).resolve()
    with recording_reads() as reads:
        blueprint = load_path(source)
    files = [source, *reads]
    files.extend(_scripted_files(blueprint))
    files.extend(_knowledge_files(blueprint))
    if model is not None:
        files.extend(_scripted_file(model, source.parent))
    chosen = [file for file in dict.fromkeys(files) if not file.is_relative_to(BUILTIN_DIR)]
    root = Path(os.path.commonpath([file.parent for file in chosen]))
    packed: dict[str, str] = {}
    total = 0
    for file in chosen:
        data = _read(file)
        total += len(data)
        if total > MAX_BUNDLE_BYTES:
            raise BlueprintLoadError(
                f"blueprint {str(path)!r} references {str(file)!r} ({len(data)} bytes), which does not fit in what "
                f"a queued run carries ({MAX_BUNDLE_BYTES} bytes for the blueprint and all the files it references); "
                "make the file smaller, or give workers the blueprint's folder and submit it by id "
                "(codeact worker --blueprints DIR, codeact run id:NAME --queue ...).",
                code="blueprint.bundle.tooLarge",
            )
        try:
            packed[file.relative_to(root).as_posix()] = data.decode("utf-8")
        except UnicodeDecodeError:
            raise BlueprintLoadError(
                f"blueprint {str(path)!r} references {str(file)!r}, which is not UTF-8 text; a queued run carries "
                "text files only.",
                code="blueprint.io",
            ) from None
    return {"root": source.relative_to(root).as_posix(), "files": packed}


def bundle_digest(bundle: Mapping[str, object]) -> str:
    """sha256 (hex) of a pack: the same files give the same folder on a worker."""
    text = json.dumps(dict(bundle), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def unpack_blueprint(bundle: Mapping[str, object], directory: str | os.PathLike[str]) -> Path:
    """Write a pack into ``directory`` (created) and return the blueprint's path there.

    Raises:
        BlueprintLoadError: ``blueprint.bundle.invalid``: the pack is malformed or a path in it would
            leave ``directory`` (absolute, or with ``..``); nothing outside ``directory`` is written.
    """
    folder = Path(directory)
    files = bundle.get("files")
    root = bundle.get("root")
    if not isinstance(files, Mapping) or not isinstance(root, str) or root not in files:
        raise BlueprintLoadError(
            "the queued run's blueprint folder is malformed (no root or files)", code="blueprint.bundle.invalid"
        )
    for name, text in _entries(files):
        target = folder.joinpath(*PurePosixPath(name).parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return folder.joinpath(*PurePosixPath(root).parts)


def _entries(files: Mapping[str, object]) -> Iterator[tuple[str, str]]:
    for name, text in files.items():
        pure = PurePosixPath(str(name))
        if pure.is_absolute() or ".." in pure.parts or not pure.parts or not isinstance(text, str):
            raise BlueprintLoadError(
                f"the queued run's blueprint folder holds {str(name)!r}, which is not a relative path inside it",
                code="blueprint.bundle.invalid",
            )
        yield str(name), text


def _read(file: Path) -> bytes:
    try:
        return file.read_bytes()
    except OSError as exc:
        raise BlueprintLoadError(
            f"cannot read {str(file)!r}, which the blueprint references: {exc.strerror or type(exc).__name__}",
            code="blueprint.io",
        ) from None


def _scripted_file(model: str | None, base: Path) -> list[Path]:
    """``scripted/FILE`` relative to ``base`` (as ``codeact run`` resolves it), when the file exists."""
    if not model or not model.startswith(_SCRIPTED) or model.startswith(_SCRIPTED + "@"):
        return []
    file = Path(model.removeprefix(_SCRIPTED))
    if file.is_absolute():
        return []
    candidate = (base / file).resolve()
    return [candidate] if candidate.is_file() else []


def _knowledge_files(blueprint: Blueprint) -> list[Path]:
    """The files the ``knowledge`` sources of ``blueprint``, its sub-agents and its flow agents read."""
    from codeact.engine.blueprint.factory import knowledge_settings

    found: list[Path] = []
    settings = knowledge_settings(blueprint)
    for source in settings.sources if settings is not None else ():
        found.extend(path.resolve() for path in source.files() if path.is_file())
    for child in (*blueprint.subagent_blueprints.values(), *blueprint.flow_blueprints.values()):
        found.extend(_knowledge_files(child))
    return found


def _scripted_files(blueprint: Blueprint) -> list[Path]:
    """The scripted reply files the models of ``blueprint``, its sub-agents and its flow agents name."""
    found: list[Path] = []
    base = blueprint.source_path.parent if blueprint.source_path is not None else None
    model = blueprint.model
    if base is not None and model is not None:
        found.extend(_scripted_file(model.model, base))
        routes = model.routes
        for route in (routes.code, routes.thought, routes.utility) if routes is not None else ():
            if route is not None:
                found.extend(_scripted_file(route.model, base))
    for child in (*blueprint.subagent_blueprints.values(), *blueprint.flow_blueprints.values()):
        found.extend(_scripted_files(child))
    return found
