"""``session.memory``: what a blueprint asks of memory, parsed and checked (light: pydantic only).

A blueprint declares::

    session:
      memory:
        enabled: true
        scope: agent           # session | user | agent | project: who shares experiences
        store: session         # "session" (the run's store) or a store URL (sqlite:///..., redis://...)
        config:
          budgetTokens: 1200   # memory's share of the prompt (entities + summaries + experiences)
          policy: oldest       # eviction: oldest (by creation) or lru (least recently used first)
          entities:   {enabled: true, maxCount: 50, maxChars: 20000, show: 10}
          history:    {enabled: true, topK: 3, recent: 1, maxCount: 200, maxAgeDays: 180}
          experience: {enabled: true, topK: 3, retrieval: lexical, embeddingModel: null,
                       distill: rules, requireApproval: false, maxCount: 5000, maxAgeDays: 365}

Every key is optional; camelCase and snake_case are both accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails

__all__ = [
    "SCOPES",
    "EntityConfig",
    "ExperienceConfig",
    "HistoryConfig",
    "KindLimits",
    "MemoryConfig",
    "is_memory_store",
    "memory_config",
    "memory_config_problems",
]

SCOPES: tuple[str, ...] = ("session", "user", "agent", "project")
"""``session``: only entities (nothing outlives the session); ``user``: history and experiences are the
user's; ``agent``: experiences are shared by every user of the blueprint (history stays per user);
``project``: experiences are shared by every agent writing to the store."""


class _Config(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True)


class KindLimits(_Config):
    """Limits of one memory kind in one scope; ``None`` is no limit.

    Attributes:
        max_count: Most records kept; the eviction policy picks which go.
        max_age_days: Records older than this are dropped.
        max_chars: Most characters (of the records' JSON) kept in total.
    """

    enabled: bool = True
    max_count: int | None = Field(default=None, ge=1)
    max_age_days: float | None = Field(default=None, gt=0)
    max_chars: int | None = Field(default=None, ge=100)


class EntityConfig(KindLimits):
    """Entity memory (``system.remember/recall/entities``), scoped to the session.

    Attributes:
        show: At most this many entities are listed in the prompt's Context (the newest first).
        max_data_chars: Longest JSON of one entity's data.
    """

    max_count: int | None = Field(default=50, ge=1)
    max_chars: int | None = Field(default=20_000, ge=100)
    show: int = Field(default=10, ge=0, le=100)
    max_data_chars: int = Field(default=4_000, ge=10)


class HistoryConfig(KindLimits):
    """History summaries (the seed's ``HistoryChatMemory``), scoped to the user.

    Attributes:
        top_k: Summaries most similar to the task put in the Context.
        recent: The user's latest summaries added even when they share no word with the task.
    """

    max_count: int | None = Field(default=200, ge=1)
    max_age_days: float | None = Field(default=180, gt=0)
    top_k: int = Field(default=3, ge=0, le=20)
    recent: int = Field(default=1, ge=0, le=10)


class ExperienceConfig(KindLimits):
    """Experiences distilled from runs and retrieved into the Experience section.

    Attributes:
        top_k: Experiences retrieved before the first code round.
        retrieval: ``lexical`` (BM25) or ``embedding`` (``embedding_model`` through litellm).
        embedding_model: A litellm embedding model; setting it selects ``embedding`` retrieval.
        distill: ``rules`` (from the run's record) or ``model`` (one utility model call).
        require_approval: Only experiences approved by a curator (``codeact memory approve``) are retrieved.
        record_failures: Also store runs that failed (their errors are lessons too).
    """

    max_count: int | None = Field(default=5_000, ge=1)
    max_age_days: float | None = Field(default=365, gt=0)
    top_k: int = Field(default=3, ge=0, le=20)
    retrieval: Literal["lexical", "embedding"] = "lexical"
    embedding_model: str | None = None
    distill: Literal["rules", "model"] = "rules"
    require_approval: bool = False
    record_failures: bool = True


class MemoryConfig(_Config):
    """The whole ``session.memory`` block, resolved.

    Attributes:
        enabled: Memory is on.
        scope: See :data:`SCOPES`.
        store: ``session`` (the agent's store) or a store URL.
        budget_tokens: Memory's share of the prompt, in tokens (it also stays under the headroom the
            compaction trigger leaves, see ``docs/memory.md``).
        policy: Which records eviction drops first: ``oldest`` (creation time) or ``lru`` (last use).
    """

    enabled: bool = False
    scope: Literal["session", "user", "agent", "project"] = "agent"
    store: str = "session"
    budget_tokens: int = Field(default=1_200, ge=50, le=100_000)
    policy: Literal["oldest", "lru"] = "oldest"
    entities: EntityConfig = Field(default_factory=EntityConfig)
    history: HistoryConfig = Field(default_factory=HistoryConfig)
    experience: ExperienceConfig = Field(default_factory=ExperienceConfig)

    @property
    def experience_retrieval(self) -> str:
        """``embedding`` when an embedding model is named, else the configured retrieval."""
        return "embedding" if self.experience.embedding_model else self.experience.retrieval


def memory_config(
    *, enabled: bool, scope: str | None, store: str | None, config: Mapping[str, object] | None
) -> MemoryConfig:
    """Resolve a blueprint's ``session.memory`` fields.

    Raises:
        ValueError: A field is invalid (the message names it and says what is accepted).
    """
    data: dict[str, object] = {k: _plain(v) for k, v in (config or {}).items()}
    data["enabled"] = enabled
    if scope is not None:
        data["scope"] = scope
    if store is not None:
        data["store"] = store
    try:
        return MemoryConfig.model_validate(data)
    except ValidationError as exc:
        raise ValueError("; ".join(_describe(error) for error in exc.errors())) from None


def memory_config_problems(
    *, enabled: bool, scope: str | None, store: str | None, config: Mapping[str, object] | None
) -> list[tuple[str, str]]:
    """``(json path, message)`` for each invalid field of ``session.memory`` (empty when valid)."""
    data: dict[str, object] = {k: _plain(v) for k, v in (config or {}).items()}
    data["enabled"] = enabled
    if scope is not None:
        data["scope"] = scope
    if store is not None:
        data["store"] = store
    try:
        MemoryConfig.model_validate(data)
    except ValidationError as exc:
        return [(_path(error), _describe(error)) for error in exc.errors()]
    problems = []
    if store is not None and not is_memory_store(store):
        problems.append(
            (
                "$.session.memory.store",
                f"session.memory.store {store!r} is not 'session' nor a store URL: use 'session' (the run's "
                "store), sqlite:///PATH or redis://HOST:PORT/DB",
            )
        )
    return problems


def is_memory_store(store: str) -> bool:
    """True for a ``session.memory.store`` codeact opens: ``session`` (the run's store) or a store URL/file."""
    return store == "session" or "://" in store or store.endswith(".db")


def _plain(value: object) -> object:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _path(error: ErrorDetails) -> str:
    loc = [str(part) for part in error.get("loc", ())]
    top = {"enabled", "scope", "store"}
    if loc and loc[0] in top:
        return "$.session.memory." + ".".join(loc)
    return "$.session.memory.config" + "".join(f".{part}" for part in loc)


def _describe(error: ErrorDetails) -> str:
    where = _path(error).removeprefix("$.")
    message = str(error.get("msg", "invalid"))
    if error.get("type") == "extra_forbidden":
        message = (
            "unknown key; known keys: enabled, scope, store, and under config: budgetTokens, policy, "
            "entities, history, experience (each with enabled, maxCount, maxAgeDays, maxChars, ...)"
        )
    return f"{where}: {message}"
