"""The ``flow:`` block (``workflow.mode: flow``): checking the tree (``models.py`` loads its agents).

A flow blueprint composes other blueprints (``flow.agents[].path``, relative to the declaring file,
like ``subagents``) into a sequential, parallel, routing or loop flow (``codeact.engine.flow`` runs it).
Loading follows each path with the sub-agents' cycle detection and depth limit; the validator checks
the flow's own options and then every agent's blueprint, its issues reported under the entry's path.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from codeact.engine.blueprint.issues import ValidationIssue
from codeact.engine.blueprint.modes import WorkflowMode

if TYPE_CHECKING:
    from codeact.engine.blueprint.models import Blueprint

__all__ = [
    "FLOW_KINDS",
    "LOOP_CAP",
    "MAX_PARALLEL",
    "MERGE_STRATEGIES",
    "MIN_PARALLEL",
    "check_flow",
]

FLOW_KINDS: Final = ("sequential", "conditional", "parallel", "routing", "loop")
PAUSING_KINDS: Final = ("sequential", "conditional")
MERGE_STRATEGIES: Final = ("map", "list", "concat")
MIN_PARALLEL: Final = 2
MAX_PARALLEL: Final = 10
LOOP_CAP: Final = 1000
_KEY: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NAME: Final = re.compile(r"^[A-Za-z0-9._-]+$")


def _trim(value: str | None) -> str | None:
    stripped = value.strip() if value is not None else None
    return stripped or None


def is_flow(bp: Blueprint) -> bool:
    """True for a flow blueprint (``workflow.mode: flow``): the one test every builder and runner asks."""
    return bp.workflow is not None and bp.workflow.workflow_mode is WorkflowMode.FLOW


def agent_name(entry_name: str | None, child: Blueprint | None, index: int) -> str:
    """The name of ``flow.agents[index]``: its ``name``, else its blueprint's id, else ``agent<index>``."""
    return _trim(entry_name) or (_trim(child.id) if child is not None else None) or f"agent{index + 1}"


def check_flow(bp: Blueprint, validate: Callable[[Blueprint], list[ValidationIssue]]) -> list[ValidationIssue]:
    """The issues of a flow blueprint's ``flow`` block and of every agent in it (recursively).

    Args:
        bp: The flow blueprint.
        validate: Validates a child blueprint (the validator itself).
    """
    out: list[ValidationIssue] = []

    def error(path: str, code: str, message: str) -> None:
        out.append(ValidationIssue.error(path, code, message))

    def warning(path: str, code: str, message: str) -> None:
        out.append(ValidationIssue.warning(path, code, message))

    mode = _trim(bp.workflow.mode) if bp.workflow is not None else None
    flow = bp.flow
    if flow is None:
        if mode == "flow":
            error(
                "$.flow",
                "blueprint.flow.required",
                "workflow.mode is flow but there is no flow block; add flow: {kind: sequential, agents: [...]}.",
            )
        return out
    if mode != "flow":
        warning(
            "$.flow",
            "blueprint.flow.ignored",
            "the flow block is ignored because workflow.mode is not flow; set workflow: {mode: flow}.",
        )
    kind = _trim(flow.kind)
    if kind is None:
        error("$.flow.kind", "blueprint.flow.kind.required", f"flow.kind is required: one of {', '.join(FLOW_KINDS)}.")
    elif kind not in FLOW_KINDS:
        error(
            "$.flow.kind",
            "blueprint.flow.kind.invalid",
            f"flow.kind must be one of: {', '.join(FLOW_KINDS)} (got {kind!r}).",
        )
    agents = [entry for entry in flow.agents]
    count = len(agents)
    if count == 0:
        error("$.flow.agents", "blueprint.flow.agents.required", "flow.agents is required: list the sub-agents.")
    elif kind == "parallel" and not MIN_PARALLEL <= count <= MAX_PARALLEL:
        error(
            "$.flow.agents",
            "blueprint.flow.parallel.agents.count",
            f"a parallel flow runs {MIN_PARALLEL} to {MAX_PARALLEL} sub-agents (got {count}).",
        )
    elif kind == "loop" and count != 1:
        error(
            "$.flow.agents",
            "blueprint.flow.loop.agents.count",
            f"a loop flow runs exactly one sub-agent (got {count}); wrap several in a sequential flow first.",
        )
    keys: dict[str, int] = {}
    names: dict[str, int] = {}
    for index, entry in enumerate(agents):
        path = f"$.flow.agents[{index}]"
        if entry is None or _trim(entry.path) is None:
            error(
                f"{path}.path",
                "blueprint.flow.agent.path.required",
                f"flow.agents[{index}].path is required: the sub-agent's blueprint file.",
            )
            continue
        child = bp.flow_blueprints.get(index)
        name = agent_name(entry.name, child, index)
        if not _NAME.match(name):
            error(
                f"{path}.name",
                "blueprint.flow.agent.name.invalid",
                f"flow.agents[{index}].name {name!r} must contain only letters, digits, '.', '_' or '-'.",
            )
        elif name in names:
            error(
                f"{path}.name",
                "blueprint.flow.agent.name.duplicate",
                f"two sub-agents are named {name!r} (flow.agents[{names[name]}] and [{index}]); "
                "give one a name: field.",
            )
        else:
            names[name] = index
        key = _trim(entry.output_key)
        if key is not None:
            if not _KEY.match(key):
                error(
                    f"{path}.outputKey",
                    "blueprint.flow.outputKey.invalid",
                    f"flow.agents[{index}].outputKey {key!r} must be an identifier (letters, digits, '_'), "
                    "so instructions can refer to it as {" + key + "}.",
                )
            elif key in keys:
                if kind == "parallel":
                    error(
                        f"{path}.outputKey",
                        "blueprint.flow.outputKey.duplicate",
                        f"flow.agents[{index}].outputKey {key!r} is also the outputKey of flow.agents[{keys[key]}]: "
                        "parallel branches must write distinct keys.",
                    )
                else:
                    warning(
                        f"{path}.outputKey",
                        "blueprint.flow.outputKey.overwritten",
                        f"flow.agents[{index}].outputKey {key!r} overwrites the result of flow.agents[{keys[key]}].",
                    )
            else:
                keys[key] = index
        _check_when(entry.when, kind, index, last=index == count - 1, error=error, warning=warning)
        if kind == "routing" and _trim(entry.description) is None:
            error(
                f"{path}.description",
                "blueprint.flow.agent.description.required",
                f"flow.agents[{index}].description is required in a routing flow: the router picks agents by it.",
            )
        out.extend(issue for issue in bp.load_issues if issue.path.startswith(f"{path}."))
        if child is not None:
            for issue in validate(child):
                out.append(
                    ValidationIssue(
                        severity=issue.severity,
                        path=f"{path}.path",
                        code=issue.code,
                        message=f"flow agent {name!r} at {issue.path}: {issue.message}",
                    )
                )
    _check_options(bp, kind, keys, error, warning)
    _check_interrupts(flow.interrupt_before, kind, names, error)
    return out


def _check_when(
    when: str | None,
    kind: str | None,
    index: int,
    *,
    last: bool,
    error: Callable[[str, str, str], None],
    warning: Callable[[str, str, str], None],
) -> None:
    """``flow.agents[index].when``: a condition of the language, in a conditional flow; a default only last."""
    from codeact.engine.blueprint.conditions import ConditionError, parse_condition

    path = f"$.flow.agents[{index}].when"
    if kind != "conditional":
        if when is not None:
            warning(path, "blueprint.flow.option.ignored", f"flow.agents[{index}].when is ignored in a {kind} flow.")
        return
    if when is None:
        if not last:
            error(
                path,
                "blueprint.flow.when.default",
                f"flow.agents[{index}] has no when: condition, so the agents after it never run; give it one, "
                "or move it last (the default branch).",
            )
        return
    try:
        parse_condition(when)
    except ConditionError as exc:
        error(path, "blueprint.flow.when.invalid", f"flow.agents[{index}].when: {exc}.")


def _check_interrupts(
    interrupts: list[str | None], kind: str | None, names: dict[str, int], error: Callable[[str, str, str], None]
) -> None:
    """``flow.interruptBefore``: names of this flow's agents, in a flow kind that can pause."""
    if interrupts and kind not in PAUSING_KINDS:
        error(
            "$.flow.interruptBefore",
            "blueprint.flow.interruptBefore.kind",
            f"flow.interruptBefore applies to {' and '.join(PAUSING_KINDS)} flows, not a {kind} flow; "
            "put the agent in a sequential flow.",
        )
        return
    for index, name in enumerate(interrupts):
        if (name or "").strip() not in names:
            error(
                f"$.flow.interruptBefore[{index}]",
                "blueprint.flow.interruptBefore.unknown",
                f"flow.interruptBefore[{index}] {name!r} is not an agent of this flow; its agents are "
                f"{', '.join(map(repr, names))}.",
            )


def _check_options(
    bp: Blueprint,
    kind: str | None,
    keys: dict[str, int],
    error: Callable[[str, str, str], None],
    warning: Callable[[str, str, str], None],
) -> None:
    flow = bp.flow
    if flow is None:  # pragma: no cover - checked by the caller
        return
    strategy = _trim(flow.merge_strategy)
    if strategy is not None and strategy not in MERGE_STRATEGIES:
        error(
            "$.flow.mergeStrategy",
            "blueprint.flow.mergeStrategy.invalid",
            f"flow.mergeStrategy must be one of: {', '.join(MERGE_STRATEGIES)} (got {strategy!r}).",
        )
    merge_key = _trim(flow.merge_output_key)
    if merge_key is not None and not _KEY.match(merge_key):
        error(
            "$.flow.mergeOutputKey",
            "blueprint.flow.mergeOutputKey.invalid",
            f"flow.mergeOutputKey {merge_key!r} must be an identifier (letters, digits, '_').",
        )
    elif merge_key is not None and merge_key in keys:
        error(
            "$.flow.mergeOutputKey",
            "blueprint.flow.mergeOutputKey.duplicate",
            f"flow.mergeOutputKey {merge_key!r} is also the outputKey of flow.agents[{keys[merge_key]}]; rename one.",
        )
    if flow.max_concurrency is not None and flow.max_concurrency < 1:
        error(
            "$.flow.maxConcurrency",
            "blueprint.flow.maxConcurrency.invalid",
            "flow.maxConcurrency must be at least 1 (leave it out for no limit).",
        )
    if kind != "parallel":
        for field, alias in (
            ("merge_output_key", "mergeOutputKey"),
            ("separator", "separator"),
            ("max_concurrency", "maxConcurrency"),
        ):
            if getattr(flow, field) is not None and not (kind == "routing" and field == "max_concurrency"):
                warning(
                    f"$.flow.{alias}",
                    "blueprint.flow.option.ignored",
                    f"flow.{alias} only applies to parallel flows; it is ignored in a {kind} flow.",
                )
        if strategy is not None:
            warning(
                "$.flow.mergeStrategy",
                "blueprint.flow.option.ignored",
                f"flow.mergeStrategy only applies to parallel flows; it is ignored in a {kind} flow.",
            )
    if kind == "routing" and bp.model is None:
        error(
            "$.model",
            "blueprint.flow.routing.model.required",
            "a routing flow calls a model to pick its agents: add a model block with provider and model.",
        )
    loop = flow.loop
    if kind != "loop":
        if loop is not None:
            warning("$.flow.loop", "blueprint.flow.option.ignored", f"flow.loop is ignored in a {kind} flow.")
        return
    if loop is None:
        error(
            "$.flow.loop",
            "blueprint.flow.loop.required",
            "a loop flow needs flow.loop with one of: count, condition, array (e.g. loop: {count: 3}).",
        )
        return
    modes = [
        name for name, value in (("count", loop.count), ("condition", loop.condition), ("array", loop.array)) if value
    ]
    if len(modes) != 1:
        got = ", ".join(modes) if modes else "none"
        error(
            "$.flow.loop",
            "blueprint.flow.loop.mode",
            f"flow.loop takes exactly one of: count, condition, array (got {got}).",
        )
    if loop.count is not None and loop.count < 1:
        error("$.flow.loop.count", "blueprint.flow.loop.count.invalid", "flow.loop.count must be at least 1.")
    elif loop.count is not None and loop.count > LOOP_CAP:
        warning(
            "$.flow.loop.count",
            "blueprint.flow.loop.count.capped",
            f"flow.loop.count {loop.count} is capped at {LOOP_CAP} iterations.",
        )
    if loop.max_iterations is not None and not 1 <= loop.max_iterations <= LOOP_CAP:
        error(
            "$.flow.loop.maxIterations",
            "blueprint.flow.loop.maxIterations.invalid",
            f"flow.loop.maxIterations must be between 1 and {LOOP_CAP}.",
        )
    condition = loop.condition
    if condition is not None:
        tests = [t for t in (condition.contains, condition.equals, condition.matches) if t is not None]
        if len(tests) != 1:
            error(
                "$.flow.loop.condition",
                "blueprint.flow.loop.condition.invalid",
                "flow.loop.condition takes exactly one of: contains, equals, matches (a regular expression).",
            )
        elif condition.matches is not None:
            try:
                re.compile(condition.matches)
            except re.error as exc:
                error(
                    "$.flow.loop.condition.matches",
                    "blueprint.flow.loop.condition.invalid",
                    f"flow.loop.condition.matches is not a regular expression: {exc}.",
                )
