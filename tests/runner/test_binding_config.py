"""A host's binding ``config`` overrides the blueprint's variables before the instructions are rendered.

Issue 27 item 4: the prompt read "Talk about cats in English." beside "Write everything meant for the
user in French." because the instructions were rendered before the host's value was applied.
"""

from __future__ import annotations

from tests.runner.conftest import MakeRunner, code, collect, context, sent

CATS = """\
version: codeact.agent/v1
id: cats
model: {{provider: scripted, model: "{model}"}}
instructions:
  system: "Talk about {{{{ topic }}}} in {{{{ language }}}}."
  variables:
    topic: cats
    language: English
toolkits:  # the runner's fixture loads inventory and orders: each must be granted
  - ref: system
  - ref: inventory
  - ref: orders
workflow: {{mode: codeact, maxTurns: 3, codeact: {{thought: "off"}}}}
"""


async def test_the_hosts_config_is_in_the_rendered_prompt(make_runner: MakeRunner) -> None:
    runner = make_runner([code('system.finish("Les chats dorment beaucoup.")', "Je réponds.")], blueprint=CATS)
    results = await collect(runner, context("Tell me about cats", config={"language": "French"}))
    assert results[-1].type == "run.completed", results[-1].data
    prompt = sent(runner)
    assert "Talk about cats in French." in prompt
    assert "Write everything meant for the user in French." in prompt
    assert "English" not in prompt


async def test_without_config_the_blueprints_value_stays(make_runner: MakeRunner) -> None:
    runner = make_runner([code('system.finish("Cats sleep a lot.")')], blueprint=CATS)
    results = await collect(runner, context("Tell me about cats"))
    assert results[-1].type == "run.completed", results[-1].data
    assert "Talk about cats in English." in sent(runner)
