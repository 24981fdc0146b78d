"""litellm's bundled price and context-window map, read without importing litellm.

An OpenAI-compatible server called over httpx (:mod:`codeact.engine.model._openai_http`) still reports
cost, context window and vision support from the map litellm ships
(``litellm/model_prices_and_context_window_backup.json``, the one litellm itself reads with
``LITELLM_LOCAL_MODEL_COST_MAP=True``, which codeact sets). The file is read once, on first use, and
parsed (about 3 MB: tens of milliseconds, against litellm's seconds) only when it names the model: a
local server's model (``qwen2.5-coder``) is answered from the text alone. A model whose price has tiers
(``..._above_200k_tokens``) is left to litellm (:func:`simple_cost` answers ``...``), so the figure is
always litellm's; a test compares the two over every model of the map.
"""

from __future__ import annotations

import importlib.util
import json
import threading
from pathlib import Path
from types import EllipsisType
from typing import Any

__all__ = ["model_entry", "simple_cost"]

_MAP_FILE = "model_prices_and_context_window_backup.json"
_lock = threading.Lock()
_text: str | None = None
_map: dict[str, Any] | None = None


def _read() -> str:
    global _text
    with _lock:
        if _text is None:
            spec = importlib.util.find_spec("litellm")  # finds the package without running it
            where = list(spec.submodule_search_locations or []) if spec is not None else []
            files = [Path(folder) / _MAP_FILE for folder in where]
            _text = next((f.read_text(encoding="utf-8") for f in files if f.is_file()), "{}")
        return _text


def _load() -> dict[str, Any]:
    global _map
    text = _read()
    with _lock:
        if _map is None:
            _map = json.loads(text)
        return _map


def model_entry(model: str) -> dict[str, Any] | None:
    """The map's entry for ``openai/NAME`` (or ``NAME``) as litellm's ``get_model_info`` finds it, else None."""
    rest = model.split("/", 1)[1] if model.startswith("openai/") else model
    text = _read()
    if not any(json.dumps(key, ensure_ascii=False) in text for key in (model, rest)):
        return None  # a model the map does not name (a local server's): no need to parse 3 MB of JSON
    prices = _load()
    for key in (model, rest):
        entry = prices.get(key)
        if isinstance(entry, dict) and entry.get("litellm_provider") in ("openai", "text-completion-openai"):
            return entry
    return None


def simple_cost(model: str, *, prompt_tokens: int, completion_tokens: int) -> float | None | EllipsisType:
    """Cost in USD of a call, as ``litellm.cost_per_token`` gives it; None when the model is not priced.

    ``...`` when the price has tiers or other terms this reader does not apply: ask litellm.
    """
    entry = model_entry(model)
    if entry is None:
        return None
    if any("_above_" in key for key in entry):
        return ...
    prompt_price = entry.get("input_cost_per_token")
    completion_price = entry.get("output_cost_per_token")
    if not isinstance(prompt_price, int | float) or not isinstance(completion_price, int | float):
        return ...
    return float(prompt_price) * prompt_tokens + float(completion_price) * completion_tokens
