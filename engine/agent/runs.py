"""What a run shares with the code that runs agents as steps (``engine/flow``): the names it may import.

A flow runs each step's agent as a run of its own: it reads the caller's run settings as a run does
(:func:`resolve_run`), labels its session the same way (:func:`labelled`), links the step's session to
the flow (:data:`SESSION_LINK`), and reads a step's end as a run's (:func:`run_result`,
:data:`PAUSE_REASONS`); it owns and closes what it opened as an agent does (:class:`Lifecycle`).
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping

from codeact.engine.agent._input import labelled, resolve_run
from codeact.engine.agent._lifecycle import Lifecycle
from codeact.engine.agent._results import PAUSE_REASONS
from codeact.engine.agent._results import _result as run_result

__all__ = ["PAUSE_REASONS", "SESSION_LINK", "Lifecycle", "labelled", "resolve_run", "run_result"]

# Extra session metadata for the next session a run creates in this context (a flow step's link to its
# parent flow, engine.flow); read once by the run, so the run's own sub-agents do not inherit it.
SESSION_LINK: contextvars.ContextVar[Mapping[str, object] | None] = contextvars.ContextVar(
    "codeact_session_link", default=None
)
