"""One snapshot test per prompt template (segments' templates), and the TemplateError contract."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from codeact import prompts
from codeact.prompts import TemplateError
from codeact.segments import FIM_FAMILIES, Experience
from tests.segments._snapshot import check_snapshot

SNAPSHOTS = Path(__file__).parent / "snapshots"
# Templates rendered by other packages (toolkits) are tested there.
OWNED_ELSEWHERE = {"toolkit.j2", "system_parse.j2", "system_think.j2"} | {
    "flow_merge.j2",
    "flow_routing.j2",
    "flow_routing_retry.j2",
    "flow_step_input.j2",  # tests/flow/test_prompts.py
}

OWNED_ELSEWHERE = OWNED_ELSEWHERE | {"runner_input.j2"}  # tests/runner/test_entities.py
OWNED_ELSEWHERE = OWNED_ELSEWHERE | {"call_help.j2"}  # tests/toolkits/test_call_help.py

QWEN = FIM_FAMILIES["qwen"]
SECTION_VARS: dict[str, Any] = {
    "platform": "the Example Corp DevOps platform",
    "role": "You are a DevOps assistant.",
    "developer": "Prefer small steps.",
    "variables": {"language": "English"},
    "stubs": 'class demo:\n    async def ping(self) -> str:\n        """Ping."""',
    "tokens": QWEN,
    "protocol": "chat",
    "purpose": "code",
    "next_goal": False,
    "layout": "frame",
    "knowledge": ["A change belongs to one branch."],
    "experiences": [Experience(task="Ping the demo", code="print(await demo.ping())", note="one call is enough")],
}

CASES = [
    pytest.param("system_platform.j2", SECTION_VARS, id="system_platform"),
    pytest.param("system_role.j2", SECTION_VARS, id="system_role"),
    pytest.param("system_role.j2", {**SECTION_VARS, "role": ""}, id="system_role-default"),
    pytest.param("system_mechanism.j2", SECTION_VARS, id="system_mechanism"),
    pytest.param("system_input_format.j2", SECTION_VARS, id="system_input_format"),
    pytest.param("system_output_code.j2", SECTION_VARS, id="system_output_code"),
    pytest.param(
        "system_output_code.j2", {**SECTION_VARS, "tokens": FIM_FAMILIES["codestral"]}, id="system_output_code-spm"
    ),
    pytest.param(
        "system_output_code.j2", {**SECTION_VARS, "protocol": "completion"}, id="system_output_code-completion"
    ),
    pytest.param("system_output_code.j2", {**SECTION_VARS, "next_goal": True}, id="system_output_code-next-goal"),
    pytest.param(
        "system_output_code.j2",
        {**SECTION_VARS, "protocol": "completion", "next_goal": True},
        id="system_output_code-completion-next-goal",
    ),
    pytest.param("system_output_code.j2", {**SECTION_VARS, "layout": "turns"}, id="system_output_code-turns"),
    pytest.param(
        "system_output_code.j2",
        {**SECTION_VARS, "layout": "turns", "next_goal": True},
        id="system_output_code-turns-goal",
    ),
    pytest.param("turns_cue.j2", {"header": "", "ran": False, "toolkits": ["system", "demo"]}, id="turns_cue-first"),
    pytest.param(
        "turns_cue.j2",
        {
            "header": "# Variables from earlier rounds (defined; reuse, do not redefine):\n#   n: int = 3",
            "ran": True,
            "task": "How many vowels are in 'banana'?",
            "toolkits": ["system", "demo"],
        },
        id="turns_cue-after-a-round",
    ),
    pytest.param("system_output_thought.j2", SECTION_VARS, id="system_output_thought"),
    pytest.param("system_output_reflect.j2", SECTION_VARS, id="system_output_reflect"),
    pytest.param("system_toolkits.j2", SECTION_VARS, id="system_toolkits"),
    pytest.param("system_toolkits.j2", {**SECTION_VARS, "stubs": ""}, id="system_toolkits-none"),
    pytest.param("system_principles.j2", SECTION_VARS, id="system_principles"),
    pytest.param("system_common_errors.j2", SECTION_VARS, id="system_common_errors"),
    pytest.param("system_developer.j2", SECTION_VARS, id="system_developer"),
    pytest.param("system_knowledge.j2", SECTION_VARS, id="system_knowledge"),
    pytest.param(  # a chunk of several lines (blueprint knowledge): continuation lines stay inside its item
        "system_knowledge.j2",
        {**SECTION_VARS, "knowledge": ["(Refunds) Refunds over 500 EUR need a manager.\nAsk in #support.", "Short."]},
        id="system_knowledge-multiline",
    ),
    pytest.param("system_experience.j2", SECTION_VARS, id="system_experience"),
    pytest.param(
        "memory_distill.j2",
        {
            "task": "Sum the prices of apple and banana",
            "outcome": "completed (finished)",
            "answer": "3",
            "rounds": [
                {"index": 1, "code": "total = prices['apple'] + prices['banana']", "error": "KeyError: 'banana'"},
                {"index": 2, "code": "total = sum(prices.get(k, 0) for k in keys)", "error": ""},
            ],
        },
        id="memory_distill",
    ),
    pytest.param("request_thought.j2", {"round_index": 3}, id="request_thought"),
    pytest.param("request_reflect.j2", {"round_index": 3}, id="request_reflect"),
    pytest.param(
        "frame_prefix.j2",
        {"goal": "ping", "imports": ["import json"], "variables": [{"name": "x", "type": "int", "repr": "1"}]},
        id="frame_prefix",
    ),
    pytest.param("frame_suffix.j2", {"reraise": True}, id="frame_suffix"),
    pytest.param(
        "fim_chat.j2",
        {
            "prefix": "try:\n",
            "hole": "    # <your code for this round>",
            "suffix": "except Exception:\n    pass\n",
            "toolkits": ["system", "devops"],
        },
        id="fim_chat",
    ),
    pytest.param("completion.j2", {"system": "## Role\nAssistant.\n", "quote": "'''"}, id="completion"),
    pytest.param(
        "completion_history.j2",
        {
            "segments": [
                {"code": False, "label": "User", "lines": ["ping it", "twice"]},
                {"code": True, "label": "Python", "lines": ["print(await demo.ping())"]},
            ]
        },
        id="completion_history",
    ),
    pytest.param(
        "compaction_request.j2",
        {"first": 1, "last": 3, "preserve": ["instructions", "test_results"], "transcript": "Thought: a"},
        id="compaction_request",
    ),
    pytest.param(
        "compaction_summary.j2",
        {"first": 1, "last": 2, "categories": [{"title": "Changed files", "items": ["a.py"]}], "steps": ["round 1: x"]},
        id="compaction_summary",
    ),
    pytest.param(
        "evaluation.j2",
        {
            "error": {"type": "KeyError", "message": "'title'"},
            "line": 2,
            "source": "print(r['title'])",
            "stdout": "1",
            "stderr": "",
            "changed": ["r"],
            "uncaptured": ["conn"],
            "notes": [],
        },
        id="evaluation",
    ),
    pytest.param(
        "evaluation.j2",
        {
            "error": None,
            "line": None,
            "source": "",
            "stdout": "3",
            "stderr": "",
            "changed": ["x"],
            "uncaptured": [],
            "notes": ["your reply held 2 code blocks; they ran as one program, in order"],
        },
        id="evaluation-notes",
    ),
    pytest.param("reply_error.j2", {"reason": "truncated", "continued": 2, "looped": None}, id="reply_error-truncated"),
    pytest.param(
        "reply_error.j2",
        {"reason": "truncated", "continued": 0, "looped": "await cipher.count_letters(text=t, letters='aeiou')"},
        id="reply_error-looped",
    ),
    pytest.param("reply_continue.j2", {}, id="reply_continue"),
    pytest.param(
        "artifacts.j2",
        {
            "kept": [{"name": "chart.png", "mime": "image/png", "size": 20480}],
            "refused": [{"name": "big.csv", "reason": "9000000 bytes is over the 2097152-byte limit per file"}],
        },
        id="artifacts",
    ),
    pytest.param(
        "input_files.j2",
        {
            "files": [
                {"name": "sales.csv", "mime": "text/csv", "size": 1204, "image": False},
                {"name": "image-1.png", "mime": "image/png", "size": 20480, "image": True},
            ],
            "more": 2,
        },
        id="input_files",
    ),
    pytest.param("reply_error.j2", {"reason": "empty"}, id="reply_error-empty"),
    pytest.param(
        "reply_error.j2",
        {"reason": "syntax", "message": "invalid syntax", "line": 1, "text": "x = = 1"},
        id="reply_error-syntax",
    ),
    pytest.param(
        "interrupted_round.j2",
        {
            "round": 3,
            "reason": "Ctrl-C or a cancel stopped the run",
            "calls": [
                {"toolkit": "inventory", "operation": "add_item", "arguments": 'name="apple"', "outcome": '"ok"'}
            ],
            "in_flight": [],
            "not_performed": [],
        },
        id="interrupted_round",
    ),
    pytest.param(
        "interrupted_round.j2",
        {"round": 2, "reason": "its run's process vm:42 died", "calls": [], "in_flight": [], "not_performed": []},
        id="interrupted_round-none",
    ),
    pytest.param(
        "interrupted_round.j2",
        {
            "round": 1,
            "reason": "its run's process vm:42 died",
            "calls": [
                {
                    "toolkit": "shop",
                    "operation": "charge",
                    "arguments": "amount=5",
                    "outcome": '"ch-1"',
                    "call_id": "S:1:0",
                }
            ],
            "in_flight": [
                {"toolkit": "shop", "operation": "ship", "arguments": 'order="o-1"', "outcome": "", "call_id": "S:1:1"}
            ],
            "not_performed": [],
        },
        id="interrupted_round-in_flight",
    ),
    pytest.param(
        "interrupted_round.j2",
        {
            "round": 1,
            "reason": "Ctrl-C or a cancel stopped the run",
            "calls": [{"toolkit": "ledger", "operation": "add", "arguments": 'name="plum"', "outcome": '"added plum"'}],
            "in_flight": [],
            "not_performed": [
                {
                    "toolkit": "ledger",
                    "operation": "publish",
                    "arguments": "",
                    "why": "it was waiting for the user's approval when the round stopped",
                }
            ],
        },
        id="interrupted_round-not_performed",
    ),
    pytest.param(
        "from_record.j2",
        {
            "round": 1,
            "calls": [{"toolkit": "ledger", "operation": "add", "arguments": 'name="plum"', "outcome": '"added plum"'}],
        },
        id="from_record",
    ),
    pytest.param(
        "from_record.j2",
        {
            "round": 2,
            "calls": [
                {"toolkit": "ledger", "operation": "add", "arguments": 'name="plum"', "outcome": '"added plum"'},
                {"toolkit": "devops", "operation": "deploy_app", "arguments": 'version="2.4.0"', "outcome": "{...}"},
            ],
        },
        id="from_record-two",
    ),
    pytest.param(
        "queue_continue.j2",
        {"toolkit": "ledger", "operation": "add", "verdict": "approved", "reason": "fine"},
        id="queue_continue",
    ),
    pytest.param(
        "queue_continue.j2",
        {"toolkit": "ledger", "operation": "add", "verdict": "denied", "reason": ""},
        id="queue_continue-denied",
    ),
    pytest.param("same_error.j2", {"call": False}, id="same_error"),
    pytest.param("same_error.j2", {"call": True}, id="same_error-call"),
    pytest.param(
        "self_check.j2",
        {"task": "List open login requirements", "answer": "R-1, R-4", "evaluation": "Ran without error."},
        id="self_check",
    ),
    pytest.param(
        "final_answer.j2",
        {"task": "Shortest of ATG, GC?", "outputs": "Output:\n{'ATG': 3, 'GC': 2}", "variables": "lengths = {...}"},
        id="final_answer",
    ),
    pytest.param(
        "final_answer.j2",
        {"task": "Shortest of ATG, GC?", "outputs": "(nothing)", "variables": ""},
        id="final_answer-bare",
    ),
    pytest.param(
        "answer_confirm.j2",
        {"task": "Shortest of ATG, GC?", "name": "answer", "value": "2", "stdout": ""},
        id="answer_confirm",
    ),
    pytest.param(
        "answer_confirm.j2",
        {"task": "Shortest of ATG, GC?", "name": "answer", "value": "2", "stdout": "lengths: [3, 2]"},
        id="answer_confirm-printed",
    ),
    pytest.param("repeat_not_run.j2", {}, id="repeat_not_run"),
    pytest.param("repeat_ran.j2", {}, id="repeat_ran"),
    pytest.param("self_check_not_done.j2", {"reasons": "the total is missing"}, id="self_check_not_done"),
    pytest.param("self_check_not_done.j2", {"reasons": ""}, id="self_check_not_done-no-reason"),
    pytest.param("live_value.j2", {"shown": False}, id="live_value"),
    pytest.param("live_value.j2", {"shown": True}, id="live_value-shown"),
    pytest.param(
        "tool_calls_broken.j2", {"names": "'shop__buy'", "bad": (), "ended": False}, id="tool_calls_broken-cut"
    ),
    pytest.param(
        "tool_calls_broken.j2",
        {"names": "", "bad": [("'shop__buy'", "'{\"n\": 1'"), ("'(no name)'", "'[1]'")], "ended": True},
        id="tool_calls_broken-bad",
    ),
    pytest.param("tool_calls_not_run.j2", {"broken": "your reply was cut off"}, id="tool_calls_not_run"),
    pytest.param("knowledge_domain.j2", {"text": "[policy.md] Refunds take 5 days."}, id="knowledge_domain"),
    pytest.param("no_thought.j2", {}, id="no_thought"),
    pytest.param("unassigned_name.j2", {"name": "x", "line": 2, "round": 3, "failed": 1}, id="unassigned_name"),
    pytest.param("output_schema.j2", {"schema": '{\n  "type": "object"\n}'}, id="output_schema"),
    pytest.param(
        "output_invalid.j2",
        {
            "problem": "at $.price: -3 is less than the minimum of 0",
            "answer": '{"sku": "A-1", "price": -3}',
            "schema": '{\n  "type": "object"\n}',
        },
        id="output_invalid",
    ),
]


@pytest.mark.parametrize(("name", "variables"), CASES)
def test_template_snapshot(request: pytest.FixtureRequest, name: str, variables: dict[str, Any]) -> None:
    text = prompts.render(name, **variables)
    case_id = request.node.callspec.id
    check_snapshot(SNAPSHOTS, f"{case_id}.txt", text)


def test_every_segments_template_has_a_case() -> None:
    covered = {case.values[0] for case in CASES}
    mine = set(prompts.template_names()) - OWNED_ELSEWHERE
    assert sorted(mine - covered) == []


def test_missing_variable_names_template_and_variable() -> None:
    with pytest.raises(TemplateError) as caught:
        prompts.render("request_thought.j2")
    assert (
        str(caught.value) == "template 'request_thought.j2' uses undefined variable 'round_index': pass it to render()"
    )
    assert (caught.value.template, caught.value.variable, caught.value.code) == (
        "request_thought.j2",
        "round_index",
        "prompt.template",
    )


def test_missing_attribute_names_it() -> None:
    with pytest.raises(TemplateError) as caught:
        prompts.render("frame_prefix.j2", goal="", imports=[], variables=[{"name": "x"}])
    assert str(caught.value) == "template 'frame_prefix.j2' uses undefined variable 'type': pass it to render()"
    assert caught.value.variable == "type"


def test_missing_template() -> None:
    with pytest.raises(TemplateError) as caught:
        prompts.render("nope.j2")
    assert str(caught.value) == (
        "template 'nope.j2' does not exist in the prompts package (missing: 'nope.j2'); "
        "prompts.template_names() lists the shipped templates"
    )
