"""Architecture guards: ARCHITECTURE.md section 2 import direction and lazy heavy dependencies."""

from __future__ import annotations

import ast
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
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


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
            if top == "sandbox" and name.startswith("sandbox.runtime"):
                continue
            if top not in sys.stdlib_module_names:
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert offenders == []


@pytest.mark.parametrize(
    "package", ["engine", "segments", "toolkits", "sandbox", "prompts", "engine.cli", "engine.model.local"]
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


@pytest.mark.parametrize("package", PACKAGES)
def test_all_is_sorted_and_resolves(package: str) -> None:
    module = __import__(package)
    exported = list(getattr(module, "__all__", []))
    assert exported == sorted(exported)
    missing = [name for name in exported if not hasattr(module, name)]
    assert missing == []
