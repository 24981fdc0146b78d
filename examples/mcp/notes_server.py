"""A small MCP server (FastMCP, stdio) for examples/mcp/agent.yaml: team notes with tags."""

from __future__ import annotations

from mcp.server.fastmcp import FastMCP
from pydantic import BaseModel

server = FastMCP("notes", instructions="Team notes: search them and count them by tag.")

NOTES: list[Note] = []


class Note(BaseModel):
    """One note."""

    id: int
    text: str
    tags: list[str]


@server.tool()
def search_notes(query: str) -> list[Note]:
    """Notes whose text contains the query (case-insensitive)."""
    return [n for n in NOTES if query.lower() in n.text.lower()]


@server.tool()
def count_by_tag() -> dict[str, int]:
    """How many notes carry each tag."""
    counts: dict[str, int] = {}
    for note in NOTES:
        for tag in note.tags:
            counts[tag] = counts.get(tag, 0) + 1
    return counts


NOTES.extend(
    [
        Note(id=1, text="Release 2.4 ships on Friday", tags=["release"]),
        Note(id=2, text="Rotate the staging database password", tags=["ops", "security"]),
        Note(id=3, text="Release notes need a passkeys section", tags=["release", "docs"]),
    ]
)

if __name__ == "__main__":
    server.run("stdio")
