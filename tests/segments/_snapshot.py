"""Exact-text snapshots: ``CODEACT_UPDATE_SNAPSHOTS=1 pytest ...`` (re)writes them."""

from __future__ import annotations

import os
from pathlib import Path


def check_snapshot(directory: Path, name: str, text: str) -> None:
    path = directory / name
    if os.environ.get("CODEACT_UPDATE_SNAPSHOTS") == "1":
        path.write_bytes(text.encode("utf-8"))
    if not path.exists():
        raise AssertionError(f"snapshot {path} is missing: run the test with CODEACT_UPDATE_SNAPSHOTS=1 once")
    expected = path.read_bytes().decode("utf-8")
    assert text == expected, f"{name} differs from its snapshot; CODEACT_UPDATE_SNAPSHOTS=1 regenerates it"
