"""A shop whose orders cost money (tests/engine/test_cli_fail_closed.py): ``PLACED`` records every order placed."""

from __future__ import annotations

from codeact.toolkits import operation, toolkit

PLACED: list[str] = []


@toolkit(name="shop", description="An online shop: orders are paid for")
class Shop:
    @operation
    def place_order(self, item: str) -> str:
        """Order an item and pay for it.

        Args:
            item: What to order.
        """
        PLACED.append(item)
        return f"ordered {item}"
