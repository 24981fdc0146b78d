"""``engine/agent/`` is a pipeline (docs/design.md, "A run, top to bottom").

The facade (``agent.py``) calls the run (``_run.py``), which calls the loops (``codeact.py``,
``react.py``); each step imports only the steps below it and the leaves, so following one run from
``Agent.run`` to the round loop and back visits each file once. The import graph is read from the
source (``test_import_cycles.import_graph``), function-local and type-only imports included.
"""

from __future__ import annotations

import functools

import pytest

from tests.architecture.test_import_cycles import import_graph, package_dirs
from tests.architecture.test_imports import ROOT

AGENT = "codeact.engine.agent"

# The steps of a run, top to bottom; a step may import the ones after it, never one before it.
STEPS = ("agent", "_run", "codeact", "react")


@functools.cache
def _agent_graph() -> dict[str, set[str]]:
    graph = import_graph(package_dirs(ROOT, ["engine"]))
    prefix = f"{AGENT}."
    return {
        module.removeprefix(prefix): {t.removeprefix(prefix) for t in targets if t.startswith(prefix)}
        for module, targets in graph.items()
        if module.startswith(prefix)
    }


def test_the_facade_is_imported_by_the_package_face_only() -> None:
    graph = _agent_graph()
    importers = sorted(m for m, targets in graph.items() if "agent" in targets)
    assert importers == [], "engine/agent/agent.py (the facade) is imported back by " + ", ".join(importers)


def test_the_run_is_started_by_the_facade_only() -> None:
    graph = _agent_graph()
    assert sorted(m for m, targets in graph.items() if "_run" in targets) == ["agent"]


@pytest.mark.parametrize("step", STEPS, ids=STEPS)
def test_a_step_never_reaches_a_step_above_it(step: str) -> None:
    above = set(STEPS[: STEPS.index(step)])
    reached = _reachable(_agent_graph(), step) - {step}
    assert not reached & above, f"{step} reaches {sorted(reached & above)}, a step above it"


@pytest.mark.parametrize("loop", ["codeact", "react", "context"], ids=["codeact", "react", "context"])
def test_the_loops_and_the_run_state_know_no_wiring(loop: str) -> None:
    # The loops drive rounds over the RunContext they are given; they never build their wiring.
    reached = _reachable(_agent_graph(), loop)
    assert not reached & {"agent", "_run", "_wiring", "_assemble", "sandboxes", "subagents"}, sorted(reached)


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, stack = {start}, [start]
    while stack:
        for target in graph.get(stack.pop(), ()):
            if target not in seen:
                seen.add(target)
                stack.append(target)
    return seen
