"""Knowledge sources -> chunks -> one BM25 index per agent -> the chunks a task gets.

Chunking: a source's text is cut at blank lines into paragraphs; a Markdown heading (``#`` ...)
starts a new section and becomes the title of the chunks under it; paragraphs of one section are
joined while they fit in ``chunk_chars``; a longer paragraph is cut at line ends (or, for one long
line, at ``chunk_chars``). Each chunk is indexed with its title.

Selection (:meth:`KnowledgeBase.select`): constraint chunks first, in source order (rules apply to
every task), then domain chunks with a BM25 score > 0 for the task, best first; each one only if it
still fits in the budget (estimated tokens: 4 characters each, so ``codeact knowledge show`` and a
run agree without a tokenizer).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from codeact.engine.blueprint.spec import (
    KNOWLEDGE_DEFAULT_BUDGET,
    KNOWLEDGE_DEFAULT_CHUNK_CHARS,
    KNOWLEDGE_FOLDER_GLOBS,
    KNOWLEDGE_KINDS,
    KnowledgeSettings,
    KnowledgeSourceSpec,
)
from codeact.engine.errors import BlueprintLoadError
from codeact.engine.model.scripted import approx_tokens

if TYPE_CHECKING:
    from codeact.engine.memory.retrieval import LexicalIndex

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_CHUNK_CHARS",
    "FOLDER_GLOBS",
    "KNOWLEDGE_KINDS",
    "KnowledgeBase",
    "KnowledgeChunk",
    "KnowledgeSelection",
    "KnowledgeSourceInfo",
    "chunk_text",
    "estimate_tokens",
    "source_files",
]

DEFAULT_BUDGET = KNOWLEDGE_DEFAULT_BUDGET
DEFAULT_CHUNK_CHARS = KNOWLEDGE_DEFAULT_CHUNK_CHARS
FOLDER_GLOBS = KNOWLEDGE_FOLDER_GLOBS

_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.+?)\s*#*\s*$")


estimate_tokens = approx_tokens
"""Tokens of ``text`` as the knowledge budget counts them (4 characters each, rounded up)."""


@dataclass(frozen=True, kw_only=True)
class KnowledgeChunk:
    """One retrievable piece of a source.

    Attributes:
        source: The source's label (``text[0]``, ``docs/returns.md``, ``kb/faq.md``).
        kind: ``domain`` or ``constraint``.
        title: The heading the chunk sits under (or the inline text's title), ``""`` if none.
        text: The chunk's text.
    """

    source: str
    kind: Literal["domain", "constraint"]
    title: str
    text: str

    def render(self) -> str:
        """How the prompt shows the chunk: ``(title) text``, or the text alone."""
        return f"({self.title}) {self.text}" if self.title else self.text


@dataclass(frozen=True, kw_only=True)
class KnowledgeSourceInfo:
    """A source as ``codeact knowledge list`` shows it."""

    label: str
    kind: Literal["domain", "constraint"]
    files: int
    chunks: int
    chars: int


@dataclass(frozen=True, kw_only=True)
class KnowledgeSelection:
    """What one task retrieved: the constraint and domain chunks (with BM25 scores) within the budget.

    Attributes:
        constraints: Constraint chunks, in source order.
        domain: ``(chunk, score)``, best first.
        dropped: Chunks that matched (or were constraints) but did not fit in the budget.
        tokens: Estimated tokens of what was chosen.
    """

    constraints: tuple[KnowledgeChunk, ...] = ()
    domain: tuple[tuple[KnowledgeChunk, float], ...] = ()
    dropped: int = 0
    tokens: int = 0

    def __bool__(self) -> bool:
        return bool(self.constraints or self.domain)

    def domain_text(self) -> str:
        """The domain chunks as one Knowledge segment's content (one ``- item`` per chunk)."""
        return "\n".join("- " + chunk.render().replace("\n", "\n  ") for chunk, _ in self.domain)


def chunk_text(text: str, *, title: str = "", chunk_chars: int = DEFAULT_CHUNK_CHARS) -> list[tuple[str, str]]:
    """``text`` cut into ``(title, chunk)`` pairs of at most ``chunk_chars`` characters (see the module doc)."""
    pieces: list[tuple[str, str]] = []
    heading = title
    current: list[str] = []

    def flush() -> None:
        if current:
            pieces.append((heading, "\n\n".join(current)))
            current.clear()

    def add(paragraph: str) -> None:
        for part in _split_long(paragraph, chunk_chars):
            if current and sum(len(p) + 2 for p in current) + len(part) > chunk_chars:
                flush()
            current.append(part)

    lines: list[str] = []
    for line in [*text.replace("\r\n", "\n").split("\n"), ""]:
        match = _HEADING.match(line)
        if match is None and line.strip():
            lines.append(line.rstrip())
            continue
        if lines:  # a blank line or a heading ends a paragraph
            add("\n".join(lines).strip("\n"))
            lines = []
        if match is not None:  # a heading opens a section: its chunks carry its title
            flush()
            heading = match.group(2).strip()
    flush()
    return pieces


def _split_long(paragraph: str, limit: int) -> list[str]:
    if len(paragraph) <= limit:
        return [paragraph]
    parts: list[str] = []
    line_group: list[str] = []
    for line in paragraph.splitlines():
        while len(line) > limit:  # one long line: cut at the last space before the limit, else at the limit
            cut = line.rfind(" ", 0, limit)
            cut = cut if cut > limit // 2 else limit
            if line_group:
                parts.append("\n".join(line_group))
                line_group = []
            parts.append(line[:cut].rstrip())
            line = line[cut:].lstrip()
        if line_group and sum(len(x) + 1 for x in line_group) + len(line) > limit:
            parts.append("\n".join(line_group))
            line_group = []
        line_group.append(line)
    if line_group:
        parts.append("\n".join(line_group))
    return [part for part in parts if part.strip()]


def _read(path: Path, label: str) -> str:
    try:
        return path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise BlueprintLoadError(
            f"knowledge source {label!r} cannot be read: {exc.strerror or type(exc).__name__}; "
            "check the path (relative to the blueprint's folder) and its permissions.",
            code="blueprint.knowledge.io",
        ) from None
    except UnicodeDecodeError:
        raise BlueprintLoadError(
            f"knowledge source {label!r} is not UTF-8 text; save it as UTF-8 or leave it out (a folder's glob).",
            code="blueprint.knowledge.io",
        ) from None


def source_files(source: KnowledgeSourceSpec) -> list[Path]:
    """The files a source reads (a folder's matching files, sorted; hidden ones left out)."""
    return source.files()


class KnowledgeBase:
    """A blueprint's knowledge, chunked and indexed once (build one per agent, select per run).

    Args:
        chunks: The chunks of every source, in source order.
        budget: Estimated tokens a selection may hold.
        sources: The sources as listings show them.
    """

    def __init__(
        self,
        chunks: Sequence[KnowledgeChunk],
        *,
        budget: int = DEFAULT_BUDGET,
        sources: Sequence[KnowledgeSourceInfo] = (),
    ) -> None:
        self.chunks = tuple(chunks)
        self.budget = budget
        self.sources = tuple(sources)
        self._constraints = tuple(c for c in self.chunks if c.kind == "constraint")
        domain = [c for c in self.chunks if c.kind == "domain"]
        self._index: LexicalIndex[KnowledgeChunk] | None = None
        if domain:
            from codeact.engine.memory.retrieval import LexicalIndex

            self._index = LexicalIndex(domain)

    @classmethod
    def from_settings(cls, settings: KnowledgeSettings) -> KnowledgeBase:
        """Read, chunk and index the sources of ``settings``.

        Raises:
            BlueprintLoadError: ``blueprint.knowledge.io``: a source file cannot be read or is not UTF-8.
        """
        chunks: list[KnowledgeChunk] = []
        infos: list[KnowledgeSourceInfo] = []
        for source in settings.sources:
            texts: list[tuple[str, str, str]] = []  # (label, default title, text)
            files = source_files(source)
            if source.path is None:
                texts.append((source.label, source.title or "", source.text or ""))
            for path in files:
                label = _file_label(source, path)
                texts.append((label, source.title or path.stem, _read(path, label)))
            own: list[KnowledgeChunk] = []
            for label, title, text in texts:
                for heading, piece in chunk_text(text, title=title, chunk_chars=settings.chunk_chars):
                    own.append(KnowledgeChunk(source=label, kind=source.kind, title=heading, text=piece))
            chunks.extend(own)
            infos.append(
                KnowledgeSourceInfo(
                    label=source.label,
                    kind=source.kind,
                    files=len(files),
                    chunks=len(own),
                    chars=sum(len(c.text) for c in own),
                )
            )
        return cls(chunks, budget=settings.budget, sources=infos)

    def select(self, task: str) -> KnowledgeSelection:
        """The chunks for ``task`` within the budget (see the module doc)."""
        left = self.budget
        dropped = 0
        constraints: list[KnowledgeChunk] = []
        for chunk in self._constraints:
            cost = estimate_tokens(chunk.render())
            if cost <= left:
                constraints.append(chunk)
                left -= cost
            else:
                dropped += 1
        domain: list[tuple[KnowledgeChunk, float]] = []
        if self._index is not None:
            for chunk, score in self._index.search(task, len(self.chunks)):
                cost = estimate_tokens(chunk.render())
                if cost <= left:
                    domain.append((chunk, score))
                    left -= cost
                else:
                    dropped += 1
        return KnowledgeSelection(
            constraints=tuple(constraints), domain=tuple(domain), dropped=dropped, tokens=self.budget - left
        )


def _file_label(source: KnowledgeSourceSpec, path: Path) -> str:
    """A file's label: the source's (a file), or the folder's label plus its path in the folder."""
    if not source.folder or source.path is None:
        return source.label
    return source.label + path.relative_to(source.path).as_posix()
