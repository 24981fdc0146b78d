"""The launch script of the runtime that runs INSIDE the sandbox (standard library only).

Launch: ``python3 -I -S <runtime_dir>/main.py [--config JSON | --config-file PATH] [--host PID.START]``;
without ``--config``/``--config-file`` the first line of stdin is the configuration::

    {"socket": "/run/codeact/bridge.sock", "token": "...", "rlimits": {"AS": 1073741824, ...}}

The work is in :mod:`codeact.sandbox.runtime.server`. This script stays small on purpose: Python
compiles a script from source every time it runs (only imported modules load from ``__pycache__``),
and every sandbox start runs it once.
"""

from __future__ import annotations

import os
import sys
import types

if __name__ != "__main__":  # imported (the host, tests): the runtime's public names live in server
    from codeact.sandbox.runtime.server import CappedWriter, Runtime, cut_note, format_error, main

__all__ = ["CappedWriter", "Runtime", "cut_note", "format_error", "main"]


def _install_package_alias() -> None:
    """Make ``codeact.sandbox.runtime.*`` importable when this file runs as a script (``python -I``)."""
    if "codeact.sandbox.runtime" in sys.modules:
        return
    here = os.path.dirname(os.path.abspath(__file__))
    top = sys.modules.setdefault("codeact", types.ModuleType("codeact"))
    if not hasattr(top, "__path__"):
        top.__path__ = []
    sandbox = sys.modules.setdefault("codeact.sandbox", types.ModuleType("codeact.sandbox"))
    if not hasattr(sandbox, "__path__"):
        sandbox.__path__ = []
    pkg = types.ModuleType("codeact.sandbox.runtime")
    pkg.__path__ = [here]
    pkg.__package__ = "codeact.sandbox.runtime"
    top.sandbox = sandbox  # type: ignore[attr-defined]
    sandbox.runtime = pkg  # type: ignore[attr-defined]
    sys.modules["codeact.sandbox.runtime"] = pkg


if __name__ == "__main__":
    import gc

    # No collection while the runtime starts (~1 ms of CPU for the few cycles imports leave): server.main()
    # turns the collector on again, after freezing the runtime's objects and before any code of a round runs.
    gc.disable()
    _install_package_alias()
    from codeact.sandbox.runtime.server import main as _main

    sys.exit(_main())
