"""The agent loop's three memory steps (engine/memory does the work; this wires it into a run)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from codeact.engine.events import SegmentCreated
from codeact.segments import PromptConfig, SegmentKind

if TYPE_CHECKING:
    from codeact.engine.agent.context import Outcome, RunContext
    from codeact.engine.store import Store

__all__ = ["end_memory", "memory_prompt_config", "start_memory"]

_DEFAULT_WINDOW = 32_768
_log = logging.getLogger("codeact.memory")


async def start_memory(ctx: RunContext, store: Store, *, user: str | None, base_url: str | None) -> None:
    """Open the run's memory (``ctx.memory``; stays None when the blueprint enables none)."""
    if ctx.spec.session.memory is None or not ctx.spec.session.memory.enabled:
        return
    from codeact.engine.memory import open_run_memory

    ctx.memory = await open_run_memory(ctx.spec, store, session_id=ctx.session_id, user=user, embedding_base=base_url)


async def memory_prompt_config(ctx: RunContext, config: PromptConfig) -> PromptConfig:
    """Before the first code round: the Context segment and the Experience section from memory."""
    memory = ctx.memory
    if memory is None:
        return config
    from codeact.engine.memory import memory_budget

    compact = ctx.spec.session.compact
    ratio = (compact.context_ratio or 0.75) if compact is not None and compact.enabled else None
    window = ctx.spec.model.context_window or ctx.model.context_window(purpose="code") or _DEFAULT_WINDOW
    budget = memory_budget(memory.config, window=window, compact_ratio=ratio)

    def count(text: str) -> int:
        return ctx.model.count_tokens(text, purpose="code")

    found = await memory.prepare(ctx.input, budget=budget, count=count)
    if found.context:
        last = ctx.history.last(SegmentKind.CONTEXT)
        if last is None or last.content != found.context:
            segment = ctx.history.add(SegmentKind.CONTEXT, found.context, round_index=ctx.round, tags=("memory",))
            ctx.pending_segments.append(segment)
            ctx.emit(SegmentCreated, segment=segment.model_dump(mode="json"), round=ctx.round)
    if not found.experiences:
        return config
    return config.model_copy(update={"experiences": (*config.experiences, *found.experiences)})


async def end_memory(ctx: RunContext, outcome: Outcome) -> None:
    """When the run ends: distill and store its summary and experience (never fails the run)."""
    if ctx.memory is None:
        return
    from codeact.engine.agent.context import EndRun
    from codeact.engine.errors import CodeactError

    try:
        await _end_memory(ctx, outcome)
    except (CodeactError, EndRun, OSError) as exc:
        _log.warning("memory: the run's summary/experience was not stored: %s", exc)


async def _end_memory(ctx: RunContext, outcome: Outcome) -> None:
    memory = ctx.memory
    rounds = [r for r in await ctx.store.rounds(ctx.session_id) if r.index >= ctx.first_round]
    codes: dict[int, str] = {}
    for segment in ctx.history.segments:
        if segment.kind == SegmentKind.CODE and segment.round_index >= ctx.first_round:
            codes[segment.round_index] = segment.content

    async def distill(prompt: str) -> Any:
        reply = await ctx.call_model("utility", messages=({"role": "user", "content": prompt},))
        return reply.text

    await memory.finish(
        task=ctx.input,
        status=outcome.status,
        reason=outcome.reason,
        answer=outcome.answer,
        rounds=rounds,
        codes=codes,
        run_id=ctx.run_id,
        distill=distill,
    )
