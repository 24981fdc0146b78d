"""Approvals from the blueprint's grants: ask (approver allows / denies / is missing) and deny."""

from __future__ import annotations

import pytest

from codeact.engine.replay import replay_session
from codeact.engine.store import Store
from codeact.sandbox import SubprocessSandbox
from codeact.toolkits import ApprovalDecision, ApprovalRequest, ToolkitRegistry, operation, toolkit

from .conftest import BASE, MakeAgent, Probe, code, of_type

REPLY = code(
    """
    try:
        outcome = probe.record("deploy")
    except Exception as exc:
        outcome = f"{type(exc).__name__}: {exc}"
    system.finish(outcome)
    """
)


def _blueprint(approval: str) -> str:
    return BASE.replace("  - ref: devops", f"  - ref: probe\n    approval: {approval}")


class _Approver:
    def __init__(self, allow: bool) -> None:
        self.allow = allow
        self.requests: list[ApprovalRequest] = []

    async def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        self.requests.append(request)
        return ApprovalDecision(allow=self.allow, reason="approved" if self.allow else "not during a freeze")


@pytest.mark.parametrize(
    ("approval", "approver", "answer", "ran", "asked"),
    [
        pytest.param("ask", _Approver(True), "recorded 'deploy'", True, True, id="ask-allowed"),
        pytest.param(
            "manual",
            _Approver(False),
            "ToolPermissionError: probe.record was not approved: not during a freeze",
            False,
            True,
            id="manual-denied",
        ),
        pytest.param(
            "ask",
            None,
            "ToolPermissionError: probe.record was not approved: no approver is configured "
            "(use --approve-all or a callback)",
            False,
            True,
            id="ask-no-approver",
        ),
        pytest.param(
            "deny",
            _Approver(True),
            "ToolPermissionError: probe.record is denied by the blueprint's approval policy",
            False,
            False,
            id="deny",
        ),
        pytest.param("always", _Approver(False), "recorded 'deploy'", True, False, id="always"),
    ],
)
async def test_grant_approvals(
    make_agent: MakeAgent,
    probe: Probe,
    sqlite_store: Store,
    approval: str,
    approver: _Approver | None,
    answer: str,
    ran: bool,
    asked: bool,
) -> None:
    if approver is not None:
        approver.requests.clear()
    built = make_agent(_blueprint(approval), [REPLY], approver=approver)
    events = await built.run("deploy", session_id="s-approve")

    assert events[-1].type == "run.completed"
    assert events[-1].answer == answer  # type: ignore[attr-defined]
    assert probe.calls == ([("record", "deploy")] if ran else [])
    requested = of_type(events, "action.requested")
    assert len(requested) == (1 if asked else 0)
    if asked:
        event = requested[0]
        assert (event.kind, event.toolkit, event.operation, event.arguments) == (  # type: ignore[attr-defined]
            "approval",
            "probe",
            "record",
            {"value": "deploy"},
        )
        started = [e for e in of_type(events, "tool.call.started") if e.operation == "record"][0]  # type: ignore[attr-defined]
        assert started.sequence < event.sequence
    if approver is not None:
        assert [r.operation for r in approver.requests] == (["record"] if asked else [])
    # The decision is part of the record: replay gives the code the same outcome without asking.
    report = await replay_session(
        sqlite_store, "s-approve", sandbox_factory=lambda h: SubprocessSandbox(bridge=h), registry=built.agent.registry
    )
    assert report.ok, report.to_json()


@toolkit(name="ops", description="Operations that ask before they run")
class _Ops:
    @operation(approval="ask")
    async def restart(self, service: str) -> str:
        """Restart a service.

        Args:
            service: The service name.
        """
        return f"restarted {service}"


@pytest.mark.parametrize(
    "grant",
    [
        pytest.param("  - ref: ops\n    approval: ask", id="grant-and-operation-ask"),
        pytest.param("  - ref: ops", id="operation-asks"),
    ],
)
async def test_a_call_is_asked_about_once(make_agent: MakeAgent, registry: ToolkitRegistry, grant: str) -> None:
    registry.register(_Ops())
    approver = _Approver(allow=True)
    built = make_agent(
        BASE.replace("  - ref: devops", grant), [code('system.finish(ops.restart("api"))')], approver=approver
    )
    events = await built.run("restart the api")

    assert events[-1].answer == "restarted api"  # type: ignore[attr-defined]
    assert [r.operation for r in approver.requests] == ["restart"]
    assert len(of_type(events, "action.requested")) == 1
