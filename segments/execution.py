"""The execution chain of a session's segments (the seed's ``execId`` / ``parentExecId``).

Every round of a session is one execution. Its id is the round's id in the record,
``"<session id>:<round>"`` (a ``RoundRecord`` is keyed by its session and index), so it is stable:
the same in the events, the stored segments and the record, and a resumed session goes on with the
next round's id without reading anything back.

* A segment a round produced (its Thought, Code, Evaluation, ...) carries that round's id as
  ``exec_id`` and the round before it as its parent (none for a session's first round).
* A segment added between rounds (a run's task and input messages, the caller's context, memory and
  knowledge before the first round of a run) belongs to no execution (``exec_id`` empty); its parent
  is the last round that ran before it, so a resumed session's new task names the round it follows.
"""

from __future__ import annotations

from typing import TypedDict

__all__ = ["ExecChain", "exec_chain", "exec_id"]


class ExecChain(TypedDict):
    """The execution-chain fields of a segment (``Segment(..., **exec_chain(...))``)."""

    exec_id: str
    parent_exec_ids: tuple[str, ...]


def exec_id(session_id: str, round_index: int) -> str:
    """The execution id of round ``round_index`` (1-based) of ``session_id``."""
    return f"{session_id}:{round_index}"


def exec_chain(session_id: str, round_index: int, recorded: int) -> ExecChain:
    """``exec_id`` and ``parent_exec_ids`` of a segment added at ``round_index`` of a session.

    Args:
        session_id: The session.
        round_index: The round the segment is added at (the round in progress, or the last one).
        recorded: The last round already recorded: a round after it is in progress.
    """
    if round_index > recorded:  # a round in progress produced it
        parents = (exec_id(session_id, round_index - 1),) if round_index > 1 else ()
        return {"exec_id": exec_id(session_id, round_index), "parent_exec_ids": parents}
    return {"exec_id": "", "parent_exec_ids": (exec_id(session_id, round_index),) if round_index >= 1 else ()}
