"""A corpus of real-style model replies (``replies.jsonl``, built by ``build.py``) and how to score the parser on it."""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codeact.segments import CodeParseError, build_frame, extract_code

CORPUS = Path(__file__).resolve().parent / "replies.jsonl"
FRAME = build_frame({"info": ("dict", "{'name': 'Checkout'}")}, imports=["import asyncio"])


def load() -> list[dict[str, Any]]:
    """The corpus cases, in file order."""
    with CORPUS.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What the parser did with one case: the code it returned (or the error reason) and whether that is right."""

    code: str | None
    error: str | None
    correct: bool


def check(case: dict[str, Any]) -> Outcome:
    """Run the parser on ``case``: right when the program matches ``expect`` (as an AST), or the error matches."""
    try:
        code, error = extract_code(case["reply"], frame=FRAME).code, None
    except CodeParseError as exc:
        code, error = None, exc.reason
    expect = case["expect"]
    if expect is None:
        return Outcome(code=code, error=error, correct=code is None and error == case["error"])
    same = code is not None and ast.dump(ast.parse(code)) == ast.dump(ast.parse(expect))
    return Outcome(code=code, error=error, correct=same)


def score(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Shares over the corpus: compiling code blocks extracted correctly; replies that must run nothing refused."""
    outcomes = [(case, check(case)) for case in cases]
    code_cases = [o for c, o in outcomes if c["expect"] is not None]
    refused = [o for c, o in outcomes if c["expect"] is None]
    return {
        "cases": len(cases),
        "code_cases": len(code_cases),
        "code_extracted_share": sum(o.correct for o in code_cases) / len(code_cases),
        "nothing_runs_cases": len(refused),
        "nothing_runs_share": sum(o.correct for o in refused) / len(refused),
        "wrong": [c["id"] for c, o in outcomes if not o.correct],
    }
