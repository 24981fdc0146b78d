"""No ``Any`` in new signatures: ruff's ANN401 is on, and its per-file exceptions only shrink.

``pyproject.toml`` lists the product files whose signatures still take or return ``Any`` (ANN401
ignored for them). A listed file that no longer has such a signature fails here, so its line is
deleted and the file stays typed.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _listed() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    ignores: dict[str, list[str]] = config["tool"]["ruff"]["lint"]["per-file-ignores"]
    return sorted(path for path, rules in ignores.items() if "ANN401" in rules and "*" not in path)


def _is_any(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return annotation.value.strip() in ("Any", "typing.Any")
    return ast.unparse(annotation) in ("Any", "typing.Any", "t.Any")


def _has_any_signature(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            params = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            if _is_any(node.returns) or any(p is not None and _is_any(p.annotation) for p in params):
                return True
    return False


def test_ann401_is_selected() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "ANN401" in config["tool"]["ruff"]["lint"]["select"]


def test_every_exception_is_still_needed() -> None:
    stale = [path for path in _listed() if not (ROOT / path).is_file() or not _has_any_signature(ROOT / path)]
    assert stale == [], "these files have no Any in their signatures any more: delete their ANN401 lines"
