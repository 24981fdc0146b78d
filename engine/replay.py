"""Replay: re-execute a recorded session's code in a fresh sandbox and compare with the record.

Each recorded round's program runs with the variables recorded after the round before it, under the
rounds' recorded deadline (the session's ``extra.sandbox.deadline_s``). Toolkit
calls are answered from that round's call record (no model, no live tools, no side effects) unless
``live=True``. A round matches when stdout, the error (type and line), the control signal and the
captured variables all equal the record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from engine.errors import StoreError
from sandbox.runtime import protocol as _p
from toolkits import CallRecord, ToolkitBridge, ToolkitRegistry

if TYPE_CHECKING:
    from engine.store import RoundRecord, Store
    from sandbox import RpcHandler, Sandbox

__all__ = ["ReplayReport", "RoundReplay", "replay_session", "sandbox_note"]


@dataclass(frozen=True, kw_only=True)
class RoundReplay:
    """One round's replay.

    Attributes:
        index: The round.
        status: ``match``, ``mismatch`` or ``skipped`` (the round ran no code).
        differences: What differed (``stdout``, ``error``, ``variables: x``, ``calls``...), with detail.
        duration_s: Time to re-execute the round.
    """

    index: int
    status: Literal["match", "mismatch", "skipped"]
    differences: tuple[str, ...] = ()
    duration_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """A JSON object."""
        return {
            "round": self.index,
            "status": self.status,
            "differences": list(self.differences),
            "duration_s": round(self.duration_s, 6),
        }


@dataclass(frozen=True, kw_only=True)
class ReplayReport:
    """The replay of a whole session."""

    session_id: str
    live: bool
    rounds: tuple[RoundReplay, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        """True when no round mismatched."""
        return all(r.status != "mismatch" for r in self.rounds)

    def to_json(self) -> dict[str, Any]:
        """``{"session_id", "live", "ok", "rounds": [...]}``."""
        return {
            "session_id": self.session_id,
            "live": self.live,
            "ok": self.ok,
            "rounds": [r.to_json() for r in self.rounds],
        }


class _Switch:
    """The sandbox's bridge handler for the whole replay; each round plugs in its own bridge."""

    def __init__(self, manifest: dict[str, Any]) -> None:
        self._manifest = manifest
        self.current: ToolkitBridge | None = None

    def manifest(self) -> dict[str, Any]:
        return self._manifest

    async def handle(self, method: str, params: dict[str, Any]) -> Any:
        if self.current is None:
            raise _p.RpcError(_p.INTERNAL_ERROR, "replay: no round is being replayed")
        return await self.current.handle(method, params)


def sandbox_note(sandbox: Sandbox, *, deadline_s: float | None = None) -> dict[str, Any]:
    """What a session records (``extra.sandbox``) so a replay rebuilds the sandbox it ran in.

    Args:
        sandbox: The session's sandbox.
        deadline_s: The rounds' wall-clock deadline (default: the sandbox's), so a replay kills
            (or lets finish) the same code the same way.
    """
    policy = sandbox.policy
    return {
        "backend": sandbox.backend,
        "restricted": policy.restricted,
        "imports": sorted(policy.allowed_imports),
        "isolation": sandbox.isolation,
        "deadline_s": deadline_s if deadline_s is not None else sandbox.limits.wall_s,
    }


def _sandbox_from_note(note: Mapping[str, Any]) -> Callable[[RpcHandler], Sandbox]:
    def make(handler: RpcHandler) -> Sandbox:
        from sandbox import DockerSandbox, SubprocessSandbox
        from sandbox.policy import Policy

        policy = Policy(
            restricted=bool(note.get("restricted", True)),
            allowed_imports=frozenset(note.get("imports") or Policy().allowed_imports),
        )
        if note.get("backend") == "docker":
            # A session recorded on gVisor replays on gVisor: never on a weaker runtime.
            gvisor = str(note.get("isolation", "")).startswith("docker(gvisor")
            return DockerSandbox(policy=policy, bridge=handler, runtime="gvisor" if gvisor else "runc")
        weak = str(note.get("isolation", "")).startswith("process")
        return SubprocessSandbox(policy=policy, bridge=handler, isolation="process" if weak else "bwrap")

    return make


def _calls(record: RoundRecord) -> list[CallRecord]:
    return [CallRecord.from_json(c) for c in record.calls]


def _diff_variables(expected: Mapping[str, Any], actual: Mapping[str, Any]) -> list[str]:
    out = []
    for name in sorted(set(expected) | set(actual)):
        if name not in actual:
            out.append(f"variables: {name!r} missing")
        elif name not in expected:
            out.append(f"variables: {name!r} not in the record")
        elif expected[name] != actual[name]:
            out.append(f"variables: {name!r} differs")
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


async def replay_session(
    store: Store,
    session_id: str,
    *,
    sandbox_factory: Callable[[RpcHandler], Sandbox] | None = None,
    registry: ToolkitRegistry | None = None,
    live: bool = False,
    on_round: Callable[[RoundReplay], None] | None = None,
) -> ReplayReport:
    """Re-execute every recorded round of ``session_id`` and compare it with the record.

    Args:
        store: The store holding the session.
        session_id: The session.
        sandbox_factory: Builds the (fresh) sandbox from the replay's bridge handler; by default the
            sandbox the session ran in, rebuilt from its note (:func:`sandbox_note`).
        registry: The toolkits, for argument names in the manifest and for ``live`` calls.
        live: Call the tools for real instead of answering from the record.
        on_round: Called after each round (progress).

    Raises:
        StoreError: the session does not exist.
    """
    meta = await store.get_session(session_id)
    if meta is None:
        raise StoreError(f"session {session_id!r} not found in {store.url}", code="store.notFound")
    records = await store.rounds(session_id)
    grants: dict[str, Any] = dict(meta.extra.get("grants") or {"system": "*"})
    registry = registry if registry is not None else ToolkitRegistry.from_entry_points()
    known = all(name in registry for name in grants)
    every_call = [c for r in records for c in _calls(r)]
    if known:
        manifest = ToolkitBridge(registry, grants=grants, session_id=session_id).manifest()
    else:  # toolkits not loaded here: rebuild the manifest from what the record shows
        manifest = ToolkitBridge.replaying(every_call, session_id=session_id).manifest()
    note = meta.extra.get("sandbox")
    note = dict(note) if isinstance(note, dict) else {}
    deadline = note.get("deadline_s")
    deadline = float(deadline) if isinstance(deadline, int | float) else None
    switch = _Switch(manifest)
    if sandbox_factory is None:
        sandbox_factory = _sandbox_from_note(note)
    results: list[RoundReplay] = []
    previous: dict[str, Any] = {}
    async with sandbox_factory(switch) as sandbox:
        for record in records:
            if record.code is None:
                replay = RoundReplay(index=record.index, status="skipped")
            else:
                replay = await _replay_round(
                    sandbox, switch, record, previous, registry, grants, known, live, deadline=deadline
                )
            results.append(replay)
            if on_round is not None:
                on_round(replay)
            previous = dict(record.variables)
    return ReplayReport(session_id=session_id, live=live, rounds=tuple(results))


async def _replay_round(
    sandbox: Sandbox,
    switch: _Switch,
    record: RoundRecord,
    variables: dict[str, Any],
    registry: ToolkitRegistry,
    grants: dict[str, Any],
    known: bool,
    live: bool,
    *,
    deadline: float | None,
) -> RoundReplay:
    if live:
        bridge = ToolkitBridge(registry, grants=grants, session_id=record.session_id)
    elif known:
        bridge = ToolkitBridge.replaying(_calls(record), toolkits=registry, grants=grants, session_id=record.session_id)
    else:
        bridge = ToolkitBridge.replaying(_calls(record), session_id=record.session_id)
    switch.current = bridge
    assert record.code is not None  # noqa: S101 - checked by the caller
    result = await sandbox.execute(record.code, variables=variables, deadline=deadline)
    switch.current = None
    diffs: list[str] = []
    if result.stdout != record.stdout:
        diffs.append(f"stdout: recorded {_short(record.stdout)}, replayed {_short(result.stdout)}")
    recorded_error = (record.error or {}).get("type"), (record.error or {}).get("line")
    replayed_error = (result.error.type, result.error.line) if result.error is not None else (None, None)
    if recorded_error != replayed_error:
        diffs.append(f"error: recorded {recorded_error}, replayed {replayed_error}")
    if (record.control or None) != (result.control or None):
        diffs.append(f"control: recorded {_short(record.control)}, replayed {_short(result.control)}")
    diffs.extend(_diff_variables(record.variables, result.variables))
    if not live:
        if bridge.divergence is not None:
            diffs.append(f"calls: {bridge.divergence}")
        elif bridge.replay_remaining:
            diffs.append(f"calls: {bridge.replay_remaining} recorded call(s) were not made")
    return RoundReplay(
        index=record.index,
        status="mismatch" if diffs else "match",
        differences=tuple(diffs),
        duration_s=result.duration_s,
    )
