"""Load blueprints from text, streams and files (ai4j-compatible load errors).

``load_*`` parse safe YAML (duplicate keys refused), check types with ai4j's codes and
locations, follow ``extend`` for ``codeact.agent/v1`` and load the declared sub-agents. A
kimi-cli agent file (``version: 1`` with an ``agent:`` block) is resolved by
:mod:`codeact.engine.blueprint.kimi` first and then loads as a ``codeact.agent/v1`` document. Problems
that make the document unreadable raise :class:`~codeact.engine.errors.BlueprintLoadError`; problems
with inheritance or sub-agents are recorded on the blueprint and reported by the validator.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Final

from codeact.engine.blueprint._coerce import coerce_document
from codeact.engine.blueprint._yaml import parse_yaml
from codeact.engine.blueprint.inheritance import peek_version, read_blueprint_text, resolve_inheritance, shown_path
from codeact.engine.blueprint.issues import ValidationIssue
from codeact.engine.blueprint.kimi import is_kimi_document, kimi_to_codeact
from codeact.engine.blueprint.models import CODEACT_VERSION, Blueprint, UnknownField
from codeact.engine.errors import BlueprintLoadError

__all__ = ["MAX_SUBAGENT_DEPTH", "load_path", "load_stream", "load_text"]

MAX_SUBAGENT_DEPTH: Final = 8


def load_text(text: str, *, base_dir: str | Path | None = None) -> Blueprint:
    """Load a blueprint from YAML text.

    Args:
        text: The YAML document.
        base_dir: Directory that relative paths (``extend``, sub-agent paths) are resolved
            against; defaults to the current directory.

    Raises:
        BlueprintLoadError: Invalid YAML, an empty document, or a value of the wrong type.
    """
    directory = Path(base_dir) if base_dir is not None else Path.cwd()
    return _load(text, source=None, base_dir=directory.resolve(), label="<text>", stack=())


def load_stream(stream: IO[str] | IO[bytes], *, base_dir: str | Path | None = None) -> Blueprint:
    """Load a blueprint from an open text or binary stream (read to its end, UTF-8).

    Raises:
        BlueprintLoadError: ``blueprint.io`` when the stream cannot be read, else as :func:`load_text`.
    """
    try:
        content = stream.read()
    except OSError as exc:
        raise BlueprintLoadError(
            f"Unable to read Agent Blueprint stream: {exc.strerror or type(exc).__name__}.", code="blueprint.io"
        ) from None
    if isinstance(content, bytes):
        try:
            content = content.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise BlueprintLoadError(
                "Unable to read Agent Blueprint stream: it is not UTF-8 text. Save it as UTF-8.", code="blueprint.io"
            ) from None
    return load_text(content, base_dir=base_dir)


def load_path(path: str | Path) -> Blueprint:
    """Load a blueprint file; relative paths inside it are resolved against its directory.

    Raises:
        BlueprintLoadError: ``blueprint.io`` when the file cannot be read, else as :func:`load_text`.
    """
    return _load_file(Path(path), shown=str(path), stack=())


def _load_file(path: Path, *, shown: str, stack: tuple[Path, ...]) -> Blueprint:
    text = read_blueprint_text(path, shown)
    resolved = path.resolve()
    return _load(text, source=resolved, base_dir=resolved.parent, label=path.name, stack=(*stack, resolved))


def _load(text: str, *, source: Path | None, base_dir: Path, label: str, stack: tuple[Path, ...]) -> Blueprint:
    document = parse_yaml(text)
    kimi = is_kimi_document(document)
    if kimi:
        # A kimi-cli agent file: its own inheritance and checks, then it loads as a codeact agent.
        document = kimi_to_codeact(document, source=source, base_dir=base_dir, label=label)
    codeact = peek_version(document) == CODEACT_VERSION
    coerced = coerce_document(document, Blueprint, codeact=codeact)
    data = coerced.data
    unknown = [UnknownField(path=path) for path in coerced.unknown]
    issues: list[ValidationIssue] = []
    extends: tuple[str, ...] = ()
    if codeact:
        resolution = resolve_inheritance(data, base_dir=base_dir, root_label=label, root_path=source)
        data = resolution.data
        issues.extend(resolution.issues)
        unknown.extend(resolution.unknown)
        extends = resolution.extends
    blueprint = Blueprint.model_validate(data)
    subagents: dict[str, Blueprint] = {}
    flow: dict[int, Blueprint] = {}
    if codeact:
        subagents = _load_subagents(blueprint, base_dir=base_dir, stack=stack, issues=issues)
        if blueprint.flow is not None:
            from codeact.engine.blueprint._flow import load_flow_agents

            flow = load_flow_agents(blueprint.flow, base_dir=base_dir, stack=stack, issues=issues, load=_load_file)
    return blueprint.model_copy(
        update={
            "source_path": source,
            "extends": extends,
            "unknown_fields": tuple(unknown),
            "load_issues": tuple(issues),
            "subagent_blueprints": subagents,
            "flow_blueprints": flow,
            "source_format": "kimi" if kimi else "blueprint",
        }
    )


def _load_subagents(
    blueprint: Blueprint, *, base_dir: Path, stack: tuple[Path, ...], issues: list[ValidationIssue]
) -> dict[str, Blueprint]:
    loaded: dict[str, Blueprint] = {}
    for name, entry in blueprint.subagents.items():
        if entry is None or not (entry.path or "").strip():
            continue  # null removes an inherited sub-agent; a blank path is a validation error
        where = f"$.subagents.{name}.path"
        path = Path(entry.path or "")
        shown = shown_path(path, base_dir)
        if path.resolve() in stack:
            chain = " -> ".join([item.name for item in stack] + [path.name])
            issues.append(
                ValidationIssue.error(
                    where,
                    "blueprint.subagent.cycle",
                    f"Subagent {name!r} refers back to a blueprint that declares it: {chain}. Remove the cycle.",
                )
            )
        elif len(stack) >= MAX_SUBAGENT_DEPTH:
            issues.append(
                ValidationIssue.error(
                    where,
                    "blueprint.subagent.tooDeep",
                    f"Subagent {name!r} is nested more than {MAX_SUBAGENT_DEPTH} levels deep. Flatten the sub-agents.",
                )
            )
        elif not path.is_file():
            issues.append(
                ValidationIssue.error(
                    where,
                    "blueprint.subagent.notFound",
                    f"Subagent {name!r}: file {shown!r} was not found; "
                    "a path is relative to the file that declares it.",
                )
            )
        else:
            try:
                loaded[name] = _load_file(path, shown=shown, stack=stack)
            except BlueprintLoadError as exc:
                issues.append(
                    ValidationIssue.error(
                        where,
                        "blueprint.subagent.invalid",
                        f"Subagent {name!r} could not be loaded [{exc.code}]: {exc.message}",
                    )
                )
    return loaded
