"""Helpers for the console tests: recorded sessions, a real server on a free port, a real browser."""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import os
import shutil
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from codeact.toolkits import operation, toolkit
from tests.conftest import missing_service
from tests.ports import free_port

TOKEN = "console-test-token-9f2c"
HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'

BLUEPRINT = """\
version: codeact.agent/v1
extend: codeact-base
id: {id}
toolkits:
  - ref: inventory
workflow:
  maxTurns: 6
  codeact:
    thought: inline
"""


def png(width: int = 48, height: int = 32) -> bytes:
    """A small real PNG (a red and blue split), made here so the test ships no binary."""
    rows = b"".join(
        b"\x00" + b"".join(b"\xd0\x30\x30" if x < width // 2 else b"\x30\x50\xd0" for x in range(width))
        for _ in range(height)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


@toolkit(name="inventory", description="The shop's stock")
class Inventory:
    """Stock levels; ``gate`` (when set) holds ``wait`` until the test opens it."""

    gate: threading.Event | None = None

    @operation
    async def stock(self, sku: str) -> int:
        """Units in stock.

        Args:
            sku: The article.
        """
        return {"A-1": 3, "B-2": 0}.get(sku, 0)

    @operation
    async def wait(self, what: str) -> str:
        """Wait until the warehouse answers.

        Args:
            what: What to wait for.
        """
        gate = type(self).gate
        if gate is not None:
            await asyncio.get_running_loop().run_in_executor(None, gate.wait, 30)
        return f"{what}: ready"


def recorded_replies() -> list[str]:
    """Replies the way models write them: prose, a function, a broken round, an artifact, a finish."""
    return [
        "Thought: I look the stock up first and keep a helper for later.\n"
        "```python\ndef units(sku):\n    return sku.upper()\n\nn = await inventory.stock(sku=units('a-1'))\n"
        'print(f"A-1: {n} units")\n```',
        "Now the ratio per shelf.\n```python\nshelves = 0\nratio = n / shelves\n```",
        f"Oops, no shelves. I keep the supplier's note as it is.\n```python\nnote = {HOSTILE!r}\nprint(note)\n```",
        'Done.\n```python\nsystem.finish(f"{n} units of A-1")\n```',
    ]


async def record_child(store_url: str, parent: str) -> str:
    """A sub-agent session of ``parent`` (``<parent>.<name>.<n>``) whose round wrote a chart and a CSV.

    Written through the store API as the agent records a round (the sandbox's default policy has no
    ``open()`` and this machine no matplotlib, so the artifact round is recorded directly).
    """
    from codeact.engine.store import RoundRecord, SessionMeta, open_store

    session_id = f"{parent}.analyst.1"
    code = 'import matplotlib.pyplot as plt\nplt.bar(["A-1", "B-2"], [3, 0])\nplt.show()\nrows = "sku,units\\nA-1,3"\n'
    artifacts = (
        {"name": "figure-1.png", "mime": "image/png", "size": len(png()), "refused": None,
         "data_b64": base64.b64encode(png()).decode()},
        {"name": "stock.csv", "mime": "text/csv", "size": 14, "refused": None,
         "data_b64": base64.b64encode(b"sku,units\nA-1,3\n").decode()},
    )  # fmt: skip
    async with open_store(store_url) as store:
        await store.create_session(
            SessionMeta(session_id=session_id, blueprint_id="analyst", blueprint_hash="h", model="scripted/analyst")
        )
        record = RoundRecord(
            session_id=session_id,
            index=1,
            started_at=time.time(),
            duration_s=0.4,
            prompt_hash="p",
            reply=f"I chart the stock.\n```python\n{code}```",
            code=code,
            stdout="",
            variables={"rows": "sku,units\nA-1,3"},
            usage={"total_tokens": 321, "cost": 0.0012},
            artifacts=artifacts,
        )
        await store.append_round(record, segments=[], variables=record.variables)
        await store.update_session(session_id, status="completed")
    return session_id


def run_agent(
    store_url: str,
    folder: Path,
    replies: Sequence[str],
    *,
    blueprint: str = "shop",
    session_id: str | None = None,
    input: str = "How many A-1 are in stock?",
) -> Any:
    """Run a blueprint once with the scripted model (real sandbox, real store); return the RunResult."""
    from codeact.engine import Agent
    from codeact.engine.model.scripted import ScriptedReplies

    path = folder / f"{blueprint}.yaml"
    path.write_text(BLUEPRINT.format(id=blueprint))
    scripted = ScriptedReplies(list(replies))

    def run() -> Any:  # in a thread of its own: the caller may be inside an event loop
        with Agent.from_blueprint(
            path, toolkits=[Inventory], model=scripted.model, store=store_url, sandbox="subprocess"
        ) as agent:
            return agent.run_sync(input, session_id=session_id)

    return in_thread(run)


def in_thread(fn: Callable[[], Any], timeout: float = 120) -> Any:
    """``fn()`` in a thread of its own (pytest-asyncio may have a loop running in this one)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(fn).result(timeout=timeout)


@dataclass
class FakeTokens:
    """The service's ``Tokens.check`` shape: a scope object for a known token, else None."""

    known: frozenset[str] = frozenset({TOKEN})

    def check(self, presented: str) -> object | None:
        return "all" if presented in self.known else None


@dataclass
class ConsoleOnlyState:
    """A ``ServiceState`` stand-in with the fields the console reads (store, tokens, runs)."""

    store: Any
    tokens: FakeTokens = field(default_factory=FakeTokens)
    runs: Any = None


@contextlib.contextmanager
def serve_console(store_url: str) -> Iterator[str]:
    """The console's routes in a Starlette app on uvicorn (a free port, its own thread); yields the base URL."""
    import uvicorn
    from starlette.applications import Starlette

    from codeact.engine.service.console import console_routes
    from codeact.engine.store import open_store

    store = open_store(store_url)
    state = ConsoleOnlyState(store=store)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> Any:
        async with store:
            yield

    app = Starlette(routes=console_routes(state), lifespan=lifespan)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the console server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def chromium_path() -> str:
    """Debian's Chromium (scripts/setup.d/browser.sh exports CODEACT_CHROMIUM); a failure under make test."""
    path = os.environ.get("CODEACT_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        missing_service("Chromium missing: CODEACT_CHROMIUM is not set and no chromium on PATH")
        raise AssertionError("unreachable")
    return path


@contextlib.contextmanager
def browser() -> Iterator[Any]:
    """One headless Chromium under Playwright (executable_path: never a downloaded browser)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is missing: `make install` installs the dev extra", pytrace=False)
    path = chromium_path()
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            yield b
        finally:
            b.close()


DOCS = Path(__file__).resolve().parents[2] / "docs" / "console"


_SHOTS: list[Path] = []


def screenshot(page: Any, name: str) -> Path:
    """Take a screenshot: under docs/console/ (committed) with ``CODEACT_UPDATE_SCREENSHOTS=1``, else a tmp dir.

    So ``make test`` leaves the tree clean; refresh the committed images with
    ``CODEACT_UPDATE_SCREENSHOTS=1 pytest tests/console``.
    """
    if os.environ.get("CODEACT_UPDATE_SCREENSHOTS") == "1":
        folder = DOCS
    else:
        if not _SHOTS:
            import atexit
            import tempfile

            _SHOTS.append(Path(tempfile.mkdtemp(prefix="codeact-console-shots-")))
            atexit.register(shutil.rmtree, _SHOTS[0], True)
        folder = _SHOTS[0]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    page.screenshot(path=str(path), full_page=False)
    return path
