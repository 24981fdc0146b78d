"""Writing stored artifacts to a folder (``--artifacts DIR`` of ``run``, ``exec`` and ``sessions show``)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["write_artifacts"]


def write_artifacts(directory: Path, artifacts: Iterable[Mapping[str, Any]]) -> list[Path]:
    """Write each kept artifact (``{"name", "data_b64", ...}``) under ``directory``; refused ones are skipped.

    A later artifact of the same name (a later round) replaces the earlier file. Names are paths
    relative to ``outputs/``; one that would leave ``directory`` is skipped.

    Returns:
        The files written.
    """
    root = directory.resolve()
    root.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for item in artifacts:
        name, encoded = item.get("name"), item.get("data_b64")
        if item.get("refused") is not None or not isinstance(name, str) or not isinstance(encoded, str):
            continue
        target = (root / name).resolve()
        if not target.is_relative_to(root) or target == root:
            continue
        try:
            data = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        written.append(target)
    return written
