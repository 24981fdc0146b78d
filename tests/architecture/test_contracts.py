"""Shared contracts sit in leaf modules that import nothing of the product (ARCHITECTURE.md section 11)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "segments", "sandbox", "toolkits", "prompts")

LEAVES = (
    "prompts/errors.py",  # the exception root and the error value (ErrorInfo)
)


def _product_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = ["." * node.level + (node.module or "")] if node.level else [node.module or ""]
        else:
            continue
        for name in names:
            top = name.removeprefix("codeact.").split(".")[0]
            if name.startswith(".") or name == "codeact" or top in PACKAGES:
                found.append(name)
    return found


@pytest.mark.parametrize("leaf", LEAVES)
def test_contract_module_is_a_leaf(leaf: str) -> None:
    assert _product_imports(ROOT / leaf) == []
