"""Real model code: the share of the corpus that runs identically in the sandbox and in plain CPython.

The corpus is ``tests/sandbox/real_code_corpus.txt`` (typical model-written Python, stdlib only:
maths, data wrangling, strings, algorithms, idioms). Each snippet runs as one round in the
subprocess sandbox with the policy on (``Policy()``) and, as the baseline, in a plain CPython child;
"identical" means the same stdout and the same way of ending (no error, or the same exception
type). The documented exceptions (``DIFFERS`` in ``tests/sandbox/real_code_corpus.py``) are listed
with their reasons; the goal is 100 % of the rest.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


async def _measure() -> dict[str, Any]:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from codeact.sandbox import Policy, SubprocessSandbox
    from tests.sandbox.real_code_corpus import DIFFERS, SNIPPETS, outcome_key
    from tests.sandbox.test_real_code import _plain_outcomes

    plain = _plain_outcomes(SNIPPETS)
    agree: list[str] = []
    disagree: list[str] = []
    async with SubprocessSandbox(policy=Policy()) as box:
        for snippet in SNIPPETS:
            result = await box.execute(snippet.code, deadline=30)
            got = outcome_key(result.stdout, result.error.type if result.error else None)
            want = outcome_key(plain[snippet.id]["stdout"], plain[snippet.id]["error"])
            (agree if got == want else disagree).append(snippet.id)
    undocumented = sorted(set(disagree) - set(DIFFERS))
    by_category: dict[str, list[int]] = {}
    for snippet in SNIPPETS:
        counts = by_category.setdefault(snippet.category, [0, 0])
        counts[0] += snippet.id in agree
        counts[1] += 1
    return {
        "snippets": len(SNIPPETS),
        "identical": len(agree),
        "share_identical": round(len(agree) / len(SNIPPETS), 4),
        "share_identical_excluding_documented": round(len(agree) / (len(SNIPPETS) - len(DIFFERS)), 4),
        "by_category": {k: f"{a}/{n}" for k, (a, n) in sorted(by_category.items())},
        "documented_exceptions": DIFFERS,
        "undocumented_disagreements": undocumented,
        "baseline": "plain CPython child (same interpreter), a fresh namespace per snippet",
    }


def run() -> dict[str, Any]:
    return asyncio.run(_measure())


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
