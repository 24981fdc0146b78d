"""A cold start does only what the first result needs; what it skips still works when a round needs it.

Real runtimes and real cgroups. The runtime imports asyncio, dataclasses, random, secrets and uuid only
once a round uses them (an event loop, a dataclass, a recording view); the runtime's modules
load from bytecode the host wrote (a read-only mount cannot cache it); the child enters its cgroup
through ``/bin/sh`` before anything of the sandbox runs, and never runs when it cannot.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from codeact.sandbox import SubprocessSandbox
from codeact.sandbox._cgroup import SandboxCgroup, cgroup_support
from codeact.sandbox.policy import Policy
from codeact.sandbox.subprocess_sandbox import RUNTIME_DIR

pytestmark = [pytest.mark.integration]

OPEN = Policy(restricted=False, allowed_imports=frozenset(sys.stdlib_module_names))
DEFERRED = ("asyncio", "dataclasses", "random", "secrets", "uuid")
LOADED = "import sys\nloaded = [m for m in " + repr(DEFERRED) + " if m in sys.modules]\n"


class Echo:
    """A bridge with one operation: ``echo.echo(value)`` returns ``value``."""

    def manifest(self) -> dict[str, Any]:
        return {
            "toolkits": {
                "echo": {"description": "echo", "operations": {"echo": {"params": ["value"], "required": ["value"]}}}
            }
        }

    async def handle(self, method: str, params: dict[str, Any]) -> Any:
        return params["arguments"]["value"]


@pytest.mark.asyncio
@pytest.mark.parametrize("isolation", ["bwrap", "process"])
async def test_first_round_imports_none_of_the_deferred_modules_and_later_rounds_use_them(isolation: str) -> None:
    async with SubprocessSandbox(bridge=Echo(), policy=OPEN, isolation=isolation) as box:
        # a call at module level (an inserted await, run without a loop) and one inside a plain def
        first = await box.execute(LOADED + "def f(v):\n    return echo.echo(v)\nn = echo.echo(40) + f(1) + 1")
        assert first.ok, first.error
        assert first.variables["loaded"] == []
        assert first.variables["n"] == 42

        gathered = await box.execute("import asyncio\nres = await asyncio.gather(*[echo.echo(i) for i in range(5)])")
        assert gathered.ok, gathered.error
        assert gathered.variables["res"] == [0, 1, 2, 3, 4]

        defined = await box.execute(
            "import dataclasses, uuid, random\n"
            "@dataclasses.dataclass\nclass P:\n    x: int\n"
            "p = P(3)\nu = uuid.UUID(int=7)\nr = random.random()\n" + LOADED
        )
        assert defined.ok, defined.error
        assert defined.variables["p"]["$type"] == "dataclass"
        assert defined.variables["u"] == {"$type": "uuid", "v": "00000000-0000-0000-0000-000000000007"}
        assert defined.nondeterminism is not None and "seed" in defined.nondeterminism
        assert set(defined.variables["loaded"]) == set(DEFERRED) - {"secrets"}  # secrets: not imported yet


@pytest.mark.asyncio
async def test_a_round_that_awaits_only_toolkit_calls_runs_without_a_loop_and_fails_like_one() -> None:
    async with SubprocessSandbox(bridge=Echo(), policy=OPEN, isolation="process") as box:
        result = await box.execute(
            "a = echo.echo(1)\nb = [echo.echo(i) for i in range(3)]\nraise ValueError(a + sum(b))"
        )
        assert result.status == "error"
        assert result.error is not None and result.error.type == "ValueError" and result.error.message == "4"
        after = await box.execute(LOADED + "c = echo.echo('x')")
        assert (after.variables["c"], after.variables["loaded"]) == ("x", [])


@pytest.mark.asyncio
async def test_runtime_modules_have_bytecode_after_a_start() -> None:
    async with SubprocessSandbox() as box:
        assert (await box.execute("x = 1")).ok
    for source in RUNTIME_DIR.glob("*.py"):
        if source.name == "main.py":  # the launch script: never cached by Python, kept small instead
            continue
        header = Path(importlib.util.cache_from_source(str(source))).read_bytes()[:16]
        assert header[:4] == importlib.util.MAGIC_NUMBER, source.name
        # a timestamp pyc: valid while it records the source's mtime and size (what the runtime checks)
        stat = source.stat()
        assert int.from_bytes(header[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF, source.name
        assert int.from_bytes(header[12:16], "little") == stat.st_size & 0xFFFFFFFF, source.name


@pytest.fixture
def group() -> Any:
    reason = cgroup_support()
    if reason is not None:
        pytest.fail(f"this machine cannot create a sandbox cgroup: {reason}", pytrace=False)
    made = SandboxCgroup.create(pids=16, memory_bytes=256 * 1024 * 1024, cpus=1.0)
    yield made
    made.kill()
    made.remove()


def test_the_command_runs_inside_the_cgroup(group: SandboxCgroup) -> None:
    out = subprocess.run(group.command(["/bin/cat", "/proc/self/cgroup"]), capture_output=True, text=True, check=True)
    assert group.path.name in out.stdout


def test_the_command_never_runs_when_the_cgroup_cannot_be_entered(group: SandboxCgroup) -> None:
    argv = group.command(["/bin/echo", "ran outside its cgroup"])
    group.remove()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert done.returncode == 126
    assert "ran outside" not in done.stdout
