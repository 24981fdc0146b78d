"""The reply parser on the corpus of real-style replies (``corpus/replies.jsonl``): every case, and the shares."""

from __future__ import annotations

from typing import Any

import pytest

from tests.segments.corpus import check, load, score

CASES = load()


@pytest.mark.parametrize("case", [pytest.param(c, id=c["id"]) for c in CASES])
def test_corpus_case(case: dict[str, Any]) -> None:
    outcome = check(case)
    assert outcome.correct, (case["reply"], outcome.code, outcome.error)


def test_the_corpus_is_large_and_varied() -> None:
    kinds = {case["kind"] for case in CASES}
    assert len(CASES) >= 300
    assert {"tag-same-line", "blocks-broken-then-fixed", "blocks-quoted-earlier", "inline-code-prose"} <= kinds
    assert sum(case["expect"] is None for case in CASES) >= 50  # replies that must run nothing


def test_at_least_99_5_percent_of_compiling_code_blocks_are_extracted() -> None:
    figures = score(CASES)
    assert figures["code_extracted_share"] >= 0.995, figures["wrong"]
    assert figures["nothing_runs_share"] == 1.0, figures["wrong"]
