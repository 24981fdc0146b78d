"""Embedding retrieval through litellm's embedding API (when the blueprint names an embedding model)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from codeact.engine.memory.records import AgentMemoryError, MemoryItem

__all__ = ["cosine", "embed", "embedding_of"]

EMBEDDING_FIELD = "_embedding"


async def embed(texts: Sequence[str], *, model: str, api_base: str | None = None) -> list[list[float]]:
    """Embed ``texts`` with ``model`` (one litellm ``aembedding`` call).

    Raises:
        AgentMemoryError: The call failed (the message names the model).
    """
    if not texts:
        return []
    import litellm

    kwargs: dict[str, object] = {"model": model, "input": list(texts)}
    if api_base:
        kwargs["api_base"] = api_base
    try:
        response = await litellm.aembedding(**kwargs)
    except Exception as exc:  # litellm raises many provider-specific types
        raise AgentMemoryError(
            f"embedding model {model!r} failed: {exc}; check session.memory.config.experience.embeddingModel",
            code="memory.embedding",
        ) from None
    data = response.data if hasattr(response, "data") else response["data"]
    vectors = []
    for row in sorted(data, key=lambda r: r["index"] if isinstance(r, dict) else r.index):
        vector = row["embedding"] if isinstance(row, dict) else row.embedding
        vectors.append([float(x) for x in vector])
    return vectors


def embedding_of(item: MemoryItem, model: str) -> list[float] | None:
    """The stored vector of ``item`` for ``model``, if any."""
    stored = item.data.get(EMBEDDING_FIELD)
    if isinstance(stored, dict) and stored.get("model") == model and isinstance(stored.get("vector"), list):
        return [float(x) for x in stored["vector"]]
    return None


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity (0 when a vector is empty or zero)."""
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0
