"""A host toolkit for the recovery tests: a call that changes state, and a call that blocks.

State lives in the file named by ``$RECOVERY_STATE`` so the test (another process) can see what the
``codeact run`` process did: ``add_item`` appends ``added NAME``, ``hold`` appends ``holding`` and then
waits until the file ``$RECOVERY_STATE.release`` exists (a test kills the run while it waits).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from codeact.toolkits import operation, toolkit


@toolkit(name="inventory", description="A tiny inventory whose items live in a file")
class Inventory:
    """Items in a text file, one per line."""

    def __init__(self) -> None:
        self.path = Path(os.environ["RECOVERY_STATE"])

    @operation
    async def add_item(self, name: str) -> str:
        """Add an item.

        Args:
            name: The item.
        """
        with self.path.open("a", encoding="utf-8") as file:
            file.write(f"added {name}\n")
        return f"added {name}"

    @operation
    async def count(self) -> int:
        """How many items were added."""
        if not self.path.exists():
            return 0
        return sum(line.startswith("added ") for line in self.path.read_text(encoding="utf-8").splitlines())

    @operation
    async def hold(self) -> str:
        """Wait until the test releases this call."""
        with self.path.open("a", encoding="utf-8") as file:
            file.write("holding\n")
        release = Path(f"{self.path}.release")
        while not release.exists():
            await asyncio.sleep(0.05)
        return "released"
