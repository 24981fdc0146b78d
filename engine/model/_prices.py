"""litellm's bundled price and context-window map, read without importing litellm.

An OpenAI-compatible server called over httpx (:mod:`codeact.engine.model._openai_http`) still reports
cost, context window and vision support from the map litellm ships
(``litellm/model_prices_and_context_window_backup.json``, the one litellm itself reads with
``LITELLM_LOCAL_MODEL_COST_MAP=True``, which codeact sets). The file is read once, on first use
(about 3 MB: tens of milliseconds, against litellm's seconds). A model whose price has tiers
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
_map: dict[str, Any] | None = None


def _load() -> dict[str, Any]:
    global _map
    with _lock:
        if _map is None:
            spec = importlib.util.find_spec("litellm")  # finds the package without running it
            where = list(spec.submodule_search_locations or []) if spec is not None else []
            data: dict[str, Any] = {}
            for folder in where:
                path = Path(folder) / _MAP_FILE
                if path.is_file():
                    data = json.loads(path.read_text(encoding="utf-8"))
                    break
            _map = data
        return _map


def model_entry(model: str) -> dict[str, Any] | None:
    """The map's entry for ``openai/NAME`` (or ``NAME``) as litellm's ``get_model_info`` finds it, else None."""
    prices = _load()
    rest = model.split("/", 1)[1] if model.startswith("openai/") else model
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
