"""codeact as a LangBot plugin (the ``langbot`` extra): a blueprint as a LangBot Runner component.

``write_plugin(dest, "agent.yaml", author="me")`` writes the plugin directory; its Runner
subclasses :class:`CodeactRunner` (importing it needs ``pip install codeact[langbot]``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from codeact.engine.runner.langbot.package import component_manifest, write_plugin
from codeact.engine.runner.langbot.runner_fields import MODEL_FIELD

if TYPE_CHECKING:
    from codeact.engine.runner.langbot.runner import CodeactRunner, SdkTransport

__all__ = ["MODEL_FIELD", "CodeactRunner", "SdkTransport", "component_manifest", "write_plugin"]


def __getattr__(name: str) -> Any:
    """``CodeactRunner`` and ``SdkTransport`` import the LangBot SDK on first use."""
    if name in ("CodeactRunner", "SdkTransport"):
        from codeact.engine.runner.langbot import runner

        return getattr(runner, name)
    raise AttributeError(f"module 'codeact.engine.runner.langbot' has no attribute {name!r}")
