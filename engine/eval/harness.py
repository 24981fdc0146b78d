"""Running a suite: every (mode, task) pair as a real agent run, checked, one result file each.

Results go to ``OUT/results/<model>/<mode>/<task>.json`` as each task ends, so an interrupted eval
resumes where it stopped (tasks with a result file are not run again unless ``fresh``).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from codeact.engine.eval.errors import EvalError
from codeact.engine.eval.oracle import ORACLE, OracleModel
from codeact.engine.eval.suite import Suite, Task, check_answer
from codeact.toolkits.bound import bind_toolkit
from codeact.toolkits.builtin.system import SystemToolkit

if TYPE_CHECKING:
    from codeact.engine.store import RoundRecord, Store

_T = TypeVar("_T")

__all__ = ["MODES", "EvalConfig", "computed_answer", "result_path", "run_eval"]

MODES: dict[str, str] = {
    "fim-chat": "CodeAct, the FIM frame in chat messages",
    "fim-completion": "CodeAct, raw FIM text to a completion endpoint",
    "chat-blocks": "CodeAct, chat replies with fenced code blocks",
    "react": "JSON function calling (workflow.mode: react)",
}


@dataclass(frozen=True, kw_only=True)
class EvalConfig:
    """How to run a suite.

    Attributes:
        model: ``oracle`` or a litellm model (``openai/gpt-4.1-mini``).
        modes: Modes to compare (keys of :data:`MODES`).
        out: Output folder (results, sessions.db, reports).
        concurrency: Tasks run at once.
        blueprint: A blueprint the generated ones extend (instructions, model options), if any.
        base_url: Base URL of an OpenAI-compatible server for ``model``.
        fresh: Run tasks again even when their result file exists.
        sandbox: ``subprocess`` (default) or ``docker``.
        isolation: ``bwrap`` (default) or ``process`` for the subprocess sandbox.
        max_turns: Rounds per task (default: the suite's).
        strict: Refuse blueprints the validator warns about (``--strict``).
        thought: ``workflow.codeact.thought`` of the code modes: ``off`` (default), ``inline`` (a Thought
            before the code and a NextGoal for the next round) or ``separate`` (its own model call).
    """

    model: str = ORACLE
    modes: tuple[str, ...] = ("fim-chat",)
    out: Path = Path("eval-out")
    concurrency: int = 4
    blueprint: Path | None = None
    base_url: str | None = None
    fresh: bool = False
    sandbox: str = "subprocess"
    isolation: str = "bwrap"
    max_turns: int | None = None
    strict: bool = False
    thought: str = "off"


# ask_user would wait for a person; tasks lists sub-agent runs, and no suite task launches one
_SYSTEM_OPERATIONS = tuple(op for op in bind_toolkit(SystemToolkit).operations if op not in ("ask_user", "tasks"))


def task_input(task: Task) -> str:
    """The task's instruction, plus the answer's form when the checker compares values.

    The checkers compare the answer itself (349, not "Summit 2 tent. Price: 349 EUR."), so the model is
    told the form, as M3ToolEval's tasks do; every mode gets the same words.
    """
    if task.checker.type == "python":
        return task.instruction
    expected = task.expected
    if isinstance(expected, bool):
        form = "true or false"
    elif isinstance(expected, int | float):
        form = "the number alone, not a sentence"
    elif isinstance(expected, list):
        form = "a list of the values alone"
    else:
        form = "the text alone, not a sentence"
    return f"{task.instruction}\nFinish with {form}."


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "model"


def result_path(config: EvalConfig, mode: str, task: Task) -> Path:
    """Where the result of ``task`` in ``mode`` is written."""
    return config.out / "results" / _slug(config.model) / mode / f"{_slug(task.id)}.json"


def _blueprint_text(suite: Suite, task: Task, mode: str, config: EvalConfig) -> str:
    kind = "react" if mode == "react" else "codeact"
    turns = config.max_turns or suite.max_turns
    # No user answers an eval task: system.ask_user is not granted (a small model asked instead of finishing)
    system = f"{{ref: system, operations: [{', '.join(_SYSTEM_OPERATIONS)}]}}"
    grants = ", ".join([system, *(f"{{ref: {name}}}" for name in task.toolkits)])
    lines = [
        "version: codeact.agent/v1",
        f"extend: {json.dumps(str(config.blueprint.resolve())) if config.blueprint else 'codeact-base'}",
        f"id: eval-{_slug(suite.name)}",
        f"toolkits: [{grants}]",
        f"workflow: {{mode: {kind}, maxTurns: {turns}"
        # react has no code rounds: a codeact block there is ignored with a warning on every task
        + (f", codeact: {{thought: '{config.thought}'" if kind == "codeact" else "")
        + (", protocol: completion, fim: {family: qwen}" if mode == "fim-completion" else "")
        + ("}}" if kind == "codeact" else "}"),
    ]
    if config.model == ORACLE:
        lines.append("model: {provider: openai-compatible, model: oracle}")  # replaced by the oracle, never called
    return "\n".join(lines) + "\n"


async def _run_task(suite: Suite, task: Task, mode: str, config: EvalConfig, store: Store) -> dict[str, Any]:
    from codeact.engine.agent import Agent

    folder = config.out / "blueprints" / mode
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{_slug(task.id)}.yaml"
    path.write_text(_blueprint_text(suite, task, mode, config), encoding="utf-8")
    oracle = config.model == ORACLE
    agent = Agent.from_blueprint(
        path,
        toolkits=suite.toolkits_for(task),
        model=None if oracle else config.model,
        base_url=config.base_url,
        store=store,
        sandbox=config.sandbox,  # type: ignore[arg-type]
        isolation=config.isolation,  # type: ignore[arg-type]
        stream=False,
        strict=config.strict,
    )
    if oracle:
        await agent.model.aclose()
        toolkits = [suite.toolkit_classes[name] for name in task.toolkits]
        agent.model = OracleModel(mode=mode, solution=task.solution, toolkits=toolkits)  # type: ignore[assignment]
    session_id = f"eval-{_slug(config.model)}-{mode}-{_slug(task.id)}-{uuid.uuid4().hex[:8]}"
    t0 = time.perf_counter()
    try:
        result = await agent.invoke(task_input(task), session_id=session_id)
    finally:
        await agent.aclose()
    wall = time.perf_counter() - t0
    records = await store.rounds(session_id)
    per_round = []
    cost: float | None = None
    for record in records:
        from codeact.engine.telemetry import usage_of_round

        usage = usage_of_round(record.usage)
        per_round.append(
            {"round": record.index, "prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens}
        )
        if usage.cost_usd is not None:
            cost = (cost or 0.0) + usage.cost_usd
    passed, detail = check_answer(suite, task, result.answer) if result.status == "completed" else (False, "")
    if result.status != "completed":
        detail = f"the run {result.status}: {(result.error or {}).get('message', result.reason)}"
    lost = None if passed else computed_answer(suite, task, records)
    return {
        "task": task.id,
        "domain": task.domain,
        "mode": mode,
        "model": config.model,
        "passed": passed,
        "detail": detail,
        "answer": _jsonable(result.answer),
        "expected": task.expected,
        "status": result.status,
        "reason": result.reason,
        "rounds": len(records),
        "input_tokens": sum(r["prompt_tokens"] for r in per_round),
        "output_tokens": sum(r["completion_tokens"] for r in per_round),
        "cost_usd": cost,
        "wall_s": round(wall, 3),
        "per_round": per_round,
        "session_id": session_id,
        "lost": lost,
    }


def computed_answer(suite: Suite, task: Task, records: Sequence[RoundRecord]) -> str | None:
    """Where a failed task's right answer appeared (printed, or in a variable) without reaching the result.

    The candidates are each printed line (whole, and what follows its last ``->``, ``:`` or ``=``) and each
    variable's value after each round, checked with the task's own checker. Returns ``"round N: ..."`` for
    the first one that passes, or None: the figure ``codeact eval`` reports as "computed but lost".
    """
    from codeact.sandbox.runtime.codec import plain

    for record in records:
        for line in str(record.stdout).splitlines():
            for text in _line_candidates(line):
                if check_answer(suite, task, text)[0]:
                    return f"round {record.index} printed {line.strip()[:80]!r}"
        for name, value in record.variables.items():
            if isinstance(value, dict) and value.get("$type") == "source":
                continue
            if check_answer(suite, task, plain(value))[0]:
                return f"round {record.index} set {name!r}"
    return None


def _line_candidates(line: str) -> list[str]:
    text = line.strip()
    if not text:
        return []
    out = [text]
    for mark in ("->", ":", "="):
        if mark in text:
            out.append(text.rsplit(mark, 1)[1].strip().strip("'\""))
    return [t for t in out if t]


def _jsonable(value: _T) -> _T | str:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


async def run_eval(
    suite: Suite,
    tasks: Sequence[Task],
    config: EvalConfig,
    *,
    on_result: Callable[[int, int, dict[str, Any], bool], None] | None = None,
) -> list[dict[str, Any]]:
    """Run ``tasks`` of ``suite`` in every mode of ``config``; returns every result (old ones included).

    ``on_result(done, total, result, resumed)`` is called as each task ends (or is found done).

    Raises:
        EvalError: An unknown mode, or an oracle run of a task without a solution.
    """
    unknown = [m for m in config.modes if m not in MODES]
    if unknown:
        raise EvalError(f"unknown mode(s) {', '.join(unknown)}: use {', '.join(MODES)}", code="eval.mode")
    if config.model == ORACLE:
        bare = [t.id for t in tasks if not t.solution]
        if bare:
            raise EvalError(
                f"--model oracle needs a solution for every task; missing: {', '.join(bare)}", code="eval.suite"
            )
        from codeact.engine.eval.oracle import count_tokens

        count_tokens(text="warm up")  # the tokenizer loads once, before runs share the event loop
    from codeact.engine.store import SQLiteStore

    config.out.mkdir(parents=True, exist_ok=True)
    store = SQLiteStore(config.out / "sessions.db")
    pairs = [(mode, task) for mode in config.modes for task in tasks]
    total, done = len(pairs), 0
    results: list[dict[str, Any] | None] = [None] * total
    gate = asyncio.Semaphore(max(1, config.concurrency))

    async def one(index: int, mode: str, task: Task) -> None:
        nonlocal done
        path = result_path(config, mode, task)
        if path.is_file() and not config.fresh:
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                data = None
            if isinstance(data, dict):
                results[index] = data
                done += 1
                if on_result is not None:
                    on_result(done, total, data, True)
                return
        async with gate:
            try:
                data = await _run_task(suite, task, mode, config, store)
            except Exception as exc:  # one broken task is a failed task, never a crashed eval
                data = {
                    "task": task.id,
                    "domain": task.domain,
                    "mode": mode,
                    "model": config.model,
                    "passed": False,
                    "detail": f"{type(exc).__name__}: {exc}",
                    "status": "error",
                    "rounds": 0,
                    "input_tokens": 0,
                    "output_tokens": 0,
                    "cost_usd": None,
                    "wall_s": 0.0,
                    "per_round": [],
                }
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
        tmp.replace(path)  # a result file is whole or absent: an interrupted eval resumes cleanly
        results[index] = data
        done += 1
        if on_result is not None:
            on_result(done, total, data, False)

    try:
        await asyncio.gather(*(one(i, mode, task) for i, (mode, task) in enumerate(pairs)))
    finally:
        await store.close()
    return [r for r in results if r is not None]
