"""sandbox.policy: compile errors, the async allowance, await insertion, line numbers, the cache."""

from __future__ import annotations

import asyncio
import marshal
import textwrap
import traceback
from typing import Any

import pytest

from codeact.sandbox.policy import DEFAULT_IMPORTS, CompiledCode, CompileFailure, Policy, compile_code
from codeact.sandbox.runtime.guards import plain_globals, restricted_globals


class FakeToolkit:
    """Stands in for a toolkit proxy: async operations that record their calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def status(self, x: object = None) -> str:
        self.calls.append(f"status {x}")
        await asyncio.sleep(0)
        return f"ok {x}"


def sync_helper(coro: Any) -> str:
    """Stands in for the runtime's `_codeact_sync_`: closes the coroutine, answers "sync"."""
    coro.close()
    return f"sync {coro.__name__}"


async def coro_helper(awaitable: Any) -> Any:
    """Stands in for the runtime's `_codeact_coro_`: the toolkit call as a coroutine."""
    return await awaitable


def run(source: str, *, restricted: bool = True, devops: FakeToolkit | None = None) -> dict[str, Any]:
    source = textwrap.dedent(source)
    compiled = compile_code(source, policy=Policy(restricted=restricted), toolkit_names=["devops"])
    namespace = (
        restricted_globals(allowed_imports=DEFAULT_IMPORTS)
        if restricted
        else plain_globals(allowed_imports=DEFAULT_IMPORTS)
    )
    namespace["devops"] = devops or FakeToolkit()
    namespace["_codeact_sync_"] = sync_helper
    namespace["_codeact_coro_"] = coro_helper
    code = marshal.loads(compiled.code)

    async def main() -> None:
        result = eval(code, namespace)  # noqa: S307 - the code object under test
        if compiled.is_async:
            await result

    asyncio.run(main())
    return namespace


# -- compile failures -------------------------------------------------------------------------------


def test_syntax_error_quotes_the_line() -> None:
    with pytest.raises(CompileFailure) as info:
        compile_code("a = 1\nb = 2\nx = = 1\n", policy=Policy())
    failure = info.value
    assert str(failure) == 'SyntaxError: invalid syntax (line 3: "x = = 1")'
    assert (failure.type, failure.line, failure.source_line) == ("SyntaxError", 3, "x = = 1")
    assert failure.to_error() == {
        "type": "SyntaxError",
        "message": 'invalid syntax (line 3: "x = = 1")',
        "line": 3,
        "traceback": '  File "<code>", line 3\n    x = = 1\n        ^\nSyntaxError: invalid syntax (line 3: "x = = 1")',
    }


def test_indented_syntax_error_points_at_the_user_column() -> None:
    with pytest.raises(CompileFailure) as info:
        compile_code("if True:\n    y = )\n", policy=Policy())
    assert info.value.message == "unmatched ')' (line 2: \"y = )\")"
    assert info.value.to_error()["traceback"].splitlines()[1:3] == ["    y = )", "        ^"]


def test_await_outside_async_function_is_a_syntax_error_with_its_line() -> None:
    with pytest.raises(CompileFailure) as info:
        compile_code("import asyncio\ndef f():\n    await asyncio.sleep(0)\n", policy=Policy())
    assert info.value.message == "'await' outside async function (line 3: \"await asyncio.sleep(0)\")"
    assert info.value.line == 3


def test_policy_violation_names_the_line_and_what_is_not_allowed() -> None:
    with pytest.raises(CompileFailure) as info:
        compile_code("ok = 1\nx = ().__class__\n", policy=Policy())
    failure = info.value
    assert failure.type == "PolicyViolation"
    assert failure.message == (
        'attribute "__class__" is not allowed: names starting with "__" are reserved (line 2: "x = ().__class__")'
    )
    assert failure.line == 2
    assert failure.source_line == "x = ().__class__"
    assert failure.to_error()["traceback"].endswith(f"PolicyViolation: {failure.message}")


def test_every_policy_violation_is_listed_in_line_order() -> None:
    source = "a = b.__dict__\n__x = 1\nc = d.gi_frame\n"
    with pytest.raises(CompileFailure) as info:
        compile_code(source, policy=Policy())
    assert info.value.message == (
        'attribute "__dict__" is not allowed: names starting with "__" are reserved (line 1: "a = b.__dict__"); '
        'name "__x" is not allowed: names starting with "__" or starting and ending with "_" are reserved '
        '(line 2: "__x = 1"); '
        'attribute "gi_frame" is not allowed in sandboxed code (line 3: "c = d.gi_frame")'
    )


def test_many_violations_are_summarised() -> None:
    source = "".join(f"x{i} = y.__class__\n" for i in range(8))
    with pytest.raises(CompileFailure) as info:
        compile_code(source, policy=Policy())
    assert info.value.message.endswith("; and 3 more")


def test_unrestricted_policy_compiles_plain_python() -> None:
    compiled = compile_code("x = ().__class__.__name__\n", policy=Policy(restricted=False))
    assert compiled.restricted is False
    namespace = plain_globals(allowed_imports=None)
    exec(marshal.loads(compiled.code), namespace)  # noqa: S102 - the code object under test
    assert namespace["x"] == "tuple"


# -- the compiled record and the cache --------------------------------------------------------------


def test_compiled_code_record() -> None:
    compiled = compile_code("x = 1\n", policy=Policy())
    assert isinstance(compiled, CompiledCode)
    assert (compiled.source, compiled.is_async, compiled.restricted) == ("x = 1\n", False, True)
    assert marshal.loads(compiled.code).co_filename == "<code>"


def test_top_level_await_makes_the_code_async() -> None:
    assert compile_code("import asyncio\nawait asyncio.sleep(0)\n", policy=Policy()).is_async is True
    assert compile_code("x = devops.status()\n", policy=Policy(), toolkit_names=["devops"]).is_async is True
    assert compile_code("x = devops.status()\n", policy=Policy()).is_async is False


def test_results_are_cached_by_source_policy_toolkits_and_filename() -> None:
    first = compile_code("cached = 1\n", policy=Policy(), toolkit_names=["a", "b"])
    assert compile_code("cached = 1\n", policy=Policy(), toolkit_names=("b", "a")) is first
    assert compile_code("cached = 1\n", policy=Policy(restricted=False), toolkit_names=["a", "b"]) is not first
    assert compile_code("cached = 1\n", policy=Policy(), toolkit_names=["a"]) is not first
    assert compile_code("cached = 1\n", policy=Policy(), toolkit_names=["a", "b"], filename="<prelude>") is not first


def test_widen_adds_modules_and_leaves_the_original() -> None:
    policy = Policy()
    wider = policy.widen("zlib", "zoneinfo")
    assert wider.allowed_imports == DEFAULT_IMPORTS | {"zlib", "zoneinfo"}
    assert policy.allowed_imports == DEFAULT_IMPORTS
    assert wider.restricted is True


def test_default_imports_are_the_documented_safe_stdlib() -> None:
    assert DEFAULT_IMPORTS == frozenset(
        "math json re datetime collections itertools functools statistics random decimal fractions string "
        "textwrap dataclasses enum uuid hashlib base64 csv heapq bisect operator copy typing asyncio "
        "cmath numbers array pprint difflib calendar queue abc contextlib time graphlib secrets unicodedata "
        "shlex fnmatch html keyword struct".split()
    )


# -- line numbers -----------------------------------------------------------------------------------


def _error_line(source: str, **kwargs: Any) -> int | None:
    with pytest.raises(Exception) as info:  # noqa: PT011 - any error: we look at its line
        run(source, **kwargs)
    frames = [f for f in traceback.extract_tb(info.value.__traceback__) if f.filename == "<code>"]
    return frames[-1].lineno


@pytest.mark.parametrize("restricted", [pytest.param(True, id="restricted"), pytest.param(False, id="plain")])
@pytest.mark.parametrize(
    ("source", "line"),
    [
        pytest.param("x = 1\ny = devops.status()\nraise ValueError(y)\n", 3, id="after-inserted-await"),
        pytest.param("class A:\n    z = 1\n    raise ValueError('in body')\n", 3, id="class-body"),
        pytest.param("@dataclass_missing\nclass A:\n    pass\n", 1, id="class-decorator"),
        pytest.param("items = []\nitems[0] += 1\n", 2, id="augmented-item"),
        pytest.param("def f():\n    return devops.status() + 1\n\nf()\n", 2, id="sync-wrapped"),
        pytest.param("async def f():\n    x = 1\n    return devops.status() + 1\n\nawait f()\n", 3, id="async-def"),
    ],
)
def test_errors_point_at_the_users_line(source: str, line: int, restricted: bool) -> None:
    assert _error_line(source, restricted=restricted) == line


# -- await insertion --------------------------------------------------------------------------------


@pytest.mark.parametrize("restricted", [pytest.param(True, id="restricted"), pytest.param(False, id="plain")])
@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param("result = devops.status(1)", "ok 1", id="module-level"),
        pytest.param("result = await devops.status(1)", "ok 1", id="already-awaited"),
        pytest.param("result = devops.status(1).upper()", "OK 1", id="attribute-of-result"),
        pytest.param("result = f'{devops.status(2)}!'", "ok 2!", id="f-string"),
        pytest.param("result = len(devops.status(1))", 4, id="argument-of-plain-call"),
        pytest.param("async def f():\n    return devops.status(2)\nresult = await f()", "ok 2", id="async-def"),
        pytest.param("def f():\n    return devops.status(3)\nresult = f()", "sync status", id="plain-def"),
        pytest.param("f = lambda: devops.status(3)\nresult = f()", "sync status", id="lambda"),
        pytest.param("class A:\n    v = devops.status(4)\nresult = A.v", "sync status", id="class-body"),
        pytest.param("result = [devops.status(i) for i in range(2)]", ["ok 0", "ok 1"], id="list-comprehension"),
        pytest.param("result = {i: devops.status(i) for i in range(1)}", {0: "ok 0"}, id="dict-comprehension"),
        pytest.param("result = list(devops.status(i) for i in range(1))", ["sync status"], id="generator-expression"),
        pytest.param(
            "import asyncio\nresult = await asyncio.gather(devops.status(1), devops.status(2))",
            ["ok 1", "ok 2"],
            id="gather",
        ),
        pytest.param(
            "import asyncio\nresult = await asyncio.gather(*(devops.status(i) for i in range(3)))",
            ["ok 0", "ok 1", "ok 2"],
            id="gather-generator",
        ),
        pytest.param(
            "import asyncio\nresult = await asyncio.gather(*[devops.status(i) for i in range(2)])",
            ["ok 0", "ok 1"],
            id="gather-list",
        ),
        pytest.param(
            "import asyncio\ntask = asyncio.create_task(devops.status(5))\nresult = await task", "ok 5", id="task"
        ),
        pytest.param(
            "import asyncio\nresult = await asyncio.wait_for(devops.status(6), timeout=5)", "ok 6", id="wait-for"
        ),
        pytest.param(
            "import asyncio\nasync with asyncio.TaskGroup() as tg:\n    t = tg.create_task(devops.status(7))\n"
            "result = t.result()",
            "ok 7",
            id="task-group",
        ),
        pytest.param(
            "import asyncio\nasync def main():\n    return devops.status(8)\nresult = asyncio.run(main())",
            "ok 8",
            id="asyncio-run",
        ),
        pytest.param(
            "import asyncio\nasync def main():\n    return devops.status(9)\n"
            "if __name__ == '__main__':\n    result = asyncio.run(main())",
            "ok 9",
            id="asyncio-run-under-main-guard",
        ),
        pytest.param(
            "import asyncio\nasync def main():\n    return devops.status(10)\n"
            "loop = asyncio.get_event_loop()\nresult = loop.run_until_complete(main())\ndel loop",
            "ok 10",
            id="loop-run-until-complete",
        ),
        pytest.param(
            "import asyncio\nasync def one(i):\n    return devops.status(i)\n"
            "result = await asyncio.gather(*(one(i) for i in range(2)))",
            ["ok 0", "ok 1"],
            id="gather-of-user-coroutines",
        ),
    ],
)
def test_toolkit_calls_get_awaited(source: str, expected: Any, restricted: bool) -> None:
    assert run(source, restricted=restricted)["result"] == expected


def test_other_names_are_not_awaited() -> None:
    namespace = run(
        "class Other:\n    def status(self):\n        return 'plain'\nother = Other()\nresult = other.status()"
    )
    assert namespace["result"] == "plain"


def test_concurrent_calls_run_concurrently() -> None:
    devops = FakeToolkit()
    run("import asyncio\nawait asyncio.gather(devops.status('a'), devops.status('b'))", devops=devops)
    assert devops.calls == ["status a", "status b"]


# -- what the async allowance and the transform accept ---------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("async def f():\n    pass", id="async-def"),
        pytest.param("import asyncio\nawait asyncio.sleep(0)", id="top-level-await"),
        pytest.param("async def f(xs):\n    async for x in xs:\n        pass", id="async-for"),
        pytest.param("async def f(c):\n    async with c as (a, b):\n        pass", id="async-with"),
        pytest.param("async def f(xs):\n    return [x async for x in xs]", id="async-comprehension"),
        pytest.param("x: int = 1\nclass A:\n    y: str", id="annotations"),
        pytest.param("def f():\n    x = 0\n    def g():\n        nonlocal x\n        x += 1", id="nonlocal"),
        pytest.param("a, (b, *c) = 1, (2, 3)\nfor k, v in {}.items():\n    pass", id="unpacking"),
        pytest.param(
            "class A:\n    def __repr__(self):\n        return ''\n    def __len__(self):\n        return 0",
            id="dunders",
        ),
        pytest.param("class A(dict, total=False):\n    pass", id="class-keywords"),
    ],
)
def test_accepted_constructs(source: str) -> None:
    compile_code(source, policy=Policy())


@pytest.mark.parametrize(
    ("source", "message"),
    [
        pytest.param("async def __f():\n    pass", 'name "__f" is not allowed', id="async-def-name"),
        pytest.param("async def f(__a):\n    pass", 'name "__a" is not allowed', id="async-def-argument"),
        pytest.param("async def f(x):\n    await x.__aenter__()", 'attribute "__aenter__" is not allowed', id="await"),
        pytest.param("async def f(xs):\n    async for _i_ in xs:\n        pass", 'name "_i_"', id="async-for-target"),
        pytest.param("async def f(c):\n    async with c as __c:\n        pass", 'name "__c"', id="async-with-target"),
        pytest.param("async def f(xs):\n    return [x.cr_frame async for x in xs]", '"cr_frame"', id="async-comp"),
        pytest.param("def f():\n    nonlocal __x", 'name "__x"', id="nonlocal"),
        pytest.param("x: int = _write_", 'name "_write_"', id="annotated-value"),
    ],
)
def test_async_constructs_get_the_same_checks(source: str, message: str) -> None:
    with pytest.raises(CompileFailure) as info:
        compile_code(source, policy=Policy())
    assert message in info.value.message


def test_import_sandbox_does_not_load_restricted_python() -> None:
    import subprocess
    import sys

    code = "import sys, sandbox, sandbox.policy; print('RestrictedPython' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
