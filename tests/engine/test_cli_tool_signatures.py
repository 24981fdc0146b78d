"""Toolkit operations as wrappers of real libraries write them, through ``codeact run`` (issue 39).

Variadic and keyword-only operations are called like Python functions from the model's code and by
name from react's function calling; the model reads their bounds in the stubs; a call refused by the
argument check gets the operation's signature and a correct call in the Evaluation. The model is the
local OpenAI-compatible server, scripted with replies written the way a small model writes them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.engine.cli_support import cli
from tests.engine.openai_server import OpenAIServer, Reply, ToolCallReply

pytestmark = pytest.mark.usefixtures("cli_home")

TOOLKITS = Path(__file__).resolve().parents[1] / "toolkits" / "signatures_toolkit.py"
CODEACT = """\
version: codeact.agent/v1
extend: codeact-base
id: signatures
model: {provider: openai-compatible, model: openai/test-model}
workflow: {maxTurns: 4, codeact: {thought: 'off'}}
toolkits: [{ref: stats}, {ref: dna}]
"""
REACT = """\
version: codeact.agent/v1
id: signatures-react
instructions:
  system: Use the tools, then answer in one sentence.
toolkits: [{ref: system}, {ref: stats}, {ref: dna}]  # every toolkit --toolkit loads is granted
workflow: {mode: react, maxTurns: 4}
"""


def _run(tmp_path: Path, server: OpenAIServer, blueprint: str, task: str, *flags: str) -> tuple[int, str, str]:
    path = tmp_path / "agent.yaml"
    path.write_text(blueprint)
    return cli(
        "run", str(path), "--input", task, "--store", f"sqlite:///{tmp_path / 's.db'}", "--session", "S",
        "--base-url", server.base_url, "--model", "openai/test-model", "--isolation", "process",
        "--toolkit", f"{TOOLKITS}:Stats", "--toolkit", f"{TOOLKITS}:Dna", *flags,
    )  # fmt: skip


def _rounds(tmp_path: Path) -> list[dict[str, Any]]:
    rc, out, err = cli("sessions", "show", "S", "--store", f"sqlite:///{tmp_path / 's.db'}", "--json")
    assert rc == 0, err
    found: list[dict[str, Any]] = json.loads(out)["rounds"]
    return found


def _posts(server: OpenAIServer) -> list[dict[str, Any]]:
    return [r.body for r in server.requests if r.method == "POST"]


def test_variadic_and_keyword_only_operations_are_called_like_python_functions(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    calls = """Let me find the lowest price and book.
```python
low = await stats.minimum_value(7, 3, 9)
booking = await stats.book_hotel("Lisbon", "quiet", "late checkout", nights=2, breakfast=True)
gc = await dna.gc_content("GGCA", window=2)
print(low, booking["preferences"], booking["extras"], gc)
```"""
    wrong_item = '```python\nlow = await stats.minimum_value(4, "two")\n```'
    finish = "```python\nawait system.finish(answer=low)\n```"
    openai_server.push(calls, wrong_item, finish)
    rc, out, err = _run(tmp_path, openai_server, CODEACT, "Lowest of 7, 3 and 9, then book Lisbon")
    assert rc == 0, err
    assert out.strip() == "3"
    rounds = _rounds(tmp_path)
    assert rounds[0]["stdout"] == "3 ['quiet', 'late checkout'] {'breakfast': True} 1.0\n"
    sent = [(c["operation"], c["arguments"]) for c in rounds[0]["calls"]]
    assert sent == [
        ("minimum_value", {"args": [7, 3, 9]}),
        ("book_hotel", {"location": "Lisbon", "nights": 2, "preferences": ["quiet", "late checkout"],
                        "extras": {"breakfast": True}}),
        ("gc_content", {"seq": "GGCA", "window": 2}),
    ]  # fmt: skip
    # each item of *args is checked against its type
    assert rounds[1]["error"]["message"].startswith(
        "invalid arguments for stats.minimum_value(): args.1: Input should be a valid integer"
    )
    system = _posts(openai_server)[0]["messages"][0]["content"]
    assert "async def minimum_value(self, *args: int) -> int:" in system
    assert (
        "async def book_hotel(self, location: str, *preferences: str, nights: int = 1, **extras: bool) "
        "-> dict[str, Any]:" in system
    )
    assert "async def gc_content(self, seq: str, *, window: int = 0) -> float:" in system


def test_react_calls_a_variadic_operation_with_the_list_under_its_name(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    call = Reply(tool_calls=(ToolCallReply(id="c1", name="stats__minimum_value", arguments={"args": [7, 3, 9]}),))
    openai_server.push(call, "The lowest is 3.")
    rc, out, err = _run(tmp_path, openai_server, REACT, "Lowest of 7, 3 and 9?")
    assert rc == 0, err
    assert out.strip() == "The lowest is 3."
    first, second = _posts(openai_server)
    tool = next(t for t in first["tools"] if t["function"]["name"] == "stats__minimum_value")
    assert tool["function"]["parameters"]["properties"]["args"] == {
        "description": "The numbers.",
        "items": {"type": "integer"},
        "type": "array",
    }
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "3"}


def test_a_refused_call_gets_the_signature_and_a_correct_call_and_a_repeat_is_told_to_write_it(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    """The 1.5B model sent `dna.transcribe_dna_to_mrna(dna_sequence=4)` three rounds running (issue 39)."""
    wrong = """I will transcribe the sequence.
```python
# Variables from earlier rounds (defined; reuse, do not redefine):
#   (none yet)

mrna = await dna.transcribe_dna_to_mrna(dna_sequence=4)
print(mrna)
```"""
    again = "```python\nmrna = await dna.transcribe_dna_to_mrna(dna_sequence=4)\nprint(mrna)\n```"
    right = (
        "```python\nmrna = await dna.transcribe_dna_to_mrna(dna_sequence='ATGGC')\n"
        "await system.finish(answer=mrna)\n```"
    )
    openai_server.push(wrong, again, right)
    rc, out, err = _run(tmp_path, openai_server, CODEACT, "Transcribe ATGGC to mRNA")
    assert rc == 0, err
    assert out.strip() == "AUGGC"
    assert [r["status"] for r in _rounds(tmp_path)] == ["error", "error", "ok"]
    second, third = (json.dumps(p["messages"]) for p in _posts(openai_server)[1:])
    help_note = json.dumps(
        "Note: `dna.transcribe_dna_to_mrna` is `dna.transcribe_dna_to_mrna(dna_sequence: str) -> str`. A correct "
        'call, from its docstring: `await dna.transcribe_dna_to_mrna(dna_sequence="ATGC")`; pass the arguments '
        "with the types shown."
    )[1:-1]
    assert help_note in second  # at the first refusal already
    assert "the same error as in the round before" not in second
    assert help_note in third
    assert "Do not repeat it: write the call as the correct call above does, or take another way." in third


def test_bounds_are_in_the_stub_and_a_refused_call_gets_a_call_inside_them(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    over = "```python\nresult = await stats.order(sku='abc', quantity=150)\nprint(result)\n```"
    inside = "```python\nawait system.finish(answer=await stats.order(sku='ABC-123', quantity=100))\n```"
    openai_server.push(over, inside)
    rc, out, err = _run(tmp_path, openai_server, CODEACT, "Order 100 of ABC-123")
    assert rc == 0, err
    assert out.strip() == "ordered 100 x ABC-123"
    first, second = _posts(openai_server)
    system = first["messages"][0]["content"]
    assert (
        "    async def order(\n"
        "        self,\n"
        "        sku: str,  # matches r'^[A-Z]{3}-\\d{3}$'\n"
        "        quantity: int,  # 1 <= quantity <= 100\n"
        "        note: str = '',  # at most 20 characters\n"
        "    ) -> str:\n"
    ) in system
    assert "    guests: int  # 1 <= guests <= 4; People in the room\n" in system
    evaluation = second["messages"][-1]["content"]
    assert (
        "Note: `stats.order` is `stats.order(sku: str, quantity: int, note: str = '') -> str` (sku: matches "
        "r'^[A-Z]{3}-\\d{3}$'; 1 <= quantity <= 100; note: at most 20 characters). A correct call: "
        "`await stats.order(sku='AAA-111', quantity=1)`; pass the arguments with the types shown." in evaluation
    )
    assert "Failed with ToolError: invalid arguments for stats.order(): sku: String should match pattern" in evaluation


def test_a_tuple_and_a_date_read_as_python_in_the_prompt_the_cli_and_sessions_show(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    """The codec's ``{"$type": "tuple", "v": ["A", 4]}`` reached the model and the user (issue 39)."""
    keep = (
        "```python\nimport datetime\nbest = await stats.best_pair()\nwhen = datetime.date(2026, 1, 2)\nprint(best)\n```"
    )
    openai_server.push(keep, "```python\nawait system.finish(answer=best)\n```")
    rc, out, err = _run(tmp_path, openai_server, CODEACT, "The best hotel and its rating?")
    assert rc == 0, err
    assert out == '["A", 4]\n'  # the answer on stdout stays JSON, for programs
    assert "← stats.best_pair -> ('A', 4)\n" in err
    assert "→ system.finish(answer=('A', 4))\n" in err
    header = _posts(openai_server)[1]["messages"][-1]["content"]
    assert "#   best: tuple = ('A', 4)\n" in header
    assert "#   when: date = datetime.date(2026, 1, 2)\n" in header
    rc, shown, err = cli("sessions", "show", "S", "--store", f"sqlite:///{tmp_path / 's.db'}")
    assert rc == 0, err
    assert "    stats.best_pair() -> ('A', 4)\n" in shown
    assert "    + best = ('A', 4)\n" in shown
    assert "    + when = datetime.date(2026, 1, 2)\n" in shown
    assert "$type" not in shown and "$type" not in err and "$type" not in json.dumps(_posts(openai_server))


def test_react_observes_a_tuple_as_python(tmp_path: Path, openai_server: OpenAIServer) -> None:
    call = Reply(tool_calls=(ToolCallReply(id="c1", name="stats__best_pair", arguments={}),))
    openai_server.push(call, "Hotel A, rated 4.")
    rc, out, err = _run(tmp_path, openai_server, REACT, "The best hotel?")
    assert rc == 0, err
    assert _posts(openai_server)[1]["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "('A', 4)"}
