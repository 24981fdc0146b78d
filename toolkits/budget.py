"""Budgets of toolkit calls: how many calls, and how many bytes through the bridge, a round and a run may use.

The round's clock does not count time spent waiting on the host (right for real tools), so without a
count nothing would bound a loop of cheap calls: ``for i in range(200000): kit.echo("x" * 1024)``. The
bridge counts every call and the bytes of its arguments and result (:class:`BudgetMeter`); the first
call past a budget is refused with a ``budget_exceeded`` control signal, which the code cannot catch
(``except Exception`` does not see it), and the round fails with an error naming the budget and the
blueprint key that sets it. The host sets the caps (:data:`DEFAULT_BUDGETS`, ``HostContext(call_budgets=...)``);
a blueprint may ask for less or more under them (``workflow.codeact.budgets``, docs/limits.md).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Final

from codeact.toolkits.context import Control
from codeact.toolkits.errors import ToolkitError

__all__ = ["BUDGET_KEYS", "DEFAULT_BUDGETS", "BudgetMeter", "CallBudgets"]

_MiB: Final = 1024 * 1024

BUDGET_KEYS: Final[dict[str, str]] = {
    "round_calls": "roundCalls",
    "run_calls": "runCalls",
    "round_bytes": "roundBytes",
    "run_bytes": "runBytes",
}
"""Field -> its key under ``workflow.codeact.budgets`` in a blueprint."""


@dataclass(frozen=True, kw_only=True)
class CallBudgets:
    """Bounds on the toolkit calls of one round and of one run.

    Attributes:
        round_calls: Toolkit calls per round.
        run_calls: Toolkit calls per run (all its rounds).
        round_bytes: Bytes through the bridge per round (encoded arguments plus results).
        run_bytes: Bytes through the bridge per run.
    """

    round_calls: int = 20_000
    run_calls: int = 200_000
    round_bytes: int = 256 * _MiB
    run_bytes: int = 2048 * _MiB

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if type(value) is not int or value < 1:
                raise ToolkitError(f"budget {f.name} must be a whole number of at least 1, got {value!r}")

    def within(self, cap: CallBudgets) -> CallBudgets:
        """``self``, checked against the host's ``cap``.

        Raises:
            ToolkitError: A budget asks for more than the cap (the message names the blueprint key).
        """
        for f in fields(self):
            asked, allowed = getattr(self, f.name), getattr(cap, f.name)
            if asked > allowed:
                key = f"workflow.codeact.budgets.{BUDGET_KEYS[f.name]}"
                raise ToolkitError(
                    f"{key} asks for {asked}, more than this host allows ({allowed}); lower it to {allowed} or "
                    "less, or let the host allow more (HostContext(call_budgets=...))"
                )
        return self


DEFAULT_BUDGETS: Final = CallBudgets()
"""The host's caps unless it sets its own: 20,000 calls and 256 MiB per round, 200,000 calls and 2 GiB per run."""


class BudgetMeter:
    """Counts one run's calls and bridge bytes against its budgets (the round's counts reset per round)."""

    __slots__ = ("budgets", "exceeded", "round_bytes", "round_calls", "run_bytes", "run_calls")

    def __init__(self, budgets: CallBudgets) -> None:
        self.budgets = budgets
        self.round_calls = self.run_calls = self.round_bytes = self.run_bytes = 0
        self.exceeded: Control | None = None

    def begin_round(self) -> None:
        """A new round starts: its counts start at zero."""
        self.round_calls = self.round_bytes = 0
        self.exceeded = None

    def charge(self, calls: int, size: int) -> Control | None:
        """Count ``calls`` calls and ``size`` bytes; the ``budget_exceeded`` signal once a budget is passed."""
        self.round_calls += calls
        self.run_calls += calls
        self.round_bytes += size
        self.run_bytes += size
        if self.exceeded is None:
            self.exceeded = self._check()
        return self.exceeded

    def _check(self) -> Control | None:
        b = self.budgets
        for name, used, limit, unit in (
            ("round_calls", self.round_calls, b.round_calls, "toolkit calls"),
            ("round_bytes", self.round_bytes, b.round_bytes, "bytes through the bridge"),
            ("run_calls", self.run_calls, b.run_calls, "toolkit calls"),
            ("run_bytes", self.run_bytes, b.run_bytes, "bytes through the bridge"),
        ):
            if used > limit:
                scope = "round" if name.startswith("round") else "run"
                key = f"workflow.codeact.budgets.{BUDGET_KEYS[name]}"
                message = (
                    f"the {scope} passed its budget of {limit} {unit} ({key}); the call was refused and the round "
                    "stopped. Do more work per call (one call for many items), keep large data on the host, or "
                    f"raise {key} in the blueprint (up to the host's cap)"
                )
                payload: dict[str, Any] = {"budget": name, "key": key, "limit": limit, "message": message}
                return Control("budget_exceeded", payload)
        return None
