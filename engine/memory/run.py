"""A run's memory: what the agent loop calls (open, prepare the prompt, entity access, finish).

* ``open_run_memory``: None when the blueprint enables no memory; else the manager on the run's
  store (or the store ``session.memory.store`` names).
* ``prepare``: before the first code round, the user's relevant history summaries and the session's
  entities go into a Context segment, and the top-k similar experiences into the Experience
  section, all within the memory token budget.
* ``finish``: when the run ends, its history summary (when the user is known) and its experience
  are distilled and stored; a failure here is logged, never a failure of the run.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from codeact import prompts
from codeact.engine.errors import CodeactError
from codeact.engine.memory._factory import memory_backend
from codeact.engine.memory.backend import MemoryBackend
from codeact.engine.memory.distill import RoundTrace, RunTrace, experience_fields, history_fields, merge_model_fields
from codeact.engine.memory.manager import MemoryManager, experience_scope
from codeact.engine.memory.records import AgentMemoryError, MemoryItem
from codeact.engine.memory.settings import MemoryConfig, memory_config
from codeact.segments import Experience

if TYPE_CHECKING:
    from codeact.engine.blueprint import AgentSpec
    from codeact.engine.store import RoundRecord, Store

__all__ = ["EntityAccess", "MemoryPrompt", "RunMemory", "memory_budget", "open_run_memory"]

_log = logging.getLogger("codeact.memory")
_ENTITY_CHARS = 240
_DEFAULT_WINDOW = 32_768


def config_of(spec: AgentSpec) -> MemoryConfig | None:
    """The spec's memory configuration, or None when memory is off."""
    settings = spec.session.memory
    if settings is None or not settings.enabled:
        return None
    return memory_config(enabled=True, scope=settings.scope, store=settings.store, config=settings.config)


def memory_budget(config: MemoryConfig, *, window: int, compact_ratio: float | None) -> int:
    """Tokens memory may add to a prompt: ``budgetTokens``, and at most half the headroom compaction leaves.

    Compaction triggers when a prompt passes ``contextRatio`` of the window; memory takes at most half
    of what lies above that line (an eighth of the window without compaction), so remembering never
    by itself pushes a fresh prompt into compaction.
    """
    headroom = window * (1 - compact_ratio) / 2 if compact_ratio is not None else window / 8
    return max(0, min(config.budget_tokens, int(headroom)))


@dataclass(frozen=True, kw_only=True)
class MemoryPrompt:
    """What memory adds to a run's prompt."""

    context: str | None
    experiences: tuple[Experience, ...]
    used_tokens: int


class EntityAccess:
    """``toolkits.MemoryAccess`` for one session (what ``system.remember/recall/entities`` call)."""

    def __init__(self, manager: MemoryManager, session_id: str) -> None:
        self._manager = manager
        self._session_id = session_id

    async def remember(self, title: str, data: object) -> None:
        """Remember ``data`` under ``title``."""
        await self._manager.remember(self._session_id, title, data)

    async def recall(self, title: str) -> object:
        """The data under ``title``."""
        return await self._manager.recall(self._session_id, title)

    async def entities(self) -> list[dict[str, object]]:
        """The session's entities."""
        return [
            {"title": item.title, "data": item.data.get("value"), "updated": _iso(item.used_at)}
            for item in await self._manager.entities(self._session_id)
        ]


class RunMemory:
    """Memory for one run.

    Args:
        manager: The memory manager.
        session_id: The run's session.
        user: Who the run is for (history summaries need one).
        agent_id: The blueprint id (the ``agent`` experience scope).
        owned: A store this object opened itself (closed by :meth:`close`).
    """

    def __init__(
        self, manager: MemoryManager, *, session_id: str, user: str | None, agent_id: str, owned: Store | None = None
    ) -> None:
        self.manager = manager
        self.config = manager.config
        self.session_id = session_id
        self.user = user
        self.agent_id = agent_id
        self.access = EntityAccess(manager, session_id)
        self._owned = owned

    @property
    def experience_scope(self) -> str | None:
        """Where this run's experiences go (None: off)."""
        if not self.config.experience.enabled:
            return None
        return experience_scope(self.config, user=self.user, agent_id=self.agent_id)

    async def prepare(self, task: str, *, budget: int, count: Callable[[str], int]) -> MemoryPrompt:
        """The Context text (entities, history summaries) and the experiences for ``task``, within ``budget``."""
        used = 0
        lines: list[str] = []
        history: list[MemoryItem] = []
        if self.user and self.config.history.enabled and self.config.scope != "session":
            history = await self.manager.history_for(self.user, task)
        if history:
            header = "Earlier sessions of this user (most relevant first):"
            used += count(header)
            lines.append(header)
            for item in history:
                line = _history_line(item)
                cost = count(line)
                if used + cost > budget:
                    break
                lines.append(line)
                used += cost
        entities = await self.manager.entities(self.session_id) if self.config.entities.enabled else []
        shown = entities[: self.config.entities.show]
        if shown:
            header = "Remembered in this session (system.recall(title) returns the data):"
            entity_lines = [header]
            cost = count(header)
            for item in shown:
                line = f"- {item.title!r}: {_clip(item.text, _ENTITY_CHARS)}"
                if used + cost + count(line) > budget:
                    break
                entity_lines.append(line)
                cost += count(line)
            if len(entity_lines) > 1:
                if len(entities) > len(entity_lines) - 1:
                    entity_lines.append(f"- ... {len(entities) - len(entity_lines) + 1} more: system.entities()")
                lines.extend(entity_lines)
                used += cost
        experiences: list[Experience] = []
        scope = self.experience_scope
        if scope is not None and self.config.experience.top_k:
            for item, _score in await self.manager.experiences_for(scope, task):
                example = _as_example(item)
                cost = count(f"{example.task}\n{example.code}\n{example.note}")
                if used + cost > budget:
                    break
                experiences.append(example)
                used += cost
        context = "\n".join(lines) if lines else None
        return MemoryPrompt(context=context, experiences=tuple(experiences), used_tokens=used)

    async def finish(
        self,
        *,
        task: str,
        status: str,
        reason: str,
        answer: object,
        rounds: Sequence[RoundRecord],
        codes: dict[int, str],
        run_id: str,
        distill: Callable[[str], Awaitable[str]] | None = None,
    ) -> None:
        """Distill and store the run's history summary and experience (errors are logged, not raised)."""
        try:
            await self._finish(task, status, reason, answer, rounds, codes, run_id, distill)
        except (CodeactError, OSError) as exc:
            _log.warning("memory: the run's summary/experience was not stored: %s", exc)

    async def _finish(
        self,
        task: str,
        status: str,
        reason: str,
        answer: object,
        rounds: Sequence[RoundRecord],
        codes: dict[int, str],
        run_id: str,
        distill: Callable[[str], Awaitable[str]] | None,
    ) -> None:
        if status == "paused":
            return  # the run goes on after the user's answer: its summary comes then
        entities = tuple(item.title for item in await self.manager.entities(self.session_id))
        trace = RunTrace(
            task=task,
            status=status,
            reason=reason,
            answer=answer,
            rounds=tuple(_round_trace(record, codes.get(record.index)) for record in rounds),
            entities=entities,
            user=self.user,
            agent_id=self.agent_id,
            session_id=self.session_id,
            run_id=run_id,
            ended_at=time.time(),
        )
        history = history_fields(trace)
        experience = experience_fields(trace)
        if experience is not None and status != "completed" and not self.config.experience.record_failures:
            experience = None
        if distill is not None and self.config.experience.distill == "model":
            prompt = prompts.render(
                "memory_distill.j2",
                task=task,
                outcome=f"{status} ({reason})",
                answer=_clip(json.dumps(answer, ensure_ascii=False, default=str), 600),
                rounds=[{"index": r.index, "code": (r.code or "")[:800], "error": r.error or ""} for r in trace.rounds],
            )
            reply = await distill(prompt)
            parsed = _json_object(str(reply))
            if parsed is not None:
                history, experience = merge_model_fields(history, experience, parsed)
        if self.user and self.config.history.enabled and self.config.scope != "session":
            await self.manager.add_history(self.user, history)
        scope = self.experience_scope
        if scope is not None and experience is not None:
            await self.manager.add_experience(scope, experience)

    async def close(self) -> None:
        """Close what was opened for this run (a ``session.memory.store`` of its own)."""
        await self.manager.backend.close()  # its own connection (never the session store's)
        if self._owned is not None:
            owned, self._owned = self._owned, None
            await owned.close()


async def open_run_memory(
    spec: AgentSpec, store: Store, *, session_id: str, user: str | None, embedding_base: str | None = None
) -> RunMemory | None:
    """The run's memory, or None when the blueprint enables none.

    Raises:
        AgentMemoryError: ``session.memory`` is invalid or its store cannot be opened.
    """
    try:
        config = config_of(spec)
    except ValueError as exc:
        raise AgentMemoryError(f"invalid session.memory: {exc}", code="memory.config") from None
    if config is None:
        return None
    owned = None
    target = store
    if config.store not in ("", "session"):
        from codeact.engine.store import open_store

        owned = target = open_store(config.store)
    backend: MemoryBackend = memory_backend(target)
    manager = MemoryManager(backend, config, embedding_base=embedding_base)
    return RunMemory(manager, session_id=session_id, user=user, agent_id=spec.id, owned=owned)


def _round_trace(record: RoundRecord, middle: str | None) -> RoundTrace:
    error = record.error
    said: str | None = None
    source = ""
    if error is not None:
        said = f"{error.get('type', 'Error')}: {error.get('message', '')}".strip()
        source = str(error.get("source") or "")
    elif record.parse_error:
        said = f"no runnable code: {record.parse_error}"
    code = middle if middle is not None else record.code
    operations = tuple(f"{c.get('toolkit')}.{c.get('operation')}" for c in record.calls if isinstance(c, dict))
    return RoundTrace(index=record.index, code=code, error=said, source=source, operations=operations)


def _as_example(item: MemoryItem) -> Experience:
    data = item.data
    note = str(data.get("lesson", ""))
    code = str(data.get("code") or "").strip() or "# (no code succeeded)"
    return Experience(task=str(data.get("task") or item.title), code=code, note=note)


def _history_line(item: MemoryItem) -> str:
    data = item.data
    keys = f"; keys: {data.get('keys')}" if data.get("keys") else ""
    kind = data.get("question_type", item.title)
    return f"- {data.get('time', _iso(item.created_at))} ({kind}{keys}): {data.get('summary', item.text)}"


def _iso(at: float) -> str:
    return _dt.datetime.fromtimestamp(at, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _json_object(reply: str) -> dict[str, object] | None:
    text = reply.strip()
    if text.startswith("```"):
        text = text.strip("`")
        text = text.split("\n", 1)[1] if "\n" in text else text
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        value = json.loads(text[start : end + 1])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
