"""Memory and experience: what an agent remembers across rounds, sessions and runs (docs/memory.md).

* **Entities** (session scope): ``system.remember(title, data)``, ``system.recall(title)``,
  ``system.entities()``; listed (bounded) in the prompt's Context.
* **History summaries** (user scope): a summary of each finished run (the seed's ``HistoryChatMemory``:
  time, question type, keys, summary, user id); the next runs of the user get the relevant ones.
* **Experiences**: each run distilled (task, code that worked, errors and their fixes, operations,
  outcome); the top-k similar ones go into the Experience section before the first code round.

Configured by the blueprint's ``session.memory`` (:class:`MemoryConfig`); stored beside the sessions
(SQLite tables or Redis keys, :class:`MemoryBackend`); curated with ``codeact memory``.
"""

from __future__ import annotations

from codeact.engine.memory._factory import memory_backend
from codeact.engine.memory.backend import MemoryBackend
from codeact.engine.memory.manager import MemoryManager, experience_scope, history_scope
from codeact.engine.memory.records import KINDS, AgentMemoryError, MemoryItem, MemoryKind
from codeact.engine.memory.retrieval import LexicalIndex, tokenize
from codeact.engine.memory.run import RunMemory, memory_budget, open_run_memory
from codeact.engine.memory.settings import MemoryConfig, memory_config, memory_config_problems

__all__ = [
    "KINDS",
    "AgentMemoryError",
    "LexicalIndex",
    "MemoryBackend",
    "MemoryConfig",
    "MemoryItem",
    "MemoryKind",
    "MemoryManager",
    "RunMemory",
    "experience_scope",
    "history_scope",
    "memory_backend",
    "memory_budget",
    "memory_config",
    "memory_config_problems",
    "open_run_memory",
    "tokenize",
]
