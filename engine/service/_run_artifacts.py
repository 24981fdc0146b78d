"""The run-scoped API's artifacts (seed 003 section 7.6): which artifact an id names, and what the host serves of it.

An artifact is a file a round of the run's session wrote into ``outputs/`` (or an input file, ``inputs/<name>``),
kept with its round in the session store. A call names it ``ROUND/NAME`` or by the ``codeact://`` URI its
``artifact.created`` result carried (``codeact://sessions/<session>/rounds/<n>/artifacts/<name>``). Before
anything is answered the host checks, in this order:

1. scope: the artifact is one of the run's own session (a URI of another session: ``unauthorized``);
2. existence: its round and name are in the store (``not_found``);
3. expiry: it is younger than the host's ``--artifact-ttl`` (``not_found``, the message says when it expired);

and before a byte of it leaves (``artifact_read``, ``artifact_open_stream``):

4. content: the sandbox kept it (a file over the sandbox's caps has none: ``not_found``);
5. size: at most the host's ``--artifact-max-bytes`` (``payload_too_large``);
6. MIME: the declared type does not contradict the content (its magic bytes; text without NUL bytes), and
   it is in the host's ``--artifact-mime`` allow-list when there is one (``unauthorized``).

``artifact_metadata`` answers after 1-3 and reports 4-6 as ``readable`` and ``refusal``. The whole artifact
streams as JSON lines (:func:`stream_lines`): a bounded number of base64 chunks, then a last line with its
size and sha256.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final
from urllib.parse import unquote

from codeact.sandbox.artifacts import MAGIC_TYPES

if TYPE_CHECKING:
    from codeact.engine.runner import RunnerAPIError
    from codeact.engine.store import Store

__all__ = [
    "DEFAULT_MAX_ARTIFACT_BYTES",
    "STREAM_CHUNK_BYTES",
    "ArtifactPolicy",
    "StoredArtifact",
    "find_artifact",
    "stream_lines",
]

DEFAULT_MAX_ARTIFACT_BYTES: Final = 16 * 1024 * 1024
"""The largest artifact a run reads or streams unless the host says otherwise (``--artifact-max-bytes``)."""
STREAM_CHUNK_BYTES: Final = 64 * 1024
"""Bytes of an artifact per line of its stream."""

_URI: Final = re.compile(r"codeact://sessions/(?P<session>[^/]+)/rounds/(?P<round>\d{1,9})/artifacts/(?P<name>.+)")
_ID: Final = re.compile(r"(?P<round>\d{1,9})/(?P<name>.+)")
_MAX_ID_CHARS: Final = 1024
_MIME: Final = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/(\*|[a-z0-9][a-z0-9!#$&^_.+-]{0,126})")
# magic bytes -> the type the content is: the sandbox's table (it types its artifacts so), and what a host
# must also recognise when it checks a declared type
_MAGIC: Final = (
    *MAGIC_TYPES,
    (b"\x1f\x8b", "application/gzip"),
    (b"\x7fELF", "application/x-executable"),
    (b"MZ", "application/x-msdownload"),
)
_ALIASES: Final[Mapping[str, frozenset[str]]] = {
    "image/jpeg": frozenset({"image/jpg", "image/pjpeg"}),
    "application/zip": frozenset({"application/x-zip-compressed"}),
    "application/gzip": frozenset({"application/x-gzip"}),
    "application/x-executable": frozenset({"application/x-elf", "application/x-sharedlib"}),
}
_CONTAINERS: Final = frozenset({"application/zip", "application/gzip"})  # docx, xlsx, epub, tar.gz, ... are these
_TEXT_APPLICATION: Final = frozenset({"application/json", "application/xml", "application/javascript"})


def _error(code: str, message: str, *, retryable: bool = False, **details: object) -> RunnerAPIError:
    from codeact.engine.runner import RunnerAPIError  # the runner's entities: imported when a call is refused

    return RunnerAPIError.make(code, message, retryable=retryable, **details)


def _base_type(mime: str) -> str:
    return mime.split(";", 1)[0].strip().lower()


def _is_text(base: str) -> bool:
    return (
        base.startswith("text/")
        or base in _TEXT_APPLICATION
        or base.endswith(("+json", "+xml"))
        or base == "image/svg+xml"
    )


def _detected(data: bytes) -> str | None:
    """The type the content's magic bytes say it is, or None."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return next((mime for magic, mime in _MAGIC if data.startswith(magic)), None)


def contradiction(declared: str, data: bytes) -> str | None:
    """Why ``data`` is not of the ``declared`` type (its magic bytes say another, or "text" holds NUL bytes), or None.

    ``application/octet-stream`` claims nothing and contradicts nothing; a zip or gzip container may be declared as
    any binary ``application/*`` type built on it (``.docx``, ``.xlsx``, ``.tar.gz``).
    """
    base = _base_type(declared)
    if base in ("", "application/octet-stream"):
        return None
    found = _detected(data)
    if found is not None:
        if base == found or base in _ALIASES.get(found, frozenset()):
            return None
        if found in _CONTAINERS and base.startswith("application/") and not _is_text(base):
            return None
        return f"its content is {found} (by its magic bytes)"
    if _is_text(base) and b"\x00" in data[:8192]:
        return "its content is binary (it holds NUL bytes), not text"
    return None


@dataclass(frozen=True, kw_only=True)
class StoredArtifact:
    """One artifact of the run's session as the store keeps it.

    Attributes:
        artifact_id: The id the call named it by.
        round: Its round in the session.
        name: Its name (its path under ``outputs/``, or ``inputs/<name>``).
        mime: The declared MIME type.
        size: Its size in bytes.
        data: Its content; None when the sandbox refused it (over a cap) or the store holds none.
        refused: Why the sandbox refused it, or None.
        created_at: Unix time its round ended (when the file came back from the sandbox).
    """

    artifact_id: str
    round: int
    name: str
    mime: str
    size: int | None
    data: bytes | None
    refused: str | None
    created_at: float


def _ref(artifact_id: object, session_id: str) -> tuple[int, str]:
    """``(round, name)`` of an id of the run's session (``ROUND/NAME`` or a ``codeact://`` URI of that session)."""
    if not isinstance(artifact_id, str) or not artifact_id or len(artifact_id) > _MAX_ID_CHARS:
        raise _error(
            "invalid_argument",
            f"artifact_id must be ROUND/NAME or the codeact:// URI of an artifact.created result, got {artifact_id!r}",
            artifact=str(artifact_id)[:200],
        )
    uri = _URI.fullmatch(artifact_id)
    if uri is not None:
        session = unquote(uri["session"])
        if session != session_id:
            raise _error(
                "unauthorized",
                f"artifact {artifact_id!r} is of session {session!r}, not this run's: a run reads the artifacts of "
                "its own conversation's session only",
                artifact=artifact_id,
            )
        return int(uri["round"]), unquote(uri["name"])
    plain = _ID.fullmatch(artifact_id)
    if plain is None:
        raise _error(
            "not_found",
            f"no artifact {artifact_id!r} in this run's session (ids are ROUND/NAME, or the codeact:// URI an "
            "artifact.created result carried)",
            artifact=artifact_id,
        )
    return int(plain["round"]), plain["name"]


async def find_artifact(store: Store, session_id: str, artifact_id: object) -> StoredArtifact:
    """The artifact ``artifact_id`` of session ``session_id`` (checks 1 and 2 of the module's list).

    Raises:
        RunnerAPIError: ``invalid_argument`` (not an id), ``unauthorized`` (another session's URI),
            ``not_found`` (no such round or name), ``runtime_error`` (content the store cannot decode).
    """
    round_index, name = _ref(artifact_id, session_id)
    record = await store.round(session_id, round_index)
    found = next((a for a in (record.artifacts if record is not None else ()) if a.get("name") == name), None)
    if record is None or found is None:
        raise _error(
            "not_found",
            f"no artifact {artifact_id!r} in this run's session (ids are ROUND/NAME, or the codeact:// URI an "
            "artifact.created result carried)",
            artifact=artifact_id,
        )
    data: bytes | None = None
    if isinstance(found.get("data_b64"), str):
        try:
            data = base64.b64decode(found["data_b64"], validate=True)
        except (binascii.Error, ValueError):
            raise _error(
                "runtime_error", f"artifact {artifact_id!r} is unreadable in the store", artifact=artifact_id
            ) from None
    size = found.get("size")
    refused = found.get("refused")
    return StoredArtifact(
        artifact_id=str(artifact_id),
        round=round_index,
        name=name,
        mime=str(found.get("mime") or "application/octet-stream"),
        size=size
        if isinstance(size, int) and not isinstance(size, bool)
        else (len(data) if data is not None else None),
        data=data,
        refused=refused if isinstance(refused, str) else None,
        created_at=record.started_at + max(record.duration_s, 0.0),
    )


@dataclass(frozen=True, kw_only=True)
class ArtifactPolicy:
    """What the host serves of a run's artifacts (``codeact serve --artifact-max-bytes/-mime/-ttl``).

    Attributes:
        max_bytes: The largest artifact read or streamed.
        mime_types: The declared types served (``image/png``, or ``image/*`` for a family); empty: any type.
        ttl_s: Seconds an artifact is served after its round ended; None: as long as the store keeps it.
    """

    max_bytes: int = DEFAULT_MAX_ARTIFACT_BYTES
    mime_types: tuple[str, ...] = ()
    ttl_s: float | None = None

    def __post_init__(self) -> None:
        if self.max_bytes < 1:
            raise ValueError(f"the largest artifact must be at least 1 byte, got {self.max_bytes}")
        if self.ttl_s is not None and self.ttl_s <= 0:
            raise ValueError(f"an artifact's time to live must be positive seconds, got {self.ttl_s:g}")
        for pattern in self.mime_types:
            if not _MIME.fullmatch(pattern):
                raise ValueError(
                    f"{pattern!r} is not a MIME type: give TYPE/SUBTYPE (image/png) or TYPE/* (image/*), in lower case"
                )

    def expires_at(self, artifact: StoredArtifact) -> float | None:
        """Unix time after which ``artifact`` is no longer served, or None."""
        return artifact.created_at + self.ttl_s if self.ttl_s is not None else None

    def check_alive(self, artifact: StoredArtifact, *, now: float | None = None) -> None:
        """Check 3: ``not_found`` once the artifact's time to live has passed."""
        expires = self.expires_at(artifact)
        if expires is not None and (time.time() if now is None else now) >= expires:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires))
            raise _error(
                "not_found",
                f"artifact {artifact.artifact_id!r} expired at {stamp}: this host serves an artifact for "
                f"{self.ttl_s:g} s after its round ended; run the step again to make it anew",
                artifact=artifact.artifact_id,
                expired_at=round(expires, 3),
            )

    def allows(self, mime: str) -> bool:
        """Whether the declared type ``mime`` is in the allow-list (always, without one)."""
        if not self.mime_types:
            return True
        base = _base_type(mime)
        family = base.split("/", 1)[0] + "/*"
        return base in self.mime_types or family in self.mime_types

    def refusal(self, artifact: StoredArtifact) -> RunnerAPIError | None:
        """Checks 4-6: why no byte of ``artifact`` may leave (the error a read raises), or None."""
        name = artifact.artifact_id
        if artifact.data is None:
            reason = f" (refused by the sandbox: {artifact.refused})" if artifact.refused else ""
            return _error("not_found", f"artifact {name!r} has no content{reason}", artifact=name, reason="no_content")
        size = len(artifact.data)
        if size > self.max_bytes:
            return _error(
                "payload_too_large",
                f"artifact {name!r} is {size} bytes; this host serves artifacts of at most {self.max_bytes} bytes",
                artifact=name,
                size=size,
                limit=self.max_bytes,
            )
        wrong = contradiction(artifact.mime, artifact.data)
        if wrong is not None:
            return _error(
                "unauthorized",
                f"artifact {name!r} is declared {artifact.mime!r} but {wrong}: this host serves an artifact only "
                "when its declared type matches its content",
                artifact=name,
                reason="mime_mismatch",
                declared=artifact.mime,
            )
        if not self.allows(artifact.mime):
            return _error(
                "unauthorized",
                f"artifact {name!r} is of type {artifact.mime!r}, which this host does not serve; it serves "
                f"{', '.join(self.mime_types)}",
                artifact=name,
                reason="mime_not_allowed",
                declared=artifact.mime,
            )
        return None

    def describe(self, artifact: StoredArtifact) -> dict[str, object]:
        """``artifact_metadata``'s answer: what the artifact is, when it expires, whether it may be read and why not."""
        refusal = self.refusal(artifact)
        expires = self.expires_at(artifact)
        return {
            "artifact_id": artifact.artifact_id,
            "name": artifact.name,
            "mime_type": artifact.mime,
            "size_bytes": artifact.size,
            "created_at": round(artifact.created_at, 3),
            "expires_at": round(expires, 3) if expires is not None else None,
            "readable": refusal is None,
            "refusal": refusal.error.message if refusal is not None else None,
            "refused": artifact.refused,
        }


def stream_lines(artifact: StoredArtifact, data: bytes, *, chunk: int = STREAM_CHUNK_BYTES) -> Iterator[bytes]:
    """The whole artifact as JSON lines, at most ``len(data) / chunk + 2`` of them.

    ``{"offset", "data_base64"}`` per ``chunk`` bytes, then ``{"eof": true, "size", "sha256", "mime_type"}``.
    """
    for offset in range(0, len(data), chunk):
        piece = data[offset : offset + chunk]
        yield (json.dumps({"offset": offset, "data_base64": base64.b64encode(piece).decode()}) + "\n").encode()
    end = {"eof": True, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "mime_type": artifact.mime}
    yield (json.dumps(end) + "\n").encode()
