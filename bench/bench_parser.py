"""The reply parser on the corpus of real-style replies (``tests/segments/corpus/replies.jsonl``).

``code_extracted_share`` is the share of replies holding compiling code whose program the parser
returns exactly (compared as an AST; goal >= 0.995); ``nothing_runs_share`` the share of broken,
cut-off, prose-only and other-language replies it refuses (goal 1.0). ``invented_turn_*`` count the
replies that invent the next turn after their code (``Output:``, ``Observation:``, ``User:``, a cut-off
block; chat and FIM shapes): the share whose code before the invented part is returned, or refused when
that code is broken. ``parse_ms_per_reply`` is the
mean time per reply, against ``ast_parse_ms_per_reply`` (``ast.parse`` of the expected program) as the
baseline measured in the same run.
"""

from __future__ import annotations

import ast
import time
from typing import Any

from codeact.segments import CodeParseError, extract_code
from tests.segments.corpus import FRAME, check, load, score


def _parse_all(cases: list[dict[str, Any]]) -> None:
    for case in cases:
        try:
            extract_code(case["reply"], frame=FRAME)
        except CodeParseError:
            pass


def run() -> dict[str, Any]:
    cases = load()
    figures = score(cases)
    started = time.perf_counter()
    _parse_all(cases)
    parse_ms = (time.perf_counter() - started) * 1000 / len(cases)
    programs = [c["expect"] for c in cases if c["expect"] is not None]
    started = time.perf_counter()
    for program in programs:
        ast.parse(program)
    baseline_ms = (time.perf_counter() - started) * 1000 / len(programs)
    invented = [c for c in cases if c["kind"].startswith("invented-")]
    return {
        "cases": figures["cases"],
        "invented_turn_cases": len(invented),
        "invented_turn_right_share": round(sum(check(c).correct for c in invented) / max(len(invented), 1), 4),
        "code_cases": figures["code_cases"],
        "code_extracted_share": round(figures["code_extracted_share"], 4),
        "code_extracted_goal": 0.995,
        "nothing_runs_cases": figures["nothing_runs_cases"],
        "nothing_runs_share": round(figures["nothing_runs_share"], 4),
        "wrong": figures["wrong"][:20],
        "parse_ms_per_reply": round(parse_ms, 4),
        "ast_parse_ms_per_reply": round(baseline_ms, 4),
        "parse_ratio_to_ast_parse": round(parse_ms / baseline_ms, 1),
    }
