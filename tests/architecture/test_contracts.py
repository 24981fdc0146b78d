"""Shared contracts sit in leaf modules that import nothing of the product (ARCHITECTURE.md section 11).

A leaf imports nothing of the product at all. A contract module that raises the service's errors
may import exactly the modules listed for it at module level (a function may import more, lazily;
``if TYPE_CHECKING:`` imports cost nothing at run time).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "segments", "sandbox", "toolkits", "prompts")

LEAVES = (
    "prompts/errors.py",  # the exception root and the error value (ErrorInfo)
    "engine/blueprint/modes.py",  # WorkflowMode, ThoughtMode, SandboxBackend
    "engine/interceptors.py",  # the one guard around a model or tool interceptor (chain)
    "sandbox/runtime/protocol.py",  # the wire messages (also stdlib-only: it runs in the sandbox)
)

# module -> the product modules it may import at module level
CONTRACTS: dict[str, set[str]] = {
    "engine/service/errors.py": {"prompts.errors"},
    "engine/service/contract.py": {"engine.service.errors"},
}


def _product(name: str) -> str | None:
    local = name.removeprefix("codeact.")
    return local if local.split(".")[0] in PACKAGES or name.startswith(".") else None


def _imports(nodes: list[ast.stmt] | list[ast.AST], *, module_level: bool) -> set[str]:
    found: set[str] = set()
    for node in nodes:
        if module_level and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, ast.Import):
            found.update(n for a in node.names if (n := _product(a.name)))
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            if base == "codeact":
                found.update(n for a in node.names if (n := _product(a.name)))
            elif name := _product(base):
                found.add(name)
        elif module_level and isinstance(node, (ast.If, ast.Try)):
            found |= _imports(list(ast.iter_child_nodes(node)), module_level=True)
    return found


def _tree(path: str) -> ast.Module:
    return ast.parse((ROOT / path).read_text(encoding="utf-8"), filename=path)


@pytest.mark.parametrize("leaf", LEAVES)
def test_leaf_imports_nothing_of_the_product(leaf: str) -> None:
    assert _imports(list(ast.walk(_tree(leaf))), module_level=False) == set()


@pytest.mark.parametrize("module", sorted(CONTRACTS))
def test_contract_imports_only_its_contracts(module: str) -> None:
    assert _imports(_tree(module).body, module_level=True) <= CONTRACTS[module]
