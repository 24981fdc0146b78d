"""Eval suites: a folder with ``suite.yaml``, its tasks, its toolkits and its Python checkers.

``suite.yaml``::

    name: multitool
    toolkits: toolkits.py      # a module defining @toolkit classes (fresh instances per task)
    checks: checks.py          # optional: functions named by `checker: {type: python, function: checks:NAME}`
    tasks: tasks.yaml          # {tasks: [...]}; or a folder of *.yaml files, one task each
    max_turns: 8

A task: ``id``, ``instruction``, ``expected``, ``checker`` (``exact`` by default, ``numeric`` with
``tolerance``, or ``python`` with ``function``), ``toolkits`` it needs, an optional ``domain`` and a
reference ``solution`` (a list of rounds of code, for ``--model oracle``).
"""

from __future__ import annotations

import importlib.util
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from codeact.engine.eval.errors import EvalError

__all__ = ["BUILTIN_SUITES", "Checker", "Suite", "Task", "check_answer", "load_suite"]

BUILTIN_SUITES = Path(__file__).resolve().parent / "suites"


@dataclass(frozen=True, kw_only=True)
class Checker:
    """How an answer is checked.

    Attributes:
        type: ``exact``, ``numeric`` or ``python``.
        tolerance: Absolute tolerance of ``numeric``.
        function: ``MODULE:NAME`` of ``python`` (``checks:same_text``), called ``f(answer, expected, task)``.
    """

    type: str = "exact"
    tolerance: float = 1e-6
    function: str = ""


@dataclass(frozen=True, kw_only=True)
class Task:
    """One task of a suite.

    Attributes:
        id: Unique in the suite (used for the result files).
        instruction: What the agent is asked.
        expected: The reference answer.
        checker: How the answer is checked.
        toolkits: The toolkits it needs (names of the suite's toolkits).
        domain: A group for the report.
        solution: Rounds of reference code (ending with ``system.finish(...)``) for the oracle.
    """

    id: str
    instruction: str
    expected: object
    checker: Checker = field(default_factory=Checker)
    toolkits: tuple[str, ...] = ()
    domain: str = ""
    solution: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Suite:
    """A loaded suite.

    Attributes:
        name: The suite's name.
        path: Its folder.
        tasks: The tasks, in file order.
        toolkit_classes: ``toolkit name -> class`` (instantiated per task).
        checks: Modules of Python checkers by name (``checks``).
        max_turns: Rounds allowed per task.
        description: One line.
    """

    name: str
    path: Path
    tasks: tuple[Task, ...]
    toolkit_classes: Mapping[str, type]
    checks: Mapping[str, ModuleType]
    max_turns: int = 8
    description: str = ""

    def toolkits_for(self, task: Task) -> list[object]:
        """Fresh instances of the toolkits ``task`` needs."""
        return [self.toolkit_classes[name]() for name in task.toolkits]

    def select(self, ids: Sequence[str] = (), limit: int | None = None, per_domain: int | None = None) -> list[Task]:
        """The tasks named by ``ids`` (prefixes allowed), at most ``per_domain`` of each domain, then ``limit``."""
        tasks = [t for t in self.tasks if not ids or any(t.id == i or t.id.startswith(i) for i in ids)]
        if per_domain is not None:
            seen: dict[str, int] = {}
            kept = []
            for task in tasks:
                seen[task.domain] = seen.get(task.domain, 0) + 1
                if seen[task.domain] <= per_domain:
                    kept.append(task)
            tasks = kept
        return tasks[:limit] if limit is not None else tasks


def _load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise EvalError(f"cannot load {path}: not a Python file", code="eval.suite")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise EvalError(f"cannot load {path}: {type(exc).__name__}: {exc}", code="eval.suite") from exc
    return module


def _toolkit_classes(module: ModuleType) -> dict[str, type]:
    from codeact.toolkits.decorators import toolkit_spec

    found: dict[str, type] = {}
    for value in vars(module).values():
        if isinstance(value, type):
            spec = toolkit_spec(value)
            if spec is not None:
                found[spec.name] = value
    return found


def _resolve(name_or_dir: str | Path) -> Path:
    path = Path(name_or_dir)
    if (path / "suite.yaml").is_file():
        return path
    builtin = BUILTIN_SUITES / str(name_or_dir)
    if (builtin / "suite.yaml").is_file():
        return builtin
    known = sorted(p.name for p in BUILTIN_SUITES.iterdir() if (p / "suite.yaml").is_file())
    raise EvalError(
        f"no suite {str(name_or_dir)!r}: give a folder holding suite.yaml or a built-in suite ({', '.join(known)})",
        code="eval.suite_not_found",
    )


def _task(raw: Any, where: str) -> Task:
    if not isinstance(raw, Mapping):
        raise EvalError(f"{where}: a task must be a mapping, got {type(raw).__name__}", code="eval.suite")
    missing = [k for k in ("id", "instruction", "expected") if k not in raw]
    if missing:
        raise EvalError(f"{where}: the task lacks {', '.join(missing)}", code="eval.suite")
    checker = raw.get("checker") or {}
    if isinstance(checker, str):
        checker = {"type": checker}
    kind = str(checker.get("type", "exact"))
    if kind not in ("exact", "numeric", "python"):
        raise EvalError(f"{where}: checker type {kind!r} is not exact, numeric or python", code="eval.suite")
    if kind == "python" and ":" not in str(checker.get("function", "")):
        raise EvalError(f"{where}: a python checker needs function: MODULE:NAME", code="eval.suite")
    solution = raw.get("solution") or ()
    if isinstance(solution, str):
        solution = (solution,)
    return Task(
        id=str(raw["id"]),
        instruction=str(raw["instruction"]),
        expected=raw["expected"],
        checker=Checker(
            type=kind, tolerance=float(checker.get("tolerance", 1e-6)), function=str(checker.get("function", ""))
        ),
        toolkits=tuple(str(t) for t in raw.get("toolkits") or ()),
        domain=str(raw.get("domain", "")),
        solution=tuple(str(s) for s in solution),
    )


def _read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise EvalError(f"cannot read {path}: {exc}", code="eval.suite") from exc


def load_suite(name_or_dir: str | Path) -> Suite:
    """Load a suite by built-in name (``multitool``) or folder.

    Raises:
        EvalError: The suite is missing or invalid (the message names the file).
    """
    root = _resolve(name_or_dir)
    meta = _read_yaml(root / "suite.yaml") or {}
    if not isinstance(meta, Mapping):
        raise EvalError(f"{root / 'suite.yaml'}: expected a mapping", code="eval.suite")
    name = str(meta.get("name") or root.name)
    key = f"codeact_eval_suite_{abs(hash(str(root.resolve())))}"
    classes: dict[str, type] = {}
    if meta.get("toolkits"):
        classes = _toolkit_classes(_load_module(root / str(meta["toolkits"]), f"{key}_toolkits"))
    checks: dict[str, ModuleType] = {}
    if meta.get("checks"):
        file = root / str(meta["checks"])
        checks[file.stem] = _load_module(file, f"{key}_{file.stem}")
    source = root / str(meta.get("tasks", "tasks.yaml"))
    raws: list[tuple[Any, str]] = []
    if source.is_dir():
        for file in sorted(source.glob("*.yaml")):
            raws.append((_read_yaml(file), str(file)))
    else:
        data = _read_yaml(source)
        items = data.get("tasks") if isinstance(data, Mapping) else data
        if not isinstance(items, list):
            raise EvalError(f"{source}: expected {{tasks: [...]}} or a list of tasks", code="eval.suite")
        raws = [(item, f"{source} tasks[{i}]") for i, item in enumerate(items)]
    tasks = tuple(_task(raw, where) for raw, where in raws)
    ids = [t.id for t in tasks]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise EvalError(f"{source}: duplicate task ids {', '.join(dupes)}", code="eval.suite")
    for task in tasks:
        unknown = [t for t in task.toolkits if t not in classes]
        if unknown:
            raise EvalError(
                f"{source}: task {task.id} needs toolkits {', '.join(unknown)} the suite does not define "
                f"(defined: {', '.join(sorted(classes)) or 'none'})",
                code="eval.suite",
            )
        if task.checker.type == "python" and task.checker.function.split(":", 1)[0] not in checks:
            raise EvalError(f"{source}: task {task.id} names checker {task.checker.function!r}", code="eval.suite")
    return Suite(
        name=name,
        path=root,
        tasks=tasks,
        toolkit_classes=classes,
        checks=checks,
        max_turns=int(meta.get("max_turns", 8)),
        description=str(meta.get("description", "")),
    )


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip().replace(",", ""))
        except ValueError:
            return None
    return None


def check_answer(suite: Suite, task: Task, answer: object) -> tuple[bool, str]:
    """``(passed, why)`` for ``answer`` to ``task``; a failing Python checker counts as a fail."""
    checker = task.checker
    if checker.type == "numeric":
        got, want = _number(answer), _number(task.expected)
        if got is None or want is None or math.isnan(got):
            return False, f"not a number: {answer!r}"
        ok = abs(got - want) <= checker.tolerance
        return ok, "" if ok else f"{got} differs from {want} by more than {checker.tolerance}"
    if checker.type == "python":
        module, _, func_name = checker.function.partition(":")
        func: Callable[..., Any] | None = getattr(suite.checks.get(module), func_name, None)
        if func is None:
            return False, f"checker {checker.function} not found"
        try:
            ok = bool(func(answer, task.expected, task))
        except Exception as exc:  # a checker crashing on a strange answer fails the task
            return False, f"checker {checker.function} raised {type(exc).__name__}: {exc}"
        return ok, "" if ok else f"{answer!r} does not match {task.expected!r}"
    ok = _exact(answer, task.expected)
    return ok, "" if ok else f"{answer!r} is not {task.expected!r}"


def _exact(answer: object, expected: object) -> bool:
    if isinstance(expected, str) and isinstance(answer, str):
        return answer.strip() == expected.strip()
    if isinstance(expected, int | float) and not isinstance(expected, bool):
        got = _number(answer)
        return got is not None and got == float(expected)
    if isinstance(expected, list) and isinstance(answer, list | tuple):
        return len(answer) == len(expected) and all(_exact(a, e) for a, e in zip(answer, expected, strict=True))
    return bool(answer == expected)
