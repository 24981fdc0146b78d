"""The run's knowledge step: the blueprint's knowledge chosen once per run, from the task (docs/knowledge.md).

engine/knowledge chunks and indexes the sources (once per agent); this puts one task's selection into
the prompt: constraint chunks into the system prompt's Knowledge section (the same for every task, so
the system prompt stays cacheable), the matching domain chunks into one Knowledge segment of the
task's round (recorded with the session, and the same in every round's prompt).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from codeact.engine.events import SegmentCreated
from codeact.segments import PromptConfig, SegmentKind

if TYPE_CHECKING:
    from codeact.engine.agent.context import RunContext
    from codeact.engine.knowledge import KnowledgeBase

__all__ = ["KNOWLEDGE_INTRO", "KNOWLEDGE_TAG", "knowledge_prompt_config"]

KNOWLEDGE_TAG = "knowledge"
KNOWLEDGE_INTRO = "From the agent's knowledge, relevant to this task:"


def knowledge_prompt_config(ctx: RunContext, base: KnowledgeBase | None, config: PromptConfig) -> PromptConfig:
    """Before the first code round: the Knowledge section (constraints) and segment (domain) for ``ctx.input``."""
    if base is None:
        return config
    selection = base.select(ctx.input)
    if selection.domain:
        segment = ctx.history.add(
            SegmentKind.KNOWLEDGE,
            f"{KNOWLEDGE_INTRO}\n{selection.domain_text()}",
            round_index=ctx.round,
            tags=(KNOWLEDGE_TAG, *sorted({chunk.source for chunk, _ in selection.domain})),
        )
        ctx.pending_segments.append(segment)
        ctx.emit(SegmentCreated, segment=segment.model_dump(mode="json"), round=ctx.round)
    if not selection.constraints:
        return config
    return config.model_copy(update={"knowledge": (*config.knowledge, *(c.render() for c in selection.constraints))})
