"""Distillation: a finished run becomes a history summary and an experience (by rules, or by a model).

The rules read the run's record: the task, the code of each round, the errors the code raised and the
round that got past them, the toolkit operations called, and how the run ended.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from codeact.engine.memory.retrieval import tokenize

__all__ = ["RoundTrace", "RunTrace", "experience_fields", "history_fields", "merge_model_fields"]

_CODE_CHARS = 1_500
_TEXT_CHARS = 240


@dataclass(frozen=True, kw_only=True)
class RoundTrace:
    """One round as distillation sees it.

    Attributes:
        index: The round number.
        code: The code the model wrote (the FIM middle), or None when the reply had none.
        error: ``"Type: message"`` of what the code raised (or why nothing ran), or None.
        source: The line that raised, when known.
        operations: ``toolkit.operation`` of each call, in order.
    """

    index: int
    code: str | None
    error: str | None = None
    source: str = ""
    operations: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class RunTrace:
    """What a run did, for distillation."""

    task: str
    status: str
    reason: str
    answer: object = None
    rounds: tuple[RoundTrace, ...] = ()
    entities: tuple[str, ...] = ()
    user: str | None = None
    agent_id: str = ""
    session_id: str = ""
    run_id: str = ""
    ended_at: float = field(default=0.0)

    @property
    def operations(self) -> tuple[str, ...]:
        """Distinct toolkit operations called (``system.finish`` and ``system.ask_user`` left out)."""
        seen: dict[str, None] = {}
        for trace in self.rounds:
            for op in trace.operations:
                if op not in ("system.finish", "system.ask_user"):
                    seen.setdefault(op, None)
        return tuple(seen)

    @property
    def succeeded(self) -> bool:
        """The run ended with an answer."""
        return self.status == "completed"


def _clip(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _answer_text(answer: object) -> str:
    if answer is None:
        return ""
    if isinstance(answer, str):
        return answer
    return json.dumps(answer, ensure_ascii=False, default=str)


def _question_type(trace: RunTrace) -> str:
    if any(not op.startswith("system.") for op in trace.operations):
        return "operation"
    task = trace.task.strip().lower()
    if task.endswith(("?", "？")) or task.split(" ", 1)[0] in {"what", "which", "who", "when", "where", "why", "how"}:
        return "question"
    return "task"


def _keys(trace: RunTrace) -> list[str]:
    keys: list[str] = list(trace.entities[:5])
    for op in trace.operations[:5]:
        keys.append(op)
    seen = set(keys)
    for word in trace.task.replace(",", " ").split():
        clean = word.strip(".,;:!?\"'()[]").strip()
        if len(clean) >= 4 and tokenize(clean) and clean.lower() not in seen:
            seen.add(clean.lower())
            keys.append(clean)
        if len(keys) >= 10:
            break
    return keys


def _changed_line(failed: str, fixed: str) -> str:
    """The first line of ``fixed`` that ``failed`` did not have (what the fix changed)."""
    before = {line.strip() for line in failed.split("\n")}
    for line in fixed.split("\n"):
        if line.strip() and line.strip() not in before:
            return line.strip()
    return fixed.strip().split("\n")[0] if fixed.strip() else ""


def history_fields(trace: RunTrace) -> dict[str, object]:
    """The seed's ``HistoryChatMemory`` fields: ``time``, ``question_type``, ``keys``, ``summary``, ``userId``."""
    outcome = {"completed": "Answered", "failed": "Failed", "paused": "Waiting for the user"}.get(trace.status, "Ended")
    answer = _answer_text(trace.answer)
    asked = _clip(trace.task, _TEXT_CHARS)
    summary = f"Asked: {asked}{'' if asked.endswith(('.', '?', '!', '。', '？', '！')) else '.'} {outcome}"
    summary += f": {_clip(answer, _TEXT_CHARS)}" if answer else f" ({trace.reason})"
    if trace.operations:
        summary += f". Used {', '.join(trace.operations[:6])}"
    when = _dt.datetime.fromtimestamp(trace.ended_at or 0, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    return {
        "time": when,
        "question_type": _question_type(trace),
        "keys": ", ".join(_keys(trace)),
        "summary": summary,
        "userId": trace.user or "",
        "session_id": trace.session_id,
    }


def experience_fields(trace: RunTrace) -> dict[str, object] | None:
    """The experience of a run: task, the code that worked, errors and their fixes, operations, outcome.

    None when the run ran no code (nothing to learn from).
    """
    coded = [r for r in trace.rounds if r.code is not None or r.error is not None]
    if not coded:
        return None
    good = [r for r in coded if r.error is None and r.code]
    code = "\n".join((r.code or "").strip("\n") for r in good)
    errors = []
    for i, r in enumerate(coded):
        if r.error is None:
            continue
        fix = next((later for later in coded[i + 1 :] if later.error is None and later.code), None)
        errors.append(
            {
                "round": r.index,
                "error": _clip(r.error, _TEXT_CHARS),
                "line": _clip(r.source, 160),
                "fixed_in_round": fix.index if fix is not None else None,
                "fix": _clip(_changed_line(r.code or "", fix.code or ""), 160) if fix is not None else "",
            }
        )
    lessons = []
    for e in errors:
        if e["fixed_in_round"] is not None:
            lessons.append(f"{e['error']} (at `{e['line']}`) was fixed by `{e['fix']}`")
        else:
            lessons.append(f"{e['error']} (at `{e['line']}`) was not fixed")
    outcome = "succeeded" if trace.succeeded else f"{trace.status} ({trace.reason})"
    if trace.operations:
        lesson = f"Used {', '.join(trace.operations[:8])}; {outcome}."
    else:
        lesson = f"Plain Python; {outcome}."
    if lessons:
        lesson += " Errors met: " + "; ".join(lessons[:4]) + "."
    return {
        "task": _clip(trace.task, 600),
        "code": code[-_CODE_CHARS:] if len(code) > _CODE_CHARS else code,
        "errors": errors,
        "operations": list(trace.operations),
        "outcome": {"status": trace.status, "reason": trace.reason, "answer": _clip(_answer_text(trace.answer), 300)},
        "lesson": lesson,
        "rounds": len(trace.rounds),
        "session_id": trace.session_id,
        "agent_id": trace.agent_id,
        "distilled_by": "rules",
    }


def merge_model_fields(
    history: dict[str, object], experience: dict[str, object] | None, reply: Mapping[str, object]
) -> tuple[dict[str, object], dict[str, object] | None]:
    """Overlay what a distilling model replied (``question_type``, ``keys``, ``summary``, ``lesson``)."""
    history = dict(history)
    for name in ("question_type", "keys", "summary"):
        value = reply.get(name)
        if isinstance(value, list):
            value = ", ".join(str(v) for v in value)
        if isinstance(value, str) and value.strip():
            history[name] = _clip(value, 600)
    if experience is not None:
        experience = dict(experience)
        lesson = reply.get("lesson")
        if isinstance(lesson, str) and lesson.strip():
            experience["lesson"] = _clip(lesson, 800)
            experience["distilled_by"] = "model"
    return history, experience
