"""The ordered segment history of one session (the seed's TaskExecutor round structure).

Round 0 holds the task (User, Context, Knowledge, ...). Round ``N`` appends ``Thought N, Plan N,
Code N, Evaluation N, NextGoal N``; round ``N``'s prompt is every earlier segment plus the ones of
round ``N`` produced so far, in order.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from codeact.segments.model import Segment, SegmentKind

__all__ = ["SegmentHistory"]

_SEPARATOR = "\n"


class SegmentHistory:
    """An append-only, ordered list of segments with round helpers.

    Args:
        segments: Initial segments, kept in the given order.
    """

    def __init__(self, segments: Iterable[Segment] = ()) -> None:
        self._segments: list[Segment] = list(segments)
        self._rendered: list[str] = [s.render() for s in self._segments]

    def __len__(self) -> int:
        return len(self._segments)

    def __iter__(self) -> Iterator[Segment]:
        return iter(self._segments)

    def __repr__(self) -> str:
        return f"SegmentHistory({len(self._segments)} segments, {self.current_round} rounds)"

    @property
    def segments(self) -> tuple[Segment, ...]:
        """Every segment, in order."""
        return tuple(self._segments)

    @property
    def current_round(self) -> int:
        """The highest round index present (0 when only the task is there)."""
        return max((s.round_index for s in self._segments), default=0)

    def append(self, segment: Segment) -> Segment:
        """Append ``segment`` and return it."""
        self._segments.append(segment)
        self._rendered.append(segment.render())
        return segment

    def add(
        self,
        kind: str,
        content: str,
        *,
        round_index: int | None = None,
        exec_id: str = "",
        parent_exec_ids: Sequence[str] = (),
        tags: Sequence[str] = (),
        **extra: Any,
    ) -> Segment:
        """Create a segment (in the current round unless ``round_index`` is given) and append it."""
        segment = Segment(
            kind=kind,
            content=content,
            round_index=self.current_round if round_index is None else round_index,
            exec_id=exec_id,
            parent_exec_ids=tuple(parent_exec_ids),
            tags=tuple(tags),
            **extra,
        )
        return self.append(segment)

    def add_round(
        self,
        *,
        thought: str | None = None,
        plan: str | None = None,
        code: str | None = None,
        evaluation: str | None = None,
        next_goal: str | None = None,
        exec_id: str = "",
        round_index: int | None = None,
    ) -> int:
        """Append one whole round (``Thought, Plan, Code, Evaluation, NextGoal``; ``None`` parts skipped).

        Returns:
            The round index used (the next one unless ``round_index`` is given).
        """
        index = self.current_round + 1 if round_index is None else round_index
        for kind, content in (
            (SegmentKind.THOUGHT, thought),
            (SegmentKind.PLAN, plan),
            (SegmentKind.CODE, code),
            (SegmentKind.EVALUATION, evaluation),
            (SegmentKind.NEXT_GOAL, next_goal),
        ):
            if content is not None:
                self.add(kind, content, round_index=index, exec_id=exec_id)
        return index

    def rounds(self) -> dict[int, list[Segment]]:
        """Segments grouped by round index (ascending), each group in order."""
        grouped: dict[int, list[Segment]] = {}
        for segment in self._segments:
            grouped.setdefault(segment.round_index, []).append(segment)
        return dict(sorted(grouped.items()))

    def of_kind(self, kind: str) -> list[Segment]:
        """The segments of one kind, in order."""
        return [s for s in self._segments if s.kind == kind]

    def last(self, kind: str) -> Segment | None:
        """The latest segment of ``kind``, or None."""
        for segment in reversed(self._segments):
            if segment.kind == kind:
                return segment
        return None

    def render(self) -> str:
        """Every segment as ``Label: content``, one after the other (separated by a newline)."""
        return _SEPARATOR.join(self._rendered)

    def copy(self) -> SegmentHistory:
        """A shallow copy (segments are immutable)."""
        return SegmentHistory(self._segments)

    def to_json(self) -> str:
        """Serialize as a JSON list of segments."""
        return json.dumps([s.to_dict() for s in self._segments], ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> SegmentHistory:
        """Load a history written by :meth:`to_json`."""
        return cls(Segment.model_validate(item) for item in json.loads(text))
