"""The OS wall without the RestrictedPython layer: a cgroup per runtime bounds processes, as root too.

Real processes, real cgroups: the sandbox's fork bombs meet ``pids.max`` early, nothing a round
started is alive after it, the deadline kills every child, and the sandbox fails closed (a clear
``IsolationUnavailableError``) when no cgroup can be created.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

import pytest

from codeact.sandbox import IsolationUnavailableError, Limits, SubprocessSandbox
from codeact.sandbox._cgroup import SandboxCgroup, cgroup_support
from codeact.sandbox.policy import Policy

pytestmark = [pytest.mark.integration]

OPEN = Policy(restricted=False, allowed_imports=frozenset(sys.stdlib_module_names))


def _alive_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "cmdline").read_bytes() + (entry / "comm").read_bytes()
            zombie = (entry / "stat").read_bytes().rsplit(b")", 1)[-1].split()[0] == b"Z"
        except OSError:
            continue
        if marker.encode() in text and not zombie:
            found.append(int(entry.name))
    return found


@pytest.fixture(autouse=True)
def _needs_cgroups() -> None:
    reason = cgroup_support()
    if reason is not None:
        pytest.fail(f"this machine cannot create a sandbox cgroup: {reason}", pytrace=False)


def _sleepers(marker: str, n: int, *, then: str = "") -> str:
    return (
        "import os, time\n"
        f"for _ in range({n}):\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        f"        os.execv('/bin/sh', ['/bin/sh', '-c', 'sleep 3600; : {marker}'])\n" + then
    )


@pytest.mark.asyncio
@pytest.mark.parametrize("isolation", ["bwrap", "process"])
async def test_fork_bomb_is_refused_by_pids_max(isolation: str) -> None:
    marker = "mk" + secrets.token_hex(6)
    async with SubprocessSandbox(policy=OPEN, isolation=isolation, limits=Limits(processes=16)) as sandbox:  # type: ignore[arg-type]
        result = await sandbox.execute(_sleepers(marker, 80), deadline=20)
        assert result.status == "error"
        assert result.error is not None and "Resource temporarily unavailable" in result.error.message
        assert result.isolation == f"{isolation}+cgroup+rlimits"
        assert _alive_with(marker) == []  # the round's end killed the ones that did start
        after = await sandbox.execute("x = 6 * 7", deadline=20)
        assert after.ok and after.variables == {"x": 42}


@pytest.mark.asyncio
async def test_children_die_at_the_end_of_an_ok_round_and_the_runtime_stays() -> None:
    marker = "mk" + secrets.token_hex(6)
    async with SubprocessSandbox(policy=OPEN) as sandbox:
        first = await sandbox.execute(_sleepers(marker, 3, then="time.sleep(0.3)\nn = 1\n"), deadline=20)
        assert first.ok, first.error
        assert _alive_with(marker) == []
        second = await sandbox.execute("n += 1", variables=first.variables, deadline=20)
        assert second.ok and second.variables["n"] == 2


@pytest.mark.asyncio
@pytest.mark.parametrize("isolation", ["bwrap", "process"])
async def test_the_deadline_kills_every_child_and_removes_the_cgroup(isolation: str) -> None:
    marker = "mk" + secrets.token_hex(6)
    async with SubprocessSandbox(policy=OPEN, isolation=isolation) as sandbox:  # type: ignore[arg-type]
        await sandbox.start()
        worker = sandbox._worker
        assert worker is not None
        group = worker.cgroup  # type: ignore[attr-defined]
        assert isinstance(group, SandboxCgroup)
        result = await sandbox.execute(_sleepers(marker, 5, then="time.sleep(3600)\n"), deadline=2)
        assert result.status == "deadline_exceeded"
        assert _alive_with(marker) == []
        assert not group.path.exists()
        after = await sandbox.execute("y = 'fresh'", deadline=20)
        assert after.ok


def test_cgroup_limits_are_written() -> None:
    group = SandboxCgroup.create(pids=7, memory_bytes=96 * 1024 * 1024, cpus=0.5)
    try:
        assert (group.path / "pids.max").read_text().strip() == "7"
        assert group.processes() == []
    finally:
        assert group.remove()
    assert not group.path.exists()


@pytest.mark.asyncio
async def test_fails_closed_when_no_cgroup_can_be_created(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import codeact.sandbox._cgroup as cgroup_module

    monkeypatch.setattr(cgroup_module, "_ROOT", tmp_path)  # an OS edge: a machine without cgroups
    sandbox = SubprocessSandbox(policy=OPEN, process_wall="cgroup")
    with pytest.raises(IsolationUnavailableError) as caught:
        await sandbox.execute("x = 1")
    message = str(caught.value)
    assert "process wall is unavailable" in message
    assert 'process_wall="rlimits"' in message
    await sandbox.aclose()


@pytest.mark.asyncio
async def test_rlimits_wall_is_explicit_and_reported() -> None:
    async with SubprocessSandbox(policy=OPEN, process_wall="rlimits") as sandbox:
        result = await sandbox.execute("x = 1", deadline=20)
    assert result.ok
    assert result.isolation == "bwrap+rlimits"


def test_bad_wall_name_is_refused() -> None:
    with pytest.raises(ValueError, match="process_wall"):
        SubprocessSandbox(process_wall="none")  # type: ignore[arg-type]


def test_root_without_cgroup_is_not_silently_weaker() -> None:
    if os.geteuid() != 0:
        pytest.skip("the root case: RLIMIT_NPROC binds a non-root host")
    assert SubprocessSandbox(policy=OPEN)._use_cgroup


def test_an_oom_kill_is_counted() -> None:
    """The cgroup's OOM kills are what names the memory limit when it kills a runtime (issue 35 item 4)."""
    import subprocess

    group = SandboxCgroup.create(pids=8, memory_bytes=64 * 1024 * 1024, cpus=1.0)
    try:
        assert group.oom_kills() == 0
        hog = subprocess.run(
            [sys.executable, "-c", "data = b'x' * (512 * 1024 * 1024)"], preexec_fn=group.enter, check=False
        )
        assert hog.returncode == -9  # SIGKILL from the OOM killer
        assert group.oom_kills() == 1
    finally:
        group.kill()
        assert group.remove()
