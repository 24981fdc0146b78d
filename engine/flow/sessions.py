"""A flow's recorded tree: ``codeact sessions show`` prints it, ``codeact replay`` replays it whole.

A flow session's ``extra.children`` lists its steps' sessions in the order they started; a step that
is a flow has children of its own. :func:`flow_tree` reads the tree, :func:`replay_flow` replays
every codeact/react step session in it (in order) with :func:`codeact.engine.replay.replay_session`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from codeact.engine.errors import StoreError

if TYPE_CHECKING:
    from codeact.engine.replay import ReplayReport, RoundReplay
    from codeact.engine.store import Store
    from codeact.toolkits import ToolkitRegistry

__all__ = ["FlowNode", "FlowReplayReport", "flow_tree", "is_flow_session", "replay_flow", "tree_lines"]

_MAX_DEPTH = 16


def is_flow_session(extra: Any) -> bool:
    """True for the metadata ``extra`` of a flow's session."""
    return isinstance(extra, dict) and extra.get("kind") == "flow"


@dataclass(frozen=True, kw_only=True)
class FlowNode:
    """A session in a flow's tree.

    Attributes:
        session_id: The session.
        agent: The agent's (or flow's) name.
        position: Its position in the parent flow ("" for the root).
        kind: ``sequential``/``parallel``/``routing``/``loop`` for a flow, else ``codeact`` or ``react``.
        status: The session's status (``missing`` when it is not in the store).
        rounds: Its recorded rounds.
        children: Its steps, for a flow.
    """

    session_id: str
    agent: str
    position: str = ""
    kind: str = ""
    status: str = ""
    rounds: int = 0
    children: tuple[FlowNode, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        """A JSON object (children nested)."""
        return {
            "session_id": self.session_id,
            "agent": self.agent,
            "position": self.position,
            "kind": self.kind,
            "status": self.status,
            "rounds": self.rounds,
            "children": [child.to_json() for child in self.children],
        }


async def flow_tree(store: Store, session_id: str, *, agent: str = "", position: str = "", depth: int = 0) -> FlowNode:
    """The tree of a (flow) session as recorded in ``store``."""
    meta = await store.get_session(session_id)
    if meta is None:
        return FlowNode(session_id=session_id, agent=agent, position=position, status="missing")
    extra = meta.extra
    if not is_flow_session(extra):
        kind = str(extra.get("kind") or "")
        return FlowNode(
            session_id=session_id,
            agent=agent or meta.blueprint_id,
            position=position,
            kind=kind,
            status=meta.status,
            rounds=meta.rounds,
        )
    children: list[FlowNode] = []
    if depth < _MAX_DEPTH:
        for child in extra.get("children") or []:
            if isinstance(child, dict) and isinstance(child.get("session_id"), str):
                children.append(
                    await flow_tree(
                        store,
                        child["session_id"],
                        agent=str(child.get("agent") or ""),
                        position=str(child.get("position") or ""),
                        depth=depth + 1,
                    )
                )
    flow = extra.get("flow")
    info: dict[str, Any] = flow if isinstance(flow, dict) else {}
    return FlowNode(
        session_id=session_id,
        agent=agent or meta.blueprint_id,
        position=position,
        kind=str(info.get("kind") or "flow"),
        status=meta.status,
        rounds=sum(c.rounds for c in children),
        children=tuple(children),
    )


def tree_lines(node: FlowNode, prefix: str = "", last: bool = True, root: bool = True) -> list[str]:
    """The tree as text lines (``├─`` / ``└─``), one per session."""
    where = f"{node.position} " if node.position else ""
    rounds = f", {node.rounds} round{'s' if node.rounds != 1 else ''}" if node.rounds else ""
    text = f"{where}{node.agent} ({node.kind}) · {node.session_id} · {node.status}{rounds}"
    lines = [text if root else f"{prefix}{'└─ ' if last else '├─ '}{text}"]
    inner = "" if root else prefix + ("   " if last else "│  ")
    for index, child in enumerate(node.children):
        lines.extend(tree_lines(child, inner, index == len(node.children) - 1, root=False))
    return lines


@dataclass(frozen=True, kw_only=True)
class FlowReplayReport:
    """The replay of a flow: every step session's report, in the order the steps started.

    Attributes:
        session_id: The flow's session.
        live: Tools were called for real.
        steps: ``(session_id, agent, report)`` per codeact/react step, depth first.
    """

    session_id: str
    live: bool
    steps: tuple[tuple[str, str, ReplayReport], ...] = ()

    @property
    def rounds(self) -> tuple[RoundReplay, ...]:
        """Every replayed round of every step."""
        return tuple(r for _, _, report in self.steps for r in report.rounds)

    @property
    def problem(self) -> str | None:
        """The first step's problem (an unreadable record), if any."""
        return next((f"{sid}: {r.problem}" for sid, _, r in self.steps if r.problem is not None), None)

    @property
    def ok(self) -> bool:
        """True when every step replayed without a mismatch."""
        return all(report.ok for _, _, report in self.steps)

    def to_json(self) -> dict[str, Any]:
        """``{"session_id", "live", "ok", "flow": true, "rounds": [...], "steps": [...]}``."""
        return {
            "session_id": self.session_id,
            "live": self.live,
            "ok": self.ok,
            "flow": True,
            "rounds": [r.to_json() for r in self.rounds],
            "steps": [{"session_id": sid, "agent": agent, **report.to_json()} for sid, agent, report in self.steps],
            **({"problem": self.problem} if self.problem is not None else {}),
        }


async def replay_flow(
    store: Store,
    session_id: str,
    *,
    registry: ToolkitRegistry | None = None,
    live: bool = False,
    on_round: Callable[[RoundReplay], None] | None = None,
    on_step: Callable[[str, str], None] | None = None,
) -> FlowReplayReport:
    """Replay every codeact/react step of a flow session (nested flows included), in order.

    Raises:
        StoreError: the session does not exist.
    """
    from codeact.engine.replay import replay_session

    if await store.get_session(session_id) is None:
        raise StoreError(f"session {session_id!r} not found in {store.url}", code="store.notFound")
    tree = await flow_tree(store, session_id)
    steps: list[tuple[str, str, ReplayReport]] = []

    async def walk(node: FlowNode) -> None:
        for child in node.children:
            if child.children or child.kind in ("sequential", "parallel", "routing", "loop"):
                await walk(child)
            elif child.status != "missing":
                if on_step is not None:
                    on_step(child.session_id, child.agent)
                report = await replay_session(store, child.session_id, registry=registry, live=live, on_round=on_round)
                steps.append((child.session_id, child.agent, report))

    await walk(tree)
    return FlowReplayReport(session_id=session_id, live=live, steps=tuple(steps))
