"""The warm namespace and the data snapshot (issue 27 item 11), on a real subprocess sandbox.

* ``warm=True`` with the variables the previous round returned continues its namespace: a value no
  codec carries (a generator) and object identity survive, as in one CPython namespace.
* Anything else starts fresh from the variables given: an edited state, ``warm=False`` (another
  session on the same sandbox), a replaced runtime. Nothing stale is ever seen.
* With the ``datascience`` preset, numpy arrays and scalars, pandas frames and series, and sympy
  objects are captured as tagged JSON and restored from it inside the sandbox; the host keeps the tags
  opaque (its decoder refuses them, ``plain`` shows their repr); past the size cap the value is kept
  in the warm sandbox only, with a note.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from codeact.sandbox import Limits, SubprocessSandbox, open_sandbox
from codeact.sandbox.runtime import codec


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_warm_rounds_keep_every_value_and_identity() -> None:
    async def go() -> list[Any]:
        async with SubprocessSandbox() as box:
            one = await box.execute(
                "gen = (i * i for i in range(5))\na = b = []\nclass P:\n    pass\np = P()\nprint(next(gen))"
            )
            two = await box.execute(
                "b.append(1)\nprint(next(gen), a, isinstance(p, P))", variables=one.variables, warm=True
            )
            return [one, two]

    one, two = _run(go())
    assert [(u.name, u.live) for u in one.uncaptured] == [("gen", True), ("p", True)]
    assert two.error is None, two.error
    assert two.stdout == "1 [1] True\n"
    assert two.nondeterminism is not None and two.nondeterminism.get("warm") is True


def test_an_edited_state_or_another_session_starts_fresh() -> None:
    async def go() -> list[Any]:
        async with SubprocessSandbox() as box:
            one = await box.execute("gen = iter([1, 2])\nn = 1")
            edited = await box.execute("print(n)\nprint(next(gen))", variables={**one.variables, "n": 5}, warm=True)
            again = await box.execute("gen = iter([1, 2])\nsecret = 'from session A'")
            other = await box.execute("try:\n    print(secret)\nexcept NameError:\n    print('fresh')", variables={})
            other_warm = await box.execute("print(secret)", variables=again.variables, warm=False)
            return [edited, other, other_warm]

    edited, other, other_warm = _run(go())
    # Not continued: the iterator is not there, only its repr() string from the snapshot.
    assert edited.stdout == "5\n" and edited.error is not None and edited.error.type == "TypeError"
    assert "'str' object is not an iterator" in edited.error.message
    assert (edited.nondeterminism or {}).get("warm") is None
    assert other.stdout == "fresh\n", other
    # warm=False (a new session, or a replay of a round that was not warm): only the snapshot is there
    assert other_warm.error is None and other_warm.stdout == "from session A\n"
    assert (other_warm.nondeterminism or {}).get("warm") is None


def test_a_replaced_runtime_is_never_continued() -> None:
    async def go() -> list[Any]:
        async with SubprocessSandbox(limits=Limits(wall_s=2)) as box:
            one = await box.execute("gen = iter([1, 2])\nx = 1")
            hung = await box.execute("while True:\n    pass", variables=one.variables, warm=True)
            after = await box.execute("print(x)\nprint(next(gen))", variables=hung.variables, warm=True)
            return [hung, after]

    hung, after = _run(go())
    assert hung.status == "deadline_exceeded"
    assert after.stdout == "1\n" and after.error is not None and after.error.type == "TypeError"  # gen: its repr


@pytest.fixture(scope="module")
def datascience() -> Any:
    from codeact.sandbox.env import EnvSpec, ensure_environment

    return ensure_environment(EnvSpec(preset="datascience"), backend="subprocess")


def _data_sandbox(env: Any, **limits: Any) -> Any:
    from codeact.engine.agent.sandboxes import sandbox_spec

    return open_sandbox(sandbox_spec("subprocess", env=env, limits=Limits(**limits)))


MAKE = """
import numpy as np
import pandas as pd
import sympy as sp
a = np.arange(6, dtype=np.int32).reshape(2, 3)
n = a.sum()
df = pd.DataFrame({"k": pd.Categorical(["x", "y", "x"]), "v": [1.5, None, 3.25]}, index=["r1", "r2", "r3"])
s = df["v"].fillna(0)
x, d = sp.symbols("x d")
sol = sp.solve(sp.Eq(x**2 - d, 0), x)
M = sp.Matrix([[1, x], [0, sp.Rational(1, 2)]])
"""

USE = """
print(a.dtype, a.T.tolist(), type(n).__name__, n)
print(df.dtypes.tolist(), df.loc["r3", "v"], df["k"].cat.categories.tolist())
print(s.tolist(), s.name)
print(sol, M.inv(), sp.solve(sp.Eq(x**2 - d, 0), d))
"""


def test_data_values_restore_from_the_snapshot(datascience: Any) -> None:
    async def go() -> list[Any]:
        async with _data_sandbox(datascience) as box:
            one = await box.execute(MAKE)
            warm = await box.execute(USE, variables=one.variables, warm=True)
            cold = await box.execute(USE, variables=one.variables)
            return [one, warm, cold]

    one, warm, cold = _run(go())
    assert one.uncaptured == (), one.uncaptured
    tags = {name: one.variables[name]["$type"] for name in ("a", "n", "df", "s", "x", "M")}
    assert tags == {"a": "ndarray", "n": "npscalar", "df": "dataframe", "s": "series", "x": "sympy", "M": "sympy"}
    assert [item["$type"] for item in one.variables["sol"]] == ["sympy", "sympy"]
    assert one.variables["df"]["class"] == "DataFrame"
    assert warm.error is None and cold.error is None, (warm.error, cold.error)
    assert cold.stdout == warm.stdout
    assert "int32 [[0, 3], [1, 4], [2, 5]] int64 15" in cold.stdout
    assert "[-sqrt(d), sqrt(d)]" in cold.stdout and "[x**2]" in cold.stdout

    # The host keeps the tags opaque: it never decodes them, and shows their repr to readers.
    with pytest.raises(codec.Undecodable, match="unknown codec tag 'ndarray'"):
        codec.decode(one.variables["a"])
    assert codec.plain(one.variables["x"]) == "x"


def test_past_the_size_cap_a_value_lives_in_the_warm_sandbox_only(datascience: Any) -> None:
    async def go() -> list[Any]:
        async with _data_sandbox(datascience, max_var_bytes=4096) as box:
            one = await box.execute("import numpy as np\nbig = np.zeros(10_000)\nsmall = np.ones(3)")
            two = await box.execute("print(big.size, small.sum())", variables=one.variables, warm=True)
            return [one, two]

    one, two = _run(go())
    assert "small" in one.variables and "big" not in one.variables
    (note,) = one.uncaptured
    assert note.name == "big" and note.live and note.type == "ndarray"
    assert note.reason.startswith("exceeds the 4 KiB per-variable cap (")
    assert two.stdout == "10000 3.0\n"
