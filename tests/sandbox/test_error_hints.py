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
        second = await box.execute(
            'flights = [{"id": "F1", "price": 80.0}]\n' + hotels + 'total = flights[0]["price"] + hotels[0]["price"]'
        )
        big = await box.execute('wide = {f"k{i}": "v" * 20 for i in range(30)}\nwide["x"]')
        nested_obj = await box.execute('deep = {"a": [1], "b": 2}\ndeep["x"]')
    assert direct.error is not None and direct.error.type == "KeyError"
    assert direct.error.message == "'price'; `hotels[0]` is {'name': 'Alfama', 'nightly': 61.0}"
    assert direct.error.line == 2
    assert nested.error is not None and nested.error.message == "'price'; `h` is {'name': 'Alfama', 'nightly': 61.0}"
    assert empty.error is not None and empty.error.message == "'id'; `found` is empty"
    # the dict that lacks the key, not the first subscript with that key on the line
    assert (
        second.error is not None
        and second.error.message == "'price'; `hotels[0]` is {'name': 'Alfama', 'nightly': 61.0}"
    )
    # a large dict, or one holding other objects, is named by its keys
    assert big.error is not None and big.error.message.startswith("'x'; `wide` has the keys 'k0', 'k1', ")
    assert nested_obj.error is not None and nested_obj.error.message == "'x'; `deep` has the keys 'a', 'b'"


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


async def test_the_last_expression_is_shown_as_in_a_notebook() -> None:
    """Real models end a round with the call whose result they want to see, without print (issue 29)."""
    framed = 'try:\n    word = "ab"\n    word.upper()\nexcept Exception as e:\n    print(f"Error: {e!r}")\n    raise'
    async with SubprocessSandbox() as box:
        value = await box.execute("x = 2\nx * 21")
        in_frame = await box.execute(framed)
        none = await box.execute("items = []\nitems.append(1)")
        printed = await box.execute("print('once')")
        literal = await box.execute('"a docstring"')
        earlier = await box.execute("3 + 4\ny = 1")
        effect = await box.execute("log = []\nlog.append(1)\nlog.pop()\nz = 0")
    assert value.stdout == "42\n"
    assert in_frame.stdout == "'AB'\n"  # the last statement of the frame's try body
    assert none.stdout == ""  # None is not shown
    assert printed.stdout == "once\n"  # print is not wrapped (no "None" after it)
    assert literal.stdout == ""
    assert earlier.stdout == "3 + 4 -> 7\n"  # a bare read before the end is shown too, labelled
    assert effect.stdout == ""  # a plain call before the end is run for its effect, not shown


async def test_several_bare_tool_calls_each_show_their_value_labelled() -> None:
    """Qwen2.5-Coder-1.5B wrote four bare awaits and answered from the last, the only one shown (issue 29)."""
    code = (
        "import asyncio\n"
        "await asyncio.sleep(0, result=27.03)\n"
        "await asyncio.sleep(0)\n"  # None: not shown
        "fee = 0.5\n"
        "fee\n"
        "await asyncio.sleep(0, result={'symbol': 'ACME', 'note': 'a long note written inline, so its label is cut'})"
    )
    framed = "try:\n    a = 2\n    a * 3\n    a + 1\nexcept Exception:\n    raise"
    async with SubprocessSandbox() as box:
        several = await box.execute(code)
        in_frame = await box.execute(framed)
    lines = several.stdout.splitlines()
    assert lines[:2] == ["await asyncio.sleep(0, result=27.03) -> 27.03", "fee -> 0.5"]
    label, value = lines[2].split(" -> ", 1)
    assert label.endswith("...") and len(label) == 80  # a long expression is cut
    assert value == "{'symbol': 'ACME', 'note': 'a long note written inline, so its label is cut'}"
    assert len(lines) == 3
    assert in_frame.stdout == "a * 3 -> 6\na + 1 -> 3\n"


async def test_a_round_ending_by_storing_an_awaited_value_shows_it_under_its_name() -> None:
    """The 1.5B ended a round with ``page = await browser.read()`` and then guessed the page's links (issue 29)."""
    framed = (
        "try:\n    import asyncio\n    page = await asyncio.sleep(0, result={'links': ['Home', 'Tents']})\n"
        "except Exception:\n    raise"
    )
    async with SubprocessSandbox() as box:
        stored = await box.execute(framed)
        annotated = await box.execute("import asyncio\nn: int = await asyncio.sleep(0, result=3)")
        none = await box.execute("import asyncio\nnothing = await asyncio.sleep(0)")
        not_last = await box.execute("import asyncio\nx = await asyncio.sleep(0, result=1)\ny = x + 1")
        plain = await box.execute("z = 5")
        unpacked = await box.execute("import asyncio\na, b = await asyncio.sleep(0, result=(1, 2))")
    assert stored.stdout == "page -> {'links': ['Home', 'Tents']}\n"
    assert annotated.stdout == "n -> 3\n"
    assert none.stdout == ""  # None is not shown
    assert not_last.stdout == ""  # only the round's last statement
    assert plain.stdout == "" and unpacked.stdout == ""  # no await, or not one name
    assert "page" in stored.variables  # stored as well as shown
