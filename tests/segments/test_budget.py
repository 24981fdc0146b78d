"""Token counting and compaction of older rounds."""

from __future__ import annotations

import pytest

from codeact.segments import (
    ApproxTokenCounter,
    CompactConfig,
    Compactor,
    PromptConfig,
    SegmentBuilder,
    SegmentHistory,
    SummaryRequest,
    TokenCounter,
    fallback_summary,
)


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        pytest.param("", 0, id="empty"),
        pytest.param("hello world", 2, id="words"),
        pytest.param("print(x)", 4, id="code"),
        pytest.param("12345", 2, id="digits"),
        pytest.param("登录功能", 4, id="cjk"),
        pytest.param("a\n    b", 3, id="indent"),
    ],
)
def test_approx_counter(text: str, tokens: int) -> None:
    assert ApproxTokenCounter().count(text) == tokens


def test_approx_counter_is_a_token_counter() -> None:
    assert isinstance(ApproxTokenCounter(), TokenCounter)


def _history(rounds: int) -> SegmentHistory:
    history = SegmentHistory()
    history.add("User", "Make the tests pass.", timestamp=0.0)
    history.add("Context", "repo at /work/app", timestamp=0.0)
    for i in range(1, rounds + 1):
        failed = i % 2 == 1
        history.add_round(
            thought=f"thought {i}",
            plan=f"plan {i}",
            code=f"open('src/mod{i}.py', 'w').write(fix)\nresult = await shell.run(cmd='pytest -q')",
            evaluation=(
                "Failed with AssertionError: expected 2 (line 2 of your code)\nOutput:\n1 failed, 4 passed"
                if failed
                else "Output:\n5 passed"
            ),
            next_goal=f"goal {i}",
        )
    return history


def test_config_from_blueprint() -> None:
    config = CompactConfig.from_blueprint(
        {
            "enabled": True,
            "trigger": {"contextRatio": 0.5, "maxTurns": 4},
            "strategy": "structured-summary",
            "preserve": ["instructions", "changed_files"],
        }
    )
    assert (config.context_ratio, config.max_turns, config.preserve) == (0.5, 4, ("instructions", "changed_files"))


@pytest.mark.parametrize("ratio", [0, 1.5])
def test_config_rejects_bad_ratio(ratio: float) -> None:
    with pytest.raises(ValueError, match="context_ratio"):
        CompactConfig.from_blueprint({"trigger": {"contextRatio": ratio}})


@pytest.mark.parametrize(
    ("config", "prompt_tokens", "rounds", "expected"),
    [
        pytest.param(CompactConfig(context_ratio=0.75), 700, 5, False, id="under-ratio"),
        pytest.param(CompactConfig(context_ratio=0.75), 800, 5, True, id="over-ratio"),
        pytest.param(CompactConfig(max_turns=4), 10, 4, False, id="at-max-turns"),
        pytest.param(CompactConfig(max_turns=4), 10, 5, True, id="over-max-turns"),
        pytest.param(CompactConfig(enabled=False, max_turns=1), 10_000, 5, False, id="disabled"),
        pytest.param(CompactConfig(context_ratio=0.1), 10_000, 2, False, id="nothing-old-enough"),
    ],
)
def test_should_compact(config: CompactConfig, prompt_tokens: int, rounds: int, expected: bool) -> None:
    compactor = Compactor(config, context_window=1000)
    assert compactor.should_compact(_history(rounds), prompt_tokens=prompt_tokens) is expected


EXPECTED_FALLBACK = """Summary of rounds 1-3 (compacted):
Instructions:
- (none)
Open decisions:
- Plan (round 3): plan 3
- NextGoal (round 3): goal 3
Changed files:
- src/mod1.py
- src/mod2.py
- src/mod3.py
Failed commands:
- round 1: `open('src/mod1.py', 'w').write(fix)` -> Failed with AssertionError: expected 2 (line 2 of your code)
- round 3: `open('src/mod3.py', 'w').write(fix)` -> Failed with AssertionError: expected 2 (line 2 of your code)
Test results:
- round 1: 1 failed, 4 passed
- round 2: 5 passed
- round 3: 1 failed, 4 passed
Steps:
- round 1: goal 1 [failed]
- round 2: goal 2
- round 3: goal 3 [failed]"""


async def test_compact_with_fallback_summary() -> None:
    history = _history(5)
    result = await Compactor(CompactConfig(max_turns=3), context_window=10_000).compact(history)
    assert result.rounds == (1, 2, 3)
    assert result.used_fallback is True and result.summarizer_error is None
    assert result.summary is not None and result.summary.content == EXPECTED_FALLBACK
    assert result.summary.kind == "Round" and result.summary.tags == ("compacted",)
    kinds = [(s.kind, s.round_index) for s in result.history]
    assert kinds[:3] == [("User", 0), ("Context", 0), ("Round", 3)]
    assert {r for _, r in kinds[3:]} == {4, 5}
    assert len(history) == 27  # the input history is untouched


async def test_compact_with_summarizer() -> None:
    seen: list[SummaryRequest] = []

    async def summarize(request: SummaryRequest) -> str:
        seen.append(request)
        return "  rounds 1-3: fixed mod1..mod3; tests still failing  "

    compactor = Compactor(
        CompactConfig(max_turns=3, preserve=("instructions",)), context_window=10, summarizer=summarize
    )
    result = await compactor.compact(_history(5))
    assert result.summary is not None and result.summary.content == "rounds 1-3: fixed mod1..mod3; tests still failing"
    assert result.used_fallback is False
    assert (seen[0].first_round, seen[0].last_round, seen[0].preserve) == (1, 3, ("instructions",))
    assert seen[0].prompt.startswith("Summarize rounds 1 to 3 of an agent session")
    assert "Keep, under one heading each: instructions." in seen[0].prompt
    assert seen[0].transcript.startswith("Thought: thought 1\nPlan: plan 1\nPython:\n")


async def test_summarizer_failure_falls_back() -> None:
    async def broken(request: SummaryRequest) -> str:
        raise RuntimeError("utility model down")

    result = await Compactor(CompactConfig(), context_window=10, summarizer=broken).compact(_history(5))
    assert result.used_fallback is True
    assert result.summarizer_error == "RuntimeError: utility model down"
    assert result.summary is not None and result.summary.content == EXPECTED_FALLBACK


async def test_second_compaction_folds_the_first_summary_in() -> None:
    compactor = Compactor(CompactConfig(max_turns=2), context_window=10_000)
    history = (await compactor.compact(_history(5))).history
    for i in range(6, 9):
        history.add_round(thought=f"t{i}", code="x = 1", evaluation="ok", next_goal=f"g{i}")
    result = await compactor.compact(history)
    assert [s.kind for s in result.history].count("Round") == 1
    assert result.summary is not None
    assert "Round: Summary of rounds 1-3 (compacted):" in result.summary.content
    assert result.rounds == (3, 4, 5, 6)


async def test_maybe_compact_and_variables_stay_in_the_frame() -> None:
    compactor = Compactor(CompactConfig(max_turns=2), context_window=100_000)
    history = await compactor.maybe_compact(_history(6), prompt_tokens=10)
    assert [s.kind for s in history].count("Round") == 1
    prompt = SegmentBuilder(PromptConfig()).build("code", history, variables={"result": ("dict", "{'rc': 1}")})
    assert "#   result: dict = {'rc': 1}\n" in prompt.user
    same = await compactor.maybe_compact(history, prompt_tokens=10)
    assert same is history


def test_custom_preserve_category_uses_tags() -> None:
    history = _history(1)
    history.add("Evaluation", "db migrated to v7", round_index=1, tags=("migrations",))
    text = fallback_summary(list(history), preserve=["migrations"])
    assert "Migrations:\n- Evaluation: db migrated to v7\n" in text
