"""Token and cost totals of round records (``RoundRecord.usage``), for ``sessions show`` and the eval."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Usage", "usage_of_round", "usage_total"]


@dataclass(frozen=True, kw_only=True)
class Usage:
    """Tokens in and out, and the cost when every priced call said it.

    Attributes:
        input_tokens: Prompt tokens.
        output_tokens: Completion tokens.
        cost_usd: Cost in US dollars; None when no call was priced.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None

    def __add__(self, other: Usage) -> Usage:
        costs = [c for c in (self.cost_usd, other.cost_usd) if c is not None]
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=sum(costs) if costs else None,
        )

    def to_json(self) -> dict[str, Any]:
        """``{"input_tokens", "output_tokens", "cost_usd"}``."""
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "cost_usd": self.cost_usd}

    def describe(self) -> str:
        """``1200 in / 80 out tokens, $0.0012`` (the cost only when known)."""
        text = f"{self.input_tokens} in / {self.output_tokens} out tokens"
        return text if self.cost_usd is None else f"{text}, ${self.cost_usd:.4f}"


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def usage_of_round(usage: Mapping[str, Any]) -> Usage:
    """The totals of one round's ``usage`` (``{"code": {...}, "thought": {...}}``, or flat counts)."""
    parts = [v for v in usage.values() if isinstance(v, Mapping)] or [usage]
    total = Usage()
    for part in parts:
        cost = part.get("cost_usd")
        total += Usage(
            input_tokens=_int(part.get("prompt_tokens")),
            output_tokens=_int(part.get("completion_tokens")),
            cost_usd=float(cost) if isinstance(cost, int | float) else None,
        )
    return total


def usage_total(usages: Iterable[Mapping[str, Any]]) -> Usage:
    """The totals of many rounds."""
    total = Usage()
    for usage in usages:
        total += usage_of_round(usage)
    return total
