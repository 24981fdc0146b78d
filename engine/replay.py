"""Replay: re-execute a recorded session's code in a fresh sandbox and compare with the record.

Each recorded round's program runs with the variables recorded after the round before it, under the
rounds' recorded limit (the session's ``extra.sandbox.deadline_s``, seconds of code). Toolkit
calls are answered from that round's call record (no model, no live tools, no side effects) unless
``live=True``. A round matches when stdout, the error (type and line), the control signal and the
captured variables all equal the record.

A round whose call record was capped (``codeact.toolkits.records.RecordCaps``: an argument or result over
64 KiB, or calls over the per-round count) cannot be answered from the record: without ``live`` it is
reported ``skipped`` with "not replayable: ..." (the rounds after it still replay from their own
records); with ``live`` it runs against the real tools like every other round.

An unreadable round record stops the replay there: the rounds before it are replayed, and the report's
``problem`` names the bad round (nothing from it, or after it, is executed).
"""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from codeact.engine.errors import StoreError
from codeact.prompts.jsontypes import JsonObject
from codeact.sandbox.runtime import protocol as _p
from codeact.toolkits import CallRecord, ToolkitBridge, ToolkitRegistry

if TYPE_CHECKING:
    from codeact.engine.store import RoundRecord, Store
    from codeact.sandbox import RpcHandler, Sandbox, SandboxSpec

__all__ = ["ReplayReport", "RoundReplay", "replay_session", "sandbox_note", "session_hash_seed"]


@dataclass(frozen=True, kw_only=True)
class RoundReplay:
    """One round's replay.

    Attributes:
        index: The round.
        status: ``match``, ``mismatch`` or ``skipped`` (the round ran no code, or was interrupted).
        differences: What differed (``stdout``, ``error``, ``variables: x``, ``calls``...), with detail.
        duration_s: Time to re-execute the round.
    """

    index: int
    status: Literal["match", "mismatch", "skipped"]
    differences: tuple[str, ...] = ()
    duration_s: float = 0.0

    def to_json(self) -> dict[str, object]:
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
    problem: str | None = None
    """Why the replay stopped before the last recorded round (an unreadable record), or None."""

    @property
    def ok(self) -> bool:
        """True when no round mismatched and every recorded round could be read."""
        return self.problem is None and all(r.status != "mismatch" for r in self.rounds)

    def to_json(self) -> dict[str, object]:
        """``{"session_id", "live", "ok", "rounds": [...]}``."""
        return {
            "session_id": self.session_id,
            "live": self.live,
            "ok": self.ok,
            "rounds": [r.to_json() for r in self.rounds],
            **({"problem": self.problem} if self.problem is not None else {}),
        }


class _Switch:
    """The sandbox's bridge handler for the whole replay; each round plugs in its own bridge."""

    def __init__(self, manifest: dict[str, Any], session_id: str = "") -> None:
        self.base = manifest  # the session's grants; a round's injected toolkits are added to it (use_tools)
        self._manifest = manifest
        self.tools: dict[str, Any] = {}
        self.current: ToolkitBridge | None = None
        self.hung: list[CallRecord] = []
        self.session_id = session_id  # names the replay's sandbox (container label, runtime argv)

    def manifest(self) -> dict[str, Any]:
        return self._manifest

    def use_tools(self, tools: Mapping[str, Any], sandbox: Sandbox) -> None:
        """The toolkits hooks injected that were in force for the next round (its ``edits["tools"]``).

        When they differ from the last round's, the runtimes are replaced, as the run replaced them, so
        the next one connects with the round's toolkits.
        """
        if dict(tools) == self.tools:
            return
        self.tools = dict(tools)
        self._manifest = {"toolkits": {**self.base.get("toolkits", {}), **self.tools}}
        sandbox.restart()

    async def handle(self, method: str, params: dict[str, Any]) -> Any:
        current = self.current
        if current is None:
            raise _p.RpcError(_p.INTERNAL_ERROR, "replay: no round is being replayed")
        if self.hung and method == "call" and current.replay_remaining == 0 and isinstance(params, dict):
            call = self.hung[0]
            if (params.get("toolkit"), params.get("operation")) == (call.toolkit, call.operation):
                # The recorded call was still running when the round's deadline killed the sandbox:
                # it does not answer now either, so the same deadline ends the replayed round.
                self.hung.pop(0)
                await asyncio.Event().wait()
        return await current.handle(method, params)


def _unfinished(record: RoundRecord, calls: list[CallRecord]) -> tuple[list[CallRecord], list[CallRecord]]:
    """Split a round's calls into the answered ones and the ones its deadline cut off (still running)."""
    if record.status != "deadline_exceeded":
        return calls, []
    answered = list(calls)
    hung: list[CallRecord] = []
    while answered and (answered[-1].error or {}).get("name") == "cancelled":
        hung.insert(0, answered.pop())
    return answered, hung


def sandbox_note(sandbox: Sandbox, *, deadline_s: float | None = None) -> dict[str, object]:
    """What a session records (``extra.sandbox``) so a replay rebuilds the sandbox it ran in.

    Args:
        sandbox: The session's sandbox.
        deadline_s: The rounds' wall-clock deadline (default: the sandbox's), so a replay kills
            (or lets finish) the same code the same way.
    """
    policy = sandbox.policy
    note: dict[str, object] = {
        "backend": sandbox.backend,
        "restricted": policy.restricted,
        "imports": sorted(policy.allowed_imports),
        "isolation": sandbox.isolation,
        "deadline_s": deadline_s if deadline_s is not None else sandbox.limits.wall_s,
    }
    if sandbox.hash_seed is not None:
        note["hash_seed"] = sandbox.hash_seed
    return note


def session_hash_seed(note: object) -> int:
    """The string-hash seed of a session: the one its sandbox note recorded, else a new one.

    Every sandbox process of a session (each round's, a resumed run's, Docker's, a replay's) runs
    with this ``PYTHONHASHSEED``, so set order and ``hash()`` are the same everywhere.

    Args:
        note: The session's ``extra["sandbox"]`` (:func:`sandbox_note`), or None for a new session.
    """
    seed = note.get("hash_seed") if isinstance(note, Mapping) else None
    if type(seed) is int and 0 < seed <= _MAX_HASH_SEED:
        return seed
    return secrets.randbelow(_MAX_HASH_SEED) + 1


_MAX_HASH_SEED = 4294967295
_CUT_MARKER = re.compile(r"\n\.\.\. \[(\d+) bytes cut[^\]\n]*\] \.\.\.\n")
_LIMIT_ERRORS = frozenset({"CpuLimitExceeded", "MemoryLimitExceeded"})


def _uncut(text: str) -> str:
    """``text`` with the output limit's cut marker in its older, shorter form (records of either version compare)."""
    return _CUT_MARKER.sub(r"\n... [\1 bytes cut] ...\n", text)


def _sandbox_spec(note: Mapping[str, Any]) -> SandboxSpec:
    """The sandbox a session's note (:func:`sandbox_note`) records: the same backend, policy, isolation and runtime."""
    from codeact.engine.agent.sandboxes import noted_environment
    from codeact.sandbox import SandboxSpec
    from codeact.sandbox.policy import Policy

    policy = Policy(
        restricted=bool(note.get("restricted", True)),
        allowed_imports=frozenset(note.get("imports") or Policy().allowed_imports),
    )
    docker = note.get("backend") == "docker"
    # The declared packages, from the environment cache.
    env = noted_environment(note.get("env"), "docker" if docker else "subprocess")
    if docker:
        # A session recorded on gVisor replays on gVisor: never on a weaker runtime.
        gvisor = note.get("runtime") == "gvisor" or str(note.get("isolation", "")).startswith("docker(gvisor")
        image = env.image if env is not None else None
        from codeact.sandbox.env import MOUNT_POINT

        return SandboxSpec(
            backend="docker",
            policy=policy,
            image=image,
            sys_path=(MOUNT_POINT,) if image is not None else (),
            runtime="gvisor" if gvisor else "runc",
        )
    weak = str(note.get("isolation", "")).startswith("process")
    return SandboxSpec(
        backend="subprocess",
        policy=policy,
        isolation="process" if weak else "bwrap",
        env_dir=str(env.site) if env is not None and env.site is not None else None,
    )


def _sandbox_from_note(note: Mapping[str, Any]) -> Callable[[RpcHandler], Sandbox]:
    def make(handler: RpcHandler) -> Sandbox:
        from codeact.sandbox import open_sandbox

        return open_sandbox(_sandbox_spec(note), bridge=handler)

    return make


def _calls(record: RoundRecord) -> list[CallRecord]:
    return [CallRecord.from_json(c) for c in record.calls]


def _diff_variables(expected: Mapping[str, object], actual: Mapping[str, object]) -> list[str]:
    out = []
    for name in sorted(set(expected) | set(actual)):
        if name not in actual:
            out.append(f"variables: {name!r} missing")
        elif name not in expected:
            out.append(f"variables: {name!r} not in the record")
        elif expected[name] != actual[name]:
            out.append(f"variables: {name!r} differs")
    return out


def _short(value: object) -> str:
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
    read = await store.read_rounds(session_id)
    records = list(read.rounds)  # the readable rounds before the first unreadable one
    every_call = [c for r in records for c in _calls(r) if c.capped is None or c.toolkit]
    # Without recorded grants (an old session, or metadata reset by `sessions truncate`), the toolkits
    # the record shows calls to are the grants.
    recorded_grants = {"system": "*", **{c.toolkit: "*" for c in every_call if c.toolkit}}
    grants: dict[str, Any] = dict(meta.extra.get("grants") or recorded_grants)
    registry = registry if registry is not None else ToolkitRegistry.from_entry_points()
    known = all(name in registry for name in grants)
    if known:
        manifest = ToolkitBridge(registry, grants=grants, session_id=session_id).manifest()
    else:  # toolkits not loaded here: rebuild the manifest from what the record shows
        manifest = ToolkitBridge.replaying(every_call, session_id=session_id).manifest()
        # ... but for the toolkits hooks injected: those are the rounds' own (edits["tools"], _Switch.use_tools)
        injected = {name for r in records for name in (r.edits or {}).get("tools") or {}}
        manifest = {"toolkits": {k: v for k, v in manifest["toolkits"].items() if k not in injected}}
    note = meta.extra.get("sandbox")
    note = dict(note) if isinstance(note, dict) else {}
    deadline = note.get("deadline_s")
    deadline = float(deadline) if isinstance(deadline, int | float) else None
    switch = _Switch(manifest, session_id)
    if sandbox_factory is None:
        sandbox_factory = _sandbox_from_note(note)
    results: list[RoundReplay] = []
    previous: JsonObject = {}
    seed = note.get("hash_seed")
    async with sandbox_factory(switch) as sandbox:
        if type(seed) is int:
            sandbox.hash_seed = seed  # the session's: set order and hash() as recorded
        for record in records:
            switch.use_tools((record.edits or {}).get("tools") or {}, sandbox)
            if record.code is None or record.status == "interrupted":
                # An interrupted round never finished: it is recorded as it was, not re-executed.
                replay = RoundReplay(index=record.index, status="skipped")
            else:
                if record.edits:  # what hooks set before the round's code ran (engine/agent/hooks.py)
                    removed = set(record.edits.get("removed", ()))
                    previous = {k: v for k, v in previous.items() if k not in removed}
                    previous.update(record.edits.get("set", {}))
                replay = await _replay_round(
                    sandbox, switch, record, previous, registry, grants, known, live, deadline=deadline
                )
            results.append(replay)
            if on_round is not None:
                on_round(replay)
            previous = dict(record.variables)
    problem = read.problem.message if read.problem is not None else await _other_problem(store, session_id)
    return ReplayReport(session_id=session_id, live=live, rounds=tuple(results), problem=problem)


async def _other_problem(store: Store, session_id: str) -> str | None:
    """An unreadable segment or variable (replay does not need them, but the session is damaged), or None."""
    from codeact.engine.store import CorruptRecordError

    try:
        await store.segments(session_id)
        await store.variables(session_id)
    except CorruptRecordError as exc:
        return exc.message
    return None


async def _replay_round(
    sandbox: Sandbox,
    switch: _Switch,
    record: RoundRecord,
    variables: JsonObject,
    registry: ToolkitRegistry,
    grants: dict[str, Any],
    known: bool,
    live: bool,
    *,
    deadline: float | None,
) -> RoundReplay:
    capped = next((c for c in _calls(record) if c.capped is not None), None)
    if capped is not None and not live:
        what = f"{capped.toolkit}.{capped.operation}" if capped.toolkit else "the calls after the cap"
        reason = capped.capped.get("reason", "capped") if capped.capped else "capped"
        return RoundReplay(
            index=record.index,
            status="skipped",
            differences=(
                f"not replayable: the result of {what} (call #{capped.sequence}) was not recorded in full ({reason}); "
                "replay with --live to call the tools",
            ),
        )
    calls, switch.hung = _unfinished(record, _calls(record))
    if live:
        switch.hung = []
        bridge = ToolkitBridge(registry, grants=grants, session_id=record.session_id)
    elif known:
        bridge = ToolkitBridge.replaying(calls, toolkits=registry, grants=grants, session_id=record.session_id)
    else:
        bridge = ToolkitBridge.replaying(calls, session_id=record.session_id)
    switch.current = bridge
    assert record.code is not None  # noqa: S101 - checked by the caller
    # A round that continued the warm namespace of the round before it does so again (replay runs the
    # rounds in order in one sandbox); one that started from the store's snapshot starts from it again.
    # A call still running when the deadline killed the round was recorded under the old rule (the deadline
    # counted waiting on calls too): such a round replays under that rule, or its hung call would pause the
    # round's clock for good.
    placed = _input_files(record)
    if placed:  # the run's input files, recorded with its first round (engine/agent/_files.py)
        sandbox.put_files(placed)
    result = await sandbox.execute(
        record.code,
        variables=variables,
        deadline=deadline,
        nondeterminism=record.nondeterminism or None,
        clock="wall" if switch.hung else "code",
        warm=(record.nondeterminism or {}).get("warm") is True,
    )
    switch.current = None
    unmade = len(switch.hung)
    switch.hung = []
    diffs: list[str] = []
    if _uncut(result.stdout) != _uncut(record.stdout):
        diffs.append(f"stdout: recorded {_short(record.stdout)}, replayed {_short(result.stdout)}")
    recorded_error = (record.error or {}).get("type"), (record.error or {}).get("line")
    replayed_error = (result.error.type, result.error.line) if result.error is not None else (None, None)
    if recorded_error[0] == "SandboxCrashed" and replayed_error[0] in _LIMIT_ERRORS:
        recorded_error = replayed_error  # recorded before a limit named itself (issue 35): the same death
    if recorded_error != replayed_error:
        diffs.append(f"error: recorded {recorded_error}, replayed {replayed_error}")
    if (record.control or None) != (result.control or None):
        diffs.append(f"control: recorded {_short(record.control)}, replayed {_short(result.control)}")
    diffs.extend(_diff_variables(record.variables, result.variables))
    fed = result.nondeterminism or {}
    if record.nondeterminism and fed.get("diverged"):
        diffs.append(f"nondeterminism: {fed['diverged']}")
    elif record.nondeterminism and fed.get("unread"):
        diffs.append(f"nondeterminism: {fed['unread']} recorded read(s) of the clock or randomness were not made")
    if not live:
        if bridge.divergence is not None:
            diffs.append(f"calls: {bridge.divergence}")
        elif bridge.replay_remaining or unmade:
            diffs.append(f"calls: {bridge.replay_remaining + unmade} recorded call(s) were not made")
    return RoundReplay(
        index=record.index,
        status="mismatch" if diffs else "match",
        differences=tuple(diffs),
        duration_s=result.duration_s,
    )


def _input_files(record: RoundRecord) -> dict[str, bytes]:
    """The input files a round's record carries (artifacts ``inputs/<name>`` marked ``"input": true``)."""
    import base64
    import binascii

    from codeact.sandbox.base import plain_file_name

    files: dict[str, bytes] = {}
    for artifact in record.artifacts:
        name = artifact.get("name")
        if artifact.get("input") is not True or not isinstance(name, str) or not name.startswith("inputs/"):
            continue
        try:
            data = base64.b64decode(str(artifact.get("data_b64") or ""), validate=True)
        except (binascii.Error, ValueError):
            continue  # a damaged entry: the round's code then misses the file, and the replay says so
        if plain_file_name(name[len("inputs/") :]):
            files[name[len("inputs/") :]] = data
    return files
