"""``extend`` inheritance for ``codeact.agent/v1`` blueprints.

Rules (after the agent-spec resolver of the seeds, with its two gaps closed):

* ``extend: ./base.yaml`` names a file relative to the declaring file; ``extend: codeact-base``
  names a blueprint shipped in ``engine/blueprint/builtin/``.
* A key the child does not write is *inherited* (the :data:`INHERIT` sentinel); an explicit
  ``null`` *clears* the inherited value. Mappings (blocks, ``options``, ``config``,
  ``instructions.variables``, ``subagents``) merge key by key with the child winning; scalars and
  lists replace the inherited value as a whole.
* Path-valued fields (``extend``, ``subagents.<name>.path``, ``knowledge.sources[].file``/``folder``)
  are resolved against the file that declares them, before merging.
* A cycle, a missing base, a base with an unsupported version or a chain deeper than
  :data:`MAX_EXTEND_DEPTH` is a validation error at ``$.extend`` naming the chain; a base that
  cannot be read or parsed (an empty file included) is a load error.
"""

from __future__ import annotations

import contextlib
import enum
import os
import re
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel

from codeact.engine.blueprint._coerce import coerce_document
from codeact.engine.blueprint._document import AI4J_VERSION, CODEACT_VERSION, SUPPORTED_VERSIONS, UnknownField
from codeact.engine.blueprint._yaml import parse_yaml
from codeact.engine.blueprint.issues import ValidationIssue
from codeact.engine.errors import BlueprintLoadError

__all__ = [
    "BUILTIN_DIR",
    "INHERIT",
    "Inherit",
    "MAX_EXTEND_DEPTH",
    "Resolution",
    "builtin_names",
    "merge_layers",
    "peek_version",
    "read_blueprint_text",
    "recording_reads",
    "resolve_inheritance",
    "resolve_paths",
]

MAX_EXTEND_DEPTH: Final = 8
BUILTIN_DIR: Final = Path(__file__).resolve().parent / "builtin"
_BUILTIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class Inherit(enum.Enum):
    """The type of :data:`INHERIT`: "not written in this file", as opposed to an explicit null."""

    INHERIT = "inherit"

    def __repr__(self) -> str:
        return "INHERIT"


INHERIT: Final = Inherit.INHERIT


def builtin_names() -> list[str]:
    """Names usable as ``extend: <name>`` (the shipped blueprints), sorted."""
    return sorted(path.stem for path in BUILTIN_DIR.glob("*.yaml"))


def shown_path(path: Path, base_dir: Path) -> str:
    """``path`` as messages show it: relative to ``base_dir`` when inside it, else as given."""
    try:
        return path.relative_to(base_dir).as_posix()
    except ValueError:
        return path.as_posix()


_READS: ContextVar[list[Path] | None] = ContextVar("codeact_blueprint_reads", default=None)


@contextlib.contextmanager
def recording_reads() -> Iterator[list[Path]]:
    """Record every file :func:`read_blueprint_text` reads inside the block (resolved paths, in order).

    The queue uses it to carry a blueprint's folder to its workers (``engine/blueprint/bundle.py``).
    """
    reads: list[Path] = []
    token = _READS.set(reads)
    try:
        yield reads
    finally:
        _READS.reset(token)


def read_blueprint_text(path: Path, shown: str) -> str:
    """Read a blueprint file as UTF-8 text.

    Args:
        path: The file to read.
        shown: How to name the file in a message (as the user wrote it).

    Raises:
        BlueprintLoadError: ``blueprint.io`` when the file cannot be read or is not UTF-8.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise BlueprintLoadError(
            f"Unable to read Agent Blueprint file {shown!r}: {reason}. Check the path and its permissions.",
            code="blueprint.io",
        ) from None
    reads = _READS.get()
    if reads is not None:
        reads.append(path.resolve())
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BlueprintLoadError(
            f"Unable to read Agent Blueprint file {shown!r}: it is not UTF-8 text. Save it as UTF-8.",
            code="blueprint.io",
        ) from None


def peek_version(document: Any) -> str | None:
    """The document's ``version`` as a trimmed string, before type checks (None if absent)."""
    if isinstance(document, dict):
        value = document.get("version")
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            return str(value).strip()
    return None


def resolve_paths(data: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    """Return ``data`` with its path-valued fields made absolute against ``base_dir``.

    ``subagents.<name>.path``, ``flow.agents[].path`` and ``knowledge.sources[].file``/``folder`` are
    path-valued besides ``extend`` (resolved when followed).
    """
    data = _resolve_knowledge_paths(_resolve_flow_paths(data, base_dir), base_dir)
    subagents = data.get("subagents")
    if not isinstance(subagents, dict):
        return data
    resolved: dict[str, Any] = {}
    for name, entry in subagents.items():
        if isinstance(entry, dict) and isinstance(entry.get("path"), str) and entry["path"].strip():
            entry = {**entry, "path": os.path.normpath(base_dir / entry["path"].strip())}
        resolved[name] = entry
    return {**data, "subagents": resolved}


def _resolve_flow_paths(data: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    """``flow.agents[].path`` made absolute against ``base_dir`` (like ``subagents.<name>.path``)."""
    flow = data.get("flow")
    agents = flow.get("agents") if isinstance(flow, dict) else None
    if not isinstance(flow, dict) or not isinstance(agents, list):
        return data
    resolved = [
        {**entry, "path": os.path.normpath(base_dir / entry["path"].strip())}
        if isinstance(entry, dict) and isinstance(entry.get("path"), str) and entry["path"].strip()
        else entry
        for entry in agents
    ]
    return {**data, "flow": {**flow, "agents": resolved}}


def _resolve_knowledge_paths(data: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    """``knowledge.sources[].file``/``folder`` made absolute against ``base_dir`` (the declaring file's folder)."""
    knowledge = data.get("knowledge")
    sources = knowledge.get("sources") if isinstance(knowledge, dict) else None
    if not isinstance(knowledge, dict) or not isinstance(sources, list):
        return data
    resolved = []
    for entry in sources:
        if isinstance(entry, dict):
            for key in ("file", "folder"):
                value = entry.get(key)
                if isinstance(value, str) and value.strip():
                    entry = {**entry, key: os.path.normpath(base_dir / value.strip())}
        resolved.append(entry)
    return {**data, "knowledge": {**knowledge, "sources": resolved}}


def merge_layers(base: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """Merge a child layer over its base layer.

    Keys absent from the child inherit (:data:`INHERIT`); an explicit ``None`` clears; two
    mappings merge key by key (child wins); anything else in the child replaces the base value.
    """
    result: dict[str, Any] = {}
    for key in [*base, *(key for key in child if key not in base)]:
        value = child.get(key, INHERIT)
        inherited = base.get(key, INHERIT)
        if value is INHERIT:
            result[key] = inherited
        elif isinstance(value, dict) and isinstance(inherited, dict):
            result[key] = merge_layers(inherited, value)
        else:
            result[key] = value
    return result


def _without_inherited_codeact(merged: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """``merged`` less a base's ``workflow.codeact`` when the child switches ``workflow.mode`` away from codeact.

    A react agent extending ``codeact-base`` inherits its ``workflow.codeact`` block, which react ignores;
    the validator's "ignored" warning is for a block the file itself writes, not for one it inherited.
    """
    own = child.get("workflow")
    workflow = merged.get("workflow")
    if not (isinstance(own, dict) and isinstance(workflow, dict)) or "codeact" in own:
        return merged
    mode = own.get("mode")
    if not isinstance(mode, str) or mode.strip() in ("", "codeact") or "codeact" not in workflow:
        return merged
    return {**merged, "workflow": {key: value for key, value in workflow.items() if key != "codeact"}}


@dataclass(frozen=True, kw_only=True)
class Resolution:
    """The merged data of a blueprint and its bases, and what went wrong on the way."""

    data: dict[str, Any]
    issues: tuple[ValidationIssue, ...] = ()
    unknown: tuple[UnknownField, ...] = ()
    extends: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Link:
    label: str
    path: Path | None


@dataclass
class _Resolver:
    root_dir: Path
    model: type[BaseModel]
    issues: list[ValidationIssue] = field(default_factory=list)
    unknown: list[UnknownField] = field(default_factory=list)
    extends: list[str] = field(default_factory=list)

    def label(self, path: Path) -> str:
        try:
            return Path(os.path.relpath(path, self.root_dir)).as_posix()
        except ValueError:  # another drive on Windows
            return path.name

    def locate(self, extend: str, base_dir: Path) -> tuple[str, Path | None]:
        if _BUILTIN_NAME.match(extend) and not extend.endswith((".yaml", ".yml")):
            candidate = BUILTIN_DIR / f"{extend}.yaml"
            return extend, (candidate if candidate.is_file() else None)
        candidate = Path(os.path.normpath(base_dir / extend))
        return self.label(candidate), (candidate.resolve() if candidate.is_file() else None)

    def error(self, code: str, message: str) -> None:
        self.issues.append(ValidationIssue.error("$.extend", code, message))

    def follow(self, data: dict[str, Any], base_dir: Path, chain: list[_Link]) -> dict[str, Any]:
        data = dict(data)
        raw = data.pop("extend", None)
        extend = raw.strip() if isinstance(raw, str) else ""
        if not extend:
            return data
        label, path = self.locate(extend, base_dir)
        names = " -> ".join([link.label for link in chain] + [label])
        if path is None:
            hint = (
                f"shipped blueprints: {', '.join(builtin_names()) or 'none'}"
                if label == extend and "/" not in extend
                else "a file path is relative to the file that declares it"
            )
            self.error(
                "blueprint.extend.notFound",
                f"Base blueprint {extend!r} was not found (extend chain: {names}); {hint}.",
            )
            return data
        if any(link.path == path for link in chain):
            self.error("blueprint.extend.cycle", f"extend forms a cycle: {names}. Remove the extend that points back.")
            return data
        if len(chain) > MAX_EXTEND_DEPTH:
            self.error(
                "blueprint.extend.tooDeep",
                f"extend chain is deeper than {MAX_EXTEND_DEPTH} bases: {names}. Merge some bases into one file.",
            )
            return data
        where = f"(in base blueprint {label!r}, extend chain: {names})"
        try:
            document = parse_yaml(read_blueprint_text(path, label))
            version = peek_version(document)
            if version not in SUPPORTED_VERSIONS:
                self.error(
                    "blueprint.extend.version",
                    f"Base blueprint {label!r} declares "
                    f"{'no version' if version is None else f'version {version!r}'}; a base must declare "
                    f"{CODEACT_VERSION} or {AI4J_VERSION} (extend chain: {names}).",
                )
                return data
            coerced = coerce_document(document, self.model, codeact=version == CODEACT_VERSION)
        except BlueprintLoadError as exc:
            raise BlueprintLoadError(f"{exc.message} {where}", code=exc.code, path=exc.path) from None
        self.unknown.extend(UnknownField(path=item, origin=label) for item in coerced.unknown)
        self.extends.append(label)
        base = self.follow(resolve_paths(coerced.data, path.parent), path.parent, [*chain, _Link(label, path)])
        return _without_inherited_codeact(merge_layers(base, data), data)


def resolve_inheritance(
    data: dict[str, Any], *, model: type[BaseModel], base_dir: Path, root_label: str, root_path: Path | None
) -> Resolution:
    """Resolve paths and follow ``extend`` for one coerced ``codeact.agent/v1`` document.

    Args:
        data: The coerced document (see :mod:`codeact.engine.blueprint._coerce`).
        model: The blueprint model bases are coerced against (``codeact.engine.blueprint.models.Blueprint``).
        base_dir: The directory relative paths in ``data`` are resolved against.
        root_label: How to name this document in chains (its file name, or ``<text>``).
        root_path: The document's resolved file path, if it came from a file.

    Returns:
        The merged data (``extend`` removed) and the inheritance issues.

    Raises:
        BlueprintLoadError: A base file exists but cannot be read, parsed or type-checked.
    """
    resolver = _Resolver(root_dir=root_path.parent if root_path is not None else base_dir, model=model)
    merged = resolver.follow(resolve_paths(data, base_dir), base_dir, [_Link(root_label, root_path)])
    return Resolution(
        data=merged,
        issues=tuple(resolver.issues),
        unknown=tuple(resolver.unknown),
        extends=tuple(resolver.extends),
    )
