"""The eval harness: run a suite of tasks against a blueprint and a model, check, compare modes.

``codeact eval --suite multitool --model oracle --modes fim-chat react`` (see docs/eval.md). A suite
is a folder (:mod:`codeact.engine.eval.suite`); :func:`run_eval` runs it (resumable, concurrent);
:mod:`codeact.engine.eval.report` turns the results into a table, JSON, Markdown and HTML with charts.
"""

from __future__ import annotations

from codeact.engine.eval.errors import EvalError
from codeact.engine.eval.harness import MODES, EvalConfig, result_path, run_eval
from codeact.engine.eval.oracle import ORACLE, OracleModel, count_tokens
from codeact.engine.eval.suite import BUILTIN_SUITES, Checker, Suite, Task, check_answer, load_suite

__all__ = [
    "BUILTIN_SUITES",
    "MODES",
    "ORACLE",
    "Checker",
    "EvalConfig",
    "EvalError",
    "OracleModel",
    "Suite",
    "Task",
    "check_answer",
    "count_tokens",
    "load_suite",
    "result_path",
    "run_eval",
]
