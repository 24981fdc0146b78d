"""Safe YAML parsing that refuses duplicate keys (PyYAML keeps the last one silently).

Parsed documents are remembered by their text (the last :data:`_CACHE_ENTRIES` texts of at most
:data:`_CACHE_MAX_CHARS` characters): the same text always parses to the same document, and each
caller gets its own deep copy. PyYAML's pure-Python parser takes milliseconds even for the
shipped ``codeact-base`` (about 1 KB), and the same blueprint and bases are read again and again:
``submit()`` loads the blueprint on every call to pack its folder (``bundle.py``), ``serve`` and
the workers load the blueprints they are given. A text that does not parse is never remembered.
"""

from __future__ import annotations

import contextlib
import copy
import threading
from collections import OrderedDict
from typing import Any, Final

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node

from codeact.engine.errors import BlueprintLoadError

__all__ = ["parse_yaml"]

_MERGE_TAG = "tag:yaml.org,2002:merge"
_CACHE_ENTRIES: Final = 64
_CACHE_MAX_CHARS: Final = 64 * 1024
_parsed: OrderedDict[str, Any] = OrderedDict()  # text -> document, most recently used last
_MISS: Final = object()
_parsed_lock = threading.Lock()


class _StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that raises on a key written twice in the same mapping."""

    def construct_mapping(self, node: Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, MappingNode):
            seen: dict[Any, Node] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG:
                    continue  # ``<<: *anchor`` merges may override; only written keys must be unique
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:
                    continue  # unhashable key: PyYAML reports it below
                if first is not None:
                    raise ConstructorError(
                        None,
                        None,
                        f"found duplicate key {key!r} (first defined on line {first.start_mark.line + 1})",
                        key_node.start_mark,
                    )
                seen[key] = key_node
        return super().construct_mapping(node, deep=deep)  # type: ignore[arg-type]


def _describe(error: yaml.YAMLError) -> str:
    """The parser's complaint with line/column, without the stream name (which may be a local path)."""
    if isinstance(error, yaml.MarkedYAMLError):
        parts = [part for part in (error.context, error.problem) if part]
        text = "; ".join(parts) or "parse failed"
        mark = error.problem_mark or error.context_mark
        if mark is not None:
            text += f" at line {mark.line + 1}, column {mark.column + 1}"
        return text
    message = " ".join(str(error).split())
    return message or "parse failed"


def _fix(error: yaml.YAMLError) -> str:
    if isinstance(error, yaml.MarkedYAMLError) and (error.problem or "").startswith("found duplicate key"):
        return "Remove or rename one of the two keys."
    return "Fix the YAML syntax there."


def parse_yaml(text: str, *, source: str | None = None) -> Any:
    """Parse one YAML document safely (a document parsed before from the same text is copied, not parsed).

    Args:
        text: The document.
        source: The file it came from, named in the error (None: text given directly).

    Returns:
        The document, the caller's own: changing it changes no other caller's.

    Raises:
        BlueprintLoadError: ``blueprint.yaml.invalid`` (syntax, duplicate key, several documents)
            or ``blueprint.document.required`` (nothing but comments/whitespace/null).
    """
    with _parsed_lock:
        cached = _parsed.get(text, _MISS)
        if cached is not _MISS:
            _parsed.move_to_end(text)
    if cached is not _MISS:
        with contextlib.suppress(RecursionError):  # a document nested nearly as deep as the parser allows
            return copy.deepcopy(cached)
    document = _parse(text, source)
    if len(text) <= _CACHE_MAX_CHARS:
        try:
            kept = copy.deepcopy(document)  # the caller may change the document it gets
        except RecursionError:
            return document
        with _parsed_lock:
            _parsed[text] = kept
            while len(_parsed) > _CACHE_ENTRIES:
                _parsed.popitem(last=False)
    return document


def _parse(text: str, source: str | None) -> object:
    where = f" in {source}" if source else ""
    try:
        document = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.YAMLError as exc:
        raise BlueprintLoadError(
            f"Invalid Agent Blueprint YAML{where}: {_describe(exc)}. {_fix(exc)}",
            code="blueprint.yaml.invalid",
        ) from None
    except RecursionError:
        raise BlueprintLoadError(
            f"Invalid Agent Blueprint YAML{where}: the document nests too deeply. Flatten the structure.",
            code="blueprint.yaml.invalid",
        ) from None
    if document is None:
        raise BlueprintLoadError(
            f"Agent Blueprint document{where} is empty. Write at least version, id and model.",
            code="blueprint.document.required",
        )
    return document
