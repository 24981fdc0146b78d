"""The flow kinds (seed ``002``'s FlowAgent family): sequential, conditional, parallel, routing and loop."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from codeact import prompts
from codeact.engine.blueprint.conditions import ConditionError, parse_condition
from codeact.engine.events import MessageCompleted
from codeact.engine.flow._base import FlowAgent
from codeact.engine.flow._run import _FlowRun, run_concurrently
from codeact.engine.flow._steps import LOOP_CAP, LoopMode, Step, StepResult, _EndFlow, as_text
from codeact.engine.flow.errors import FlowError

if TYPE_CHECKING:
    from codeact.engine.agent import Agent
    from codeact.engine.agent.hooks import Hook
    from codeact.engine.model import ModelClient
    from codeact.engine.store import Store

__all__ = [
    "LOOP_CAP",
    "ConditionalAgent",
    "MAX_PARALLEL",
    "MIN_PARALLEL",
    "ROUTING_RETRIES",
    "LoopAgent",
    "LoopMode",
    "MergeStrategy",
    "ParallelAgent",
    "RoutingAgent",
    "SequentialAgent",
    "merge_results",
    "parse_routes",
]

MIN_PARALLEL = 2
MAX_PARALLEL = 10
ROUTING_RETRIES = 2
MergeStrategy = Literal["map", "list", "concat"]
_MERGES: tuple[str, ...] = ("map", "list", "concat")
_FENCE = re.compile(r"^\s*```[A-Za-z]*\s*\n(.*?)\n?```\s*$", re.DOTALL)

_Agents = Sequence["Agent | FlowAgent | Step"]


class SequentialAgent(FlowAgent):
    """Runs its agents in order; each one's result is written under its output key and passed on.

    A later agent's instructions refer to earlier results as ``{key}``; with ``include_contents``
    (the default) it is also given the earlier results after the flow's input. The flow's answer is
    the last agent's.
    """

    kind: ClassVar[str] = "sequential"
    pauses: ClassVar[bool] = True

    async def _execute(self, run: _FlowRun) -> Any:
        answer: Any = run.last if run.resume_at else None
        for index, step in enumerate(self.steps, 1):
            if index < run.resume_at:
                continue  # a resumed run: the steps before the pause ran in the paused run
            run.gate(step, index)
            result = await run.step(step, str(index), run.compose(step))
            run.keep(step, result)
            answer = result.answer
        return answer


class ConditionalAgent(FlowAgent):
    """Runs the first of its agents whose condition holds on the flow's state (a predicate branch).

    Each step's ``when`` is a function of the state (``{"input": ..., key: result, ...}``) or a condition
    in the blueprints' expression language (``codeact.engine.blueprint.conditions``:
    ``classify.kind == "refund"``); a step without ``when`` is the default branch and comes last. The
    answer is the branch's; when no condition holds and there is no default, nothing runs: a note says
    so, ``run.completed``'s reason is ``no_branch`` and the answer is the previous result, passed on.
    Beside :class:`RoutingAgent`, which asks a model, this branch is decided by code, the same way
    every time.
    """

    kind: ClassVar[str] = "conditional"
    pauses: ClassVar[bool] = True

    def __init__(
        self,
        *,
        name: str,
        agents: _Agents,
        description: str = "",
        store: Store | None = None,
        hooks: Sequence[Hook] = (),
        interrupt_before: Sequence[str] = (),
    ) -> None:
        super().__init__(
            name=name,
            agents=agents,
            description=description,
            store=store,
            hooks=hooks,
            interrupt_before=interrupt_before,
        )
        tests: list[Callable[[Mapping[str, Any]], bool] | None] = []
        for index, step in enumerate(self.steps):
            when = step.when
            if when is None and index != len(self.steps) - 1:
                raise FlowError(
                    f"conditional flow {name!r}: agents[{index}] ({step.label!r}) has no condition, so the agents "
                    "after it never run; give it when=... or make it the last (the default branch)",
                    code="flow.when.default",
                )
            if isinstance(when, str):
                try:
                    when = parse_condition(when)
                except ConditionError as exc:
                    raise FlowError(
                        f"conditional flow {name!r}: agents[{index}] ({step.label!r}): {exc}", code="flow.when.invalid"
                    ) from None
            elif when is not None and not callable(when):
                raise FlowError(
                    f"conditional flow {name!r}: agents[{index}].when must be a function of the state or a condition "
                    f"string, not {type(when).__name__}",
                    code="flow.when.invalid",
                )
            tests.append(when)
        self.conditions = tuple(tests)

    def _holds(self, index: int, state: Mapping[str, Any]) -> bool:
        test = self.conditions[index]
        if test is None:
            return True
        try:
            return bool(test(state))
        except Exception as exc:  # noqa: BLE001 - the caller's predicate: any error fails the flow, named
            label = self.steps[index].label
            raise FlowError(
                f"conditional flow {self.name!r}: the condition of {label!r} failed: {type(exc).__name__}: {exc}",
                code="flow.when.failed",
            ) from None

    async def _execute(self, run: _FlowRun) -> Any:
        for index, step in enumerate(self.steps, 1):
            if not (index == run.resume_at or self._holds(index - 1, run.state)):
                continue
            run.gate(step, index)
            result = await run.step(step, f"when {index}", run.compose(step))
            run.keep(step, result)
            return result.answer
        conditions = "; ".join(
            repr(getattr(test, "text", None) or getattr(test, "__name__", "a function")) for test in self.conditions
        )
        run.notes.append(f"conditional flow {self.name!r} ran no agent: none of its conditions held ({conditions})")
        run.reason = "no_branch"
        return run.last


def merge_results(
    strategy: MergeStrategy | Callable[[list[tuple[str, Any]]], Any],
    results: list[tuple[str, Any]],
    *,
    separator: str = "\n\n",
) -> Any:
    """Merge ``(key, answer)`` pairs: ``map`` ({key: answer}), ``list`` ([answers]) or ``concat`` (text, joined)."""
    if callable(strategy):
        return strategy(results)
    if strategy == "map":
        return {key: answer for key, answer in results}
    if strategy == "list":
        return [answer for _, answer in results]
    return separator.join(as_text(answer) for _, answer in results)


class ParallelAgent(FlowAgent):
    """Runs 2 to 10 agents concurrently on the same input and merges their results.

    Each result is written under its agent's output key, and the merged value under
    ``merge_output_key`` (it is also the flow's answer).

    Args:
        merge_strategy: ``map`` (default: ``{key: answer}``), ``list`` (answers in declaration order),
            ``concat`` (answers as text joined by ``separator``), or a function of the ``(key, answer)`` pairs.
        merge_output_key: The state key of the merged value (default ``merged_results``).
        separator: Between answers for ``concat`` (default a blank line).
        max_concurrency: At most this many branches at a time (default: all at once).
    """

    kind: ClassVar[str] = "parallel"

    def __init__(
        self,
        *,
        name: str,
        agents: _Agents,
        description: str = "",
        store: Store | None = None,
        hooks: Sequence[Hook] = (),
        merge_strategy: MergeStrategy | Callable[[list[tuple[str, Any]]], Any] = "map",
        merge_output_key: str = "merged_results",
        separator: str = "\n\n",
        max_concurrency: int | None = None,
    ) -> None:
        super().__init__(name=name, agents=agents, description=description, store=store, hooks=hooks)
        count = len(self.steps)
        if not MIN_PARALLEL <= count <= MAX_PARALLEL:
            raise FlowError(
                f"parallel flow {name!r} runs {MIN_PARALLEL} to {MAX_PARALLEL} agents (got {count})",
                code="flow.parallel.agents.count",
            )
        keys: dict[str, int] = {}
        for index, step in enumerate(self.steps):
            if step.key in keys:
                raise FlowError(
                    f"parallel flow {name!r}: agents[{index}] writes output key {step.key!r} like "
                    f"agents[{keys[step.key]}]; parallel branches must write distinct keys",
                    code="flow.outputKey.duplicate",
                )
            keys[step.key] = index
        if merge_output_key in keys:
            raise FlowError(
                f"parallel flow {name!r}: merge_output_key {merge_output_key!r} is also an agent's output key",
                code="flow.mergeOutputKey.duplicate",
            )
        if not callable(merge_strategy) and merge_strategy not in _MERGES:
            raise FlowError(
                f"parallel flow {name!r}: merge_strategy must be one of {', '.join(_MERGES)} or a function "
                f"(got {merge_strategy!r})",
                code="flow.mergeStrategy.invalid",
            )
        if max_concurrency is not None and max_concurrency < 1:
            raise FlowError(
                f"parallel flow {name!r}: max_concurrency must be at least 1 (None: no limit), got {max_concurrency}",
                code="flow.maxConcurrency.invalid",
            )
        self.merge_strategy = merge_strategy
        self.merge_output_key = merge_output_key
        self.separator = separator
        self.max_concurrency = max_concurrency

    async def _execute(self, run: _FlowRun) -> Any:
        texts = [run.compose(step) for step in self.steps]

        def branch(index: int, step: Step, text: str) -> Callable[[], Any]:
            return lambda: run.step(step, f"branch {index}", text)

        results = await run_concurrently(
            [branch(i, step, text) for i, (step, text) in enumerate(zip(self.steps, texts, strict=True), 1)],
            limit=self.max_concurrency,
        )
        for step, result in zip(self.steps, results, strict=True):
            run.keep(step, result)
        merged = merge_results(
            self.merge_strategy,
            [(s.key, r.answer) for s, r in zip(self.steps, results, strict=True)],
            separator=self.separator,
        )
        run.state[self.merge_output_key] = merged
        run.last = merged
        return merged


def parse_routes(reply: str, names: Sequence[str]) -> tuple[list[tuple[str, str | None]], str | None]:
    """The ``(agent, query)`` pairs of a routing reply, or ``([], problem)`` saying what is wrong with it."""
    text = reply.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    data: Any = None
    try:
        data = json.loads(text)
    except ValueError:
        start, end = text.find("{"), text.rfind("}")
        if 0 <= start < end:
            try:
                data = json.loads(text[start : end + 1])
            except ValueError:
                data = None
    if not isinstance(data, dict) or not isinstance(data.get("agents"), list):
        return [], 'it is not a JSON object with an "agents" list'
    routes: list[tuple[str, str | None]] = []
    invalid: list[str] = []
    for item in data["agents"]:
        name = item.get("agent") if isinstance(item, dict) else item
        query = item.get("query") if isinstance(item, dict) else None
        if not isinstance(name, str) or name.strip() not in names:
            invalid.append(repr(name) if not isinstance(name, str) or not name.strip() else repr(name.strip()))
            continue
        routes.append((name.strip(), query if isinstance(query, str) and query.strip() else None))
    if invalid:
        return [], f"unknown or empty agent name(s): {', '.join(invalid)}"
    if not routes:
        return [], "it names no agent"
    return routes, None


class RoutingAgent(FlowAgent):
    """Asks a model which agents should handle the input, runs them, and returns their answer.

    The routing model replies ``{"agents": [{"agent": name, "query": sub-question}]}``; a reply that
    is not that JSON or names unknown agents is sent back with the problem (at most
    ``ROUTING_RETRIES`` times), then the run fails with ``flow.routing.failed``. One routed agent's
    answer is the flow's answer as it is; several run concurrently and one more model call merges
    their answers.

    Args:
        model: The model client of the routing (and merging) calls (purpose ``utility``).
        instruction: Extra routing guidance placed in the routing prompt.
    """

    kind: ClassVar[str] = "routing"

    def __init__(
        self,
        *,
        name: str,
        agents: _Agents,
        model: ModelClient,
        description: str = "",
        instruction: str = "",
        store: Store | None = None,
        hooks: Sequence[Hook] = (),
        max_concurrency: int | None = None,
    ) -> None:
        super().__init__(name=name, agents=agents, description=description, store=store, hooks=hooks)
        if model is None:
            raise FlowError(
                f"routing flow {name!r} needs a model: pass model=ModelClient(...)", code="flow.model.required"
            )
        for index, step in enumerate(self.steps):
            if not step.about:
                raise FlowError(
                    f"routing flow {name!r}: agents[{index}] ({step.label!r}) has no description; the router picks "
                    "agents by it: pass Step(agent, description=...)",
                    code="flow.agent.description.required",
                )
        self.model = model
        self.instruction = instruction
        self.max_concurrency = max_concurrency

    async def _call(self, run: _FlowRun, purpose: str, messages: list[dict[str, str]]) -> str:
        jump = await self._hooks("before_model", run, purpose=purpose)
        if jump is not None and jump.to == "end":
            raise _EndFlow(jump.reason or "ended by a before_model hook")
        reply = await self.model.complete(purpose="utility", messages=messages)
        run.emit(MessageCompleted, text=reply.text, purpose=purpose, model=reply.model, usage=dict(reply.usage))
        jump = await self._hooks("after_model", run, reverse=True, purpose=purpose, reply=reply.text)
        if jump is not None and jump.to == "end":
            raise _EndFlow(jump.reason or "ended by an after_model hook")
        return str(reply.text)

    async def _route(self, run: _FlowRun) -> list[tuple[Step, str | None]]:
        names = [step.label for step in self.steps]
        by_name = {step.label: step for step in self.steps}
        system = prompts.render(
            "flow_routing.j2",
            instruction=self.instruction,
            agents=[{"name": s.label, "description": s.about} for s in self.steps],
        )
        messages = [{"role": "system", "content": system}, {"role": "user", "content": run.input}]
        problem = ""
        for _attempt in range(ROUTING_RETRIES + 1):
            reply = await self._call(run, "routing", messages)
            routes, problem_or_none = parse_routes(reply, names)
            if problem_or_none is None:
                return [(by_name[name], query) for name, query in routes]
            problem = problem_or_none
            messages.append({"role": "assistant", "content": reply})
            messages.append(
                {"role": "user", "content": prompts.render("flow_routing_retry.j2", problem=problem, names=names)}
            )
        raise FlowError(
            f"routing flow {self.name!r} could not route the request after {ROUTING_RETRIES + 1} attempts: "
            f"the last reply was refused because {problem}; the agents are {', '.join(names)}. Use a model that "
            'follows the {"agents": [{"agent", "query"}]} format, or clearer agent descriptions.',
            code="flow.routing.failed",
        )

    async def _execute(self, run: _FlowRun) -> Any:
        routes = await self._route(run)
        if len(routes) == 1:
            step, query = routes[0]
            result = await run.step(step, "route 1", run.compose(step, query))
            run.keep(step, result)
            return result.answer

        def route(index: int, step: Step, query: str | None) -> Callable[[], Any]:
            return lambda: run.step(step, f"route {index}", run.compose(step, query))

        results: list[StepResult] = await run_concurrently(
            [route(i, step, query) for i, (step, query) in enumerate(routes, 1)], limit=self.max_concurrency
        )
        for (step, _), result in zip(routes, results, strict=True):
            run.keep(step, result)
        merge = prompts.render(
            "flow_merge.j2",
            input=run.input,
            results=[
                {"agent": r.agent, "query": query or run.input, "answer": as_text(r.answer)}
                for (_, query), r in zip(routes, results, strict=True)
            ],
        )
        answer = await self._call(run, "merge", [{"role": "user", "content": merge}])
        run.last = answer
        return answer


def parse_array(value: Any) -> tuple[list[Any] | None, str | None]:
    """``value`` as a list: a list as it is, a string parsed as a JSON array (code fences allowed)."""
    if isinstance(value, list | tuple):
        return list(value), None
    text = as_text(value).strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"it is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    if not isinstance(data, list):
        return None, f"it is JSON but a {type(data).__name__}, not an array"
    return data, None


class LoopAgent(FlowAgent):
    """Runs exactly one agent repeatedly (seed ``LoopAgent``).

    * ``LoopMode.count(n)``: ``n`` times (at most 1000); the answer is the last result.
    * ``LoopMode.condition(predicate)``: until ``predicate(result)`` is true; after 1000 (or
      ``max_iterations``) iterations it stops with the note "max loop count reached".
    * ``LoopMode.array()``: the previous result (the flow's input, or the previous step's result in
      an enclosing flow) parsed as a JSON array, one iteration per element (the element is the
      agent's input); the answer is the list of results. A result that is not a JSON array runs no
      iteration, with a note saying why.

    Each iteration's result is written under the agent's output key (so ``{key}`` in its
    instructions is the previous iteration's result).
    """

    kind: ClassVar[str] = "loop"

    def __init__(
        self,
        *,
        name: str,
        agents: _Agents,
        mode: LoopMode,
        description: str = "",
        store: Store | None = None,
        hooks: Sequence[Hook] = (),
    ) -> None:
        super().__init__(name=name, agents=agents, description=description, store=store, hooks=hooks)
        if len(self.steps) != 1:
            raise FlowError(
                f"loop flow {name!r} runs exactly one agent (got {len(self.steps)}); "
                "wrap several in a SequentialAgent first",
                code="flow.loop.agents.count",
            )
        if not isinstance(mode, LoopMode):
            raise FlowError(
                f"loop flow {name!r} needs mode=LoopMode.count(n), LoopMode.condition(fn) or LoopMode.array()",
                code="flow.loop.invalid",
            )
        self.mode = mode

    async def _execute(self, run: _FlowRun) -> Any:
        step, mode = self.steps[0], self.mode
        if mode.kind == "array":
            items, problem = parse_array(run.last)
            if items is None:
                run.notes.append(
                    f"loop {self.name!r} ran no iteration: the previous result is not a JSON array: {problem}"
                )
                run.reason = "no_iterations"
                return []
            if len(items) > mode.max_iterations:
                run.notes.append(
                    f"max loop count reached: loop {self.name!r} ran {mode.max_iterations} of {len(items)} elements"
                )
                run.reason = "max_loop_count"
                items = items[: mode.max_iterations]
            answers: list[Any] = []
            for index, item in enumerate(items, 1):
                result = await run.step(step, f"iteration {index}", run.compose(step, as_text(item)))
                run.keep(step, result)
                answers.append(result.answer)
            run.last = answers
            return answers
        limit = mode.times if mode.kind == "count" else mode.max_iterations
        answer: Any = None
        for index in range(1, limit + 1):
            result = await run.step(step, f"iteration {index}", run.compose(step))
            run.keep(step, result)
            answer = result.answer
            if mode.predicate is not None and mode.predicate(answer):
                return answer
        if mode.kind == "condition":
            run.notes.append(
                f"max loop count reached: loop {self.name!r} stopped after {limit} iterations "
                "without its condition becoming true"
            )
            run.reason = "max_loop_count"
        return answer
