"""Every script a Makefile recipe runs by its path is executable (`make demo-local` once hit "Permission denied")."""

from __future__ import annotations

import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# a recipe line's command (after `@`, `-`, `;`, `&&`, `||`) that is a path into the repository
_RUN = re.compile(r"(?:^\t[@-]*|;\s*|&&\s*|\|\|\s*)((?:scripts|sandbox)/[\w./-]+\.(?:sh|py))\b")


def test_the_scripts_the_makefile_runs_by_path_are_executable() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    scripts = sorted({match.group(1) for line in makefile.splitlines() for match in _RUN.finditer(line)})
    assert "scripts/demo-local.sh" in scripts and "scripts/services.sh" in scripts, scripts
    not_executable = [path for path in scripts if not os.access(REPO / path, os.X_OK)]
    assert not_executable == [], f"chmod +x (and git update-index --chmod=+x) these: {not_executable}"
