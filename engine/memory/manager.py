"""``MemoryManager``: entities, history summaries and experiences over a :class:`MemoryBackend`.

Writes apply the kind's limits right away (eviction); retrievals go through the cached BM25 index
(or embeddings when configured) and mark what they returned as used (the ``lru`` policy).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from codeact.engine.memory._embed import EMBEDDING_FIELD, cosine, embed, embedding_of
from codeact.engine.memory.backend import MemoryBackend
from codeact.engine.memory.records import KINDS, AgentMemoryError, MemoryItem, MemoryKind
from codeact.engine.memory.retrieval import cached_index
from codeact.engine.memory.settings import KindLimits, MemoryConfig

__all__ = ["MemoryManager", "experience_scope", "history_scope"]

_TITLE_CHARS = 200
_DAY_S = 86_400.0


def history_scope(user: str) -> str:
    """The scope of a user's history summaries."""
    return f"user:{user}"


def experience_scope(config: MemoryConfig, *, user: str | None, agent_id: str) -> str | None:
    """Where a run's experiences go and come from (None: experiences are off for this scope)."""
    if config.scope == "session":
        return None
    if config.scope == "user":
        return f"user:{user}" if user else None
    if config.scope == "project":
        return "project"
    return f"agent:{agent_id}"


def _entity_id(session_id: str, title: str) -> str:
    return hashlib.sha256(f"{session_id}\x1f{title}".encode()).hexdigest()[:24]


class MemoryManager:
    """Memory of one store under one configuration.

    Args:
        backend: Where records live.
        config: Limits, retrieval and policy (``MemoryConfig()`` for curation).
        embedding_base: ``api_base`` for the embedding model (the agent's model server, if any).
    """

    def __init__(
        self, backend: MemoryBackend, config: MemoryConfig | None = None, *, embedding_base: str | None = None
    ):
        self.backend = backend
        self.config = config or MemoryConfig(enabled=True)
        self.embedding_base = embedding_base

    # -- entities (session scope) ---------------------------------------------------------------
    async def remember(self, session_id: str, title: str, data: object) -> None:
        """Remember ``data`` under ``title`` in the session (replacing what the title held).

        Raises:
            AgentMemoryError: The title is empty or too long, or the data is not JSON or too large.
        """
        title = _check_title(title)
        limit = self.config.entities.max_data_chars
        try:
            text = json.dumps(data, ensure_ascii=False, sort_keys=True)
        except (TypeError, ValueError) as exc:
            raise AgentMemoryError(
                f"remember({title!r}, ...): the data must be JSON (dict, list, str, number, bool, None): {exc}",
                code="memory.entity_data",
            ) from None
        if len(text) > limit:
            raise AgentMemoryError(
                f"remember({title!r}, ...): the data is {len(text)} characters of JSON, over the limit of {limit} "
                "(session.memory.config.entities.maxDataChars): keep a summary or the key fields",
                code="memory.entity_too_large",
            )
        item_id = _entity_id(session_id, title)
        old = await self.backend.get("entity", item_id)
        now = time.time()
        item = MemoryItem(
            kind="entity",
            scope=session_id,
            title=title,
            text=text,
            data={"value": data},
            id=item_id,
            created_at=old.created_at if old is not None else now,
            used_at=now,
        )
        await self.backend.put([item])
        await self.evict("entity", session_id, keep=item_id)

    async def recall(self, session_id: str, title: str) -> object:
        """The data remembered under ``title``.

        Raises:
            AgentMemoryError: Nothing is remembered under that title (the message lists the titles).
        """
        title = _check_title(title)
        item = await self.backend.get("entity", _entity_id(session_id, title))
        if item is None or item.scope != session_id:
            known = [e.title for e in await self.backend.items("entity", session_id)]
            raise AgentMemoryError(
                f"nothing is remembered under {title!r} in this session; remembered titles: {known[:20]}",
                code="memory.entity_not_found",
            )
        await self.backend.touch("entity", [item.id], time.time())
        return item.data.get("value")

    async def entities(self, session_id: str) -> list[MemoryItem]:
        """The session's entities, most recently written first."""
        items = await self.backend.items("entity", session_id)
        items.sort(key=lambda item: (-item.used_at, item.title))
        return items

    # -- history summaries (user scope) ---------------------------------------------------------
    async def add_history(self, user: str, fields: Mapping[str, object]) -> MemoryItem:
        """Store a run's summary for ``user`` (the seed's ``HistoryChatMemory`` fields)."""
        text = f"{fields.get('summary', '')}\nkeys: {fields.get('keys', '')}"
        item = MemoryItem(
            kind="history",
            scope=history_scope(user),
            title=str(fields.get("question_type", "")),
            text=text,
            data=fields,
        )
        await self.backend.put([item])
        await self.evict("history", item.scope, keep=item.id)
        return item

    async def history_for(self, user: str, query: str) -> list[MemoryItem]:
        """The user's summaries relevant to ``query`` (BM25 top-k), then the most recent ones, no repeats."""
        cfg = self.config.history
        scope = history_scope(user)
        chosen = [item for item, _ in await self._lexical("history", scope, query, cfg.top_k)]
        if cfg.recent:
            recent = await self.backend.items("history", scope)
            for item in recent[: cfg.recent]:
                if all(item.id != c.id for c in chosen):
                    chosen.append(item)
        if chosen:
            await self.backend.touch("history", [c.id for c in chosen], time.time())
        return chosen

    # -- experiences ----------------------------------------------------------------------------
    async def add_experience(self, scope: str, fields: Mapping[str, object], *, approved: bool = False) -> MemoryItem:
        """Store an experience in ``scope`` (embedded now when an embedding model is configured)."""
        text = _experience_text(fields)
        data = dict(fields)
        model = self.config.experience.embedding_model
        if model:
            (vector,) = await embed([text], model=model, api_base=self.embedding_base)
            data[EMBEDDING_FIELD] = {"model": model, "vector": vector}
        item = MemoryItem(
            kind="experience",
            scope=scope,
            title=str(fields.get("task", ""))[:600],
            text=text,
            data=data,
            approved=approved,
        )
        await self.backend.put([item])
        await self.evict("experience", scope, keep=item.id)
        return item

    async def experiences_for(self, scope: str, query: str, k: int | None = None) -> list[tuple[MemoryItem, float]]:
        """The ``k`` experiences of ``scope`` most similar to ``query`` (approved only when required)."""
        cfg = self.config.experience
        k = cfg.top_k if k is None else k
        if self.config.experience_retrieval == "embedding" and cfg.embedding_model:
            found = await self._embedded(scope, query, k, cfg.embedding_model)
        else:
            found = await self._lexical("experience", scope, query, k)
        if found:
            await self.backend.touch("experience", [item.id for item, _ in found], time.time())
        return found

    async def _lexical(self, kind: MemoryKind, scope: str, query: str, k: int) -> list[tuple[MemoryItem, float]]:
        if k <= 0:
            return []
        approved_only = kind == "experience" and self.config.experience.require_approval
        version = await self.backend.version(kind, scope)
        key = (self.backend.key, kind, scope, "approved" if approved_only else "all")
        items: list[MemoryItem] = []
        if version:
            items = await self._load_if_stale(key, version, kind, scope, approved_only)
        index = cached_index(key, version, lambda: items)
        return index.search(query, k)

    async def _load_if_stale(
        self, key: tuple[str, ...], version: int, kind: MemoryKind, scope: str, approved_only: bool
    ) -> list[MemoryItem]:
        from codeact.engine.memory.retrieval import cached_items

        cached = cached_items(key, version)
        if cached is not None:
            return cached
        items = await self.backend.items(kind, scope)
        return [item for item in items if item.approved] if approved_only else items

    async def _embedded(self, scope: str, query: str, k: int, model: str) -> list[tuple[MemoryItem, float]]:
        items = await self.backend.items("experience", scope)
        if self.config.experience.require_approval:
            items = [item for item in items if item.approved]
        if not items or k <= 0:
            return []
        missing = [item for item in items if embedding_of(item, model) is None]
        if missing:
            vectors = await embed([item.text for item in missing], model=model, api_base=self.embedding_base)
            updated = {
                item.id: item.with_changes(data={**item.data, EMBEDDING_FIELD: {"model": model, "vector": vector}})
                for item, vector in zip(missing, vectors, strict=True)
            }
            await self.backend.put(list(updated.values()))
            items = [updated.get(item.id, item) for item in items]
        (target,) = await embed([query], model=model, api_base=self.embedding_base)
        scored = [(item, cosine(target, embedding_of(item, model) or [])) for item in items]
        scored.sort(key=lambda pair: (-pair[1], pair[0].id))
        return [(item, score) for item, score in scored[:k] if score > 0]

    # -- eviction -------------------------------------------------------------------------------
    def limits(self, kind: MemoryKind) -> KindLimits:
        """The configured limits of ``kind``."""
        return {"entity": self.config.entities, "history": self.config.history, "experience": self.config.experience}[
            kind
        ]

    async def evict(self, kind: MemoryKind, scope: str, *, keep: str | None = None, now: float | None = None) -> int:
        """Apply ``kind``'s limits (age, then count, then size) in ``scope``; returns how many records went.

        The policy picks the order: ``oldest`` drops the earliest created first, ``lru`` the least
        recently used. ``keep`` (the record just written) is dropped last.
        """
        limits = self.limits(kind)
        if limits.max_count is None and limits.max_age_days is None and limits.max_chars is None:
            return 0
        now = time.time() if now is None else now
        items = await self.backend.items(kind, scope)
        drop: list[str] = []
        if limits.max_age_days is not None:
            cutoff = now - limits.max_age_days * _DAY_S
            drop.extend(item.id for item in items if item.created_at < cutoff and item.id != keep)
        alive = [item for item in items if item.id not in set(drop)]
        order = "used_at" if self.config.policy == "lru" else "created_at"
        alive.sort(key=lambda item: (item.id == keep, getattr(item, order), item.id))  # first = first to go
        if limits.max_count is not None and len(alive) > limits.max_count:
            excess = len(alive) - limits.max_count
            drop.extend(item.id for item in alive[:excess])
            alive = alive[excess:]
        if limits.max_chars is not None:
            total = sum(item.size for item in alive)
            while alive and total > limits.max_chars and alive[0].id != keep:
                total -= alive[0].size
                drop.append(alive.pop(0).id)
        return await self.backend.delete(kind, drop) if drop else 0

    async def prune(self, kind: MemoryKind | None = None) -> int:
        """Apply the limits in every scope (records of scopes nobody writes to any more age out here)."""
        dropped = 0
        for k in (kind,) if kind is not None else KINDS:
            for scope in await self.backend.scopes(k):
                dropped += await self.evict(k, scope)
        return dropped

    # -- curation -------------------------------------------------------------------------------
    async def list(self, kind: MemoryKind | None = None, scope: str | None = None) -> list[MemoryItem]:
        """Records of one kind or all kinds (in ``scope``), newest first."""
        kinds: Iterable[MemoryKind] = (kind,) if kind is not None else KINDS
        found: list[MemoryItem] = []
        for k in kinds:
            found.extend(await self.backend.items(k, scope))
        found.sort(key=lambda item: (-item.created_at, item.id))
        return found

    async def find(self, item_id: str) -> MemoryItem | None:
        """The record with ``item_id`` (of any kind)."""
        for kind in KINDS:
            item = await self.backend.get(kind, item_id)
            if item is not None:
                return item
        return None

    async def delete(self, item_id: str) -> bool:
        """Delete a record by id; False when there is none."""
        item = await self.find(item_id)
        return item is not None and await self.backend.delete(item.kind, [item.id]) > 0

    async def approve(self, item_id: str, approved: bool = True) -> MemoryItem:
        """Mark a record reviewed (or not).

        Raises:
            AgentMemoryError: No record has that id.
        """
        item = await self.find(item_id)
        if item is None:
            raise AgentMemoryError(f"no memory record {item_id!r}: see `codeact memory list`", code="memory.not_found")
        updated = item.with_changes(approved=approved)
        await self.backend.put([updated])
        return updated

    async def import_items(self, records: Sequence[Mapping[str, object]], *, approved: bool | None = None) -> int:
        """Store exported records (``approved`` overrides their flag when given); returns how many."""
        items = [MemoryItem.from_json(record) for record in records]
        if approved is not None:
            items = [item.with_changes(approved=approved) for item in items]
        await self.backend.put(items)
        for kind, scope in sorted({(item.kind, item.scope) for item in items}):
            await self.evict(kind, scope)
        return len(items)


def _check_title(title: object) -> str:
    if not isinstance(title, str) or not title.strip():
        raise AgentMemoryError(f"an entity title must be a non-empty string, got {title!r}", code="memory.entity_title")
    clean = str(title).strip()
    if len(clean) > _TITLE_CHARS:
        raise AgentMemoryError(
            f"entity title of {len(clean)} characters: keep it under {_TITLE_CHARS}", code="memory.entity_title"
        )
    return clean


def _experience_text(fields: Mapping[str, Any]) -> str:
    errors = " ".join(str(e.get("error", "")) for e in fields.get("errors", ()) if isinstance(e, Mapping))
    operations = " ".join(str(op) for op in fields.get("operations", ()))
    return "\n".join(
        part for part in (str(fields.get("task", "")), str(fields.get("lesson", "")), operations, errors) if part
    )
