"""A host toolkit for the durable-call tests: side effects in a file, and a way to kill the host at a chosen instant.

``ledger.append(item)`` appends ``ITEM<TAB>CALL_ID`` to the file named by ``$LEDGER_FILE`` (the side
effect, visible to the test in another process) and returns ``"E-ITEM"``; ``ledger.has(item)`` says
whether it was appended; ``ledger.wait()`` blocks (so the round never ends on its own).

``$LEDGER_KILL`` SIGKILLs the host process (the ``codeact run`` serving the call) at a chosen instant:
``before:ITEM`` as the call for ITEM starts (its start is journaled, its effect not made), ``after:ITEM``
right after its effect (still in flight), ``ms:ITEM:D`` D ms after its effect (from a timer; the call
returns at once when there is no delay).
``$LEDGER_DELAY`` (seconds) is slept before and after each effect: a window for kills at random instants.
``$LEDGER_IDEMPOTENT=1`` makes ``append`` deduplicate on ``ToolkitContext.call_id`` (and the item).
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from pathlib import Path

from codeact.toolkits import ToolkitContext, operation, toolkit


def _kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


@toolkit(name="ledger", description="A ledger of entries kept in a file")
class Ledger:
    """Entries in a text file, one per line."""

    def __init__(self) -> None:
        self.path = Path(os.environ["LEDGER_FILE"])
        self.delay = float(os.environ.get("LEDGER_DELAY") or 0)
        self.kill = os.environ.get("LEDGER_KILL") or ""

    def _lines(self) -> list[tuple[str, str]]:
        if not self.path.exists():
            return []
        return [tuple(line.split("\t", 1)) for line in self.path.read_text().splitlines()]  # type: ignore[misc]

    @operation
    async def append(self, item: str, context: ToolkitContext) -> str:
        """Append an entry to the ledger.

        Args:
            item: The entry.
        """
        Path(f"{self.path}.begin").touch()
        if self.kill == f"before:{item}":
            _kill()
        if os.environ.get("LEDGER_IDEMPOTENT") == "1" and (item, str(context.call_id)) in self._lines():
            return f"E-{item}"
        if self.delay:
            await asyncio.sleep(self.delay)
        with self.path.open("a", encoding="utf-8") as file:
            file.write(f"{item}\t{context.call_id}\n")
        if self.kill == f"after:{item}":
            _kill()
        if self.kill.startswith(f"ms:{item}:"):
            threading.Timer(float(self.kill.rsplit(":", 1)[1]) / 1000, _kill).start()
        if self.delay:
            await asyncio.sleep(self.delay)
        return f"E-{item}"

    @operation
    async def has(self, item: str) -> bool:
        """Whether the ledger has an entry.

        Args:
            item: The entry.
        """
        return any(line[0] == item for line in self._lines())

    @operation
    async def wait(self) -> str:
        """Wait for the warehouse (blocks until the host goes away)."""
        while True:
            await asyncio.sleep(0.05)
