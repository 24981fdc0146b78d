"""Structured output (seed 002's ``outputSchema`` / output type): the final answer validated, repaired once, or refused.

The agents run against the local OpenAI-compatible server with a real subprocess sandbox and a SQLite
store; the replies are written as models write them (prose around the code, an answer of the wrong
shape, JSON given as text).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from codeact import Agent
from codeact.engine import CodeactError
from tests.engine.openai_server import OpenAIServer

pytestmark = pytest.mark.usefixtures("cli_home")

CODEACT = str(Path(sys.executable).parent / "codeact")
BLUEPRINT = """\
version: codeact.agent/v1
extend: codeact-base
id: pricing
workflow:
  maxTurns: 3
  codeact:
    thought: inline
"""
WITH_SCHEMA = (
    BLUEPRINT
    + """\
outputSchema:
  type: object
  required: [sku, price]
  properties:
    sku: {type: string}
    price: {type: number, minimum: 0}
"""
)


class Quote(BaseModel):
    sku: str
    price: float


def make_agent(tmp_path: Path, server: OpenAIServer, text: str = BLUEPRINT, **kwargs: Any) -> Agent:
    path = tmp_path / "agent.yaml"
    path.write_text(text)
    return Agent.from_blueprint(
        path, model="openai/test", base_url=server.base_url, store=f"sqlite:///{tmp_path / 's.db'}", **kwargs
    )


def sent(server: OpenAIServer, index: int = -1) -> str:
    body = server.requests[index].body
    return "\n".join(str(m.get("content")) for m in body.get("messages", ()))


async def test_a_valid_answer_passes_and_the_model_is_shown_the_schema(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.push(
        "Thought: the price list says A-1 costs 4.5.\n"
        '```python\nquote = {"sku": "A-1", "price": 4.5}\nsystem.finish(quote)\n```\nDone.'
    )
    async with make_agent(tmp_path, openai_server, text=WITH_SCHEMA) as agent:
        result = await agent.invoke("Quote A-1.")
    assert (result.status, result.answer, result.rounds) == ("completed", {"sku": "A-1", "price": 4.5}, 1)
    prompt = sent(openai_server)
    assert "The final answer must be a JSON value matching this JSON Schema:" in prompt
    assert '"required": [\n    "sku",\n    "price"\n  ]' in prompt


async def test_an_invalid_answer_is_repaired_in_one_round_into_the_pydantic_model(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.push(
        'Thought: I will give the price as text.\n```python\nsystem.finish(\'{"sku": "A-1", "price": "cheap"}\')\n```',
        "Thought: the price must be a number; A-1 costs 4.5.\n"
        '```python\nsystem.finish(\'```json\\n{"sku": "A-1", "price": 4.5}\\n```\')\n```',
    )
    async with make_agent(tmp_path, openai_server, output_type=Quote) as agent:
        result = await agent.invoke("Quote A-1.")
        segments = await agent.store.segments(result.session_id)
    assert result.status == "completed" and result.rounds == 2
    assert isinstance(result.answer, Quote) and result.answer == Quote(sku="A-1", price=4.5)
    repair = sent(openai_server)
    assert "Your final answer was not accepted: it does not match the required output schema." in repair
    assert "Problem: at $.price: Input should be a valid number, unable to parse string as a number" in repair
    assert '"price": "cheap"' in repair
    (told,) = [s for s in segments if "output" in s["tags"] and s["kind"] == "Evaluation"]
    assert told["content"].startswith("Your final answer was not accepted")


async def test_an_answer_invalid_twice_fails_the_run_naming_the_violation(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.push(
        'Here is the quote.\n```python\nsystem.finish({"sku": "A-1"})\n```',
        'Sorry, again.\n```python\nsystem.finish({"sku": "A-1", "price": -3})\n```',
    )
    async with make_agent(tmp_path, openai_server, text=WITH_SCHEMA) as agent:
        result = await agent.invoke("Quote A-1.")
    assert (result.status, result.reason, result.rounds) == ("failed", "output.invalid", 2)
    assert result.error is not None
    assert result.error["message"] == (
        "the final answer does not match the output schema after one repair round: at $.price: -3 is less than "
        "the minimum of 0; say the answer's shape in the instructions, or loosen the schema (outputSchema / "
        "output_type)"
    )
    assert "Problem: at $: 'price' is a required property" in sent(openai_server)


async def test_a_react_agents_text_answer_is_checked_too(tmp_path: Path, openai_server: OpenAIServer) -> None:
    react = "version: codeact.agent/v1\nid: pricing\nworkflow: {mode: react, maxTurns: 2}\n"
    openai_server.push("The quote: A-1 for 4.5 euros.", 'Here it is:\n```json\n{"sku": "A-1", "price": 4.5}\n```')
    async with make_agent(tmp_path, openai_server, text=react, output_type=Quote.model_json_schema()) as agent:
        result = await agent.invoke("Quote A-1.")
    assert (result.status, result.answer) == ("completed", {"sku": "A-1", "price": 4.5})
    messages = openai_server.requests[-1].body["messages"]
    assert messages[-2] == {"role": "assistant", "content": "The quote: A-1 for 4.5 euros."}
    assert "Problem: it is not JSON (Expecting value: line 1 column 1 (char 0))" in messages[-1]["content"]


def test_a_schema_that_is_not_one_is_refused(tmp_path: Path, openai_server: OpenAIServer) -> None:
    with pytest.raises(CodeactError, match="output_type.type is not a valid JSON Schema") as caught:
        make_agent(tmp_path, openai_server, output_type={"type": "objekt"})
    assert caught.value.code == "output.schema.invalid"
    bad = tmp_path / "bad.yaml"
    bad.write_text(BLUEPRINT + "outputSchema: {type: 12}\n")
    env = {**os.environ, "CODEACT_HOME": str(tmp_path / "home")}
    run = subprocess.run([CODEACT, "validate", str(bad), "--json"], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 1, run.stdout + run.stderr
    (issue,) = [i for i in json.loads(run.stdout)["issues"] if i["code"] == "blueprint.outputSchema.invalid"]
    assert issue["path"] == "$.outputSchema" and "outputSchema.type is not a valid JSON Schema" in issue["message"]


def test_codeact_run_checks_the_blueprints_output_schema(tmp_path: Path, openai_server: OpenAIServer) -> None:
    openai_server.push(
        "Thought: a quick answer.\n```python\nsystem.finish('A-1 costs 4.5')\n```",
        'Thought: as JSON then.\n```python\nsystem.finish({"sku": "A-1", "price": 4.5})\n```',
    )
    agent = tmp_path / "agent.yaml"
    agent.write_text(WITH_SCHEMA)
    env = {**os.environ, "CODEACT_HOME": str(tmp_path / "home"), "OPENAI_API_KEY": "sk-test"}
    run = subprocess.run(
        [CODEACT, "run", str(agent), "--model", "openai/test", "--base-url", openai_server.base_url]
        + ["--store", f"sqlite:///{tmp_path / 's.db'}", "--session", "q1", "--json", "--input", "Quote A-1."],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    last = json.loads(run.stdout.splitlines()[-1])
    assert (last["type"], last["answer"], last["rounds"]) == ("run.completed", {"sku": "A-1", "price": 4.5}, 2)
    replay = subprocess.run(
        [CODEACT, "replay", "q1", "--store", f"sqlite:///{tmp_path / 's.db'}", "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert json.loads(replay.stdout)["ok"] is True


async def test_the_docs_example_runs(tmp_path: Path, openai_server: OpenAIServer) -> None:
    """docs/python-api.md's "Structured output" example, as written: a Quote, or the error after one repair."""
    text = (Path(__file__).parents[2] / "docs" / "python-api.md").read_text()
    section = text[text.index("## Structured output") :]
    block = section[section.index("```python\n") + len("```python\n") :]
    namespace: dict[str, Any] = {}
    exec(compile(block[: block.index("```")], "python-api.md", "exec"), namespace)  # noqa: S102 - our own docs
    (tmp_path / "agent.yaml").write_text(BLUEPRINT)  # cli_home runs the test in tmp_path
    options = {"model": "openai/test", "base_url": openai_server.base_url, "store": f"sqlite:///{tmp_path / 's.db'}"}
    openai_server.push(
        'It costs 4.5.\n```python\nsystem.finish({"sku": "A-1", "price": 4.5})\n```',
        'Thought: no price known.\n```python\nsystem.finish({"sku": "B-2"})\n```',
        'Still none.\n```python\nsystem.finish("unknown")\n```',
    )
    quote = await namespace["quote"]("A-1", **options)
    assert type(quote).__name__ == "Quote" and (quote.sku, quote.price) == ("A-1", 4.5)
    with pytest.raises(RuntimeError, match=r"after one repair round: it is not JSON"):
        await namespace["quote"]("B-2", **options)
