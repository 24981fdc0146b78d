"""A round's artifacts in the loop: ``artifact.created`` events and the line the model reads.

The sandbox returns the files the code wrote into ``outputs/`` (``ExecutionResult.artifacts``);
the round record stores them (``RoundRecord.artifacts``). This module tells the host (one event
per file, with the address to fetch it) and the model (its Evaluation says which files were
produced and which were refused, rendered by ``prompts/artifacts.j2``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from codeact import prompts
from codeact.engine.events import ArtifactCreated

if TYPE_CHECKING:
    from codeact.sandbox.artifacts import Artifact

__all__ = ["artifact_uri", "emit_artifacts", "with_artifacts"]


def artifact_uri(session_id: str, round_index: int, name: str) -> str:
    """``codeact://sessions/<session>/rounds/<n>/artifacts/<name>``: where a stored artifact lives."""
    return f"codeact://sessions/{quote(session_id, safe='')}/rounds/{round_index}/artifacts/{quote(name)}"


def emit_artifacts(ctx: Any, round_index: int, artifacts: Sequence[Artifact]) -> None:
    """One ``artifact.created`` event per artifact of the round (kept or refused)."""
    for artifact in artifacts:
        ctx.emit(
            ArtifactCreated,
            round=round_index,
            session_id=ctx.session_id,
            name=artifact.name,
            mime=artifact.mime,
            size=artifact.size,
            refused=artifact.refused,
            uri="" if artifact.refused else artifact_uri(ctx.session_id, round_index, artifact.name),
        )


def with_artifacts(evaluation: str, artifacts: Sequence[Artifact]) -> str:
    """``evaluation`` followed by the artifacts line(s); unchanged when the round produced none."""
    if not artifacts:
        return evaluation
    kept = [{"name": a.name, "mime": a.mime, "size": a.size} for a in artifacts if a.refused is None]
    refused = [{"name": a.name, "reason": a.refused} for a in artifacts if a.refused is not None]
    note = prompts.render("artifacts.j2", kept=kept, refused=refused).strip()
    return f"{evaluation}\n{note}" if note else evaluation
