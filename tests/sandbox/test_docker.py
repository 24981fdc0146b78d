"""The Docker backend against the real engine: hardening, warm reuse, recovery, deadline, gc, image."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from typer.testing import CliRunner

from codeact.engine.cli import app
from codeact.sandbox import DockerSandbox, Limits, SandboxError, SandboxImageMissingError
from codeact.sandbox.aio import cancel_and_wait
from codeact.sandbox.docker_sandbox import remove_orphans
from codeact.sandbox.image import ensure_image, image_tag

pytestmark = [pytest.mark.integration, pytest.mark.docker]

ROOT = Path(__file__).resolve().parents[2]
MiB = 1024 * 1024


@pytest.fixture(scope="module")
def sandbox_image(docker_client: Any) -> str:
    try:
        return ensure_image(docker_client)
    except SandboxImageMissingError as exc:
        if os.environ.get("CODEACT_REQUIRE_SERVICES") == "1" or os.environ.get("CI") == "true":
            pytest.fail(str(exc), pytrace=False)
        pytest.skip(str(exc))


@pytest_asyncio.fixture
async def sandbox(sandbox_image: str) -> AsyncIterator[DockerSandbox]:
    async with DockerSandbox(session_id=f"test-{uuid.uuid4().hex[:8]}") as sb:
        yield sb


def _session_containers(docker_client: Any, session: str) -> list[Any]:
    return docker_client.containers.list(
        all=True, ignore_removed=True, filters={"label": f"org.codeact.session={session}"}
    )


def _active_container(docker_client: Any, sb: DockerSandbox) -> Any:
    worker = sb._worker
    assert worker is not None
    return docker_client.containers.get(worker.container.id)  # type: ignore[attr-defined]


# --- image -------------------------------------------------------------------------------------


def test_image_tag_matches_the_build_script() -> None:
    out = subprocess.run([str(ROOT / "sandbox/image/build.sh"), "--tag"], capture_output=True, text=True, check=True)
    assert image_tag() == out.stdout.strip()


def test_missing_image_names_the_command_that_builds_it(docker_client: Any) -> None:
    with pytest.raises(SandboxImageMissingError) as info:
        ensure_image(docker_client, "codeact-sandbox:000000000000")
    assert info.value.message == (
        "the Docker sandbox image 'codeact-sandbox:000000000000' is not built; run `codeact sandbox image build` "
        "to build it (about a minute, from Debian packages; `make sandbox-image` in a clone)"
    )
    assert info.value.code == "sandbox.image.missing"


async def test_sandbox_with_missing_image_raises_before_running(docker_client: Any) -> None:
    async with DockerSandbox(image="codeact-sandbox:000000000000", pool_size=0) as sb:
        with pytest.raises(SandboxImageMissingError, match=r"run `codeact sandbox image build`"):
            await sb.start()


# docker-py leaks the socket of a failed connection; collect it here, where the warning is expected.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_unreachable_engine_is_a_sandbox_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(SandboxError) as info:
        remove_orphans()
    error = info.value
    del info
    assert error.code == "sandbox.docker.unavailable"
    assert error.message.startswith("cannot connect to the Docker engine: the Docker engine is not reachable (")
    assert error.message.endswith("start Docker or point DOCKER_HOST at it, or use the subprocess sandbox")
    # The traceback (through contextlib's frames) holds docker-py's leaked socket: free it here.
    error.__context__ = error.__traceback__ = None
    del error
    gc.collect()


# --- hardening ----------------------------------------------------------------------------------


async def test_container_hardening_is_in_force(sandbox: DockerSandbox, docker_client: Any) -> None:
    result = await sandbox.execute("x = 1 + 1")
    assert result.ok, result
    assert result.backend == "docker"
    assert result.isolation == "docker(no-net,ro-root,caps-dropped,non-root)"
    attrs = _active_container(docker_client, sandbox).attrs
    host = attrs["HostConfig"]
    assert host["NetworkMode"] == "none"
    assert host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"]
    assert host["CapAdd"] is None
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert host["Privileged"] is False
    assert host["PidsLimit"] == 64
    assert host["Memory"] == 512 * MiB
    assert host["MemorySwap"] == 512 * MiB
    assert host["NanoCpus"] == 1_000_000_000
    assert host["IpcMode"] == "none"
    assert set(host["Tmpfs"]) == {"/work", "/tmp"}
    assert f"size={256 * MiB}" in host["Tmpfs"]["/work"]
    assert "noexec" in host["Tmpfs"]["/work"]
    assert all(m["RW"] is False for m in attrs["Mounts"])
    assert attrs["Config"]["User"] == "65534:65534"
    labels = attrs["Config"]["Labels"]
    assert labels["org.codeact.sandbox"] == "1"
    assert labels["org.codeact.session"] == sandbox.session_id
    assert labels["org.codeact.host_pid"] == str(os.getpid())
    assert not any("SECRET" in e or "TOKEN" in e for e in attrs["Config"]["Env"] if not e.startswith("CODEACT_"))


async def test_hardening_seen_from_inside(sandbox: DockerSandbox) -> None:
    code = """
import os, socket
status = dict(line.split(':\\t', 1) for line in open('/proc/self/status').read().splitlines() if ':\\t' in line)
cap_eff = status['CapEff'].strip()
no_new_privs = status['NoNewPrivs'].strip()
uid = os.getuid()
interfaces = sorted(os.listdir('/sys/class/net'))
try:
    open('/etc/pwned', 'w')
    root_write = 'allowed'
except OSError as exc:
    root_write = type(exc).__name__
try:
    socket.create_connection(('1.1.1.1', 53), timeout=1)
    egress = 'allowed'
except OSError as exc:
    egress = type(exc).__name__
"""
    result = await sandbox.execute(code)
    assert result.ok, result
    v = result.variables
    assert v["cap_eff"] == "0000000000000000"
    assert v["no_new_privs"] == "1"
    assert v["uid"] == 65534
    assert v["interfaces"] == ["lo"]
    assert v["root_write"] == "OSError"
    assert v["egress"] == "OSError"


async def test_memory_limit_stops_a_bomb_and_the_sandbox_recovers(sandbox: DockerSandbox) -> None:
    bomb = await sandbox.execute("x = bytearray(800 * 1024 * 1024)", deadline=20)
    assert not bomb.ok
    # RLIMIT_AS raises MemoryError in the code; the container's OOM kill names the limit (issue 35).
    assert bomb.error is not None and bomb.error.type in ("MemoryError", "MemoryLimitExceeded")
    assert "sandbox.limits.memoryMb" in bomb.error.message
    after = await sandbox.execute("x = 1 + 1")
    assert after.ok and after.variables == {"x": 2}


async def test_an_oom_kill_names_the_memory_limit(sandbox_image: str) -> None:
    """Files in the tmpfs work dir count against the container's memory: past it the runtime is OOM-killed."""
    fill = (
        "for i in range(4):\n    with open(f'/work/fill{i}', 'wb') as f:\n"
        "        for _ in range(60):\n            f.write(b'x' * (1024 * 1024))\n"
    )
    async with DockerSandbox(limits=Limits(memory_bytes=128 * MiB), pool_size=0) as sb:
        killed = await sb.execute(fill, deadline=30)
        assert killed.status == "crashed"
        assert killed.error is not None and killed.error.type == "MemoryLimitExceeded"
        assert killed.error.message == (
            "the round ran past its 128 MB memory limit (its processes and the files they wrote, together); the "
            "sandbox was killed and will be replaced (the variables from before the round are kept). Hold less in "
            "memory at once, or raise the limit (sandbox.limits.memoryMb)"
        )
        assert (await sb.execute("x = 1")).ok


async def test_restricted_policy_can_be_switched_on(sandbox_image: str) -> None:
    from codeact.sandbox.policy import Policy

    async with DockerSandbox(policy=Policy(), pool_size=0) as sb:
        result = await sb.execute("import os")
        assert result.status == "error"
        assert result.isolation == "docker(no-net,ro-root,caps-dropped,non-root)+restricted"


# --- warm reuse, recovery, deadline -------------------------------------------------------------


async def test_warm_container_is_reused_between_rounds(sandbox: DockerSandbox, docker_client: Any) -> None:
    first = await sandbox.execute("import sys\nsys.codeact_marker = 41\nx = 1 + 1")
    container_id = _active_container(docker_client, sandbox).id
    second = await sandbox.execute("import sys\ny = sys.codeact_marker + 1\nz = x * 10", variables=first.variables)
    assert second.ok, second
    assert _active_container(docker_client, sandbox).id == container_id
    assert second.variables["y"] == 42
    assert second.variables["z"] == 20


async def test_variables_and_functions_survive_a_killed_container(sandbox: DockerSandbox, docker_client: Any) -> None:
    first = await sandbox.execute("def helper(v):\n    return v * 3\nx = 5")
    assert first.ok, first
    old = _active_container(docker_client, sandbox)
    old.kill()
    # The runtime died between rounds: once the host has seen its connection drop, the next round
    # runs on a fresh container with the variables restored.
    await asyncio.wait_for(asyncio.shield(sandbox._worker.channel.lost), 10)  # type: ignore[union-attr]
    second = await sandbox.execute("y = helper(x)", variables=first.variables)
    assert second.ok, second
    assert second.variables["y"] == 15
    assert _active_container(docker_client, sandbox).id != old.id


async def test_deadline_kills_the_container_and_the_next_round_restores(
    sandbox: DockerSandbox, docker_client: Any
) -> None:
    first = await sandbox.execute("x = 7")
    looping = _active_container(docker_client, sandbox)
    result = await sandbox.execute("while True:\n    pass", variables=first.variables, deadline=2)
    assert result.status == "deadline_exceeded"
    assert result.error is not None and result.error.type == "DeadlineExceeded"
    assert result.variables == first.variables
    ids = {c.id for c in _session_containers(docker_client, sandbox.session_id)}
    assert looping.id not in ids  # killed and removed, not left spinning
    after = await sandbox.execute("y = x + 1", variables=result.variables)
    assert after.ok and after.variables["y"] == 8


async def test_pool_keeps_a_started_container_and_close_removes_all(sandbox_image: str, docker_client: Any) -> None:
    sb = DockerSandbox(pool_size=1, session_id=f"test-pool-{uuid.uuid4().hex[:8]}")
    await sb.start()
    assert len(sb._pool) >= 1
    assert len(_session_containers(docker_client, sb.session_id)) == 1 + len(sb._pool)  # warm one + pooled
    result = await sb.execute("x = 1 + 1")
    assert result.ok
    await sb.aclose()
    assert _session_containers(docker_client, sb.session_id) == []


def test_sync_close_removes_containers(sandbox_image: str, docker_client: Any) -> None:
    sb = DockerSandbox(pool_size=1, session_id=f"test-sync-{uuid.uuid4().hex[:8]}")

    async def run() -> None:
        await sb.start()

    asyncio.run(run())
    sb.close()
    assert _session_containers(docker_client, sb.session_id) == []


async def test_close_retries_a_removal_the_engine_refused(sandbox_image: str, docker_client: Any) -> None:
    """After an OOM kill under gVisor the engine may refuse `rm -f` for a while; close still removes it."""
    import docker.errors

    sb = DockerSandbox(session_id=f"test-refused-{uuid.uuid4().hex[:8]}")
    await sb.start()
    worker = sb._worker
    assert worker is not None
    real = worker.container  # type: ignore[attr-defined]
    refusals = {"left": 2}

    class Refusing:
        """The real container, whose first two removals the engine answers with an error."""

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def remove(self, **kwargs: Any) -> None:
            if refusals["left"]:
                refusals["left"] -= 1
                code = 500 if refusals["left"] else 409
                raise docker.errors.APIError("refused", response=_Response(code))
            real.remove(**kwargs)

    worker.container = Refusing()  # type: ignore[attr-defined]
    await sb.aclose()
    assert refusals["left"] == 0
    assert _session_containers(docker_client, sb.session_id) == []


@pytest.mark.parametrize("phase", ["created", "running"])
async def test_a_start_cancelled_again_and_again_leaves_no_container(
    sandbox_image: str, docker_client: Any, phase: str
) -> None:
    """Closing a sandbox cancels a pool refill every second until it ends (cancel_and_wait); a start
    on a busy gVisor engine takes longer, so the clean-up of a cancelled start is itself cancelled.
    It must still remove the container (it once left one whose bridge directory was already gone)."""
    sb = DockerSandbox(session_id=f"test-recancel-{uuid.uuid4().hex[:8]}")
    starting = asyncio.ensure_future(sb.start())
    for _ in range(600):  # the container exists (in the phase under test): the start is under way
        found = _session_containers(docker_client, sb.session_id)
        if found and (phase == "created" or found[0].status == "running"):
            break
        await asyncio.sleep(0.01)
    else:
        raise AssertionError(f"no {phase} container appeared")
    await cancel_and_wait(starting, poll=0.01)  # a cancel every 10 ms, through the clean-up too
    assert starting.cancelled()
    await sb.aclose()
    assert _session_containers(docker_client, sb.session_id) == []


class _Response:
    def __init__(self, status_code: int) -> None:
        self.status_code = status_code
        self.reason = "refused"


def test_limits_are_applied_to_the_container(sandbox_image: str, docker_client: Any) -> None:
    limits = Limits(memory_bytes=256 * MiB, processes=32, disk_bytes=64 * MiB)
    sb = DockerSandbox(limits=limits, cpus=0.5, pool_size=0, session_id=f"test-lim-{uuid.uuid4().hex[:8]}")

    async def run() -> dict[str, Any]:
        async with sb:
            await sb.execute("x = 1")
            return dict(_active_container(docker_client, sb).attrs["HostConfig"])

    host = asyncio.run(run())
    assert (host["Memory"], host["PidsLimit"], host["NanoCpus"]) == (256 * MiB, 32, 500_000_000)
    assert f"size={64 * MiB}" in host["Tmpfs"]["/work"]


# --- gc -----------------------------------------------------------------------------------------


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _labelled_container(docker_client: Any, image: str, session: str, pid: int) -> Any:
    return docker_client.containers.run(
        image,
        ["sleep", "300"],
        detach=True,
        network_mode="none",
        labels={"org.codeact.sandbox": "1", "org.codeact.session": session, "org.codeact.host_pid": str(pid)},
    )


def test_gc_removes_orphans_and_keeps_live_sessions(sandbox_image: str, docker_client: Any) -> None:
    tag = uuid.uuid4().hex[:8]
    orphan = _labelled_container(docker_client, sandbox_image, f"gc-orphan-{tag}", _dead_pid())
    live = _labelled_container(docker_client, sandbox_image, f"gc-live-{tag}", os.getpid())
    try:
        removed = remove_orphans(client=docker_client)
        assert orphan.short_id in [r.id for r in removed]
        assert live.short_id not in [r.id for r in removed]
        assert _session_containers(docker_client, f"gc-orphan-{tag}") == []
        assert len(_session_containers(docker_client, f"gc-live-{tag}")) == 1
    finally:
        for c in (orphan, live):
            try:
                c.remove(force=True)
            except Exception:  # noqa: BLE001 - already removed by gc
                pass


def test_gc_command_prints_what_it_removed(sandbox_image: str, docker_client: Any) -> None:
    tag = uuid.uuid4().hex[:8]
    pid = _dead_pid()
    orphan = _labelled_container(docker_client, sandbox_image, f"gc-cli-{tag}", pid)
    result = CliRunner().invoke(app, ["sandbox", "gc"])
    assert result.exit_code == 0, result.output
    assert f"removed {orphan.short_id} {orphan.name} (session 'gc-cli-{tag}', host pid {pid}, running)" in result.output
    assert _session_containers(docker_client, f"gc-cli-{tag}") == []
    again = CliRunner().invoke(app, ["sandbox", "gc", "--json"])
    assert again.exit_code == 0
    assert f"gc-cli-{tag}" not in again.output
    assert isinstance(json.loads(again.output), list)
