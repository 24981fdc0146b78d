"""Model client overhead: a scripted call vs taking the reply from the script directly; a base-URL call vs a raw POST.

Figures: litellm import time, per-call milliseconds (plain and streamed) through ModelClient, the
baseline (``ScriptedReplies.take``) and the ratio; a call to the local OpenAI-compatible test server
through ModelClient (httpx, no litellm) against a raw POST of the same body with httpx to the same
server in the same run (``http_local_call_over_raw_ms``: what the client adds per call).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

N = 200


def _ms(seconds: float, n: int) -> float:
    return round(seconds / n * 1000, 3)


async def _calls(n: int, *, stream: bool) -> float:
    from codeact.engine.model import ModelClient, ModelSettings, ScriptedReplies

    script = ScriptedReplies(["x = 1\nprint(x)\n"] * n)
    client = ModelClient(ModelSettings(model=script.model), env={})
    messages = [{"role": "user", "content": "round"}]
    sink: list[str] = []
    started = time.perf_counter()
    for _ in range(n):
        await client.complete(messages=messages, on_delta=sink.append if stream else None)
    return time.perf_counter() - started


_BODY = {"model": "gpt-4.1-mini", "messages": [{"role": "user", "content": "round"}]}


async def _raw_post(n: int) -> float:
    import httpx

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.engine.openai_server import serve

    with serve(["x = 1"] * n) as server:
        async with httpx.AsyncClient() as client:
            url = server.base_url + "/chat/completions"
            started = time.perf_counter()
            for _ in range(n):
                response = await client.post(url, json=_BODY, headers={"Authorization": "Bearer sk-no-key"})
                response.raise_for_status()
                response.json()
            return time.perf_counter() - started


async def _http(n: int) -> float:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from codeact.engine.model import ModelClient, ModelSettings
    from tests.engine.openai_server import serve

    with serve(["x = 1"] * n) as server:
        client = ModelClient(ModelSettings(model="gpt-4.1-mini", api_base=server.base_url), env={})
        started = time.perf_counter()
        for _ in range(n):
            await client.complete(messages=[{"role": "user", "content": "round"}])
        elapsed = time.perf_counter() - started
        await client.aclose()
        return elapsed


def run() -> dict[str, Any]:
    """Measure and return the figures."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from codeact.engine.model import ScriptedReplies
    from codeact.engine.model._litellm import _litellm

    started = time.perf_counter()
    _litellm()
    import_s = time.perf_counter() - started

    script = ScriptedReplies(["x = 1\nprint(x)\n"] * N)
    started = time.perf_counter()
    for _ in range(N):
        script.take("code", messages=[{"role": "user", "content": "round"}])
    baseline = time.perf_counter() - started

    asyncio.run(_calls(10, stream=False))  # warm-up
    plain = asyncio.run(_calls(N, stream=False))
    streamed = asyncio.run(_calls(N, stream=True))
    asyncio.run(_http(10))  # warm-up
    asyncio.run(_raw_post(10))
    # Alternated, best of three each: on a shared machine a burst of load must not land on one side only.
    pairs = [(asyncio.run(_http(N)), asyncio.run(_raw_post(N))) for _ in range(3)]
    http, raw = min(h for h, _ in pairs), min(r for _, r in pairs)
    return {
        "litellm_import_s": round(import_s, 2),
        "baseline_take_ms": _ms(baseline, N),
        "scripted_call_ms": _ms(plain, N),
        "scripted_stream_call_ms": _ms(streamed, N),
        "http_local_call_ms": _ms(http, N),
        "http_raw_post_ms": _ms(raw, N),
        "http_local_call_over_raw_ms": round(_ms(http, N) - _ms(raw, N), 3),
        "scripted_call_vs_baseline": round(plain / baseline, 1),
    }


if __name__ == "__main__":
    print(run())
