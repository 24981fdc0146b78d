"""Context budget: token counting and compaction of older rounds into one summary segment.

The engine passes litellm's counter and the model's context window (litellm model info, overridable in
the blueprint); :class:`ApproxTokenCounter` is the dependency-free fallback. When a prompt passes
``session.compact.trigger.contextRatio`` of the window, or more than ``trigger.maxTurns`` rounds are
kept verbatim, :class:`Compactor` replaces the older rounds with ONE ``Round`` segment (tag
``compacted``) that keeps the ``session.compact.preserve`` categories. The summary comes from an
injected async summarizer (the utility model) and falls back to :func:`fallback_summary`, which is
deterministic. The task itself (round 0) and the latest rounds stay verbatim; restored variables are
not segments at all, so the frame header keeps listing them.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from codeact import prompts
from codeact.segments._text import one_line
from codeact.segments.history import SegmentHistory
from codeact.segments.model import Segment, SegmentKind

__all__ = [
    "ApproxTokenCounter",
    "CompactConfig",
    "Compaction",
    "Compactor",
    "SummaryRequest",
    "Summarizer",
    "TokenCounter",
    "fallback_summary",
]

COMPACTED_TAG = "compacted"
DEFAULT_PRESERVE: tuple[str, ...] = (
    "instructions",
    "open_decisions",
    "changed_files",
    "failed_commands",
    "test_results",
)


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens of a text for one model."""

    def count(self, text: str) -> int:
        """The number of tokens in ``text``."""
        ...


_TOKEN = re.compile(r"[A-Za-z]+|\d{1,3}|[\u3000-\u9fff\uac00-\ud7af\uff00-\uffef]|[^\sA-Za-z\d]{1,2}|\s+", re.UNICODE)


class ApproxTokenCounter:
    """A dependency-free approximation of a BPE tokenizer (within ~15% of cl100k on code and prose).

    Letter runs cost one token per 6 characters (at least one), digits one per 3, each CJK character
    one, punctuation one per pair of characters, and whitespace runs one when they hold a newline or
    are longer than one space (a single space is merged into the next word, as BPE vocabularies do).
    """

    def count(self, text: str) -> int:
        """The approximate number of tokens in ``text``."""
        total = 0
        for match in _TOKEN.finditer(text):
            piece = match.group(0)
            first = piece[0]
            if first.isalpha() and first.isascii():
                total += (len(piece) + 5) // 6
            elif first.isspace():
                total += 1 if ("\n" in piece or len(piece) > 1) else 0
            else:
                total += 1
        return total


class CompactConfig(BaseModel):
    """The blueprint's ``session.compact`` block.

    Attributes:
        enabled: Compact at all.
        context_ratio: Compact when a prompt passes this share of the context window, in (0, 1].
        max_turns: Compact when more rounds than this are kept verbatim (None: no turn limit).
        strategy: Only ``structured-summary`` is implemented.
        preserve: Categories the summary must keep.
        keep_recent: Rounds kept verbatim after compaction.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = True
    context_ratio: float = Field(default=0.75, gt=0, le=1)
    max_turns: int | None = Field(default=None, ge=1)
    strategy: str = "structured-summary"
    preserve: tuple[str, ...] = DEFAULT_PRESERVE
    keep_recent: int = Field(default=2, ge=0)

    @classmethod
    def from_blueprint(cls, block: dict[str, Any] | None) -> CompactConfig:
        """From the blueprint's camelCase ``session.compact`` mapping (``trigger.contextRatio`` ...)."""
        block = dict(block or {})
        trigger = dict(block.pop("trigger", None) or {})
        fields: dict[str, Any] = {k: v for k, v in block.items() if k in ("enabled", "strategy", "preserve")}
        if "contextRatio" in trigger:
            fields["context_ratio"] = trigger["contextRatio"]
        if "maxTurns" in trigger:
            fields["max_turns"] = trigger["maxTurns"]
        if "keepRecent" in block:
            fields["keep_recent"] = block["keepRecent"]
        return cls.model_validate(fields)


@dataclass(frozen=True, kw_only=True)
class SummaryRequest:
    """What a summarizer gets.

    Attributes:
        prompt: The full instruction for a utility model (rendered ``compaction_request.j2``).
        transcript: The compacted rounds as ``Label: content`` text.
        preserve: The categories to keep.
        first_round: First compacted round.
        last_round: Last compacted round.
    """

    prompt: str
    transcript: str
    preserve: tuple[str, ...]
    first_round: int
    last_round: int


Summarizer = Callable[[SummaryRequest], Awaitable[str]]


@dataclass(frozen=True, kw_only=True)
class Compaction:
    """The result of :meth:`Compactor.compact`.

    Attributes:
        history: The new history (the old one is untouched).
        summary: The summary segment, or None when there was nothing to compact.
        rounds: The compacted round indexes.
        used_fallback: True when the deterministic summary was used.
        summarizer_error: Why the summarizer's answer was not used, if it was not.
    """

    history: SegmentHistory
    summary: Segment | None
    rounds: tuple[int, ...] = ()
    used_fallback: bool = False
    summarizer_error: str | None = None


def _verbatim_rounds(history: SegmentHistory) -> list[int]:
    return sorted(
        {s.round_index for s in history if s.round_index > 0 and COMPACTED_TAG not in s.tags},
    )


class Compactor:
    """Decides when to compact and builds the compacted history.

    Args:
        config: The ``session.compact`` settings.
        context_window: The model's context window in tokens.
        summarizer: Async callable producing the summary (the utility model); optional.
        counter: Token counter for :meth:`prompt_tokens` (defaults to :class:`ApproxTokenCounter`).
    """

    def __init__(
        self,
        config: CompactConfig,
        *,
        context_window: int,
        summarizer: Summarizer | None = None,
        counter: TokenCounter | None = None,
    ) -> None:
        self.config = config
        self.context_window = context_window
        self.summarizer = summarizer
        self.counter: TokenCounter = counter or ApproxTokenCounter()

    def prompt_tokens(self, *texts: str) -> int:
        """Tokens of the given prompt parts (system, user, ...)."""
        return sum(self.counter.count(t) for t in texts)

    def should_compact(self, history: SegmentHistory, *, prompt_tokens: int) -> bool:
        """True when the prompt passes ``context_ratio`` of the window or too many rounds are verbatim."""
        if not self.config.enabled or not self._compactable(history):
            return False
        if prompt_tokens > self.config.context_ratio * self.context_window:
            return True
        max_turns = self.config.max_turns
        return max_turns is not None and len(_verbatim_rounds(history)) > max_turns

    def _compactable(self, history: SegmentHistory) -> list[int]:
        rounds = sorted({s.round_index for s in history if s.round_index > 0})
        keep = set(_verbatim_rounds(history)[-self.config.keep_recent :]) if self.config.keep_recent else set()
        return [r for r in rounds if r not in keep]

    async def maybe_compact(self, history: SegmentHistory, *, prompt_tokens: int) -> SegmentHistory:
        """``history`` compacted if :meth:`should_compact`, else ``history`` itself."""
        if not self.should_compact(history, prompt_tokens=prompt_tokens):
            return history
        return (await self.compact(history)).history

    async def compact(self, history: SegmentHistory) -> Compaction:
        """Replace every round but round 0 and the ``keep_recent`` latest with one summary segment."""
        rounds = self._compactable(history)
        if not rounds:
            return Compaction(history=history, summary=None)
        chosen = set(rounds)
        old = [s for s in history if s.round_index in chosen]
        preserve = self.config.preserve
        transcript = "\n".join(s.render() for s in old)
        request = SummaryRequest(
            prompt=prompts.render(
                "compaction_request.j2",
                preserve=list(preserve),
                transcript=transcript,
                first=rounds[0],
                last=rounds[-1],
            ),
            transcript=transcript,
            preserve=preserve,
            first_round=rounds[0],
            last_round=rounds[-1],
        )
        text, error = None, None
        if self.summarizer is not None:
            try:
                text = (await self.summarizer(request)).strip() or None
                if text is None:
                    error = "the summarizer returned an empty summary"
            except Exception as exc:  # the utility model is optional: any failure falls back, and is reported
                error = f"{type(exc).__name__}: {exc}"
        used_fallback = text is None
        if text is None:
            text = fallback_summary(old, preserve=preserve)
        summary = Segment(
            kind=SegmentKind.ROUND,
            content=text,
            round_index=rounds[-1],
            tags=(COMPACTED_TAG,),
            timestamp=old[-1].timestamp,
        )
        kept: list[Segment] = []
        placed = False
        for segment in history:
            if segment.round_index in chosen:
                if not placed:
                    kept.append(summary)
                    placed = True
                continue
            kept.append(segment)
        return Compaction(
            history=SegmentHistory(kept),
            summary=summary,
            rounds=tuple(rounds),
            used_fallback=used_fallback,
            summarizer_error=error,
        )


_WRITE_PATTERNS = (
    re.compile(r"""open\(\s*(?:file=)?(['"])(?P<path>[^'"\n]+)\1\s*,\s*(?:mode=)?(['"])[^'"]*[wax+][^'"]*\3"""),
    re.compile(r"""Path\(\s*(['"])(?P<path>[^'"\n]+)\1\s*\)\.write_(?:text|bytes)"""),
    re.compile(
        r"""\b\w*(?:write|edit|create|save|patch|append|update)_?\w*file\w*\(\s*(?:\w+\s*=\s*)?(['"])(?P<path>[^'"\n]+)\1"""
    ),
)
_TEST_LINE = re.compile(
    r"(\b\d+ (?:passed|failed|errors?|skipped)\b|^Ran \d+ tests?|^(?:OK|FAILED)\b|\b[Tt]ests? (?:passed|failed)\b)",
    re.MULTILINE,
)
_ERROR_LINE = re.compile(r"^(?:Failed with .*|Error: .*|Traceback .*|\w*(?:Error|Exception)\b.*)$", re.MULTILINE)
_TITLES = {
    "instructions": "Instructions",
    "open_decisions": "Open decisions",
    "changed_files": "Changed files",
    "failed_commands": "Failed commands",
    "test_results": "Test results",
}


def _first_line(text: str, limit: int = 160) -> str:
    return one_line(text.strip().split("\n", 1)[0], limit)


def fallback_summary(segments: Sequence[Segment], *, preserve: Iterable[str] = DEFAULT_PRESERVE) -> str:
    """A deterministic structured summary of ``segments`` (same input, same bytes).

    Known categories are extracted: ``instructions`` (User/Context text and earlier summaries),
    ``open_decisions`` (the latest Plan and NextGoal), ``changed_files`` (paths written by the code),
    ``failed_commands`` (code whose Evaluation reports an error), ``test_results`` (test summary lines in
    Evaluations). Any other category collects the segments tagged with its name.
    """
    by_round: dict[int, list[Segment]] = {}
    for segment in segments:
        by_round.setdefault(segment.round_index, []).append(segment)
    categories: list[dict[str, object]] = []
    for name in dict.fromkeys(preserve):
        items = _category(name, segments, by_round)
        categories.append({"title": _TITLES.get(name, name.replace("_", " ").capitalize()), "items": items})
    steps = []
    for index, group in sorted(by_round.items()):
        goal = next((s for s in reversed(group) if s.kind in (SegmentKind.NEXT_GOAL, SegmentKind.PLAN)), None)
        failed = any(_is_failure(s) for s in group if s.kind == SegmentKind.EVALUATION)
        what = _first_line(goal.content) if goal else "(no plan recorded)"
        steps.append(f"round {index}: {what}{' [failed]' if failed else ''}")
    rounds = sorted(by_round)
    return prompts.render(
        "compaction_summary.j2",
        first=rounds[0] if rounds else 0,
        last=rounds[-1] if rounds else 0,
        categories=categories,
        steps=steps,
    ).strip()


def _is_failure(segment: Segment) -> bool:
    return "error" in segment.tags or bool(_ERROR_LINE.search(segment.content))


def _category(name: str, segments: Sequence[Segment], by_round: dict[int, list[Segment]]) -> list[str]:
    items: list[str] = []
    if name == "instructions":
        for s in segments:
            if s.kind in (SegmentKind.USER, SegmentKind.CONTEXT) or (
                s.kind == SegmentKind.ROUND and COMPACTED_TAG in s.tags
            ):
                items.append(f"{s.label}: {one_line(s.content.strip(), 400)}")
    elif name == "open_decisions":
        for kind in (SegmentKind.PLAN, SegmentKind.NEXT_GOAL):
            last = next((s for s in reversed(segments) if s.kind == kind), None)
            if last is not None:
                items.append(f"{last.label} (round {last.round_index}): {one_line(last.content.strip(), 300)}")
    elif name == "changed_files":
        for s in segments:
            if s.kind == SegmentKind.CODE:
                for pattern in _WRITE_PATTERNS:
                    items.extend(m.group("path") for m in pattern.finditer(s.content))
    elif name == "failed_commands":
        for index, group in sorted(by_round.items()):
            code = next((s for s in group if s.kind == SegmentKind.CODE), None)
            for evaluation in (s for s in group if s.kind == SegmentKind.EVALUATION and _is_failure(s)):
                match = _ERROR_LINE.search(evaluation.content)
                error = one_line(match.group(0), 200) if match else _first_line(evaluation.content)
                items.append(f"round {index}: `{_first_line(code.content, 100) if code else '?'}` -> {error}")
    elif name == "test_results":
        for s in segments:
            if s.kind == SegmentKind.EVALUATION:
                items.extend(
                    f"round {s.round_index}: {one_line(line.strip(), 200)}"
                    for line in s.content.split("\n")
                    if _TEST_LINE.search(line)
                )
    else:
        items.extend(f"{s.label}: {one_line(s.content.strip(), 300)}" for s in segments if name in s.tags)
    return list(dict.fromkeys(items))
