"""The README's "Install" section names every extra pyproject declares, and how to get the wheel."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _install_section() -> str:
    return (REPO / "README.md").read_text().split("\n## Install\n", 1)[1].split("\n## ", 1)[0]


def test_every_extra_has_a_row() -> None:
    extras = set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    rows = set(re.findall(r"^\| `([a-z0-9]+)` \|", _install_section(), re.M))
    assert rows == extras


def test_the_local_row_says_pull_then_the_extra() -> None:
    row = next(line for line in _install_section().splitlines() if line.startswith("| `local` |"))
    assert "--model local/NAME" in row and "codeact models pull NAME" in row and "needs this extra" in row


def test_the_section_builds_and_installs_the_wheel_and_the_image() -> None:
    section = _install_section()
    for command in ("make dist", "pip install dist/codeact-0.1.0-py3-none-any.whl", "codeact --version",
                    "codeact sandbox image build"):  # fmt: skip
        assert f"\n{command}" in section, command
    assert "pip install codeact\n" not in (REPO / "README.md").read_text()  # not on the index
