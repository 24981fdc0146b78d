"""``build``: the one way to turn a blueprint into something that runs, an agent or a flow.

Every entry point calls it or the assembly under it: ``codeact run``, ``serve`` and ``worker`` (through the
runner and the queued task), ``eval``, ``a2a``, the runner, ``Agent.from_blueprint`` and
``FlowAgent.from_blueprint``. It sits above both ``engine/agent`` and ``engine/flow`` (a flow's nodes are
agents) and only dispatches: an agent blueprint goes to ``engine.agent.assemble``, a flow blueprint
(``workflow.mode: flow``) to the flow builder; each owns what it opened.
"""

from __future__ import annotations

from collections.abc import Iterable
from os import PathLike
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from codeact.engine.agent import Agent, BuildOptions
    from codeact.engine.blueprint import Blueprint
    from codeact.engine.flow import FlowAgent
    from codeact.toolkits import ToolkitRegistry

__all__ = ["build"]


def build(
    blueprint: str | PathLike[str] | Blueprint,
    *,
    toolkits: Iterable[object] | ToolkitRegistry | None = (),
    options: BuildOptions | None = None,
) -> Agent | FlowAgent:
    """The agent, or the flow, of ``blueprint``, built for this host with ``options``.

    Close what it returns (``async with`` / ``with``, or ``aclose()``): it owns the model clients, the
    MCP servers and the store it opened (a ``Store`` object given in ``options`` stays open).

    Args:
        blueprint: Path of the blueprint YAML, or a loaded ``Blueprint``.
        toolkits: ``@toolkit`` classes or instances, ``MODULE:OBJECT`` strings, or a ``ToolkitRegistry``.
        options: The host's choices (:class:`~codeact.engine.agent.BuildOptions`; default: none).

    Raises:
        BlueprintLoadError: The file cannot be read or parsed.
        BlueprintFactoryError: The blueprint (or one of a flow's agents) is invalid for this host.
        ModelError: No model could be chosen, or a profile is missing.
        ToolkitError: A toolkit cannot be loaded, or an MCP server did not start.
        StoreError: The store URL is invalid.
    """
    from codeact.engine.agent import Agent, BuildOptions, assemble, load_blueprint
    from codeact.engine.blueprint import is_flow

    chosen = options if options is not None else BuildOptions()
    bp = load_blueprint(blueprint)
    if is_flow(bp):
        from codeact.engine.flow import FlowAgent

        return FlowAgent.from_blueprint(bp, toolkits=toolkits, options=chosen)
    return assemble(Agent, bp, toolkits=toolkits, options=chosen)
