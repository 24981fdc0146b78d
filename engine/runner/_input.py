"""A run context's input -> the text of the User segment, and its attachments."""

from __future__ import annotations

import json

from codeact.engine.runner.attachments import NamedAttachment, named_attachments
from codeact.engine.runner.entities import RunnerContext
from codeact.engine.runner.interactions import answer_text

__all__ = ["compose_input"]

_EVENT_DATA_CHARS = 4000


def compose_input(context: RunnerContext, *, readable_refs: bool = False) -> tuple[str, list[NamedAttachment]]:
    """The user's message for the engine and the attachments the ``attachments`` toolkit serves.

    The text is the input's text (or its text contents); an ``interaction.submitted`` run carries
    the answer; an event without text is described by its type and (trimmed) data.

    Args:
        context: The run context.
        readable_refs: Whether attachments held by the host (``ref``) can be read (under a host).
    """
    from codeact import prompts

    submission = context.input.interaction
    text = context.input.to_text().strip()
    if submission is not None:
        answer = answer_text(submission).strip()
        text = f"{answer}\n\n{text}".strip() if text and text != answer else answer
    attachments = named_attachments(context.input.attachments)
    data = ""
    if not text and context.event.data:
        data = json.dumps(context.event.data, ensure_ascii=False, default=str)
        if len(data) > _EVENT_DATA_CHARS:
            data = data[: _EVENT_DATA_CHARS - 1] + "…"
    shown = [
        item.describe(item.attachment.content is not None or (readable_refs and item.attachment.ref is not None))
        for item in attachments
    ]
    rendered = prompts.render(
        "runner_input.j2",
        text=text,
        event_type=context.event.event_type,
        event_data=data,
        attachments=shown,
        answer_to=submission.interaction_id if submission is not None else None,
    )
    return rendered.strip(), attachments
