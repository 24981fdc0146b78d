"""Architecture guards: ARCHITECTURE.md section 2 import direction and lazy heavy dependencies."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "segments", "sandbox", "toolkits", "prompts")

# package -> the first-party packages it may import (besides itself)
ALLOWED: dict[str, set[str]] = {
    "engine": {"segments", "sandbox", "toolkits", "prompts"},
    "segments": {"prompts"},
    "toolkits": {"sandbox", "prompts"},
    "sandbox": {"prompts"},
    "prompts": set(),
}


def _imports(path: Path) -> set[str]:
    """The absolute module names a file imports, ``codeact.`` prefix removed (``from codeact import x`` -> ``x``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(_local(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "codeact":
                names.update(alias.name for alias in node.names)
            else:
                names.add(_local(node.module))
    return names


def _local(name: str) -> str:
    return name.removeprefix("codeact.")


def _bare_imports(path: Path) -> list[str]:
    """Imports of a product package by its bare name (``import engine``): they load a second copy."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in PACKAGES]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in PACKAGES:
                found.append(node.module)
    return found


def _files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", PACKAGES)
def test_import_direction(package: str) -> None:
    offenders = []
    for path in _files(package):
        if package == "sandbox" and "runtime" in path.relative_to(ROOT / "sandbox").parts:
            continue  # checked by test_runtime_is_stdlib_only
        for name in _imports(path):
            top = name.split(".")[0]
            if top in PACKAGES and top != package and top not in ALLOWED[package]:
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert offenders == []


def test_runtime_is_stdlib_only() -> None:
    offenders = []
    for path in _files("sandbox/runtime"):
        for name in _imports(path):
            top = name.split(".")[0]
            if name.startswith("sandbox.runtime"):
                continue
            if top not in sys.stdlib_module_names:
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert offenders == []


@pytest.mark.parametrize(
    "package", ["codeact", *(f"codeact.{p}" for p in PACKAGES), "codeact.engine.cli", "codeact.engine.model.local"]
)
def test_import_loads_no_heavy_dependency(package: str) -> None:
    code = (
        f"import sys, {package}\n"
        "names = ('litellm', 'redis', 'docker', 'RestrictedPython', 'xllamacpp')\n"
        "heavy = sorted(m for m in names if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    heavy = [m for m in out.stdout.strip().split(",") if m]
    # RestrictedPython is light but belongs to the subprocess backend only.
    assert heavy == []


@pytest.mark.parametrize("package", ["codeact", *(f"codeact.{p}" for p in PACKAGES)])
def test_all_is_sorted_and_resolves(package: str) -> None:
    module = importlib.import_module(package)
    exported = list(getattr(module, "__all__", []))
    assert exported == sorted(exported)
    missing = [name for name in exported if not hasattr(module, name)]
    assert missing == []


def test_code_imports_the_product_only_through_the_codeact_namespace() -> None:
    """The wheel installs one top-level package; a bare ``import engine`` works only in a checkout."""
    offenders = []
    files = [ROOT / "codeact" / "__init__.py"]
    for top in (*PACKAGES, "tests", "examples", "bench"):
        files += sorted((ROOT / top).rglob("*.py"))
    for path in files:
        offenders += [f"{path.relative_to(ROOT)} imports {name}" for name in _bare_imports(path)]
    assert offenders == []


def test_the_namespace_folders_are_the_repository_folders() -> None:
    """``codeact/<package>`` is a link to the top-level folder, so both names show the same files."""
    for package in PACKAGES:
        link = ROOT / "codeact" / package
        assert link.is_symlink(), link
        assert link.resolve() == (ROOT / package).resolve()
