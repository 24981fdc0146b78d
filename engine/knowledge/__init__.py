"""A blueprint's knowledge: sources chunked, indexed once per agent, retrieved per task (docs/knowledge.md).

Seed 001's "domain knowledge" and "constraint knowledge": ``knowledge.sources`` of a blueprint (inline
text, files, folders) are cut into chunks (paragraphs under their headings, bounded) and ranked against
a run's task with BM25 (the memory package's :class:`~codeact.engine.memory.LexicalIndex`). Constraint
chunks (rules) are always chosen; domain chunks only when they match the task. Both within a budget.
"""

from __future__ import annotations

from codeact.engine.knowledge.base import (
    DEFAULT_BUDGET,
    DEFAULT_CHUNK_CHARS,
    FOLDER_GLOBS,
    KNOWLEDGE_KINDS,
    KnowledgeBase,
    KnowledgeChunk,
    KnowledgeSelection,
    KnowledgeSourceInfo,
    chunk_text,
    estimate_tokens,
    source_files,
)

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
