"""A KeyError on a dict names the keys the dict has (real models guess a tool result's shape, issue 29)."""

from __future__ import annotations

import pytest

from codeact.sandbox import SubprocessSandbox

pytestmark = pytest.mark.asyncio


async def test_a_missing_key_names_the_keys_of_the_dict_on_that_line() -> None:
    async with SubprocessSandbox() as box:
        hotels = 'hotels = [{"name": "Alfama", "nightly": 61.0}]\n'
        direct = await box.execute(hotels + 'total = hotels[0]["price"] * 2')
        nested = await box.execute(hotels + 'cheapest = min(h["price"] for h in hotels)')
        empty = await box.execute('found = {}\nprint(found["id"])')
    assert direct.error is not None and direct.error.type == "KeyError"
    assert direct.error.message == "'price'; `hotels[0]` has the keys 'name', 'nightly'"
    assert direct.error.line == 2
    assert nested.error is not None and nested.error.message == "'price'; `h` has the keys 'name', 'nightly'"
    assert empty.error is not None and empty.error.message == "'id'; `found` is empty"


async def test_the_hint_never_runs_the_codes_own_methods() -> None:
    """Only plain dicts, lists and tuples are looked into: a mapping class of the code's is left alone."""
    code = (
        "class Loud(dict):\n"
        "    def keys(self):\n"
        "        print('keys() ran')\n"
        "        return super().keys()\n"
        "box = Loud(a=1)\n"
        "box['b']\n"
    )
    async with SubprocessSandbox() as sandbox:
        result = await sandbox.execute(code)
    assert result.error is not None and result.error.message == "'b'"
    assert result.stdout == ""
