"""No module imports another package's private module or name (STYLE.md rule 2, issue 37).

A ``_``-prefixed component of an import path is private to what comes before it: ``a.b._c`` (a
private module) to the package ``a.b``, ``a.b.c._x`` (a private name of a module) to the module
``a.b.c``. A module may import it only from inside that owner: its package (the directory that holds
it) is the owner or lies below it. So ``engine/service/_runs.py`` may import
``engine.service._log``; ``engine/queue/_manager.py`` may not, and imports the package's public face
(``codeact.engine.service``) or a public module (``engine.service.contract``) instead.

``REMAINING`` lists the imports still reaching in, each in a file of another workstream of issue 37
(its owner moves it to a public name); the list only shrinks: a listed import that is gone fails
the test too, so its line is deleted with the fix.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "segments", "sandbox", "toolkits", "prompts")

# (file, the private path it imports) -> why it is still here
REMAINING: dict[tuple[str, str], str] = {}


def _module_of(path: Path) -> tuple[str, str]:
    """``(module, package)``: ``engine/queue/_manager.py`` -> (``engine.queue._manager``, ``engine.queue``)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == "__init__":
        dotted = ".".join(parts[:-1])
        return dotted, dotted
    return ".".join(parts), ".".join(parts[:-1])


def _imported(tree: ast.AST, package: str) -> list[tuple[int, str]]:
    """Every dotted path a file imports (``from X import a`` gives ``X`` and ``X.a``), ``codeact.`` removed."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name.removeprefix("codeact.")) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = (node.module or "").removeprefix("codeact")
                module = module.removeprefix(".")
            found.append((node.lineno, module))
            found += [(node.lineno, f"{module}.{a.name}" if module else a.name) for a in node.names]
    return found


def _private_owner(dotted: str) -> tuple[str, str] | None:
    """``(owner, private path)`` for a product path with a private component, else None."""
    parts = dotted.split(".")
    if parts[0] not in PACKAGES:
        return None
    for index, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:index]), ".".join(parts[: index + 1])
    return None


def _violations() -> set[tuple[str, str, int]]:
    found: set[tuple[str, str, int]] = set()
    for top in PACKAGES:
        for path in sorted((ROOT / top).rglob("*.py")):
            _module, package = _module_of(path)
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for line, dotted in _imported(tree, package):
                owned = _private_owner(dotted)
                if owned is None:
                    continue
                owner, private = owned
                if package == owner or package.startswith(owner + "."):
                    continue
                found.add((str(path.relative_to(ROOT)), private, line))
    return found


def test_no_private_import_across_packages() -> None:
    found = {(path, private) for path, private, _line in _violations()}
    new = sorted(f"{path} imports {private}" for path, private in found - set(REMAINING))
    assert new == [], "import the package's public name instead (or make the name public where it is defined)"


def test_the_remaining_list_only_shrinks() -> None:
    found = {(path, private) for path, private, _line in _violations()}
    gone = sorted(f"{path}: {private}" for path, private in set(REMAINING) - found)
    assert gone == [], "these imports are fixed: delete their lines from REMAINING"
