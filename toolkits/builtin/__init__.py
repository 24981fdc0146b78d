"""Built-in toolkits, registered through the ``codeact.toolkits`` entry point like any other."""

from __future__ import annotations
