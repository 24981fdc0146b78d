"""Toolkits written the way wrappers of real libraries are (issue 39): variadics, bounds, an example call.

Loaded by path (``--toolkit tests/toolkits/signatures_toolkit.py:Stats``) by the CLI tests of
``tests/engine/test_cli_tool_signatures.py`` and imported by the unit tests.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from codeact.toolkits import operation, toolkit


class Room(BaseModel):
    """A room to book."""

    guests: int = Field(ge=1, le=4, description="People in the room")
    view: Literal["sea", "city"] = "city"


@toolkit(name="stats", description="Statistics over numbers, and hotel booking")
class Stats:
    """Operations with variadic, keyword-only and bounded parameters."""

    @operation
    def minimum_value(self, *args: int) -> int:
        """The smallest of the numbers given.

        Args:
            *args: The numbers.

        Returns:
            The smallest one.
        """
        if not args:
            raise ValueError("give at least one number")
        return min(args)

    @operation
    async def book_hotel(self, location: str, *preferences: str, nights: int = 1, **extras: bool) -> dict[str, Any]:
        """Book a hotel room.

        Args:
            location: The city.
            *preferences: Wishes such as "quiet" or "late checkout".
            nights: How many nights.
            **extras: Extras to add, by name (``breakfast=True``).
        """
        return {"location": location, "preferences": list(preferences), "nights": nights, "extras": extras}

    @operation
    def order(
        self,
        sku: Annotated[str, Field(pattern=r"^[A-Z]{3}-\d{3}$")],
        quantity: Annotated[int, Field(ge=1, le=100)],
        note: Annotated[str, Field(max_length=20)] = "",
    ) -> str:
        """Order an item.

        Args:
            sku: The item's code.
            quantity: How many.
            note: For the packer.
        """
        return f"ordered {quantity} x {sku}"

    @operation
    def reserve(self, room: Room) -> str:
        """Reserve a room.

        Args:
            room: The room wanted.
        """
        return f"{room.guests} guests, {room.view} view"

    @operation
    def best_pair(self) -> tuple[str, int]:
        """The best-rated hotel and its rating."""
        return ("A", 4)


@toolkit(name="dna", description="DNA sequence tools")
class Dna:
    """Transcription."""

    @operation
    def transcribe_dna_to_mrna(self, dna_sequence: str) -> str:
        """Transcribe a DNA sequence into mRNA (T becomes U).

        Args:
            dna_sequence: The DNA bases (A, C, G, T).

        Returns:
            The mRNA sequence.

        Example:
            >>> dna.transcribe_dna_to_mrna(dna_sequence="ATGC")
            'AUGC'
        """
        return dna_sequence.upper().replace("T", "U")

    @operation
    def gc_content(self, seq: str, *, window: int = 0) -> float:
        """The share of G and C bases.

        Args:
            seq: The DNA bases.
            window: Look at the first ``window`` bases only (0: all).
        """
        part = seq[:window] if window else seq
        return sum(b in "GC" for b in part) / max(1, len(part))
