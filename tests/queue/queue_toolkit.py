"""A host toolkit for the queue tests: a ledger whose entries live in a file (``$QUEUE_LEDGER``).

``publish`` always needs an approval (its operation asks), whatever the blueprint's grant says.
"""

from __future__ import annotations

import os
from pathlib import Path

from codeact.toolkits import operation, toolkit


@toolkit(name="ledger", description="A ledger whose entries live in a file")
class Ledger:
    """Lines in a text file, one per entry."""

    def __init__(self) -> None:
        self.path = Path(os.environ["QUEUE_LEDGER"])

    @operation
    async def add(self, name: str) -> str:
        """Add an entry.

        Args:
            name: The entry.
        """
        with self.path.open("a", encoding="utf-8") as file:
            file.write(f"added {name}\n")
        return f"added {name}"

    @operation(approval="ask")
    async def publish(self) -> str:
        """Publish the ledger (each call needs an approval)."""
        with self.path.open("a", encoding="utf-8") as file:
            file.write("published\n")
        return "published"
