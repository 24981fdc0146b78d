"""The walk figure: how often following one run's input from ``Agent.run`` to the sandbox and back leaves a file.

Runs one scripted run (the scripted model the tests use, the real subprocess sandbox, a SQLite store in a
temporary directory): one round whose code prints and calls ``system.finish``. While it runs, a profiler
(``sys.setprofile``) follows the functions of the run's pipeline, the files of ``engine/agent/`` (the
sandbox, the model client, the store and the segments are the stages it calls into; the walk notes the
call and comes back, it does not read them).

Definitions (the figure is a reader's walk through the code, so each function is read once):

* **visit**: the first call of a pipeline function. A function called again (``emit`` for the tenth
  event, a coroutine resumed after an ``await``) is not read again and is not a visit.
* **position**: the file the reader is in. A visit moves it to the visited function's file; the visited
  function's final return (not a coroutine's suspension) moves it back to the file of the nearest
  pipeline function below it on the stack (its caller). A task's coroutine counts as called by the visit
  that created the task (``create_task``): ``stream`` runs the run in a task, and that is still the walk
  of ``Agent.run``'s input, which ends back in ``Agent.run`` (its last event yielded).
* **stay**: a maximal stretch of the walk in one file (consecutive positions in the same file are one stay).
* **return**: a stay in a file the walk had been in before and left (``a -> b -> a`` is one return).

Usage::

    python scripts/walk.py            # the figure, then the stays per file
    python scripts/walk.py --json     # {"stays": ..., "files": ..., "returns": ..., "per_file": {...}, "walk": [...]}
    python scripts/walk.py --path     # the walk itself, one stay a line
    python scripts/walk.py --tree     # the visits, as a call tree (file: function)
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dis
import json
import sys
import tempfile
import types
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "engine" / "agent"

BLUEPRINT = """\
version: codeact.agent/v1
extend: codeact-base
id: walk
model:
  provider: scripted
  model: {model}
toolkits:
  - ref: system
workflow:
  maxTurns: 3
  codeact:
    thought: "off"
"""

REPLY = "```python\nanswer = 6 * 7\nprint(answer)\nawait system.finish(answer=answer)\n```"

_INLINE = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})
_RETURN_OPS = frozenset({dis.opmap["RETURN_VALUE"], *(v for k, v in dis.opmap.items() if k == "RETURN_CONST")})


@dataclass(frozen=True)
class Figure:
    """The walk: its stays (file paths relative to the repository, in order) and what they add up to."""

    walk: tuple[str, ...]

    @property
    def stays(self) -> int:
        """How many stays the walk makes."""
        return len(self.walk)

    @property
    def files(self) -> int:
        """How many files it stays in."""
        return len(set(self.walk))

    @property
    def returns(self) -> int:
        """How many of its stays are in a file it had left before."""
        left: set[str] = set()
        count = 0
        for before, stay in zip((None, *self.walk), self.walk, strict=False):
            if stay in left:
                count += 1
            if before is not None:
                left.add(before)
        return count

    def per_file(self) -> dict[str, int]:
        """The stays in each file, most first."""
        return dict(collections.Counter(self.walk).most_common())

    def summary(self) -> str:
        """The figure in one line."""
        return f"{self.stays} stays in {self.files} files, {self.returns} returns to an already-left file"

    def to_json(self) -> dict[str, object]:
        """The figure, its stays per file and the walk."""
        return {
            "stays": self.stays,
            "files": self.files,
            "returns": self.returns,
            "per_file": self.per_file(),
            "walk": list(self.walk),
        }


@dataclass
class _Visit:
    """One visit: the function's file and the visits it made before its final return, in order."""

    file: str
    calls: list[_Visit]
    function: str = ""


class _Walker:
    """The profiler: builds the tree of visits (each pipeline function's first call, under its caller's visit)."""

    def __init__(self) -> None:
        self.root = _Visit(file="", calls=[])
        self._read: set[types.CodeType] = set()
        self._open: dict[int, _Visit] = {}  # frames of visits not yet returned from
        self._files: dict[str, str | None] = {}  # co_filename -> its path in the repository, None if not followed
        # A task's coroutine frame -> the visit that created the task: the task is part of that visit's walk
        # (``stream`` runs the run in a task of its own; the run is still the walk of Agent.run's input).
        # The frame is kept with its visit: while it is held, no other frame can take its id.
        self._spawned: dict[int, tuple[types.FrameType, _Visit]] = {}

    def _name(self, filename: str) -> str | None:
        if filename not in self._files:
            path = Path(filename).resolve()  # codeact/engine is a link to engine/
            self._files[filename] = str(path.relative_to(ROOT)) if path.is_relative_to(PIPELINE) else None
        return self._files[filename]

    def _parent(self, frame: types.FrameType) -> _Visit:
        current: types.FrameType | None = frame
        while current is not None:
            visit = self._open.get(id(current)) if current is not frame else None
            if visit is not None:
                return visit
            spawned = self._spawned.get(id(current))
            if spawned is not None and spawned[0] is current:
                return spawned[1]
            current = current.f_back
        return self.root

    def _note_task(self, frame: types.FrameType) -> None:
        """``create_task(coro)``: the coroutine's frame belongs to the visit that created the task."""
        coro = frame.f_locals.get("coro")
        inner = getattr(coro, "cr_frame", None)
        if isinstance(inner, types.FrameType):
            self._spawned[id(inner)] = (inner, self._parent(frame))

    def __call__(self, frame: types.FrameType, event: str, arg: object) -> None:
        code = frame.f_code
        if event == "call" and code.co_name in _INLINE:
            return  # a comprehension is read as a part of its function (Python 3.12 inlines them)
        if event == "call" and code.co_name == "create_task":
            self._note_task(frame)
            return
        if event == "call" and code not in self._read and (name := self._name(code.co_filename)) is not None:
            self._read.add(code)
            visit = _Visit(file=name, calls=[], function=code.co_qualname)
            self._parent(frame).calls.append(visit)
            self._open[id(frame)] = visit
        elif event == "return" and id(frame) in self._open and not _suspended(frame):
            del self._open[id(frame)]


def _files_of(visit: _Visit) -> set[str]:
    """The files a visit and everything it calls stay in."""
    return {visit.file}.union(*(_files_of(call) for call in visit.calls))


def _walk(visit: _Visit, *, fold: str) -> list[str]:
    """The positions of a depth-first walk over the visits: into each call, back to the caller's file after it.

    ``fold``: ``"none"`` follows every call; ``"leaves"`` reads a call that calls nothing else of the pipeline at
    its name (it is not a stay); ``"local"`` does so too for a call whose whole call tree stays in its own file.
    """
    positions: list[str] = []

    def move(name: str) -> None:
        if name and (not positions or positions[-1] != name):
            positions.append(name)

    def folded(call: _Visit) -> bool:
        if fold == "leaves":
            return not call.calls
        return fold == "local" and _files_of(call) == {call.file}

    def enter(node: _Visit) -> None:
        move(node.file)
        for call in node.calls:
            if folded(call):
                continue  # read at its name
            enter(call)
            move(node.file)

    enter(visit)
    return positions


def _suspended(frame: types.FrameType) -> bool:
    """True when a coroutine/generator frame's "return" is a suspension (it will be resumed), not its end."""
    if not frame.f_code.co_flags & (0x80 | 0x20 | 0x200):  # CO_COROUTINE | CO_GENERATOR | CO_ASYNC_GENERATOR
        return False
    if frame.f_lasti < 0:
        return False
    return frame.f_code.co_code[frame.f_lasti] not in _RETURN_OPS


async def _run_once(walker: _Walker) -> list[str]:
    from codeact.engine.agent import Agent
    from codeact.engine.blueprint import AgentFactory, HostContext, load_text
    from codeact.engine.model import ModelClient, ModelSettings, ScriptedReplies
    from codeact.engine.store import SQLiteStore
    from codeact.toolkits import ToolkitRegistry

    with tempfile.TemporaryDirectory() as tmp:
        script = ScriptedReplies([REPLY])
        client = ModelClient(ModelSettings(model=script.model, max_retries=0))
        registry = ToolkitRegistry.from_entry_points()
        spec = AgentFactory().create(
            load_text(BLUEPRINT.replace("{model}", script.model), base_dir=ROOT),
            HostContext(model_client=client, toolkit_registry=registry),
        )
        store = SQLiteStore(Path(tmp) / "sessions.db")
        agent = Agent(spec, model=client, store=store, registry=registry, stream=False)
        types_seen: list[str] = []
        try:
            sys.setprofile(walker)
            try:
                async for event in agent.run("What is 6 times 7?"):
                    types_seen.append(event.type)
            finally:
                sys.setprofile(None)
        finally:
            await store.close()
        return types_seen


def _visits() -> _Visit:
    walker = _Walker()
    events = asyncio.run(_run_once(walker))
    if not events or events[-1] != "run.completed":
        raise RuntimeError(f"the scripted run did not complete: {events}")
    return walker.root


def measure() -> dict[str, Figure]:
    """Run the scripted run once under the profiler: its walk by each way of folding (``leaves``: the figure)."""
    root = _visits()
    return {fold: Figure(tuple(_walk(root, fold=fold))) for fold in ("leaves", "local", "none")}


def _tree(visit: _Visit, depth: int = 0) -> list[str]:
    """The visits as an indented tree, ``file: function`` a line (leaves marked)."""
    lines: list[str] = []
    for call in visit.calls:
        lines.append(f"{'  ' * depth}{call.file}: {call.function}{'' if call.calls else '  (leaf)'}")
        lines.extend(_tree(call, depth + 1))
    return lines


def main(argv: list[str] | None = None) -> int:
    """Print the figure (``--json``: as JSON; ``--path``: the folded walk, one stay a line)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--path", action="store_true", help="print the walk (leaves folded), one stay a line")
    parser.add_argument("--tree", action="store_true", help="print the visits as a tree (file: function)")
    args = parser.parse_args(argv)
    if args.tree:
        print("\n".join(_tree(_visits())))
        return 0
    figures = measure()
    folded = figures["leaves"]
    if args.json:
        print(
            json.dumps(
                {
                    "walk": folded.to_json(),
                    "local": figures["local"].to_json(),
                    "every_call": figures["none"].to_json(),
                },
                indent=2,
            )
        )
    elif args.path:
        print("\n".join(folded.walk))
    else:
        print(f"walk: {folded.summary()}")
        for name, count in folded.per_file().items():
            print(f"  {count:3d}  {name}")
        print(f"self-contained calls folded too: {figures['local'].summary()}")
        print(f"every call (nothing folded): {figures['none'].summary()}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # this checkout's codeact, whatever is installed
    raise SystemExit(main())
