"""A blueprint (its resolved ``AgentSpec``) -> the runner manifest."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from pydantic import ValidationError

from codeact.engine.errors import BlueprintError
from codeact.engine.runner.entities import (
    ConfigField,
    ContextPolicy,
    RunnerCapabilities,
    RunnerManifest,
    RunnerPermissions,
)

if TYPE_CHECKING:
    from codeact.engine.blueprint import AgentSpec, Blueprint

__all__ = ["declared_permissions", "manifest_for"]

_TYPES: list[tuple[type, str]] = [(bool, "boolean"), (int, "integer"), (float, "float"), (str, "string")]


def _config_field(name: str, default: object) -> ConfigField:
    kind = next((label for cls, label in _TYPES if isinstance(default, cls)), "string")
    return ConfigField(
        type=kind,
        name=name,
        label={"en_US": name.replace("_", " ").capitalize()},
        description={"en_US": f"The blueprint's instructions variable {name!r}."},
        default=default,
    )


def declared_permissions(blueprint: Blueprint | None, base: RunnerPermissions) -> RunnerPermissions:
    """``base`` (what the engine itself uses) with what the blueprint declares in ``extensions.runner.permissions``.

    A blueprint declares the host resources a runner's callers may reach beyond the engine's own use: the
    run-scoped API's history, events, artifacts and storage, and the platform actions its code may request
    (``platform_api: [message.edit]``). Each kind's list is added to ``base``'s (the seed's kinds, section 3.4).

    Raises:
        BlueprintError: ``blueprint.runner.permissions`` for an unknown kind or operation, naming the allowed ones.
    """
    extensions = blueprint.extensions if blueprint is not None else {}
    runner = extensions.get("runner") if isinstance(extensions, dict) else None
    declared = runner.get("permissions") if isinstance(runner, dict) else None
    if declared is None:
        return base
    where = f"blueprint {blueprint.id!r}: " if blueprint is not None and blueprint.id else ""
    if not isinstance(declared, dict):
        raise BlueprintError(
            f"{where}extensions.runner.permissions must be a mapping of kind -> list (e.g. history: [page]), "
            f"got {type(declared).__name__}",
            code="blueprint.runner.permissions",
        )
    try:
        extra = RunnerPermissions.model_validate(declared)
    except ValidationError as exc:
        problems = "; ".join(
            (".".join(map(str, error["loc"])) + ": " if error["loc"] else "")
            + error["msg"].removeprefix("Value error, ")
            for error in exc.errors()
        )
        raise BlueprintError(
            f"{where}extensions.runner.permissions: {problems}", code="blueprint.runner.permissions"
        ) from None
    merged = {
        kind: list(dict.fromkeys([*getattr(base, kind), *getattr(extra, kind)]))
        for kind in RunnerPermissions.model_fields
    }
    return RunnerPermissions.model_validate(merged)


def manifest_for(spec: AgentSpec, *, toolkits: Iterable[str] = (), streaming: bool) -> RunnerManifest:
    """The manifest of the runner that runs ``spec``.

    ``id``, ``name``, label and description come from the blueprint (``id``, ``name``,
    ``description``, else ``extensions.description``); the config schema from its declared inputs
    (``instructions.variables``: one field each, typed by its default); capabilities from what the
    engine does (streaming, interrupt, interactions: approvals and ``ask_user``, multimodal input for
    a codeact blueprint: image and file contents become files in the sandbox, images also image
    parts for a vision model (``engine/runner/_input.py``), tool calling and
    knowledge retrieval: a host's tools and knowledge bases become the ``host`` and ``knowledge``
    toolkits of a run, ``knowledge.list()`` and ``knowledge.retrieve(...)``); permissions: the host
    resources a run uses through the proxy (models invoke/stream, tools detail/call, knowledge
    bases list/retrieve, interactions), and what the blueprint declares in ``extensions.runner.permissions``
    (:func:`declared_permissions`: the run-scoped API's history, events, artifacts and storage, the platform
    actions its code may request). The context policy claims no history or artifact pull: codeact keeps its own
    sessions. The metadata lists the blueprint's own toolkits (and ``platform_api: true`` when it declares
    platform actions, a seed capability the SDK has no field for).

    Raises:
        BlueprintError: ``blueprint.runner.permissions``, the blueprint's declaration is not the protocol's.

    Args:
        spec: The resolved blueprint.
        toolkits: Names of the toolkits it is granted (default: its ``toolkits[]``/``tools[]`` refs).
        streaming: Whether its runs return ``message.delta`` (``mapper.streams_results``: what the
            agent's loop streams and what the mapper passes on).
    """
    granted = sorted(set(toolkits) or {g.ref for g in spec.toolkits} | {t.ref.split(".")[0] for t in spec.tools})
    extensions = spec.blueprint.extensions if spec.blueprint is not None else {}
    described = spec.blueprint.description if spec.blueprint is not None else None
    if not (isinstance(described, str) and described.strip()):
        described = extensions.get("description") if isinstance(extensions, dict) else None
    label = spec.name or spec.id
    described = described.strip() if isinstance(described, str) else ""
    description = described or f"codeact agent {spec.id!r}"
    permissions = declared_permissions(
        spec.blueprint,
        RunnerPermissions(
            models=["invoke", "stream"],
            tools=["detail", "call"],
            knowledge_bases=["list", "retrieve"],
            interactions=["request"],
        ),
    )
    config = [
        _config_field(name, value)
        for name, value in sorted(spec.variables.items())
        if isinstance(value, str | int | float | bool)
    ]
    return RunnerManifest(
        id=spec.id,
        name=spec.id,
        label={"en_US": label},
        description={"en_US": description},
        usages=["agent"],
        capabilities=RunnerCapabilities(
            streaming=streaming,
            tool_calling=True,
            knowledge_retrieval=True,
            multimodal_input=spec.kind == "codeact",  # files need a sandbox: a react agent takes text
            interrupt=True,
            interactions=True,
        ),
        permissions=permissions,
        config_schema=config,
        metadata={
            **({"platform_api": True} if permissions.platform_api else {}),
            "engine": "codeact",
            "kind": spec.kind,
            "blueprint_hash": spec.blueprint_hash,
            "toolkits": granted,
            "max_turns": spec.max_turns,
            "stateful_session": True,
            # codeact keeps its own sessions: it neither pulls the host's history nor its artifacts
            "context_policy": ContextPolicy(supports_history_pull=False, supports_artifact_pull=False).model_dump(
                mode="json"
            ),
        },
    )
