"""The sandbox dies with its host: SIGKILL a real ``codeact exec`` mid-round, the runtime goes too.

Each test starts ``codeact exec`` on a round that never ends by itself (a busy loop, or an
``asyncio.sleep``), waits for its runtime to run, SIGKILLs the host and polls (bounded) until
the runtime process / container is gone. ``codeact sandbox gc`` then removes what is left
(socket and work directories, the stopped container) and names the session.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from codeact.sandbox.errors import SandboxImageMissingError
from codeact.sandbox.image import ensure_image
from codeact.sandbox.leftovers import _runtime_processes, tag_alive

CODEACT = str(Path(sys.executable).with_name("codeact"))
BUSY = "n = 0\nwhile True:\n    n += 1\n"
ASLEEP = "import asyncio\nprint('sleeping')\nawait asyncio.sleep(600)\n"
BOUND_S = 10.0  # generous: the runtime notices the hang-up within milliseconds


def _poll(predicate: Callable[[], bool], bound: float = BOUND_S) -> bool:
    give_up = time.monotonic() + bound
    while time.monotonic() < give_up:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []

    def start(code: str, *args: str) -> subprocess.Popen[str]:
        script = tmp_path / f"round{len(started)}.py"
        script.write_text(code)
        proc = subprocess.Popen(
            [CODEACT, "exec", str(script), "--timeout", "600", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def _runtimes_of(pid: int) -> list[int]:
    return [p for p, tag, _ in _runtime_processes() if tag.startswith(f"{pid}.")]


def _cpu_s(pid: int) -> float:
    """CPU seconds ``pid`` has used (user + system), 0 once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rfind(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _running_busy(pid: int) -> bool:
    """Whether a runtime of host ``pid`` runs the BUSY round: it has spent more CPU than a start-up does.

    A runtime process exists before it has connected to its host; on a starved machine its start can
    outlast ``Limits.start_timeout_s`` and the host then removes that sandbox (rightly). A runtime that
    has burnt half a second of CPU (its start-up takes ~15 ms) is past that: the round's loop runs.
    """
    return any(_cpu_s(runtime) >= 0.5 for runtime in _runtimes_of(pid))


@pytest.mark.parametrize("isolation", ["process", "bwrap"])
@pytest.mark.parametrize("code", [BUSY, ASLEEP], ids=["busy-loop", "asyncio-sleep"])
def test_subprocess_runtime_dies_with_its_host(
    host: Callable[..., subprocess.Popen[str]], isolation: str, code: str
) -> None:
    proc = host(code, "--isolation", isolation)
    assert _poll(lambda: bool(_runtimes_of(proc.pid)), 30), "the runtime never started"
    time.sleep(1.0)  # let the round begin
    runtimes = _runtimes_of(proc.pid)
    assert runtimes and proc.poll() is None
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert _poll(lambda: not _runtimes_of(proc.pid)), f"runtime processes {_runtimes_of(proc.pid)} outlived the host"
    assert not tag_alive(f"{proc.pid}.1")


def test_gc_removes_directories_of_dead_hosts_and_keeps_live_ones(
    host: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    dead = host(BUSY, "--isolation", "process")
    live = host(BUSY, "--isolation", "process")
    # both rounds running, not only their runtime processes started (see _running_busy)
    assert _poll(lambda: _running_busy(dead.pid) and _running_busy(live.pid), 60), (dead.poll(), live.poll())
    os.kill(dead.pid, signal.SIGKILL)
    dead.wait()
    tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    mine = lambda pid: sorted(p.name for p in tmp.glob(f"codeact-*-{pid}.*"))  # noqa: E731
    assert len(mine(dead.pid)) == 2  # the bridge socket dir and the work dir were left behind
    result = subprocess.run([CODEACT, "sandbox", "gc", "--json"], capture_output=True, text=True, check=False)
    assert result.returncode in (0, 3), result.stderr  # 3: no Docker engine here; the rest ran
    removed = json.loads(result.stdout)
    kinds = {entry["kind"] for entry in removed if entry["host_pid"] == str(dead.pid)}
    assert kinds == {"socket_dir", "work_dir"}
    assert mine(dead.pid) == []
    assert len(mine(live.pid)) == 2, (mine(live.pid), live.poll(), removed)  # a running host keeps its sandbox
    assert live.poll() is None and _runtimes_of(live.pid)


@pytest.mark.integration
@pytest.mark.docker
def test_container_stops_with_its_host_and_gc_names_the_session(
    host: Callable[..., subprocess.Popen[str]], docker_client: Any
) -> None:
    try:
        ensure_image(docker_client)
    except SandboxImageMissingError as exc:
        pytest.fail(str(exc), pytrace=False)
    proc = host(ASLEEP, "--sandbox", "docker")

    def containers(**filters: str) -> list[Any]:
        labels = [f"org.codeact.host_pid={proc.pid}", *(f"{k}={v}" for k, v in filters.items())]
        return list(docker_client.containers.list(all=True, ignore_removed=True, filters={"label": labels}))

    assert _poll(lambda: any(c.status == "running" for c in containers()), 60), "no container started"
    time.sleep(1.5)  # let the round begin
    sessions = {c.labels["org.codeact.session"] for c in containers()}
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()

    def stopped() -> bool:
        return all(
            c.status != "running"
            for c in docker_client.containers.list(
                all=True, ignore_removed=True, filters={"label": f"org.codeact.host_pid={proc.pid}"}
            )
        )

    assert _poll(stopped), "a container kept running after its host died"
    result = subprocess.run([CODEACT, "sandbox", "gc"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    for session in sessions:
        assert f"(session {session!r}, host pid {proc.pid}, exited)" in result.stdout
    assert containers() == []


def test_subprocess_sandbox_names_the_session_on_the_runtime_command_line() -> None:
    import asyncio

    from codeact.sandbox import SubprocessSandbox

    session = f"named-{uuid.uuid4().hex[:8]}"

    async def main() -> list[str]:
        async with SubprocessSandbox(isolation="process", session_id=session) as box:
            await box.execute("x = 1")
            return [s for _, tag, s in _runtime_processes() if tag.startswith(f"{os.getpid()}.")]

    assert session in asyncio.run(main())


def test_gc_kills_a_runtime_whose_host_is_gone_and_names_its_session() -> None:
    session = f"stuck-{uuid.uuid4().hex[:8]}"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    # A runtime that could not exit by itself, as `ps` shows it: `--host` names a dead host.
    stuck = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", "/opt/codeact/runtime/main.py"]
        + ["--host", f"{dead.pid}.1", "--session", session],
        start_new_session=True,
    )
    try:
        assert _poll(lambda: any(s == session for _, _, s in _runtime_processes()), 10)
        result = subprocess.run([CODEACT, "sandbox", "gc"], capture_output=True, text=True, check=False)
        assert f"removed runtime process {stuck.pid} (session {session!r}, host pid {dead.pid}, running)" in (
            result.stdout
        )
        assert stuck.wait(10) == -signal.SIGKILL
    finally:
        if stuck.poll() is None:
            stuck.kill()
            stuck.wait()
