"""The CodeAct loop: rounds of Thought -> Plan -> Code -> Evaluation -> NextGoal (seed ``001``).

The loop owns the loop only: prompts come from ``segments``, code runs in ``sandbox``, toolkit
calls go through the bridge, records go to the store.

* Round 1 is the seed's IntentPlanner: when the task can be answered directly, its code calls
  ``system.finish(answer)`` and the run ends after one round; otherwise the rounds go on (the
  TaskExecutor) until ``finish``, a passed self-check, ``ask_user`` (the run pauses), the same
  code or error ``max_repeats`` times in a row (stuck), or ``max_turns``.
* A reply without code, a syntax error, a tool error or a killed sandbox becomes an Evaluation
  the model sees next round, never a crash of the run. Code that does not parse, or a reply still
  cut off at the token limit after its continuations, runs nothing at all (``codeact.engine.agent._reply``).
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from codeact import prompts
from codeact.engine.agent._reply import FullReply, complete_reply, no_code_outcome, truncated_error
from codeact.engine.agent._unreached import FailedRound, unreached_note
from codeact.engine.agent.artifacts import emit_artifacts, with_artifacts
from codeact.engine.agent.context import Outcome, RunContext, prompt_hash, usage_of
from codeact.engine.agent.finishing import FinishStep, Trigger, confirm_answer, final_answer
from codeact.engine.agent.output import review
from codeact.engine.agent.recovery import from_record_notes
from codeact.engine.agent.support import describe_variables
from codeact.engine.errors import ErrorInfo
from codeact.engine.events import CodeCompleted, CodeStarted, RoundStarted, SegmentCreated, StateUpdated, reply_excerpt
from codeact.sandbox.runtime.capture import LIVE_REPR_NOTE
from codeact.sandbox.runtime.codec import python_repr
from codeact.segments import (
    CodeBlock,
    CodeFrame,
    CodeParseError,
    CompactConfig,
    Compactor,
    Prompt,
    Segment,
    SegmentBuilder,
    SegmentKind,
    SummaryRequest,
    ThoughtParseError,
    cut_invented_turn,
    extract_code,
    format_evaluation,
    parse_thought,
    stated_goal,
)

if TYPE_CHECKING:
    from codeact.sandbox import ExecutionResult, Sandbox

__all__ = ["CodeActLoop"]

_FENCE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)


class _Clock:
    """When the round started: wall-clock (the record's ``started_at``) and ``perf_counter`` (its duration)."""

    def __init__(self) -> None:
        self.started = time.time()
        self.t0 = time.perf_counter()


@dataclass(frozen=True, kw_only=True)
class Reply:
    """The round's model reply: the prompt it answered, the first reply's text, the reply completed past cut-offs.

    ``usage`` and ``timings`` are the round's so far (the thought's and the code's model calls).
    """

    prompt: Prompt
    first: str
    full: FullReply
    usage: dict[str, object]
    timings: dict[str, float]

    @property
    def text(self) -> str:
        """The whole reply, continuations concatenated."""
        return self.full.text


@dataclass(frozen=True, kw_only=True)
class Code:
    """The code the round runs: the block read from the reply, the program the sandbox runs, a repeat or not."""

    block: CodeBlock
    program: str
    repeated: bool  # the code of the last round, which ran without error


@dataclass(frozen=True, kw_only=True)
class Execution:
    """What running the code did, and its error as each reader sees it.

    ``error`` is the sandbox's; ``shown`` speaks in the model's lines (events, hooks); ``recorded`` keeps the
    program's line (replay compares it) and adds the model's, so ``sessions show`` says the same as the terminal.
    """

    result: ExecutionResult
    changed: tuple[str, ...]
    removed: tuple[str, ...]
    error: dict[str, object] | None
    shown: dict[str, object] | None
    recorded: dict[str, object] | None
    duration_s: float


@dataclass(frozen=True, kw_only=True)
class Decision:
    """How the round ends the run (None: the run goes on), and the finishing step that ran, if any."""

    outcome: Outcome | None
    step: FinishStep | None = None


class CodeActLoop:
    """Runs the rounds of one CodeAct run over a :class:`RunContext`."""

    def __init__(self, ctx: RunContext, builder: SegmentBuilder, sandbox: Sandbox) -> None:
        self.ctx = ctx
        self.sandbox = sandbox
        self.builder = builder
        settings = ctx.deps.spec.codeact
        self.thought_mode = settings.thought
        self.max_repeats = max(2, settings.max_repeats)
        self._codes: deque[str] = deque(maxlen=self.max_repeats)
        self._errors: deque[str] = deque(maxlen=self.max_repeats)
        self._self_checks = 0
        self._failed: deque[FailedRound] = deque(maxlen=8)  # the last rounds whose code failed (NameError notes)
        self.deadline = settings.round_seconds  # seconds of code; waiting on the host is not counted
        self.compactor: Compactor | None = None  # built when the rounds start (run)
        self._last_round = ctx.state.first_round + ctx.deps.spec.max_turns - 1

    def _compactor(self) -> Compactor | None:
        ctx = self.ctx
        compact = ctx.deps.spec.session.compact
        if compact is None or not compact.enabled:
            return None
        fields: dict[str, object] = {"enabled": True, "max_turns": compact.max_turns}
        if compact.context_ratio is not None:
            fields["context_ratio"] = compact.context_ratio
        if compact.preserve:
            fields["preserve"] = compact.preserve
        if compact.strategy:
            fields["strategy"] = compact.strategy  # validated: one of the implemented strategies
        window = ctx.deps.spec.model.context_window or ctx.deps.model.context_window(purpose="code") or _DEFAULT_WINDOW

        async def summarize(request: SummaryRequest) -> str:
            reply = await ctx.caller.call_model("utility", messages=({"role": "user", "content": request.prompt},))
            return reply.text

        return Compactor(
            CompactConfig.model_validate(fields),
            context_window=window,
            summarizer=summarize,
            counter=_ModelCounter(ctx),
        )

    async def _maybe_compact(self, prompt: Any) -> bool:
        """Compact older rounds when the prompt passes the budget; True when the history changed."""
        compactor = self.compactor
        if compactor is None:
            return False
        text = prompt.text if prompt.text is not None else prompt.system + prompt.user
        # Counting tokens costs milliseconds on a long prompt; a prompt with fewer characters than
        # half the threshold cannot pass it (even at 2 tokens per character), so its length will do.
        # (The turn limit is still checked by should_compact.)
        threshold = compactor.config.context_ratio * compactor.context_window
        tokens = compactor.prompt_tokens(text) if len(text) >= threshold / 2 else len(text) // 4
        if not compactor.should_compact(self.ctx.state.history, prompt_tokens=tokens):
            return False
        compaction = await compactor.compact(self.ctx.state.history)
        if compaction.summary is None:
            return False
        self.ctx.state.history = compaction.history
        # Stored with this round, so a resumed session rebuilds the same history (see _run._restore_history).
        self.ctx.recorder.pending_segments.append(compaction.summary)
        self.ctx.emit(SegmentCreated, segment=compaction.summary.model_dump(mode="json"), round=self.ctx.state.round)
        return True

    async def run(self) -> Outcome:
        """Run rounds until the run ends; returns how it ended."""
        ctx = self.ctx
        self.compactor = self._compactor()
        last_round = ctx.state.first_round + ctx.deps.spec.max_turns - 1
        self._last_round = last_round
        while ctx.state.round < last_round:
            ctx.check_stopping()
            ctx.state.round += 1
            with ctx.deps.trace.round(ctx.state.round):
                outcome = await self._round()
            if outcome is None:
                continue
            checked = review(ctx, outcome)
            if isinstance(checked, Outcome):
                return checked
            # The answer does not match the output schema: the model is told once, in one more round.
            ctx.add_segment(SegmentKind.EVALUATION, checked, tags=("output",))
            last_round = self._last_round = max(last_round, ctx.state.round + 1)
        return Outcome(
            status="failed",
            reason="max_turns",
            error=ErrorInfo(
                code="run.maxTurns",
                message=f"no answer after {ctx.deps.spec.max_turns} rounds (workflow.maxTurns); "
                "raise workflow.maxTurns in the blueprint or make the task smaller",
            ),
        )

    async def _round(self) -> Outcome | None:
        """One round, in named steps: ask, read the code, run it, evaluate it, decide, record."""
        ctx = self.ctx
        clock = _Clock()
        ctx.state.round_started = clock.started
        ctx.emit(RoundStarted, round=ctx.state.round)
        reply = await self._ask()
        code = self._read(reply)
        if isinstance(code, CodeParseError):
            return await self._unparsed(clock, reply, code)
        if code.repeated and ctx.deps.spec.codeact.final_answer:
            return await self._repeated(clock, reply, code)
        run = await self._execute(reply, code)
        evaluation = self._evaluate(reply, code, run)
        decision = await self._decide(code, run, evaluation)
        await self._record(
            clock,
            reply,
            code=code.program,
            status=run.result.status,
            timings={**reply.timings, "sandbox_s": run.duration_s},
            step=decision.step,
            result=run.result,
            error=run.recorded,
        )
        return decision.outcome

    async def _ask(self) -> Reply:
        """The model's reply to the round's prompt (its thought first when it is asked apart), cut-offs completed."""
        ctx = self.ctx
        timings: dict[str, float] = {}
        usage: dict[str, Any] = {}
        goal_segment = ctx.state.history.last(SegmentKind.NEXT_GOAL)
        goal = goal_segment.content if goal_segment is not None else None
        # Prompts are built after the before_model hooks ran (call_model calls the builder): they show the
        # variables the hooks set and the toolkits they injected.
        built: list[Prompt] = []

        def build(purpose: str) -> Callable[[], Prompt]:
            def _build() -> Prompt:
                built.append(self._prompt(purpose, goal))
                return built[-1]

            return _build

        if self.thought_mode == "separate":
            tp = time.perf_counter()
            reply = await ctx.caller.call_model("thought", prompt=build("thought"))
            usage["thought"] = usage_of(reply)
            self._add_thought(reply.text)
            timings["thought_s"] = time.perf_counter() - tp

        tc = time.perf_counter()
        if self.compactor is not None:
            await self._maybe_compact(self._prompt("code", goal))
        built.clear()
        reply = await ctx.caller.call_model("code", prompt=build("code"))
        prompt = built[-1]
        full = await complete_reply(ctx, prompt, reply.text, reply.finish_reason, dict(reply.usage))
        usage["code"] = full.usage if reply.cost_usd is None else {**full.usage, "cost_usd": reply.cost_usd}
        timings["model_s"] = time.perf_counter() - tc
        if self.thought_mode == "inline":
            # the thought is what comes before the code, not a next turn the model invented after it;
            # a NextGoal it states is the goal of the round after this one: added after the Evaluation
            self._add_thought(_FENCE.sub("", cut_invented_turn(full.text)[0]), quiet=True, goal=False)
        return Reply(prompt=prompt, first=reply.text, full=full, usage=usage, timings=timings)

    def _read(self, reply: Reply) -> Code | CodeParseError:
        """The code of the reply, as the round runs it; the reason when there is none that can run."""
        ctx = self.ctx
        try:
            full = reply.full
            if full.truncated:
                raise truncated_error(full.text, full.continuations, full.looped)
            history = [s.content for s in ctx.state.history.segments if s.kind == SegmentKind.CODE]
            granted = tuple(ctx.deps.bridge.grants) if ctx.deps.bridge is not None else ()
            block = extract_code(full.text, frame=reply.prompt.frame, history=history, toolkits=granted)
        except CodeParseError as exc:
            return exc
        frame = reply.prompt.frame
        return Code(
            block=block,
            program=frame.program(block.code) if frame is not None else block.code,
            repeated=bool(history) and self._repeats_success(block.code, history[-1]),
        )

    async def _unparsed(self, clock: _Clock, reply: Reply, exc: CodeParseError) -> Outcome | None:
        """A reply without code that can run: nothing runs; the reason is the round's outcome (``_reply.py``)."""
        ctx = self.ctx
        status, said = no_code_outcome(exc)
        ctx.add_segment(SegmentKind.EVALUATION, exc.message, tags=("error",))
        ctx.emit(CodeCompleted, round=ctx.state.round, status=status, error=said, reply=reply_excerpt(reply.text))
        record_error = {("model_line" if k == "line" else k): v for k, v in said.items()}
        ended, ending = await self._conclude(code=None, error=f"parse:{exc.message}")
        await self._record(
            clock,
            reply,
            reply_text=reply.text,
            parse_error=exc.message,
            status=status,
            step=ending,
            error=record_error,
        )
        return ended

    async def _execute(self, reply: Reply, code: Code) -> Execution:
        """Run the round's code in the sandbox (warm: the previous round's namespace); its events."""
        ctx = self.ctx
        n = ctx.state.round
        ctx.add_segment(SegmentKind.CODE, code.block.code)
        ctx.check_stopping()
        ctx.emit(CodeStarted, round=n, code=code.block.code, notes=code.block.notes)
        ctx.recorder.note_code(program=code.program, middle=code.block.code, reply=reply.first)
        ts = time.perf_counter()
        with ctx.deps.trace.execute(str(getattr(self.sandbox, "backend", "sandbox"))) as span:
            # warm: the run's sandbox keeps the previous round's namespace (values of any type)
            result = await self.sandbox.execute(
                code.program, variables=ctx.state.variables, deadline=self.deadline, warm=True
            )
            if span is not None:
                span.finish(result)
        run = _execution(result, ctx.state.variables, reply.prompt.frame, code.block.code, time.perf_counter() - ts)
        ctx.emit(
            CodeCompleted,
            round=n,
            status=result.status,
            stdout=result.stdout,
            stderr=result.stderr,
            error=run.shown,
            variables_changed=run.changed,
            duration_s=result.duration_s,
        )
        ctx.emit(
            StateUpdated,
            round=n,
            changed={k: result.variables[k] for k in run.changed},
            removed=run.removed,
            uncaptured=tuple(u.to_json() for u in result.uncaptured),
        )
        return run

    def _evaluate(self, reply: Reply, code: Code, run: Execution) -> str:
        """The round's Evaluation (what the model reads next round), added with its NextGoal; the state updated."""
        ctx = self.ctx
        n, result, error = ctx.state.round, run.result, run.error
        evaluation = format_evaluation(
            stdout=result.stdout,
            stderr=result.stderr,
            error=error,
            frame=reply.prompt.frame,
            middle=code.block.code,
            changed=list(run.changed),
            uncaptured=[f"{u.name}: {u.reason}{_live_note(u.reason) if u.live else ''}" for u in result.uncaptured],
            notes=(
                *code.block.notes,
                *([prompts.render("repeat_ran.j2").rstrip("\n")] if code.repeated else []),
                *self._error_again(error),
                *unreached_note(error, self._failed),
                *self._from_record(),
            ),
        )
        if error is not None:
            line = run.shown.get("line") if run.shown is not None else None
            self._failed.append(FailedRound(n, code.block.code, line if isinstance(line, int) else None))
        evaluation = with_artifacts(evaluation, result.artifacts)
        emit_artifacts(ctx, n, result.artifacts)
        ctx.add_segment(SegmentKind.EVALUATION, evaluation, tags=("error",) if error else ())
        if self.thought_mode == "inline":
            goal = stated_goal(reply.text)  # seed 001's order: Code, Evaluation, NextGoal
            if goal is not None:
                ctx.add_segment(SegmentKind.NEXT_GOAL, goal)
        ctx.state.variables = dict(result.variables)
        ctx.state.last_outcome = {
            "round": n,
            "status": result.status,
            "error": run.shown,
            "stdout": result.stdout[-2000:],
        }
        return evaluation

    async def _decide(self, code: Code, run: Execution, evaluation: str) -> Decision:
        """How the round ends the run, if it does: finish, a question, the answer variable, stuck, the last round."""
        ctx = self.ctx
        control, error, result = run.result.control, run.error, run.result
        kind = control.get("kind") if control is not None else None
        if kind == "finish":
            return Decision(
                outcome=await self._finish(control.get("answer") if control is not None else None, evaluation)
            )
        if kind == "ask_user":
            question = control.get("question") if control else None
            return Decision(outcome=Outcome(status="paused", reason="ask_user", answer=question))
        name = ctx.deps.spec.codeact.answer_variable
        signature = f"{error['type']}:{error['message']}" if error else None
        if error is None and name is not None and name in run.changed:
            confirmed = await confirm_answer(ctx, name=name, stdout=result.stdout)
            if confirmed.found:
                finished = await self._finish(confirmed.answer, evaluation, reason="answer_variable")
                return Decision(outcome=finished, step=confirmed)
            # one step a round: the model said this is not the answer yet
            return Decision(outcome=self._stuck_check(code=code.block.code, error=signature), step=confirmed)
        outcome, step = await self._conclude(code=code.block.code, error=signature)
        return Decision(outcome=outcome, step=step)

    async def _repeated(self, clock: _Clock, reply: Reply, code: Code) -> Outcome | None:
        """A reply repeating the last successful round's code: not run again; the final-answer step instead."""
        ctx = self.ctx
        ctx.add_segment(SegmentKind.CODE, code.block.code)
        step = await final_answer(ctx, trigger="repeat")
        outcome: Outcome | None
        if step.found:
            outcome = Outcome(status="completed", reason="final_answer", answer=step.answer)
        else:
            ctx.add_segment(SegmentKind.EVALUATION, prompts.render("repeat_not_run.j2"), tags=("repeat",))
            outcome = self._stuck_check(code=code.block.code, error=None)
        await self._record(clock, reply, reply_text=reply.text, status="repeated", step=step)
        return outcome

    async def _conclude(self, *, code: str | None, error: str | None) -> tuple[Outcome | None, FinishStep | None]:
        """The end of a round that did not finish: stuck, the last round, or go on.

        A stuck run and a last round without an answer take the final-answer step first (when
        ``workflow.codeact.finalAnswer`` is on); its answer completes the run.
        """
        stuck = self._stuck_check(code=code, error=error)
        trigger: Trigger | None = "stuck" if stuck is not None else None
        if trigger is None and self.ctx.state.round >= self._last_round:
            trigger = "max_turns"
        if trigger is None or not self.ctx.deps.spec.codeact.final_answer:
            return stuck, None
        step = await final_answer(self.ctx, trigger=trigger)
        if step.found:
            return Outcome(status="completed", reason="final_answer", answer=step.answer), step
        return stuck, step

    def _from_record(self) -> list[str]:
        """The round's calls answered from the interrupted round's record (engine.calls.FromRecord), for the model."""
        answered, self.ctx.state.from_record = self.ctx.state.from_record, []
        return from_record_notes(answered) if answered else []

    def _error_again(self, error: dict[str, object] | None) -> list[str]:
        """The notes for an error: how to call an operation whose call was refused, and the same error again.

        A toolkit call the argument check refused gets the operation's signature and one correct call
        (``ToolkitBridge.call_help``) at once, the first time too: the 1.5B model sent
        ``dna.transcribe_dna_to_mrna(dna_sequence=4)`` three rounds running, reading only the error.
        An error the round before also ended with (same type and message) gets ``prompts/same_error.j2``:
        real models send the failing step again unchanged (the 1.5B model wrote ``hotels[0]["price"]``
        seven rounds in a row although the KeyError showed the dict's keys). A timeout may pass, so it
        gets no such note.
        """
        if error is None:
            return []
        bridge = self.ctx.deps.bridge
        help_note = bridge.call_help(error) if bridge is not None else None
        notes = [help_note] if help_note else []
        last = self.ctx.state.last_outcome
        before = last.get("error") if last is not None else None
        if not isinstance(before, dict) or "Timeout" in str(error.get("type")):
            return notes
        if (before.get("type"), before.get("message")) != (error.get("type"), error.get("message")):
            return notes
        return [*notes, prompts.render("same_error.j2", call=help_note is not None).strip()]

    def _prompt(self, purpose: str, goal: str | None) -> Prompt:
        """The ``purpose`` prompt of the round as things are now (the toolkits hooks injected put in force first)."""
        ctx = self.ctx
        if ctx.caller.apply_tools() and ctx.deps.bridge is not None:
            # An injected toolkit: its stubs in the prompt, and a runtime that has it (runtimes get their
            # toolkits when they connect; the next round restores the variables from the store's copy).
            self.builder = SegmentBuilder(self.builder.config, stubs=ctx.deps.bridge.stubs())
            self.sandbox.restart()
        return self.builder.build(
            purpose, ctx.state.history, variables=describe_variables(ctx.state.variables), goal=goal
        )

    def _repeats_success(self, code: str, last: str) -> bool:
        """True when ``code`` is the code that ran last and it ran without error (no round ran since).

        Real models that printed the answer but did not finish send the same code again (and again):
        it runs (code may repeat on purpose: a counter, a poll), and the Evaluation says what to do.
        """
        outcome = self.ctx.state.last_outcome
        return outcome is not None and outcome.get("status") == "ok" and code.strip() == last.strip()

    def _add_thought(self, text: str, *, quiet: bool = False, goal: bool = True) -> None:
        try:
            parts = parse_thought(text, round_index=self.ctx.state.round)
        except ThoughtParseError:
            if quiet:
                return
            parts = [Segment(kind=SegmentKind.THOUGHT, content=prompts.render("no_thought.j2").rstrip("\n"))]
        for part in parts:
            if goal or part.kind != SegmentKind.NEXT_GOAL:
                self.ctx.add_segment(part.kind, part.content)

    def _stuck_check(self, *, code: str | None, error: str | None) -> Outcome | None:
        self._codes.append(code.strip() if code is not None else "")
        self._errors.append(error or "")
        for seen, what in ((self._codes, "code"), (self._errors, "error")):
            if len(seen) == self.max_repeats and seen[0] and all(item == seen[0] for item in seen):
                return Outcome(
                    status="failed",
                    reason="stuck",
                    error=ErrorInfo(
                        code="run.stuck",
                        message=f"the model produced the same {what} {self.max_repeats} times in a row; "
                        "stopping (raise workflow.codeact.maxRepeats or rephrase the task)",
                    ),
                )
        return None

    async def _finish(self, answer: object, evaluation: str, *, reason: str = "finished") -> Outcome | None:
        spec = self.ctx.deps.spec.codeact
        if not spec.self_check or self._self_checks >= spec.max_self_checks:
            return Outcome(status="completed", reason=reason, answer=answer)
        self._self_checks += 1
        shown = answer if isinstance(answer, str) else python_repr(answer)  # ('A', 4), never the codec's tags
        text = prompts.render("self_check.j2", task=self.ctx.deps.input, answer=shown, evaluation=evaluation)
        reply = await self.ctx.caller.call_model("utility", messages=({"role": "user", "content": text},))
        verdict = reply.text.strip()
        if verdict.upper().startswith("DONE"):
            return Outcome(status="completed", reason="self_check", answer=answer)
        reasons = verdict.split("\n", 1)[1].strip() if "\n" in verdict else verdict
        text = prompts.render("self_check_not_done.j2", reasons=reasons).rstrip("\n")
        self.ctx.add_segment(SegmentKind.EVALUATION, text, tags=("self_check",))
        return None

    async def _record(
        self,
        clock: _Clock,
        reply: Reply,
        *,
        status: str,
        step: FinishStep | None,
        reply_text: str | None = None,
        code: str | None = None,
        parse_error: str | None = None,
        timings: dict[str, float] | None = None,
        result: ExecutionResult | None = None,
        error: dict[str, object] | None = None,
    ) -> None:
        """Write the round (``Recorder.record_round``): what was sent and replied, what ran, how it ended."""
        await self.ctx.recorder.record_round(
            started=clock.started,
            t0=clock.t0,
            reply=reply.first if reply_text is None else reply_text,
            prompt_hash=prompt_hash(reply.prompt),
            segment_ids=tuple(s.id for s in self.ctx.state.history.segments),
            code=code,
            parse_error=parse_error,
            stdout=result.stdout if result is not None else "",
            stderr=result.stderr if result is not None else "",
            error=error,
            status=status,
            control=result.control if result is not None else None,
            uncaptured=tuple(u.to_json() for u in result.uncaptured) if result is not None else (),
            nondeterminism=(result.nondeterminism or {}) if result is not None else {},
            artifacts=tuple(a.to_json(with_data=True) for a in result.artifacts) if result is not None else (),
            usage=_with_step(reply.usage, step),
            timings=reply.timings if timings is None else timings,
            finish=step.to_json() if step is not None else {},
        )


def _with_step(usage: dict[str, object], step: FinishStep | None) -> dict[str, object]:
    """The round's usage with the finishing step's model call (under ``finish``) when one ran."""
    return usage if step is None else {**usage, "finish": dict(step.usage)}


_DEFAULT_WINDOW = 32_768


def _live_note(reason: str) -> str:
    """What the model is told of a value the store did not keep but this run's sandbox still holds."""
    return prompts.render("live_value.j2", shown=reason.endswith(LIVE_REPR_NOTE))  # a resume gets the text


def _execution(
    result: ExecutionResult, before: Mapping[str, object], frame: CodeFrame | None, middle: str, duration_s: float
) -> Execution:
    """The round's execution: the variables it changed and removed, its error for events and for the record."""
    changed = tuple(sorted(k for k, v in result.variables.items() if before.get(k, _MISSING) != v))
    removed = tuple(sorted(set(before) - set(result.variables)))
    error = result.error.to_json() if result.error is not None else None
    shown = recorded = error
    if error is not None and frame is not None and isinstance(error.get("line"), int):
        # Events speak in the model's lines; the record keeps the program's (replay compares it)
        # and adds the model's, so `sessions show` says the same line as the terminal.
        model_line = frame.map_line(error["line"], middle)
        source = _source_line(middle, model_line)
        shown = {**error, "line": model_line, "program_line": error["line"], "source": source}
        recorded = {**error, "model_line": model_line, "source": source}
    return Execution(
        result=result,
        changed=changed,
        removed=removed,
        error=error,
        shown=shown,
        recorded=recorded,
        duration_s=duration_s,
    )


def _source_line(code: str, line: int | None) -> str:
    lines = code.split("\n")
    return lines[line - 1].strip()[:160] if line is not None and 0 < line <= len(lines) else ""


class _ModelCounter:
    """``segments.TokenCounter`` over the model client's counter (litellm, with its own fallback)."""

    def __init__(self, ctx: RunContext) -> None:
        self._model = ctx.deps.model

    def count(self, text: str) -> int:
        return self._model.count_tokens(text, purpose="code")


class _Missing:
    pass


_MISSING = _Missing()
