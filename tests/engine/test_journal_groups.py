"""How an interrupted round's journal is grouped (``recovery.journal_groups``): completed, in flight, not performed."""

from __future__ import annotations

from codeact.engine.agent.recovery import interrupted_evaluation, journal_groups
from codeact.sandbox.runtime.protocol import CANCELLED, TOOL_ERROR
from codeact.toolkits import AWAITING_APPROVAL

CANCELLED_RUNNING = {"code": CANCELLED, "name": "cancelled", "message": "the call was cancelled: the round ended"}
WAITED = {
    "code": CANCELLED,
    "name": "cancelled",
    "message": "the call did not run: the round ended while it waited for the user's approval",
    "data": AWAITING_APPROVAL,
}


def _start(sequence: int, operation: str) -> dict[str, object]:
    start = {"round": 2, "kind": "start", "session_id": "S", "call_id": f"S:2:{sequence}", "sequence": sequence}
    return start | {"toolkit": "shop", "operation": operation, "arguments": {"n": sequence}, "started_at": 1.0}


def _end(sequence: int, operation: str, **outcome: object) -> dict[str, object]:
    call = {"call_id": f"S:2:{sequence}", "sequence": sequence, "session_id": "S", "toolkit": "shop"}
    call |= {"operation": operation, "arguments": {"n": sequence}, "result": None, "error": None, **outcome}
    return {"round": 2, "kind": "call", "call": call}


def test_a_call_that_waited_for_its_approval_is_not_performed_and_one_that_ran_stays_unknown() -> None:
    entries = [
        {"round": 2, "kind": "code", "code": "...", "middle": "...", "reply": ""},
        _start(0, "charge"),
        _end(0, "charge", result="ch-1"),  # completed
        _start(1, "refund"),
        _end(1, "refund", error={"code": TOOL_ERROR, "name": "tool_error", "message": "declined"}),  # failed: ran
        _start(2, "ship"),  # the host died while it ran: outcome unknown
        _start(3, "pack"),
        _end(3, "pack", error=CANCELLED_RUNNING),  # cancelled while it ran: outcome unknown
        _end(4, "publish", error=WAITED),  # the grant's stage asked: no start journaled
        _start(5, "invoice"),
        _end(5, "invoice", error=WAITED),  # the operation's stage asked, after the start
        _end(6, "notify", error=CANCELLED_RUNNING),  # cancelled before its start was journaled
        _start(7, "other"),
        {**_end(7, "other", result="a round before"), "round": 1},
    ]
    groups = journal_groups(entries, 2)
    assert [c["operation"] for c in groups.completed] == ["charge", "refund"]
    assert [(c["operation"], c["error"]["name"]) for c in groups.in_flight] == [  # type: ignore[index]
        ("ship", "outcome_unknown"),
        ("pack", "outcome_unknown"),
        ("other", "outcome_unknown"),  # its start is round 2's; its end was another round's
    ]
    assert [(c["operation"], c["not_performed"]) for c in groups.not_performed] == [
        ("publish", True),
        ("invoice", True),
        ("notify", True),
    ]
    assert [c["operation"] for c in groups.calls] == [
        *("charge", "refund", "ship", "pack", "other", "publish", "invoice", "notify")
    ]
    text = interrupted_evaluation(
        2, groups.completed, reason="r", in_flight=groups.in_flight, not_performed=groups.not_performed
    )
    assert text.endswith(
        "Not performed: these calls did not run, so they had no effect:\n"
        "- shop.publish(n=4): it was waiting for the user's approval when the round stopped\n"
        "- shop.invoice(n=5): it was waiting for the user's approval when the round stopped\n"
        "- shop.notify(n=6): the round stopped before it started\n"
        "Make them again if they are still needed.\n"
        "Not started: no other toolkit call of that round had started; make the calls still needed once.\n"
    ), text
    assert "publish" not in text.split("Not performed")[0]
