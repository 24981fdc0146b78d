"""The docs name only what exists: every ``system.NAME(`` the docs, the prompts, the examples and the engine's
own docstrings write is an operation of the built-in ``system`` toolkit, and the Python API is ``codeact.Agent``.

A newcomer copies what the docs write; ``system.express(text)`` (named in three places) never existed.
"""

from __future__ import annotations

import re
from pathlib import Path

from codeact.toolkits.builtin.system import SystemToolkit
from codeact.toolkits.decorators import toolkit_spec

REPO = Path(__file__).resolve().parents[2]
_SYSTEM_CALL = re.compile(r"\bsystem\.([a-z_]+)\(")
_TEXTS = ("README.md", "docs/*.md", "prompts/*.j2", "examples/**/*.md", "examples/**/*.yaml", "engine/**/*.py")


def _texts() -> list[Path]:
    return sorted({path for pattern in _TEXTS for path in REPO.glob(pattern)})


def test_every_system_operation_the_docs_name_exists() -> None:
    spec = toolkit_spec(SystemToolkit)
    assert spec is not None
    operations = set(spec.operations)
    assert {"send_message", "finish", "ask_user"} <= operations
    named: dict[str, set[str]] = {}
    for path in _texts():
        for name in _SYSTEM_CALL.findall(path.read_text(encoding="utf-8")):
            named.setdefault(name, set()).add(str(path.relative_to(REPO)))
    assert "finish" in named  # the scan reads the docs at all
    unknown = {name: sorted(where) for name, where in named.items() if name not in operations}
    assert unknown == {}, f"the system toolkit has no such operation (it has {sorted(operations)})"


def test_the_python_api_is_codeact_agent() -> None:
    text = (REPO / "docs" / "python-api.md").read_text(encoding="utf-8")
    assert "`codeact.Agent`" in text
    assert not re.search(r"(?<![\w.])engine\.Agent\b", text)
