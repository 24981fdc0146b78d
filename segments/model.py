"""The typed pieces of a prompt: :class:`Segment` and its kinds.

A segment renders as ``Label: content`` (the seed's ``[Segment]: [Content]``). The label is the kind's
name (``Thought: ...``, ``NextGoal: ...``) with one exception taken from the seed's prompt example:
Code segments are labelled ``Python:`` and their content starts on the next line, so code is never
glued to the label and the history reads like the FIM frame the model fills.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["CodeBlock", "Segment", "SegmentKind", "segment_label"]


class SegmentKind(StrEnum):
    """The known segment kinds (custom kinds are plain strings)."""

    USER = "User"
    CONTEXT = "Context"
    THOUGHT = "Thought"
    PLAN = "Plan"
    CODE = "Code"
    EVALUATION = "Evaluation"
    NEXT_GOAL = "NextGoal"
    EXPRESS = "Express"
    ROUND = "Round"
    EXPERIENCE = "Experience"
    KNOWLEDGE = "Knowledge"


_CANONICAL: dict[str, str] = {k.value.lower(): k.value for k in SegmentKind}
_CANONICAL.update({"next_goal": "NextGoal", "nextgoal": "NextGoal", "next goal": "NextGoal", "cmd": "Code"})
_LABELS: dict[str, str] = {SegmentKind.CODE.value: "Python"}
_CUSTOM_KIND = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,39}")


def segment_label(kind: str) -> str:
    """The label a segment of ``kind`` is rendered with (``Python`` for Code, else the kind)."""
    return _LABELS.get(kind, kind)


class Segment(BaseModel):
    """One typed piece of the user prompt.

    Attributes:
        kind: A :class:`SegmentKind` value (matched case-insensitively) or a custom kind
            (a letter then letters, digits or ``_``; at most 40 characters).
        content: The text after the label.
        round_index: The round that produced it (0 = the task itself: User, Context, ...).
        exec_id: The execution (round) id it belongs to.
        parent_exec_ids: Execution ids it descends from (the seed's execution chain).
        tags: Free labels (``error``, ``compacted``, a ``preserve`` category, ...).
        timestamp: Creation time, seconds since the epoch.
        sort_value: Tie-breaker when ordering segments of one round (higher = later).
        id: Unique id, for updates and deletes in a store.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str
    content: str
    round_index: int = Field(default=0, ge=0)
    exec_id: str = ""
    parent_exec_ids: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    timestamp: float = Field(default_factory=time.time)
    sort_value: int = 0
    id: str = Field(default_factory=lambda: uuid.uuid4().hex)

    @field_validator("kind")
    @classmethod
    def _canonical_kind(cls, value: str) -> str:
        known = _CANONICAL.get(value.strip().lower())
        if known is not None:
            return known
        if not _CUSTOM_KIND.fullmatch(value):
            raise ValueError(
                f"segment kind {value!r} is not a known kind nor a valid custom kind: use one of "
                f"{', '.join(k.value for k in SegmentKind)} or a name of letters, digits and '_'"
            )
        return value

    @property
    def label(self) -> str:
        """The label this segment renders with."""
        return segment_label(self.kind)

    def render(self) -> str:
        """``Label: content`` (Code: ``Python:`` then the code on the next line)."""
        if self.kind == SegmentKind.CODE:
            return f"Python:\n{self.content}"
        return f"{self.label}: {self.content}"

    def to_json(self) -> str:
        """Serialize for the store (compact JSON, stable key order)."""
        return json.dumps(self.model_dump(mode="json"), ensure_ascii=False, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> Segment:
        """Load a segment written by :meth:`to_json`."""
        return cls.model_validate_json(text)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (for records that embed segments)."""
        return self.model_dump(mode="json")


CodeSource = Literal["raw", "fence", "tag", "fim", "json"]


@dataclass(frozen=True, kw_only=True)
class CodeBlock:
    r"""The code read from a model reply.

    Attributes:
        code: Top-level (dedented) Python that ``ast.parse`` accepts, with ``\\n`` line ends.
        source: Where it was found: raw text, a fenced block, an ``<execute>``-style tag, after a FIM
            marker, or a JSON object's ``code`` field.
        notes: What was repaired, in words the model can read (empty when nothing was).
    """

    code: str
    source: CodeSource
    notes: tuple[str, ...] = ()
