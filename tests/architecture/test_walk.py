"""The walk figure (``scripts/walk.py``): following one run's input does not come back to a file more often.

The script runs one scripted run under a profiler and counts how often the walk from ``Agent.run`` through
``engine/agent/`` to the sandbox and back returns to a file it had left (its docstring defines the terms).
The bounds are a ratchet: lower them when the figure drops, never raise them.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.architecture.test_imports import ROOT

# The walk with helper leaves folded (the figure), with self-contained calls folded too, and every first call.
# At a629da1 (before the run was split into parts): 23, 11 and 100; with the call pipeline out of
# engine/agent, the run in parts and the sandbox factory beside the sandbox builder: 14, 7 and 67; a toolkit call out of
# the run's code (Emitter in engine/events): 14, 7 and 63; the loop builds its compactor when it
# starts (one visit to codeact.py from the run, not two): 12, 7 and 63; Agent.run's one call into the run
# (stream), the run's task walked as stream's (scripts/walk.py): 11, 6 and 61; a run given no config
# shares one validated default, and the hooks' view of the config is made once per run, not per hook
# call: 10, 6 and 63 (every call: the first validation of a config is now the hooks' view, made in
# context.py, no longer in _input.py beside resolve_run); the interceptors' chain in the leaf
# engine/interceptors.py beside the tool calls' (the model call no longer visits hooks.py): 10, 6 and 62.
MAX_RETURNS = 10
MAX_RETURNS_LOCAL = 6
MAX_RETURNS_EVERY_CALL = 62


def test_the_walk_through_one_run_returns_to_a_left_file_at_most_the_ratchet() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "walk.py"), "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        cwd=ROOT,
    ).stdout
    figure = json.loads(out)
    walk, local, every_call = figure["walk"], figure["local"], figure["every_call"]
    assert walk["returns"] <= MAX_RETURNS, "\n".join(walk["walk"])
    assert local["returns"] <= MAX_RETURNS_LOCAL, "\n".join(local["walk"])
    assert every_call["returns"] <= MAX_RETURNS_EVERY_CALL, every_call["per_file"]
