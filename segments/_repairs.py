"""Repairs for what real models predictably write, each one said in a note the Evaluation shows.

Small code models (Qwen2.5-Coder 0.5B/1.5B on the DevOps example, see docs/eval.md "Frames on
real models") write, round after round:

* **an invented next turn**: the code block, then ``Output:`` / ``Observation:`` / ``Assistant:`` /
  ``User:`` lines as if the round had already run, more blocks, the last one often cut off mid-line.
  :func:`cut_invented_turn` keeps the reply up to the invented part; the code written before it is
  what the model meant to run (MINT's and most harnesses' stop sequences run exactly that). Nothing
  after the cut runs, so a cut-off block never runs;
* **toolkit imports**: ``from tools import devops``, ``import devops``, ``from devops import
  get_app_list``. :func:`bind_toolkit_imports` turns an import of a *granted* toolkit name into a
  binding of the toolkit object already defined in the sandbox; any other name is left as written
  (the sandbox's import policy still refuses it: nothing is widened);
* **a middle indented as a whole** (the ``try:`` body's indentation kept), usually under a flush
  ``#`` comment, which ``textwrap.dedent`` cannot remove: :func:`dedent_once` takes one level off;
* **``asyncio.run(main())``** (also under ``if __name__ == "__main__":``, or
  ``loop.run_until_complete(...)``): the sandbox's compiler turns it into ``await main()`` on the
  sandbox's own loop (sandbox/_await_insert.py); :func:`asyncio_run_note` says so.

Every repair keeps the code's line count, so an error line still maps to the model's line.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection

from codeact.segments._text import parse_python, syntax_error

__all__: list[str] = []

_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
# A line that starts the next turn (or the tool's answer) the model invented after its code.
_TURN = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*|__)?[ \t]*(?P<label>output|outputs|observation|assistant|user|human|evaluation|"
    r"execution (?:output|result)|result of (?:the |this )?(?:code|execution)|stdout|console output)"
    r"[ \t]*(?:\*\*|__)?[ \t]*(?:[:：]|$)",
    re.IGNORECASE,
)


def cut_invented_turn(text: str) -> tuple[str, str | None]:
    """``(text up to the invented turn, the label that started it)``; ``(text, None)`` when there is none.

    A turn label counts only after complete code: a closed fenced block, or (a reply without fences)
    a line of code before it; inside a block, after a line of its code (the block ends there). A label
    line that is itself a statement (``output = 3``, ``user: str = x``)
    is code; ``Output: 42`` is not (an annotation without a value is what no model means to run).
    Labels inside a fenced block are the block's text.
    """
    lines = text.split("\n")
    fences = sum(1 for line in lines if _FENCE.match(line))
    in_fence = False
    fence_char = ""
    closed_block = False
    raw_code = False
    block_code = False
    for index, line in enumerate(lines):
        opened = _FENCE.match(line)
        if opened:
            if not in_fence:
                in_fence, fence_char, block_code = True, opened.group(1)[0], False
            elif opened.group(1)[0] == fence_char and not line.strip().strip(fence_char):
                in_fence = False
                closed_block = True
            continue
        match = _TURN.match(line)
        if in_fence:
            # `Evaluation: ...` written inside the block, after its code: the block ends there.
            if match is not None and block_code and not _statement(line):
                return "\n".join(lines[:index]).rstrip() + "\n", match.group("label")
            block_code = block_code or (bool(line.strip()) and not line.lstrip().startswith("#"))
            continue
        markdown = bool(fences) and line.lstrip().startswith(("#", "*", "_"))
        # `# Evaluation: ...`: the raw completion prompt's own history label, echoed after the code
        echoed = match is not None and match.group("label").lower() == "evaluation" and line.lstrip()[:1] == "#"
        if match is not None and (closed_block or raw_code) and (markdown or echoed or not _statement(line)):
            return "\n".join(lines[:index]).rstrip() + "\n", match.group("label")
        if not fences and line.strip() and not line.lstrip().startswith("#") and _codeish(line):
            raw_code = True
    return text, None


def _statement(line: str) -> bool:
    """True for a line of code; ``Observation: [...]`` parses too, but as an annotation without a value."""
    try:
        body = parse_python(line.strip()).body
    except (SyntaxError, ValueError):
        return False
    return not (len(body) == 1 and isinstance(body[0], ast.AnnAssign) and body[0].value is None)


def _codeish(line: str) -> bool:
    """A line that is code on its own (a bare word or a sentence is not)."""
    stripped = line.strip()
    return syntax_error(stripped) is None and not re.fullmatch(r"[\w .,!?'-]*", stripped)


def invented_turn_note(label: str) -> str:
    """The Evaluation note for a reply cut at an invented ``label`` line."""
    return (
        f"your reply went on after the code as if it had already run (from its '{label.strip().capitalize()}:' line): "
        "only the code before that line ran and the rest was ignored; the real output is in this Evaluation"
    )


DEDENT_NOTE = "your code was indented as a whole (it is the body of the frame's `try:`); it was dedented once"


def dedent_once(code: str) -> str | None:
    """``code`` with one indentation level removed from its code lines, when that makes it parse; else None.

    The level is the smallest indentation of a non-comment line; comment lines lose what they have of it.
    """
    lines = code.split("\n")
    code_lines = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
    margins = [len(line) - len(line.lstrip(" ")) for line in code_lines]
    cut = min(margins, default=0)
    if cut == 0:
        return None
    fixed = "\n".join(line[min(cut, len(line) - len(line.lstrip(" "))) :] for line in lines)
    return fixed if syntax_error(fixed) is None else None


def bind_toolkit_imports(code: str, toolkits: Collection[str]) -> tuple[str, list[str]]:
    """``(code, imports rewritten)``: imports of granted toolkit names become bindings of the toolkit objects.

    ``import devops`` and ``from tools import devops`` become ``pass`` (``devops`` is already defined;
    ``import devops as d`` becomes ``d = devops``); ``from devops import get_app_list`` becomes
    ``get_app_list = devops.get_app_list``. An import naming anything not granted is left unchanged.
    """
    granted = frozenset(toolkits)
    if not granted or "import" not in code:
        return code, []
    try:
        tree = parse_python(code)
    except (SyntaxError, ValueError):
        return code, []
    edits: list[tuple[ast.stmt, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            replacement = _import_replacement(node, granted)
            if replacement is not None:
                edits.append((node, replacement))
    if not edits:
        return code, []
    lines = code.split("\n")
    rewritten: list[str] = []
    for node, text in sorted(edits, key=lambda e: (e[0].lineno, e[0].col_offset), reverse=True):
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        start, end = _char_offset(lines[first], node.col_offset), _char_offset(lines[last], node.end_col_offset or 0)
        rewritten.append(" ".join(lines[first][start:].split()) if first == last else lines[first][start:].strip())
        lines[first : last + 1] = [lines[first][:start] + text + lines[last][end:], *([""] * (last - first))]
    return "\n".join(lines), rewritten[::-1]


def _char_offset(line: str, byte_offset: int) -> int:
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore"))


def _import_replacement(node: ast.Import | ast.ImportFrom, granted: frozenset[str]) -> str | None:
    if isinstance(node, ast.Import):
        if not any(a.name in granted for a in node.names):
            return None
        kept = [a for a in node.names if a.name not in granted]
        parts = [f"import {', '.join(_alias(a) for a in kept)}"] if kept else []
        parts += [f"{a.asname} = {a.name}" for a in node.names if a.name in granted and a.asname]
        return "; ".join(parts) or "pass"
    if node.level or any(a.name == "*" for a in node.names):
        return None
    module = (node.module or "").split(".")
    if module[-1] in granted:  # from devops import get_app_list
        return "; ".join(f"{a.asname or a.name} = {module[-1]}.{a.name}" for a in node.names)
    if all(a.name in granted for a in node.names):  # from tools import devops
        parts = [f"{a.asname} = {a.name}" for a in node.names if a.asname]
        return "; ".join(parts) or "pass"
    return None


def _alias(alias: ast.alias) -> str:
    return f"{alias.name} as {alias.asname}" if alias.asname else alias.name


def toolkit_import_note(rewritten: list[str], toolkits: Collection[str]) -> str:
    """The Evaluation note for imports of toolkits that were bound instead of imported."""
    names = ", ".join(sorted(toolkits))
    shown = "; ".join(f"`{r}`" for r in dict.fromkeys(rewritten))
    return (
        f"{shown}: toolkits are not modules; the toolkit objects ({names}) are already defined, so the import "
        "was replaced by the object itself (no import needed)"
    )


def asyncio_run_note(code: str) -> str | None:
    """The note for ``asyncio.run(...)`` / ``loop.run_until_complete(...)`` outside any function, if any."""
    if "run" not in code:
        return None
    try:
        tree = parse_python(code)
    except (SyntaxError, ValueError):
        return None
    for node in _outside_functions(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and len(node.args) == 1:
            func = node.func
            is_run = func.attr == "run" and isinstance(func.value, ast.Name) and func.value.id == "asyncio"
            if is_run or func.attr == "run_until_complete":
                call = ast.unparse(node)
                inner = ast.unparse(node.args[0])
                return (
                    f"`{call}` ran `{inner}` on the sandbox's own event loop (the sandbox already runs one; "
                    f"top-level `await {inner}` does the same)"
                )
    return None


def _outside_functions(tree: ast.AST) -> list[ast.AST]:
    found: list[ast.AST] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
                continue
            found.append(child)
            stack.append(child)
    return found
