"""A blueprint published as an A2A agent (``codeact a2a serve``): agent card, tasks, streaming, cancel.

The official ``a2a-sdk`` is imported only here, lazily (``pip install codeact[a2a]``).
"""

from __future__ import annotations

from codeact.engine.a2a.server import AgentExecutorAdapter, agent_card, build_app

__all__ = ["AgentExecutorAdapter", "agent_card", "build_app"]
