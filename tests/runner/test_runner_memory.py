"""The protocol context's actor is the memory user: an actor's later conversation sees its earlier one."""

from __future__ import annotations

from tests.runner.conftest import BLUEPRINT, MakeRunner, code, collect, context, sent, types

MEMORY_BLUEPRINT = BLUEPRINT.replace(
    'workflow: {{mode: codeact, maxTurns: 6, codeact: {{thought: "off"}}}}',
    'workflow: {{mode: codeact, maxTurns: 6, codeact: {{thought: "off"}}}}\nsession:\n'
    "  memory: {{enabled: true, scope: user}}",
)


async def test_an_actors_second_conversation_sees_the_first_ones_summary(make_runner: MakeRunner) -> None:
    assert "memory:" in MEMORY_BLUEPRINT
    runner = make_runner(
        [
            code("n = await inventory.stock(sku='A-1')\nsystem.finish(f'A-1: {n} units in stock.')", "I check."),
            code("system.finish('I can reserve them for you.')", "Known from before."),
            code("system.finish('Hello.')"),
        ],
        blueprint=MEMORY_BLUEPRINT,
    )
    first = await collect(runner, context("How many A-1 are in stock?", run_id="m-1", conversation="chat-a"))
    assert types(first)[-1] == "run.completed"
    second = await collect(runner, context("Can I reserve the A-1 units?", run_id="m-2", conversation="chat-b"))
    assert types(second)[-1] == "run.completed"
    prompt = sent(runner)
    assert "Asked: How many A-1 are in stock? Answered: A-1: 3 units in stock." in prompt, prompt

    other = context("Say hello", run_id="m-3", conversation="chat-c")
    other = other.model_copy(update={"actor": other.actor.model_copy(update={"actor_id": "u-8"})})  # type: ignore[union-attr]
    assert types(await collect(runner, other))[-1] == "run.completed"
    assert "A-1" not in sent(runner)  # another actor sees none of u-7's history
