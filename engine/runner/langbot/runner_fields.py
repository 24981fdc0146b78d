"""Form fields every codeact LangBot Runner declares (no SDK import here)."""

from __future__ import annotations

__all__ = ["MODEL_FIELD"]

MODEL_FIELD: dict[str, object] = {
    "type": "llm-model-selector",
    "name": "model",
    "label": {"en_US": "Model", "zh_Hans": "模型"},
    "description": {"en_US": "The platform model the agent writes its code with."},
    "required": False,
}
"""The binding's model choice (``context.config["model"]``), added to every plugin's config form."""
