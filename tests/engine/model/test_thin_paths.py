"""What the routes without litellm read from litellm's own data agree with litellm.

Base-URL routes price calls and find context windows from litellm's bundled map without importing it
(``_prices``); hosted routes name their missing key without it (``KEY_VARIABLES``). litellm is imported
here only to compare.
"""

from __future__ import annotations

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from codeact.engine.model import ModelClient, ModelServerError, ModelSettings
from codeact.engine.model._litellm import _litellm
from codeact.engine.model._prices import _load, model_entry, simple_cost
from codeact.engine.model.client import KEY_VARIABLES


def _openai_models() -> list[str]:
    return sorted(
        name
        for name, entry in _load().items()
        if isinstance(entry, dict) and entry.get("litellm_provider") == "openai" and "/" not in name
    )


def test_the_map_is_litellm_s_and_holds_openai_models() -> None:
    litellm: Any = _litellm()
    assert len(_openai_models()) > 50
    assert "gpt-4.1-mini" in litellm.model_cost and model_entry("openai/gpt-4.1-mini") is not None


def test_cost_and_context_window_equal_litellm_s_for_every_openai_model() -> None:
    litellm: Any = _litellm()
    compared = 0
    for name in _openai_models():
        model = f"openai/{name}"
        mine = simple_cost(model, prompt_tokens=1234, completion_tokens=567)
        if mine is ...:
            continue  # tiered prices: the client asks litellm itself
        try:
            prompt_cost, completion_cost = litellm.cost_per_token(model=model, prompt_tokens=1234,
                                                                  completion_tokens=567)  # fmt: skip
        except Exception:
            theirs = None
        else:
            theirs = float(prompt_cost) + float(completion_cost)
        if theirs is None:
            assert mine is None, model
        else:
            assert mine is not None and math.isclose(mine, theirs, rel_tol=1e-9, abs_tol=1e-12), model
        info = litellm.get_model_info(model)
        entry = model_entry(model) or {}
        assert (entry.get("max_input_tokens") or entry.get("max_tokens")) == (
            info.get("max_input_tokens") or info.get("max_tokens")
        ), model
        compared += 1
    assert compared > 50


def test_a_model_the_map_does_not_hold_has_no_price() -> None:
    assert simple_cost("openai/qwen2.5-coder", prompt_tokens=10, completion_tokens=10) is None
    assert model_entry("openai/qwen2.5-coder") is None


@pytest.mark.parametrize("provider", sorted(KEY_VARIABLES))
def test_key_variables_are_the_ones_litellm_asks_for(provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    litellm: Any = _litellm()
    for name in KEY_VARIABLES[provider]:
        monkeypatch.delenv(name, raising=False)
    missing = set(litellm.validate_environment(model=f"{provider}/some-model")["missing_keys"])
    assert KEY_VARIABLES[provider][0] in missing
    assert missing <= set(KEY_VARIABLES[provider])


class _Odd(BaseHTTPRequestHandler):
    """A server that answers 200 with JSON that is not a completion (a proxy's status page, a wrong path)."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.dumps({"status": "ok"}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return


async def test_a_reply_without_choices_is_a_server_error_that_says_what_came() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Odd)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/v1"
        client = ModelClient(ModelSettings(model="qwen2.5-coder", api_base=base, max_retries=0), env={})
        with pytest.raises(ModelServerError) as info:
            await client.complete(messages=[{"role": "user", "content": "x"}])
        await client.aclose()
    finally:
        server.shutdown()
        server.server_close()
    assert str(info.value) == (
        f"model 'openai/qwen2.5-coder' at {base} failed on the provider's side: the server's reply has no choices: "
        '\'{"status": "ok"}\'; the provider failed; retry later or use another model (--model)'
    )
