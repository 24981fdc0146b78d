"""The CodeAct loop: evaluations of bad rounds, deadlines, limits, stuck loops, thought modes, self-check."""

from __future__ import annotations

import contextlib

import pytest

from codeact.engine.replay import replay_session
from codeact.engine.store import Store
from codeact.sandbox import SubprocessSandbox

from .conftest import BASE, MakeAgent, Probe, code, of_type, segments_of, sent_text

FINISH = code('system.finish("done")')


@pytest.mark.parametrize(
    ("bad_reply", "evaluation", "status"),
    [
        pytest.param("I will look at the project first.", "contains no Python code", "no_code", id="no-code"),
        pytest.param(code("x = (1,"), "does not parse", "parse_error", id="syntax-error"),
    ],
)
async def test_a_reply_without_runnable_code_becomes_an_evaluation(
    make_agent: MakeAgent, sqlite_store: Store, bad_reply: str, evaluation: str, status: str
) -> None:
    built = make_agent(replies=[bad_reply, code("x = 41 + 1"), code("system.finish(x)")])
    events = await built.run("compute x", session_id="s-bad")

    assert events[-1].type == "run.completed"
    assert events[-1].answer == 42  # type: ignore[attr-defined]
    first_eval = [s for s in segments_of(events, "Evaluation") if s["round_index"] == 1]
    assert len(first_eval) == 1
    assert "error" in first_eval[0]["tags"]
    # The next prompt shows the model what was wrong.
    assert first_eval[0]["content"] in sent_text(built.script.requests[1])
    assert evaluation in first_eval[0]["content"], first_eval[0]["content"]
    record = await sqlite_store.round("s-bad", 1)
    assert record is not None
    assert (record.code, record.status, record.reply) == (None, status, bad_reply)
    assert record.parse_error == first_eval[0]["content"]
    assert not of_type(events, "code.started")[0].code.startswith("I will")  # type: ignore[attr-defined]


async def test_a_tool_error_is_catchable_inside_the_code(make_agent: MakeAgent, probe: Probe) -> None:
    reply = code(
        """
        try:
            probe.fail("disk full")
        except Exception as exc:
            caught = f"{type(exc).__name__}: {exc}"
        print(caught)
        system.finish(caught)
        """
    )
    built = make_agent(BASE.replace("  - ref: devops", "  - ref: probe"), [reply])
    events = await built.run("try it")

    assert events[-1].type == "run.completed"
    assert events[-1].answer == "ToolError: disk full"  # type: ignore[attr-defined]
    assert probe.calls == [("fail", "disk full")]
    done = of_type(events, "code.completed")[0]
    assert (done.status, done.error, done.stdout) == ("ok", None, "ToolError: disk full\n")  # type: ignore[attr-defined]


async def test_a_round_past_its_deadline_is_killed_and_the_next_round_keeps_the_variables(
    make_agent: MakeAgent, sqlite_store: Store
) -> None:
    blueprint = BASE + "sandbox:\n  limits:\n    timeoutSeconds: 1\n"
    built = make_agent(
        blueprint,
        [code("kept = 'before'"), code("spin = 0\nwhile True:\n    spin += 1"), code("system.finish(kept + '!')")],
        allow_sandbox_declaration=True,
    )
    events = await built.run("spin", session_id="s-deadline")

    assert events[-1].type == "run.completed"
    assert events[-1].answer == "before!"  # type: ignore[attr-defined]
    statuses = [e.status for e in of_type(events, "code.completed")]  # type: ignore[attr-defined]
    assert statuses == ["ok", "deadline_exceeded", "ok"]
    evaluation = [s for s in segments_of(events, "Evaluation") if s["round_index"] == 2][0]["content"]
    assert "DeadlineExceeded" in evaluation
    assert evaluation in sent_text(built.script.requests[2])
    record = await sqlite_store.round("s-deadline", 2)
    assert record is not None
    assert record.status == "deadline_exceeded"
    assert record.variables == {"kept": "before"}
    meta = await sqlite_store.get_session("s-deadline")
    assert meta is not None and meta.extra["sandbox"]["deadline_s"] == 1.0
    # Replay runs the rounds under the recorded deadline: the spinning round is killed again.
    report = await replay_session(
        sqlite_store, "s-deadline", sandbox_factory=lambda h: SubprocessSandbox(bridge=h), registry=built.agent.registry
    )
    assert [r.status for r in report.rounds] == ["match"] * 3, report.to_json()


async def test_max_turns_fails_the_run_with_a_reason(make_agent: MakeAgent, sqlite_store: Store) -> None:
    blueprint = BASE.replace("maxTurns: 6", "maxTurns: 3")
    built = make_agent(blueprint, [code(f"step = {i}") for i in range(1, 4)])
    events = await built.run("count", session_id="s-turns")

    last = events[-1]
    assert last.type == "run.failed"
    assert last.error == {  # type: ignore[attr-defined]
        "code": "run.maxTurns",
        "message": "no answer after 3 rounds (workflow.maxTurns); "
        "raise workflow.maxTurns in the blueprint or make the task smaller",
    }
    assert last.rounds == 3  # type: ignore[attr-defined]
    meta = await sqlite_store.get_session("s-turns")
    assert meta is not None and (meta.status, meta.rounds) == ("failed", 3)
    result = await make_agent(blueprint, [code(f"step = {-i}") for i in range(3)]).agent.invoke("again")
    assert (result.status, result.reason) == ("failed", "run.maxTurns")


@pytest.mark.parametrize(
    ("replies", "what"),
    [
        # a repeat of a successful round is not run: the final-answer step asks, and UNKNOWN goes on
        pytest.param([code("x = 1"), code("x = 1"), "UNKNOWN", code("x = 1"), "UNKNOWN"], "code", id="same-code"),
        pytest.param([code(f"y{i} = 1\nundefined_name") for i in range(3)], "error", id="same-error"),
    ],
)
async def test_the_same_code_or_error_three_times_ends_the_run_as_stuck(
    make_agent: MakeAgent, replies: list[str], what: str
) -> None:
    built = make_agent(replies=replies)
    events = await built.run("loop")

    last = events[-1]
    assert last.type == "run.failed"
    assert last.error == {  # type: ignore[attr-defined]
        "code": "run.stuck",
        "message": f"the model produced the same {what} 3 times in a row; "
        "stopping (raise workflow.codeact.maxRepeats or rephrase the task)",
    }
    assert last.rounds == 3  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("mode", "replies", "calls_per_round", "thought"),
    [
        pytest.param(
            "separate",
            [
                {"text": "Thought: I add the numbers.", "purpose": "thought"},
                {"text": code("total = 1 + 2"), "purpose": "code"},
                {"text": "Thought: report it.", "purpose": "thought"},
                {"text": code("system.finish(total)"), "purpose": "code"},
            ],
            ["thought", "code"],
            ["I add the numbers.", "report it."],
            id="separate",
        ),
        pytest.param(
            "inline",
            [
                "Thought: I add the numbers.\n" + code("total = 1 + 2"),
                "Thought: report it.\n" + code("system.finish(total)"),
            ],
            ["code"],
            ["I add the numbers.", "report it."],
            id="inline",
        ),
        pytest.param(
            "off",
            ["Thought: ignored.\n" + code("total = 1 + 2"), code("system.finish(total)")],
            ["code"],
            [],
            id="off",
        ),
    ],
)
async def test_thought_modes(
    make_agent: MakeAgent, mode: str, replies: list[object], calls_per_round: list[str], thought: list[str]
) -> None:
    built = make_agent(BASE.replace('thought: "off"', f'thought: "{mode}"'), replies)
    events = await built.run("add")

    assert events[-1].type == "run.completed"
    assert events[-1].answer == 3  # type: ignore[attr-defined]
    assert [r.purpose for r in built.script.requests] == calls_per_round * 2
    assert [s["content"] for s in segments_of(events, "Thought")] == thought
    assert [e.purpose for e in of_type(events, "message.completed")] == calls_per_round * 2  # type: ignore[attr-defined]
    if mode == "separate":
        # The code call sees the thought of its round.
        assert "I add the numbers." in sent_text(built.script.requests[1])


SELF_CHECK = BASE.replace('thought: "off"', 'thought: "off"\n    selfCheck: true\n    maxSelfChecks: 2')


@pytest.mark.parametrize(
    ("verdicts", "answer", "reason", "rounds"),
    [
        pytest.param(["DONE"], 1, "self_check", 1, id="done-first"),
        pytest.param(["NOT DONE\nthe total is missing", "DONE"], 2, "self_check", 2, id="not-done-then-done"),
        pytest.param(["NOT DONE\nno", "NOT DONE\nstill no"], 3, "finished", 3, id="bounded"),
    ],
)
async def test_self_check_reenters_the_loop_until_done(
    make_agent: MakeAgent, verdicts: list[str], answer: int, reason: str, rounds: int
) -> None:
    replies: list[object] = [{"text": code(f"system.finish({n})"), "purpose": "code"} for n in (1, 2, 3)]
    replies += [{"text": v, "purpose": "utility"} for v in verdicts]
    built = make_agent(SELF_CHECK, replies)
    events = await built.run("give the total")

    last = events[-1]
    assert last.type == "run.completed"
    assert (last.answer, last.reason, last.rounds) == (answer, reason, rounds)  # type: ignore[attr-defined]
    assert [r.purpose for r in built.script.requests].count("utility") == len(verdicts)
    checks = [s for s in segments_of(events, "Evaluation") if "self_check" in s["tags"]]
    assert len(checks) == sum(v.startswith("NOT") for v in verdicts)
    if len(verdicts) > 1:
        assert "the total is missing" in checks[0]["content"] or "no" in checks[0]["content"]
        # The verdict's reasons reach the next code prompt.
        assert checks[0]["content"] in sent_text(built.script.requests[2])


async def test_send_message_becomes_an_express_segment(make_agent: MakeAgent) -> None:
    built = make_agent(replies=[code('system.send_message("Working on it")\nsystem.finish("ok")')])
    events = await built.run("hello")

    assert events[-1].type == "run.completed"
    express = [e for e in of_type(events, "message.completed") if e.purpose == "express"]  # type: ignore[attr-defined]
    assert [e.text for e in express] == ["Working on it"]  # type: ignore[attr-defined]
    assert [s["content"] for s in segments_of(events, "Express")] == ["Working on it"]


async def test_streaming_deltas_add_up_to_each_message(make_agent: MakeAgent) -> None:
    reply = {"text": "Thought: one.\n" + code("a = 1"), "chunks": ["Thought: ", "one.\n```py", "thon\na = 1\n```"]}
    built = make_agent(
        BASE.replace('thought: "off"', "thought: inline"), [reply, code("system.finish(a)")], stream=True
    )
    events = await built.run("stream")

    assert events[-1].type == "run.completed"
    deltas = [e for e in of_type(events, "message.delta") if e.round == 1]  # type: ignore[attr-defined]
    assert [d.text for d in deltas] == ["Thought: ", "one.\n```py", "thon\na = 1\n```"]  # type: ignore[attr-defined]
    for done in of_type(events, "message.completed"):
        pieces = [d.text for d in of_type(events, "message.delta") if d.round == done.round]  # type: ignore[attr-defined]
        assert "".join(pieces) == done.text  # type: ignore[attr-defined]
        assert done.sequence > max(d.sequence for d in of_type(events, "message.delta") if d.round == done.round)  # type: ignore[attr-defined]


async def test_a_model_failure_fails_the_run_and_keeps_the_rounds(make_agent: MakeAgent, sqlite_store: Store) -> None:
    built = make_agent(replies=[code("a = 1"), {"error": "auth", "message": "invalid api key"}])
    events = await built.run("go", session_id="s-model-error")

    failed = events[-1]
    assert failed.type == "run.failed"
    assert failed.error["code"].startswith("model.")  # type: ignore[attr-defined]
    assert "invalid api key" in failed.error["message"]  # type: ignore[attr-defined]
    assert failed.retryable is False  # type: ignore[attr-defined]
    assert failed.rounds == 1  # type: ignore[attr-defined]
    meta = await sqlite_store.get_session("s-model-error")
    assert meta is not None and (meta.status, meta.rounds) == ("failed", 1)


async def test_leaving_the_event_stream_early_releases_the_session(make_agent: MakeAgent, sqlite_store: Store) -> None:
    # Round 2's first reply is consumed by the abandoned run.
    built = make_agent(replies=[code("a = 1"), code("b = 2"), code("b = 2"), code("system.finish(a + b)")])
    async with contextlib.aclosing(built.agent.run("go", session_id="s-early")) as stream:
        async for event in stream:
            if event.type == "code.started" and event.round == 2:  # type: ignore[attr-defined]
                break
    meta = await sqlite_store.get_session("s-early")
    # The round in progress is recorded as interrupted (with what it ran), the session too.
    assert meta is not None and (meta.rounds, meta.status) == (2, "interrupted")
    interrupted = await sqlite_store.round("s-early", 2)
    assert interrupted is not None and interrupted.status == "interrupted"
    assert "b = 2" in (interrupted.code or "")
    # The lock is free again: the session continues where the record ends.
    events = await built.run("continue", session_id="s-early")
    assert events[-1].type == "run.completed"
    assert events[-1].answer == 3  # type: ignore[attr-defined]
    assert [e.round for e in of_type(events, "round.started")] == [3, 4]  # type: ignore[attr-defined]
    assert "b = 2" in (await sqlite_store.round("s-early", 3)).code  # type: ignore[union-attr,operator]


COMPACT = BASE.replace(
    "workflow:",
    "session:\n  compact:\n    enabled: true\n    trigger:\n      maxTurns: 2\nworkflow:",
)


async def test_older_rounds_are_compacted_and_the_summary_is_recorded(make_agent: MakeAgent, store: Store) -> None:
    replies: list[object] = [
        {"text": code(f"v{i} = {i}\nprint('round {i} output')"), "purpose": "code"} for i in (1, 2, 3)
    ]
    replies += [
        {"text": "Summary: v1 was set to 1.", "purpose": "utility"},
        {"text": code("system.finish(v1 + v2 + v3)"), "purpose": "code"},
    ]
    built = make_agent(COMPACT, replies, store=store)
    events = await built.run("sum", session_id="s-compact")

    assert events[-1].type == "run.completed"
    assert events[-1].answer == 6  # type: ignore[attr-defined]
    summaries = [s for s in segments_of(events, "Round") if "compacted" in s["tags"]]
    assert [s["content"] for s in summaries] == ["Summary: v1 was set to 1."]
    last_prompt = sent_text(built.script.requests[-1])
    assert "Summary: v1 was set to 1." in last_prompt
    assert "round 1 output" not in last_prompt
    # The record resolves: every segment a round's prompt was built from is stored.
    stored = {s["id"] for s in await store.segments("s-compact")}
    for record in await store.rounds("s-compact"):
        assert set(record.segment_ids) <= stored, record.index
    # A resumed session starts from the compacted history (no second summary call).
    again = make_agent(COMPACT, [{"text": code("system.finish(v3)"), "purpose": "code"}], store=store)
    events = await again.run("and v3?", session_id="s-compact")
    assert events[-1].answer == 3  # type: ignore[attr-defined]
    resumed_prompt = sent_text(again.script.requests[0])
    assert "Summary: v1 was set to 1." in resumed_prompt
    assert "round 1 output" not in resumed_prompt
