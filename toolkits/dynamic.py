"""Toolkits built at run time (an MCP server, a remote agent): name, description, operations, execute."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from codeact.toolkits.context import ToolkitContext
from codeact.toolkits.spec import OperationSpec

__all__ = ["DynamicToolkit"]


class DynamicToolkit(ABC):
    """A toolkit that describes itself at run time.

    Subclasses set ``name`` and ``description`` (class or instance attributes), list their
    operations with :meth:`operations` (``OperationSpec.from_json_schema`` builds one from a JSON
    schema) and run them in :meth:`execute`. The bridge validates the arguments against the
    operation's schema before ``execute`` is called. The registry snapshots ``operations()`` when
    the toolkit is registered: re-register it (``replace=True``) when its operations change.

    Attributes:
        name: The toolkit's name (a Python identifier; the object name inside the sandbox).
        description: One line shown to the model.
    """

    name: str
    description: str

    @abstractmethod
    def operations(self) -> list[OperationSpec]:
        """The operations this toolkit offers now."""

    @abstractmethod
    async def execute(self, operation: str, params: dict[str, Any], context: ToolkitContext) -> Any:
        """Run ``operation`` with validated ``params``; return a codec-encodable value or a ``Control``.

        Raise any exception to fail the call: its message (only) reaches the sandbox as a tool error.
        """

    async def prepare(self, operation: str) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Get ready for a call of ``operation`` before its timeout starts (connect, start a server).

        The bridge awaits it before it arms the operation's timeout, so a slow (re)start, bounded by
        the toolkit's own start limit, does not count against the call. Raise to fail the call.
        """
