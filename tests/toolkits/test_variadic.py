"""Variadic, keyword-only and positional-only operations: declared, stubbed, described, mapped, called (issue 39)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pydantic
import pytest

from codeact.sandbox.runtime.proxy import Bridge, ToolkitProxy, build_proxies
from codeact.toolkits import ToolkitBridge, ToolkitContext, bind_toolkit, operation, render_stubs, toolkit
from tests.toolkits.signatures_toolkit import Dna, Stats


@toolkit(name="positional", description="Positional-only parameters")
class Positional:
    @operation
    def join(self, first: str, /, second: str = "b", *, sep: str = "-") -> str:
        """Join two words.

        Args:
            first: The first word.
            second: The second word.
            sep: What goes between.
        """
        return f"{first}{sep}{second}"


CONTEXT = ToolkitContext(session_id="s")


async def test_variadic_items_are_validated_and_spread_into_the_call() -> None:
    bound = bind_toolkit(Stats)
    assert await bound.call("minimum_value", {"args": [7, 3, 9]}, CONTEXT) == 3
    booked = await bound.call(
        "book_hotel", {"location": "Lisbon", "preferences": ["quiet"], "extras": {"breakfast": True}}, CONTEXT
    )
    assert booked == {"location": "Lisbon", "preferences": ["quiet"], "nights": 1, "extras": {"breakfast": True}}
    with pytest.raises(pydantic.ValidationError, match=r"args\.1\n  Input should be a valid integer"):
        bound.validate("minimum_value", {"args": [1, "x"]})
    with pytest.raises(pydantic.ValidationError, match=r"extras\.wifi\n  Input should be a valid boolean"):
        bound.validate("book_hotel", {"location": "Lisbon", "extras": {"wifi": "maybe"}})
    assert await bind_toolkit(Positional).call("join", {"first": "a", "sep": "+"}, CONTEXT) == "a+b"


def test_stubs_write_the_signature_as_python_does() -> None:
    stubs = render_stubs([Stats, Dna, Positional])
    assert "    async def minimum_value(self, *args: int) -> int:" in stubs
    assert "        *args: The numbers." in stubs
    assert "        **extras: Extras to add, by name (``breakfast=True``)." in stubs
    assert "    async def gc_content(self, seq: str, *, window: int = 0) -> float:" in stubs
    assert "    async def join(self, first: str, /, second: str = 'b', *, sep: str = '-') -> str:" in stubs
    compile(stubs, "<stubs>", "exec")  # valid Python


def test_the_manifest_tells_the_proxy_how_python_passes_each_parameter() -> None:
    operations = ToolkitBridge([Stats], session_id="s").manifest()["toolkits"]["stats"]["operations"]
    assert operations["minimum_value"] == {
        "params": ["args"], "required": [], "positional": [], "keyword": [], "varargs": "args",
    }  # fmt: skip
    assert operations["book_hotel"] == {
        "params": ["location", "preferences", "nights", "extras"],
        "required": ["location"],
        "positional": ["location"],
        "keyword": ["location", "nights"],
        "varargs": "preferences",
        "varkw": "extras",
    }
    assert operations["best_pair"] == {"params": [], "required": []}  # plain: as before


@pytest.fixture
def proxies() -> Iterator[tuple[dict[str, ToolkitProxy], socket.socket]]:
    """Proxies over a real socket pair: the test reads the ``call`` frames the host would get."""
    left, right = socket.socketpair()
    manifest = ToolkitBridge([Stats, Positional], session_id="s").manifest()
    try:
        yield build_proxies(manifest, Bridge(left), lambda v: v), right
    finally:
        left.close()
        right.close()


def _sent(peer: socket.socket) -> dict[str, Any]:
    frame: dict[str, Any] = json.loads(peer.recv(65536).decode())
    arguments: dict[str, Any] = frame["params"]["arguments"]
    return arguments


def test_the_proxy_maps_arguments_as_python_does(proxies: tuple[dict[str, ToolkitProxy], socket.socket]) -> None:
    found, peer = proxies
    stats: Any = found["stats"]
    positional: Any = found["positional"]
    stats.minimum_value(4, 2, 9)
    assert _sent(peer) == {"args": [4, 2, 9]}
    stats.book_hotel("Lisbon", "quiet", nights=2, breakfast=True)
    assert _sent(peer) == {"location": "Lisbon", "preferences": ["quiet"], "nights": 2, "extras": {"breakfast": True}}
    stats.book_hotel(location="Porto")
    assert _sent(peer) == {"location": "Porto"}
    positional.join("a", "b", sep="+")
    assert _sent(peer) == {"first": "a", "second": "b", "sep": "+"}
    assert repr(stats.book_hotel) == "<operation stats.book_hotel(location, *preferences, nights, **extras)>"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        pytest.param(
            lambda p: p["positional"].join("a", "b", "+"),
            "positional.join() takes 2 positional argument(s) (first, second) but 3 were given",
            id="keyword-only-given-positionally",
        ),
        pytest.param(
            lambda p: p["positional"].join(first="a"),
            "positional.join() got an unexpected keyword argument 'first'; parameters: second, sep",
            id="positional-only-given-by-name",
        ),
        pytest.param(
            lambda p: p["stats"].minimum_value(1, args=[2]),
            "stats.minimum_value() got an unexpected keyword argument 'args'; parameters: none",
            id="varargs-by-name",
        ),
        pytest.param(
            lambda p: p["stats"].book_hotel("Lisbon", location="Porto"),
            "stats.book_hotel() got multiple values for argument 'location'",
            id="twice",
        ),
    ],
)
def test_the_proxy_refuses_what_python_refuses(
    proxies: tuple[dict[str, ToolkitProxy], socket.socket], call: Any, message: str
) -> None:
    with pytest.raises(TypeError) as info:
        call(proxies[0])
    assert str(info.value) == message
