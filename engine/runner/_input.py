"""A run context's input -> the text of the User segment, its attachments and its image/file contents.

``input.contents`` (the SDK's ``ContentElement``s) become message parts of the run's input, the
same parts ``Agent.run`` takes from a Python caller (``engine/agent/_files.py``):

=================================  ===================================================================
content                            becomes
=================================  ===================================================================
``text``                           the text (``AgentInput.to_text``)
``image_base64`` (base64 or a      an image part: a file in the sandbox's working directory, and an
``data:`` URL)                     image part of the user message for a vision model
``image_url`` with a ``data:`` URL the same
``file_base64`` + ``file_name``    a file part: a file in the sandbox's working directory
``image_url`` / ``file_url`` (a    an attachment listed to the model as not readable here: codeact
web URL)                           fetches no URL a context names
=================================  ===================================================================
"""

from __future__ import annotations

import base64
import binascii
import json

from codeact.engine.runner.attachments import NamedAttachment, named_attachments
from codeact.engine.runner.entities import ContentElement, InputAttachment, RunnerContext
from codeact.engine.runner.interactions import answer_text

__all__ = ["compose_input", "content_parts"]


def _image_data_url(value: str) -> str:
    """``image_base64`` (plain base64 or already a ``data:`` URL) as a ``data:`` URL, its type sniffed."""
    text = value.strip()
    if text.startswith("data:"):
        return text
    from codeact.sandbox.artifacts import sniff_mime

    try:
        head = base64.b64decode(text[:24] + "=" * (-len(text[:24]) % 4), validate=False)
    except (binascii.Error, ValueError):
        head = b""
    mime = sniff_mime("image", head)
    return f"data:{mime if mime.startswith('image/') else 'image/png'};base64,{text}"


def content_parts(contents: list[ContentElement]) -> tuple[list[dict[str, object]], list[InputAttachment]]:
    """The image and file ``contents`` as message parts, and those held by a URL as attachments (not fetched)."""
    parts: list[dict[str, object]] = []
    linked: list[InputAttachment] = []
    for element in contents:
        kind = element.type
        url = element.image_url.get("url") if isinstance(element.image_url, dict) else None
        if kind == "image_base64" and element.image_base64:
            image: dict[str, object] = {"url": _image_data_url(element.image_base64)}
            parts.append({"type": "image_url", "image_url": image})
        elif kind == "image_url" and isinstance(url, str) and url.startswith("data:"):
            parts.append({"type": "image_url", "image_url": {"url": url}})
        elif kind == "file_base64" and element.file_base64 is not None:
            file = {"filename": element.file_name, "file_data": element.file_base64}
            parts.append({"type": "file", "file": file})
        elif kind == "image_url" and isinstance(url, str):
            linked.append(InputAttachment(type="image", url=url, source="url", name=url.rsplit("/", 1)[-1] or None))
        elif kind == "file_url" and element.file_url:
            name = element.file_name or element.file_url.rsplit("/", 1)[-1] or None
            linked.append(InputAttachment(type="file", url=element.file_url, source="url", name=name))
    return parts, linked


_EVENT_DATA_CHARS = 4000


def compose_input(
    context: RunnerContext, *, readable_refs: bool = False
) -> tuple[str, list[NamedAttachment], list[dict[str, object]]]:
    """The user's message for the engine, the attachments the ``attachments`` toolkit serves, the content parts.

    The text is the input's text (or its text contents); an ``interaction.submitted`` run carries
    the answer; an event without text is described by its type and (trimmed) data. The parts are
    the image and file contents (:func:`content_parts`); contents held by a URL join the attachments.

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
    parts, linked = content_parts(context.input.contents)
    attachments = named_attachments([*context.input.attachments, *linked])
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
    return rendered.strip(), attachments, parts
