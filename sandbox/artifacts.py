"""Artifacts on the host: the files a round wrote into ``outputs/``, checked and typed.

The runtime (:mod:`codeact.sandbox.runtime.artifacts`) sends each new or changed file of ``outputs/`` with
the round's result. Everything it sends is untrusted: :func:`artifacts_from_answer` checks each
name (a relative path inside ``outputs/``), decodes the content, enforces the caps of
:class:`~codeact.sandbox.base.Limits` again, and decides the MIME type itself (from the content's magic
bytes, else the file name). A file over a cap is kept as a REFUSED artifact (name, size, reason,
no content), so it is reported, never silently dropped.
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
import re
from dataclasses import dataclass, field
from typing import Final, TypeGuard

__all__ = ["MAGIC_TYPES", "Artifact", "OUTPUTS_DIR", "artifacts_from_answer", "sniff_mime"]

OUTPUTS_DIR: Final = "outputs"
_NAME: Final = re.compile(r"^[^\x00-\x1f/\\][^\x00-\x1f\\]{0,254}$")
MAGIC_TYPES: Final = (  # leading bytes -> the type the content is
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
    (b"PK\x03\x04", "application/zip"),
)
_TEXT_TYPES: Final = ("text/", "application/json", "image/svg+xml", "application/xml")


@dataclass(frozen=True, kw_only=True)
class Artifact:
    """A file a round produced in ``outputs/``.

    Attributes:
        name: Its path relative to ``outputs/`` (``chart.png``, ``tables/summary.csv``).
        mime: The MIME type the host decided.
        size: Its size in bytes.
        data: Its content (empty when refused).
        refused: Why it was not kept (over a size cap, unreadable), or None when kept.
    """

    name: str
    mime: str
    size: int
    data: bytes = field(default=b"", repr=False)
    refused: str | None = None

    def to_json(self, *, with_data: bool = False) -> dict[str, str | int | None]:
        """``{"name", "mime", "size", "refused"}`` (and ``data_b64`` when ``with_data``)."""
        out: dict[str, str | int | None] = {
            "name": self.name,
            "mime": self.mime,
            "size": self.size,
            "refused": self.refused,
        }
        if with_data:
            out["data_b64"] = base64.b64encode(self.data).decode("ascii")
        return out

    @classmethod
    def from_json(cls, data: object) -> Artifact | None:
        """Rebuild from :meth:`to_json` output (a stored record); None for a malformed object."""
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            return None
        content = b""
        if isinstance(data.get("data_b64"), str):
            try:
                content = base64.b64decode(data["data_b64"], validate=True)
            except (binascii.Error, ValueError):
                return None
        size = data.get("size")
        refused = data.get("refused")
        return cls(
            name=data["name"],
            mime=str(data.get("mime") or "application/octet-stream"),
            size=size if isinstance(size, int) else len(content),
            data=content,
            refused=refused if isinstance(refused, str) else None,
        )


def sniff_mime(name: str, data: bytes) -> str:
    """The MIME type of ``data``: magic bytes first, then the name's extension, else octet-stream."""
    for magic, mime in MAGIC_TYPES:
        if data.startswith(magic):
            return mime
    guessed, _ = mimetypes.guess_type(name, strict=False)
    if guessed is None:
        return "application/octet-stream"
    if guessed.startswith(("image/", "application/pdf")) and not guessed.startswith(_TEXT_TYPES):
        return "application/octet-stream"  # claims a binary type its content does not have
    return guessed


def _valid_name(name: object) -> TypeGuard[str]:
    if not isinstance(name, str) or not _NAME.match(name):
        return False
    return all(part not in ("", ".", "..") for part in name.split("/"))


def artifacts_from_answer(raw: object, *, file_bytes: int, round_bytes: int) -> tuple[Artifact, ...]:
    """The round's artifacts from the runtime's (untrusted) ``artifacts`` member.

    Args:
        raw: The member as received.
        file_bytes: Largest artifact kept (``Limits.artifact_bytes``).
        round_bytes: Largest total kept per round (``Limits.round_artifact_bytes``).

    Returns:
        One :class:`Artifact` per well-formed entry, kept or refused, in the runtime's order.
    """
    if not isinstance(raw, list):
        return ()
    out: list[Artifact] = []
    total = 0
    for item in raw[:256]:
        if not isinstance(item, dict) or not _valid_name(item.get("name")):
            continue
        name = str(item["name"])
        size = item.get("size")
        size = size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else 0
        refused = item.get("refused")
        encoded = item.get("data")
        if isinstance(refused, str) or not isinstance(encoded, str):
            reason = str(refused)[:300] if isinstance(refused, str) else "sent without content"
            out.append(Artifact(name=name, mime=sniff_mime(name, b""), size=size, refused=reason))
            continue
        try:
            data = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            out.append(Artifact(name=name, mime="application/octet-stream", size=size, refused="malformed content"))
            continue
        mime = sniff_mime(name, data)
        if len(data) > file_bytes:
            reason = f"{len(data)} bytes is over the {file_bytes}-byte limit per file"
            out.append(Artifact(name=name, mime=mime, size=len(data), refused=reason))
            continue
        if total + len(data) > round_bytes:
            reason = f"the round's artifacts would exceed the {round_bytes}-byte limit per round"
            out.append(Artifact(name=name, mime=mime, size=len(data), refused=reason))
            continue
        total += len(data)
        out.append(Artifact(name=name, mime=mime, size=len(data), data=data))
    return tuple(out)
