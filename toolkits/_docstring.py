"""A small Google-style docstring parser: the description, ``Args:`` entries and ``Returns:``."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Returns|Return|Yields|Raises|"
    r"Examples?|Notes?|Attributes|See Also|Warnings?|Todo|References)\s*:\s*$"
)
_ARG = re.compile(r"^\*{0,2}(?P<name>[A-Za-z_]\w*)\s*(?:\((?P<type>[^)]*)\))?\s*:\s*(?P<text>.*)$")
_ARGS_SECTIONS = {"Args", "Arguments", "Parameters", "Params", "Keyword Args", "Keyword Arguments"}
_RETURNS_SECTIONS = {"Returns", "Return", "Yields"}
_EXAMPLE_SECTIONS = {"Example", "Examples"}


@dataclass(frozen=True, kw_only=True)
class Docstring:
    """The parts of a docstring the model sees."""

    description: str = ""
    args: dict[str, str] = field(default_factory=dict)
    returns: str = ""
    examples: tuple[str, ...] = ()
    """The code lines of the ``Example(s):`` sections (``>>> `` prompts removed, output lines left out)."""

    @property
    def summary(self) -> str:
        """The first paragraph of the description, on one line."""
        return " ".join(self.description.split("\n\n", 1)[0].split())


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _join(lines: list[str]) -> str:
    """Join continuation lines into paragraphs (blank lines separate paragraphs)."""
    paragraphs: list[list[str]] = [[]]
    for line in lines:
        if line.strip():
            paragraphs[-1].append(line.strip())
        elif paragraphs[-1]:
            paragraphs.append([])
    return "\n\n".join(" ".join(p) for p in paragraphs if p)


def parse_docstring(doc: str | None) -> Docstring:
    """Parse a Google-style docstring.

    Args:
        doc: The raw docstring (``None`` gives an empty result).

    Returns:
        The description (text before the first section), argument descriptions by name and the
        ``Returns:`` text.
    """
    if not doc:
        return Docstring()
    lines = inspect.cleandoc(doc).splitlines()
    sections: list[tuple[str, list[str]]] = [("", [])]
    for line in lines:
        match = _SECTION.match(line)
        if match and _indent(line) == 0:
            sections.append((match.group(1), []))
        else:
            sections[-1][1].append(line)
    description = ""
    args: dict[str, str] = {}
    returns = ""
    examples: list[str] = []
    for title, body in sections:
        if title == "":
            description = _join(body)
        elif title in _ARGS_SECTIONS:
            args.update(_parse_args(body))
        elif title in _RETURNS_SECTIONS and not returns:
            returns = _join(body)
        elif title in _EXAMPLE_SECTIONS:
            examples.extend(_example_lines(body))
    return Docstring(description=description, args=args, returns=returns, examples=tuple(examples))


def _example_lines(body: list[str]) -> list[str]:
    """Code lines of an example: the ``>>>`` lines when there are any (the rest is their output), else all."""
    lines = [line.strip() for line in body if line.strip() and not line.strip().startswith("```")]
    prompted = [line[4:].strip() for line in lines if line.startswith(">>> ")]
    return prompted or lines


def _parse_args(body: list[str]) -> dict[str, str]:
    entries: dict[str, list[str]] = {}
    content = [line for line in body if line.strip()]
    if not content:
        return {}
    base = min(_indent(line) for line in content)
    current: list[str] | None = None
    for line in body:
        if not line.strip():
            continue
        match = _ARG.match(line.strip()) if _indent(line) == base else None
        if match:
            current = entries.setdefault(match.group("name"), [])
            if match.group("text"):
                current.append(match.group("text"))
        elif current is not None:
            current.append(line)
    return {name: _join(text) for name, text in entries.items()}
