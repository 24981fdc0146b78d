"""The console's session page for a 200-round session: server time to render it (goal < 300 ms).

A SQLite store gets one session of 200 rounds written the way the agent records them (a thought,
~25 lines of code, two toolkit calls, stdout, a changed variable; every 20th round an error). The
page is requested through the console's ASGI app in-process (httpx's ASGI transport: no socket, so
the figure is the server's own time): the median and p95 of 15 loads after a warm-up, and the median of 5 loads with the
highlighted code not cached (``page_cold_ms_median``: the first visitor). Baseline in
the same run: reading the same session from the store alone (``Store.read_rounds``), which the page
must do anyway; ``page_vs_store_read`` is the ratio.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROUNDS = 200
LOADS = 15
TOKEN = "bench-token"


@dataclass
class _Tokens:
    def check(self, presented: str) -> object | None:
        return "all" if presented == TOKEN else None


@dataclass
class _State:
    store: Any
    tokens: _Tokens = field(default_factory=_Tokens)
    runs: Any = None


def _code(i: int) -> str:
    body = "\n".join(f"    total_{j} = sum(range({i + j}))  # step {j}" for j in range(20))
    tail = "ratio = total_0 / 0\n" if i % 20 == 0 else f'print(f"round {i}: {{len(rows)}} rows")\n'
    return f"def step_{i}(rows):\n{body}\n    return rows\n\nrows = await shop.list(page={i})\n{tail}"


async def _record(store: Any) -> str:
    from codeact.engine.store import RoundRecord, SessionMeta

    sid = "bench-200"
    await store.create_session(SessionMeta(session_id=sid, blueprint_id="bench", blueprint_hash="h", model="m"))
    variables: dict[str, Any] = {}
    for i in range(1, ROUNDS + 1):
        variables = {**variables, f"v{i % 30}": {"round": i, "rows": list(range(i % 12))}, "last": f"round {i}"}
        calls = tuple(
            {"sequence": k, "session_id": sid, "toolkit": "shop", "operation": "list", "arguments": {"page": i},
             "result": [{"sku": f"A-{k}", "units": i}], "started_at": time.time(), "duration_s": 0.002}
            for k in range(2)
        )  # fmt: skip
        error = {"type": "ZeroDivisionError", "message": "division by zero", "line": 26, "traceback": "..."}
        record = RoundRecord(
            session_id=sid,
            index=i,
            started_at=time.time(),
            duration_s=0.3,
            prompt_hash="p",
            reply=f"Thought: step {i}, I list the shop's page {i}.\n```python\n{_code(i)}```",
            code=_code(i),
            calls=calls,
            stdout="\n".join(f"line {k} of round {i}" for k in range(8)) + "\n",
            error=error if i % 20 == 0 else None,
            status="error" if i % 20 == 0 else "ok",
            variables=variables,
            usage={"total_tokens": 900 + i, "cost": 0.0004},
        )
        await store.append_round(record, segments=[], variables=variables)
    await store.update_session(sid, status="completed")
    return sid


async def _measure(db: Path) -> dict[str, Any]:
    import httpx
    from starlette.applications import Starlette

    from codeact.engine.service.console import console_routes
    from codeact.engine.service.console._highlight import highlight
    from codeact.engine.store import open_store

    async with open_store(f"sqlite:///{db}") as store:
        sid = await _record(store)
        app = Starlette(routes=console_routes(_State(store=store)))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://console") as client:
            headers = {"Authorization": f"Bearer {TOKEN}"}
            page = await client.get(f"/sessions/{sid}", headers=headers)  # warm-up (templates compile)
            assert page.status_code == 200 and page.text.count('class="round ') == ROUNDS, page.status_code
            loads, reads = [], []
            for _ in range(LOADS):
                started = time.perf_counter()
                answer = await client.get(f"/sessions/{sid}", headers=headers)
                loads.append(time.perf_counter() - started)
                answer.raise_for_status()
                started = time.perf_counter()
                await store.read_rounds(sid)
                reads.append(time.perf_counter() - started)
            cold = []
            for _ in range(5):  # no highlighted code cached: what the first visitor of a session waits
                highlight.cache_clear()
                started = time.perf_counter()
                (await client.get(f"/sessions/{sid}", headers=headers)).raise_for_status()
                cold.append(time.perf_counter() - started)
            listing = []
            for _ in range(5):
                started = time.perf_counter()
                (await client.get("/", headers=headers)).raise_for_status()
                listing.append(time.perf_counter() - started)
    page_ms = statistics.median(loads) * 1000
    read_ms = statistics.median(reads) * 1000
    return {
        "rounds": ROUNDS,
        "page_bytes": len(page.content),
        "page_ms_median": round(page_ms, 1),
        "page_ms_p95": round(sorted(loads)[int(0.95 * (LOADS - 1))] * 1000, 1),
        "page_cold_ms_median": round(statistics.median(cold) * 1000, 1),
        "store_read_ms_median": round(read_ms, 1),
        "page_vs_store_read": round(page_ms / read_ms, 2) if read_ms else None,
        "sessions_list_ms_median": round(statistics.median(listing) * 1000, 1),
        "goal_page_ms": 300,
        "goal_met": page_ms < 300,
    }


def run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        return asyncio.run(_measure(Path(folder) / "bench.db"))


if __name__ == "__main__":
    print(run())
