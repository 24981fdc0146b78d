"""No import cycle among the product's modules (STYLE.md rule 4, ARCHITECTURE.md section 10).

Every import counts: module level, inside functions, and under ``if TYPE_CHECKING:`` (a type-only
import still says "this module needs that one", and it is where a circle starts). The graph is built
from the source, not by importing it, over the packages of ``test_imports.PACKAGES`` (docs/design.md's
map names the same packages and is checked against that list here too).

The graph takes the package directories as input: a package may sit at the repository root
(``engine/``) or under the ``codeact/`` import package (``codeact/engine/``); module names are the
dotted path below the directory that holds the package, so both layouts give the same answer.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from tests.architecture.test_imports import PACKAGES, ROOT


def package_dirs(root: Path, packages: Iterable[str]) -> list[Path]:
    """Where each package lives below ``root``: ``root/codeact/<name>``, else ``root/<name>``.

    The ``codeact`` import package comes first: its modules are named as the code imports them
    (``codeact.engine...``), so the graph has an edge for every import. Read as ``root/engine``
    in a checkout whose folders are linked under ``codeact/``, no import would resolve.
    """
    found = []
    for name in packages:
        linked = root / "codeact" / name
        found.append(linked if (linked / "__init__.py").is_file() else root / name)
    return found


def _module_name(path: Path, base: Path) -> str:
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(package_roots: Iterable[Path]) -> dict[str, set[str]]:
    """Module -> the modules of the same packages it imports (every import statement, anywhere).

    Args:
        package_roots: Package directories (each holds an ``__init__.py``); a module's name is its
            dotted import path (``codeact.engine.agent.codeact``, or ``codeact.engine.agent.codeact`` when the
            package sits in the ``codeact`` import package).

    Returns:
        Every module of the packages, with the set of the packages' modules it imports (not itself).
        ``from pkg import name`` counts as importing ``pkg.name`` when that is a module, else ``pkg``.
    """
    files: dict[str, Path] = {}
    for package in package_roots:
        top = package
        while (top.parent / "__init__.py").is_file():  # codeact/engine: names start at codeact
            top = top.parent
        for path in sorted(package.rglob("*.py")):
            files[_module_name(path, top.parent)] = path

    def resolve(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(resolve(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    base = ".".join([*parts[: len(parts) - (node.level - 1)], *([node.module] if node.module else [])])
                else:
                    base = node.module or ""
                targets.update(resolve(f"{base}.{alias.name}") or resolve(base) for alias in node.names)
        graph[module] = {t for t in targets if t is not None and t != module}
    return graph


def import_cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph``: its strongly connected components of two or more modules, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        # Tarjan's algorithm, iteratively (the graph is deep enough to matter for recursion).
        work: list[tuple[str, list[str]]] = [(start, sorted(graph.get(start, ())))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, pending = work[-1]
            if pending:
                nxt = pending.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return sorted(cycles)


def _describe(cycles: list[list[str]]) -> list[str]:
    return [f"cycle of {len(c)}: {', '.join(c)}" for c in cycles]


def test_no_import_cycle() -> None:
    graph = import_graph(package_dirs(ROOT, PACKAGES))
    # The packages were found and their imports resolved (a wrong root or naming would pass vacuously).
    assert len(graph) > 100
    assert sum(len(targets) for targets in graph.values()) > 500
    assert "codeact.engine.agent._run" in graph["codeact.engine.agent.agent"]
    assert _describe(import_cycles(graph)) == []


def test_a_cycle_is_found_and_named(tmp_path: Path) -> None:
    pkg = tmp_path / "demo"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "base.py").write_text("def opener():\n    from demo.sub.impl import Impl  # function-local\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "impl.py").write_text("from ..base import opener\n\nclass Impl: ...\n")
    (pkg / "types_.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from demo import leaf\n")
    (pkg / "leaf.py").write_text("from . import types_\n")
    (pkg / "fine.py").write_text("import demo.base\nfrom demo.leaf import x\n")

    cycles = import_cycles(import_graph([pkg]))

    assert _describe(cycles) == [
        "cycle of 2: demo.base, demo.sub.impl",
        "cycle of 2: demo.leaf, demo.types_",
    ]


def test_the_graph_reads_the_codeact_layout(tmp_path: Path) -> None:
    # After the move under the ``codeact`` import package the same roots are found there.
    pkg = tmp_path / "codeact" / "engine"
    pkg.mkdir(parents=True)
    (tmp_path / "codeact" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("from codeact.engine.a import A\n")
    (pkg / "a.py").write_text("A = 1\n")

    graph = import_graph(package_dirs(tmp_path, ["engine"]))

    assert graph == {"codeact.engine": {"codeact.engine.a"}, "codeact.engine.a": set()}


def test_design_map_names_every_package() -> None:
    # docs/design.md's map lists each package and each subpackage with its public face.
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    map_section = text.split("## The map", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([a-z_][a-z0-9_]*(?:/[a-z_][a-z0-9_]*)?)/`", map_section))
    expected = set()
    for root in package_dirs(ROOT, PACKAGES):
        expected.add(root.name)
        expected.update(f"{root.name}/{sub.name}" for sub in root.iterdir() if (sub / "__init__.py").is_file())
    assert sorted(expected - named) == []
    assert sorted(named - expected) == []
