"""The hostile suite: every case in hostile_cases.py is contained on every backend.

Backends: the subprocess sandbox with the policy on, the subprocess sandbox with the
RestrictedPython layer OFF (full CPython, every stdlib import: bubblewrap, the cgroup and the rlimits
alone must hold), the Docker sandbox (full CPython in the hardened container) and the same on gVisor
(``runtime="gvisor"``: gVisor's user-space kernel between the code and the host).

"Contained" means: the round does not end ``ok`` (unless the case says the attack may run harmlessly
inside), nothing leaked (the secret appears nowhere in the result, the host listener saw no
connection, no host file was written, no process outlives the sandbox, the bridge handler received
nothing), and afterwards the SAME sandbox object runs a benign round correctly.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import socket
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from codeact.sandbox import DockerSandbox, Limits, Sandbox, SandboxError, SandboxImageMissingError, SubprocessSandbox
from codeact.sandbox.subprocess_sandbox import python_interpreter
from tests.sandbox.hostile_cases import CASES, HostileCase

pytestmark = [pytest.mark.slow, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ("subprocess_policy", "subprocess_os_only", "docker", "docker_gvisor")
EXHAUSTING_DEADLINE_S = 3.0
DEADLINE_S = 10.0


class _Listener:
    """A TCP listener on 0.0.0.0 (127.0.0.1 included) that records every connection it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("0.0.0.0", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections: list[tuple[str, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, peer = self.sock.accept()
            except OSError:
                continue
            self.connections.append(peer)
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


def _host_ip() -> str:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing address
            return str(probe.getsockname()[0])
    except OSError:
        return "127.0.0.1"


@dataclass
class Host:
    """What the attacks aim at, and the oracles that tell whether they got anywhere."""

    secret_name: str
    secret: str
    secret_file: Path
    host_dir: Path
    marker: str
    listener: _Listener

    def substitute(self, code: str) -> str:
        values = {
            "$SECRET_NAME": self.secret_name,
            "$SECRET_FILE": str(self.secret_file),
            "$HOST_DIR": str(self.host_dir),
            "$REPO": str(ROOT),
            "$HOME": os.path.expanduser("~"),
            "$PORT": str(self.listener.port),
            "$HOST_IP": _host_ip(),
            "$MARKER": self.marker,
            "$PY_PREFIX": python_interpreter()[1],
        }
        for key in sorted(values, key=len, reverse=True):
            code = code.replace(key, values[key])
        return code

    def leaked_files(self) -> list[str]:
        found = [str(p) for p in self.host_dir.rglob("*")]
        for path in (
            Path(f"/etc/codeact-pwned-{self.marker}"),
            ROOT / f"PWNED-{self.marker}",
            Path(f"/tmp/codeact-pwned-{self.marker}"),
        ):
            if path.exists():
                found.append(str(path))
        return found

    def surviving_processes(self) -> list[str]:
        hits = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
                comm = (entry / "comm").read_bytes()  # a forked child renamed with prctl(PR_SET_NAME)
                if (entry / "stat").read_bytes().rsplit(b")", 1)[-1].split()[0] == b"Z":
                    continue  # dead, waiting to be collected: it runs nothing
            except OSError:
                continue
            if (self.marker.encode() in cmdline or self.marker.encode() in comm) and str(os.getpid()) != entry.name:
                hits.append(f"{entry.name}: {cmdline!r} ({comm.strip()!r})")
        return hits


@pytest.fixture(scope="module")
def host() -> Iterator[Host]:
    secret_name = "CODEACT_HOSTILE_SECRET"
    secret = "s3cr3t-" + secrets.token_hex(16)
    previous = os.environ.get(secret_name)
    os.environ[secret_name] = secret
    # Not under /tmp: every sandbox has a private /tmp, where the same path could be created harmlessly.
    outside = Path(tempfile.mkdtemp(prefix="codeact-hostile-", dir="/var/tmp"))
    os.chmod(outside, 0o755)
    secret_file = outside / "secret.txt"
    secret_file.write_text(secret)
    os.chmod(secret_file, 0o644)  # world-readable: only isolation may keep it out of reach
    host_dir = outside / "writable"
    host_dir.mkdir()
    os.chmod(host_dir, 0o777)  # world-writable: only isolation may keep writes out
    listener = _Listener()
    try:
        yield Host(
            secret_name=secret_name,
            secret=secret,
            secret_file=secret_file,
            host_dir=host_dir,
            marker="mk" + secrets.token_hex(6),
            listener=listener,
        )
    finally:
        listener.close()
        if previous is None:
            os.environ.pop(secret_name, None)
        else:
            os.environ[secret_name] = previous
        for path in sorted(outside.rglob("*"), reverse=True):
            path.unlink() if not path.is_dir() or path.is_symlink() else path.rmdir()
        outside.rmdir()


@dataclass
class RecordingHandler:
    """A bridge handler that grants nothing and records whatever reaches it (nothing should)."""

    secret: str
    calls: list[tuple[str, Any]] = field(default_factory=list)

    def manifest(self) -> dict[str, Any]:
        return {"toolkits": {}}

    async def handle(self, method: str, params: dict[str, Any]) -> Any:
        self.calls.append((method, params))
        return {"secret": self.secret}  # a forged call that got through would leak this


def _factory(backend: str, request: pytest.FixtureRequest) -> Callable[[RecordingHandler], Sandbox]:
    if backend in ("docker", "docker_gvisor"):
        client = request.getfixturevalue("docker_client")
        from codeact.sandbox.image import ensure_image

        try:
            ensure_image(client)
        except SandboxImageMissingError as exc:
            pytest.fail(str(exc), pytrace=False)
        runtime = "gvisor" if backend == "docker_gvisor" else "runc"
        if runtime == "gvisor" and "runsc" not in (client.info().get("Runtimes") or {}):
            pytest.fail("the Docker engine has no runsc (gVisor) runtime: run `scripts/services.sh up`", pytrace=False)
        return lambda handler: DockerSandbox(
            bridge=handler, pool_size=1, session_id="hostile-" + secrets.token_hex(4), runtime=runtime
        )
    if backend == "subprocess_policy":
        return lambda handler: SubprocessSandbox(bridge=handler)
    from codeact.sandbox.policy import Policy

    # The RestrictedPython layer off and every stdlib module importable: the OS layer alone holds.
    open_policy = Policy(restricted=False, allowed_imports=frozenset(sys.stdlib_module_names))
    return lambda handler: SubprocessSandbox(bridge=handler, policy=open_policy)


@dataclass
class Backend:
    name: str
    new: Callable[[RecordingHandler], Sandbox]
    shared: Sandbox
    handler: RecordingHandler
    containers: Callable[[str], list[Any]]


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=BACKENDS)
async def backend(request: pytest.FixtureRequest, host: Host) -> AsyncIterator[Backend]:
    new = _factory(request.param, request)
    handler = RecordingHandler(host.secret)
    shared = new(handler)

    def containers(session: str) -> list[Any]:
        client = request.getfixturevalue("docker_client")
        return list(
            client.containers.list(all=True, ignore_removed=True, filters={"label": f"org.codeact.session={session}"})
        )

    try:
        yield Backend(name=request.param, new=new, shared=shared, handler=handler, containers=containers)
    finally:
        await shared.aclose()


def _assert_nothing_leaked(case: HostileCase, host: Host, handler: RecordingHandler, result: Any) -> None:
    dumped = json.dumps(result.to_json())
    assert host.secret not in dumped, f"{case.id}: the host secret leaked into the result"
    assert "ESCAPED" not in result.stdout, f"{case.id}: the attack reached its goal: {result.stdout[:300]!r}"
    assert host.listener.connections == [], f"{case.id}: the host listener saw {host.listener.connections}"
    assert host.leaked_files() == [], f"{case.id}: host files were written: {host.leaked_files()}"
    assert handler.calls == [], f"{case.id}: forged bridge requests reached the handler: {handler.calls[:3]}"
    assert len(result.stdout.encode()) <= Limits().output_bytes + 200, f"{case.id}: stdout was not capped"


async def _assert_no_survivors(host: Host) -> None:
    for _ in range(50):
        if not host.surviving_processes():
            return
        await asyncio.sleep(0.1)
    assert host.surviving_processes() == [], "a process started in the sandbox outlived it"


async def _assert_benign_round(sandbox: Sandbox, case: HostileCase) -> None:
    after = await sandbox.execute("x = 1 + 1", deadline=DEADLINE_S * 2)
    assert after.ok, f"{case.id}: the sandbox did not recover: {after.status} {after.error}"
    assert after.variables == {"x": 2}


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
async def test_hostile_case_is_contained(case: HostileCase, backend: Backend, host: Host) -> None:
    own = case.exhausting or case.fresh
    handler = RecordingHandler(host.secret) if own else backend.handler
    sandbox = backend.new(handler) if own else backend.shared
    handler.calls.clear()
    try:
        deadline = EXHAUSTING_DEADLINE_S if case.exhausting else DEADLINE_S
        result = await sandbox.execute(host.substitute(case.code), deadline=deadline)
        if not case.may_finish:
            assert result.status != "ok", f"{case.id}: the attack ran to the end: {result.stdout[:300]!r}"
        if case.refused:
            # A limit stops it, not the clock: pids.max (an error the code sees) on the subprocess
            # backend; in a container the memory limit may come first (the runtime is OOM-killed).
            expected = ("error",) if backend.name.startswith("subprocess") else ("error", "crashed")
            assert result.status in expected, f"{case.id}: not refused by a limit: {result.status} {result.error}"
        _assert_nothing_leaked(case, host, handler, result)
        if case.round_reaps:
            await _assert_no_survivors(host)  # the sandbox is still open: the round's end killed them
        await _assert_benign_round(sandbox, case)
    finally:
        if own:
            await sandbox.aclose()
    if own and isinstance(sandbox, DockerSandbox):
        assert backend.containers(sandbox.session_id) == [], "a container outlived its sandbox"
    if case.fresh:
        await _assert_no_survivors(host)
    assert host.leaked_files() == []


def test_suite_is_large_enough() -> None:
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)
    assert {c.category for c in CASES} == {
        "files-read",
        "files-write",
        "env",
        "network",
        "process",
        "introspection",
        "import",
        "exhaustion",
        "bridge",
    }


# The round's code while its run is cancelled and the sandbox closed: double-forked, session-leading sleepers
# that ignore SIGTERM (where processes can be made at all), then a flood of raw frames on the bridge socket.
CLOSE_UNDER_FIRE = r"""
try:
    import os, signal
    for _ in range(4):
        if os.fork() == 0:
            os.setsid()
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            if os.fork() == 0:
                os.execv('/bin/sh', ['/bin/sh', '-c', 'trap "" TERM; sleep 3600; : $MARKER'])
            os._exit(0)
except Exception:
    pass
sock = _codeact_sync_.__self__.sock
frame = b'{"jsonrpc":"2.0","id":7,"method":"call","params":["vault","read"]}\n'  # refused before any handler
while True:
    sock.sendall(frame * 200)
"""
CLOSE_HANG_GUARD_S = 120.0  # a hang guard, not a speed target: the close must end, however long it takes


@pytest.mark.asyncio(loop_scope="module")
async def test_a_close_cancelled_again_and_again_ends_and_leaves_nothing(backend: Backend, host: Host) -> None:
    """``Sandbox.aclose()`` finishes through repeated cancels (it is clean-up a cancelled run must not cut short):
    hostile code must not turn that into a close that never ends, nor into processes, containers or calls left."""
    handler = RecordingHandler(host.secret)
    sandbox = backend.new(handler)
    running = asyncio.ensure_future(sandbox.execute(host.substitute(CLOSE_UNDER_FIRE), deadline=60.0))
    await asyncio.sleep(1.0)  # the code is flooding (and its sleepers started)
    running.cancel()  # the run is cancelled mid-round ...
    closing = asyncio.ensure_future(sandbox.aclose())  # ... and its clean-up is cancelled every 20 ms, as
    loop = asyncio.get_running_loop()  # cancel_and_wait does every second
    until = loop.time() + CLOSE_HANG_GUARD_S
    while not closing.done() and loop.time() < until:
        await asyncio.sleep(0.02)  # first: a task cancelled before it starts never runs (that is no close)
        closing.cancel()
    assert closing.done(), "the close did not end through repeated cancels"
    assert closing.cancelled() or closing.exception() is None  # the cancel is raised after the close, or absorbed
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await running
    assert handler.calls == [], f"forged bridge requests reached the handler: {handler.calls[:3]}"
    await _assert_no_survivors(host)
    if isinstance(sandbox, DockerSandbox):
        assert backend.containers(sandbox.session_id) == [], "a container outlived its sandbox"
    with pytest.raises(SandboxError, match="closed"):
        await sandbox.execute("x = 1", deadline=5.0)  # closed for good: nothing runs after the close
