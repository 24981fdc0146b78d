"""The ``attachments`` toolkit: the current event's attachments, readable by the code through the bridge.

Attachments are not copied into the sandbox: the code asks for one by name
(``attachments.read_text("report.csv")``), and the host side decodes inline content or, under a
host, reads it through the run-scoped API (``reader``). URLs and host paths are never fetched
from here: a hostile context must not make codeact read its own files or the network.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from codeact.engine.runner.entities import InputAttachment
from codeact.toolkits import operation, toolkit

__all__ = ["MAX_ATTACHMENT_BYTES", "AttachmentReader", "Attachments", "NamedAttachment", "named_attachments"]

MAX_ATTACHMENT_BYTES = 8 * 1024 * 1024
"""The most one read returns (larger attachments are refused with the reason)."""

AttachmentReader = Callable[[InputAttachment], Awaitable[bytes]]
"""Reads an attachment the host holds (by ``ref``); given by the host proxy."""


@dataclass(frozen=True, kw_only=True)
class NamedAttachment:
    """An attachment under the unique name the code uses."""

    name: str
    attachment: InputAttachment

    def describe(self, readable: bool) -> dict[str, object]:
        """What ``attachments.list()`` shows for it."""
        a = self.attachment
        return {
            "name": self.name,
            "type": a.type or "file",
            "mime_type": a.mime_type or "application/octet-stream",
            "size": a.size,
            "readable": readable,
        }


def named_attachments(items: Sequence[InputAttachment]) -> list[NamedAttachment]:
    """Give every attachment a unique name (its ``name``, else its id, else ``attachment-N``)."""
    out: list[NamedAttachment] = []
    seen: set[str] = set()
    for index, item in enumerate(items, start=1):
        base = (item.name or item.id or f"attachment-{index}").replace("/", "_").strip() or f"attachment-{index}"
        name, n = base, 1
        while name in seen:
            n += 1
            name = f"{base} ({n})"
        seen.add(name)
        out.append(NamedAttachment(name=name, attachment=item))
    return out


def _inline(attachment: InputAttachment) -> bytes | None:
    content = attachment.content
    if content is None:
        return None
    if len(content) > MAX_ATTACHMENT_BYTES * 4 // 3 + 1024:  # refused before decoding
        raise ValueError(f"attachment {attachment.name!r} is larger than {MAX_ATTACHMENT_BYTES} bytes")
    if content.startswith("data:"):
        head, _, body = content.partition(",")
        if ";base64" not in head:
            from urllib.parse import unquote_to_bytes

            return unquote_to_bytes(body)
        content = body
    try:
        return base64.b64decode(content, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"attachment {attachment.name!r}: its inline content is not valid base64") from None


@toolkit(name="attachments", description="The files attached to the user's current message")
class Attachments:
    """The current event's attachments (one instance per run)."""

    def __init__(self, items: Sequence[NamedAttachment], *, reader: AttachmentReader | None = None) -> None:
        self._items = {item.name: item for item in items}
        self._reader = reader

    def _readable(self, item: NamedAttachment) -> bool:
        return item.attachment.content is not None or (self._reader is not None and item.attachment.ref is not None)

    @operation
    async def list(self) -> list[dict[str, object]]:
        """Describe the attachments: name, type, mime_type, size (bytes, may be None), readable.

        Returns:
            One dict per attachment.
        """
        return [item.describe(self._readable(item)) for item in self._items.values()]

    @operation
    async def read_bytes(self, name: str) -> bytes:
        """The content of an attachment.

        Args:
            name: The attachment's name as `list()` shows it.

        Returns:
            Its bytes.
        """
        item = self._items.get(name)
        if item is None:
            raise KeyError(f"no attachment {name!r}; attachments: {sorted(self._items)}")
        data = _inline(item.attachment)
        if data is None and self._reader is not None and item.attachment.ref is not None:
            data = await self._reader(item.attachment)
        if data is None:
            where = "a URL" if item.attachment.url else "the host"
            raise ValueError(f"attachment {name!r} is held by {where} and cannot be read in this run")
        if len(data) > MAX_ATTACHMENT_BYTES:
            raise ValueError(f"attachment {name!r} is {len(data)} bytes; at most {MAX_ATTACHMENT_BYTES} can be read")
        return data

    @operation
    async def read_text(self, name: str, encoding: str = "utf-8") -> str:
        """The content of an attachment as text.

        Args:
            name: The attachment's name as `list()` shows it.
            encoding: The text encoding.

        Returns:
            The decoded text (undecodable bytes are replaced).
        """
        data = await self.read_bytes(name)
        return data.decode(encoding, errors="replace")
