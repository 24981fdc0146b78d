"""The subprocess backend end to end: real bubblewrap, real child processes, an echo toolkit."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from codeact.sandbox import ExecutionError, ExecutionResult, IsolationUnavailableError, Limits, SubprocessSandbox
from codeact.sandbox.base import limit_note
from codeact.sandbox.policy import Policy
from codeact.sandbox.runtime import protocol as p

OPEN_IMPORTS = frozenset({"os", "socket", "signal", "asyncio", "time", "json", "math", "subprocess"})


def open_policy() -> Policy:
    """The RestrictedPython layer switched off: only the OS layer contains the code."""
    return Policy(restricted=False, allowed_imports=OPEN_IMPORTS)


class Echo:
    def __init__(self) -> None:
        self.running = 0
        self.max_running = 0

    def manifest(self) -> dict[str, Any]:
        ops = {
            "echo": {"params": ["value"], "required": ["value"]},
            "pair": {"params": ["a", "b"], "required": ["a"]},
            "slow": {"params": ["value"], "required": ["value"]},
            "fail": {"params": [], "required": []},
            "forbidden": {"params": [], "required": []},
            "finish": {"params": ["answer"], "required": ["answer"]},
        }
        return {"toolkits": {"echo": {"description": "an echo toolkit", "operations": ops}}}

    async def handle(self, method: str, params: dict[str, Any]) -> Any:
        op = params["operation"]
        args = params["arguments"]
        if op == "fail":
            raise p.RpcError(p.TOOL_ERROR, "the tool broke: no such project")
        if op == "forbidden":
            raise p.RpcError(p.UNAUTHORIZED, "operation not granted")
        if op == "finish":
            return {"$control": {"kind": "finish", "answer": args["answer"]}}
        if op == "pair":
            return [args["a"], args.get("b")]
        if op == "slow":
            self.running += 1
            self.max_running = max(self.max_running, self.running)
            await asyncio.sleep(0.2)
            self.running -= 1
        return args["value"]


@pytest.fixture
async def sb() -> AsyncIterator[SubprocessSandbox]:
    box = SubprocessSandbox(bridge=Echo())
    yield box
    await box.aclose()


@pytest.fixture
async def open_sb() -> AsyncIterator[SubprocessSandbox]:
    box = SubprocessSandbox(policy=open_policy(), bridge=Echo())
    yield box
    await box.aclose()


def ok(result: ExecutionResult) -> ExecutionResult:
    assert result.status == "ok", result.error
    return result


def descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found: set[int] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.add(child)
            stack.append(child)
    return found


def running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


# -- rounds ----------------------------------------------------------------------------------------


async def test_round_trip(sb: SubprocessSandbox) -> None:
    result = ok(await sb.execute("x = 1 + 1\nprint('x is', x)"))
    assert result.stdout == "x is 2\n"
    assert result.variables == {"x": 2}
    assert result.backend == "subprocess"
    assert result.isolation == "bwrap+cgroup+rlimits+restricted"
    assert result.error is None and result.control is None
    assert result.to_json()["ok"] is True


async def test_warm_between_rounds(open_sb: SubprocessSandbox) -> None:
    ok(await open_sb.execute("with open('/work/state.txt', 'w') as f:\n    f.write('warm')"))
    result = ok(await open_sb.execute("print(open('/work/state.txt').read())"))
    assert result.stdout == "warm\n"


async def test_variables_and_functions_survive_a_killed_sandbox(sb: SubprocessSandbox) -> None:
    first = ok(await sb.execute("def helper(x):\n    return x * 10\nbase = 4\n"))
    killed = await sb.execute("while True:\n    pass\n", variables=first.variables, deadline=1)
    assert killed.status == "deadline_exceeded"
    assert killed.variables == first.variables
    third = ok(await sb.execute("answer = helper(base) + 2\n", variables=killed.variables))
    assert third.variables["answer"] == 42
    assert third.variables["base"] == 4
    assert "helper" in third.variables


async def test_error_line_numbers_and_trimmed_traceback(sb: SubprocessSandbox) -> None:
    result = await sb.execute("a = 1\nb = 0\n\ndef f(x):\n    return x / b\n\nf(a)\n")
    assert result.status == "error"
    assert result.error is not None
    assert result.error.type == "ZeroDivisionError"
    assert result.error.message == "division by zero"
    assert result.error.line == 5
    assert result.error.traceback == (
        "Traceback (most recent call last):\n"
        '  File "<code>", line 7, in <module>\n'
        "    f(a)\n"
        '  File "<code>", line 5, in f\n'
        "    return x / b\n"
        "ZeroDivisionError: division by zero"
    )
    assert "/" not in result.error.traceback.replace("x / b", "")
    assert result.variables["a"] == 1


async def test_compile_error_is_a_normal_result(sb: SubprocessSandbox) -> None:
    result = await sb.execute("x = 1\ny = (\n")
    assert result.status == "error"
    assert result.error is not None and result.error.type == "SyntaxError"
    assert result.error.line is not None


async def test_output_is_truncated_head_and_tail() -> None:
    async with SubprocessSandbox(limits=Limits(output_bytes=1000)) as box:
        result = ok(await box.execute("print('HEAD')\nfor i in range(20000):\n    print('x' * 10)\nprint('TAIL')\n"))
    assert result.stdout.startswith("HEAD\n")
    assert result.stdout.endswith("TAIL\n")
    # The cut names the limit and the key that raises it (issue 35).
    marker = " bytes cut: output is capped at 1000 bytes per stream and round, raise sandbox.limits.outputBytes] ...\n"
    assert marker in result.stdout
    cut = int(result.stdout.split("... [", 1)[1].split(" bytes cut", 1)[0])
    assert cut == 5 + 20000 * 11 + 5 - 1000
    assert len(result.stdout.encode()) <= 1000 + 40 + len(marker)


# -- toolkit proxies ---------------------------------------------------------------------------------


async def test_proxy_calls_await_sync_and_positional(sb: SubprocessSandbox) -> None:
    code = "a = await echo.echo('x')\nb = echo.pair(1, b=2)\ndef inner():\n    return echo.echo(value=3)\nc = inner()\n"
    result = ok(await sb.execute(code))
    assert (result.variables["a"], result.variables["c"]) == ("x", 3)
    assert result.variables["b"] == [1, 2]
    assert result.rpc_count == 3


async def test_gathered_calls_overlap_on_the_host() -> None:
    echo = Echo()
    async with SubprocessSandbox(bridge=echo) as box:
        result = ok(await box.execute("import asyncio\nres = await asyncio.gather(*[echo.slow(i) for i in range(8)])"))
    assert result.variables["res"] == list(range(8))
    assert echo.max_running == 8
    assert result.rpc_count == 8


@pytest.mark.parametrize(
    ("code", "type_", "message"),
    [
        pytest.param(
            "echo.pair(1, 2, 3)",
            "TypeError",
            "echo.pair() takes 2 positional argument(s) (a, b) but 3 were given",
            id="too-many",
        ),
        pytest.param("echo.pair(b=1)", "TypeError", "echo.pair() missing required argument(s): 'a'", id="missing"),
        pytest.param(
            "echo.pair(1, c=2)",
            "TypeError",
            "echo.pair() got an unexpected keyword argument 'c'; parameters: a, b",
            id="unknown-kw",
        ),
        pytest.param(
            "echo.deploy()",
            "AttributeError",
            "toolkit 'echo' has no operation 'deploy' granted to this session; "
            "granted operations of echo: echo, fail, finish, forbidden, pair, slow",
            id="not-granted",
        ),
    ],
)
async def test_proxy_errors_are_clear(sb: SubprocessSandbox, code: str, type_: str, message: str) -> None:
    result = await sb.execute(code)
    assert result.error is not None
    assert (result.error.type, result.error.message, result.error.line) == (type_, message, 1)
    assert result.rpc_count == 0


async def test_private_proxy_attributes_are_refused(open_sb: SubprocessSandbox) -> None:
    result = await open_sb.execute("echo._bridge")
    assert result.error is not None
    assert result.error.type == "AttributeError"
    assert result.error.message == "private attribute '_bridge' of toolkit 'echo' is not accessible"


async def test_tool_errors_can_be_caught(sb: SubprocessSandbox) -> None:
    code = (
        "try:\n    await echo.fail()\nexcept ToolError as exc:\n    caught = str(exc)\n"
        "try:\n    await echo.forbidden()\nexcept PermissionError as exc:\n    denied = str(exc)\n"
    )
    result = ok(await sb.execute(code))
    assert result.variables["caught"] == "the tool broke: no such project"
    assert result.variables["denied"] == "operation not granted"


async def test_uncaught_tool_error(sb: SubprocessSandbox) -> None:
    result = await sb.execute("x = 1\nawait echo.fail()\n")
    assert result.error is not None
    assert (result.error.type, result.error.message, result.error.line) == (
        "ToolError",
        "the tool broke: no such project",
        2,
    )


async def test_control_signal_ends_the_round_and_cannot_be_swallowed(sb: SubprocessSandbox) -> None:
    code = "before = 1\ntry:\n    await echo.finish('the answer')\nexcept Exception:\n    swallowed = True\nafter = 2\n"
    result = ok(await sb.execute(code))
    assert result.control == {"kind": "finish", "answer": "the answer"}
    assert result.variables == {"before": 1}
    assert result.to_json()["control"] == {"kind": "finish", "answer": "the answer"}


# -- limits and recovery ------------------------------------------------------------------------------


async def test_deadline_kills_the_whole_process_tree(open_sb: SubprocessSandbox) -> None:
    await open_sb.start()
    worker = open_sb._worker
    assert worker is not None
    root = worker.proc.pid  # type: ignore[attr-defined]
    seen: set[int] = set()

    async def watch() -> None:
        while True:
            seen.update(descendants(root))
            await asyncio.sleep(0.05)

    watcher = asyncio.ensure_future(watch())
    started = time.monotonic()
    try:
        result = await open_sb.execute("x = 0\nwhile True:\n    x += 1\n", deadline=1.0)
    finally:
        watcher.cancel()
    assert time.monotonic() - started < 8
    assert result.status == "deadline_exceeded"
    assert result.error is not None and result.error.type == "DeadlineExceeded"
    assert seen, "the runtime's processes were never observed"
    for _ in range(100):
        if not any(running(pid) for pid in {root, *seen}):
            break
        await asyncio.sleep(0.05)
    assert [pid for pid in {root, *seen} if running(pid)] == []
    ok(await open_sb.execute("y = 1"))


async def test_crash_then_recovery(open_sb: SubprocessSandbox) -> None:
    first = ok(await open_sb.execute("kept = [1, 2]"))
    crashed = await open_sb.execute(
        "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", variables=first.variables
    )
    assert crashed.status == "crashed"
    assert crashed.error is not None and crashed.error.type == "SandboxCrashed"
    assert "killed by signal" in crashed.error.message or "exit status" in crashed.error.message
    assert crashed.variables == first.variables
    after = ok(await open_sb.execute("kept.append(3)", variables=crashed.variables))
    assert after.variables["kept"] == [1, 2, 3]


async def test_exit_is_an_error_not_a_crash(open_sb: SubprocessSandbox) -> None:
    result = await open_sb.execute("raise SystemExit(3)\n")
    assert result.status == "error" and result.error is not None and result.error.type == "SystemExit"
    ok(await open_sb.execute("z = 1"))


async def test_memory_limit(open_sb: SubprocessSandbox) -> None:
    result = await open_sb.execute("hog = bytearray(2 * 1024 ** 3)\n")
    assert result.status in ("error", "crashed")
    if result.status == "error":
        assert result.error is not None and result.error.type == "MemoryError"
    ok(await open_sb.execute("z = 1"))


# -- isolation -----------------------------------------------------------------------------------------


async def test_host_environment_is_invisible(monkeypatch: pytest.MonkeyPatch, open_sb: SubprocessSandbox) -> None:
    monkeypatch.setenv("CODEACT_TEST_SECRET", "hunter2-secret-value")
    code = (
        "import os\n"
        "env = dict(os.environ)\n"
        "blobs = []\n"
        "for pid in os.listdir('/proc'):\n"
        "    if pid.isdigit():\n"
        "        try:\n"
        "            blobs.append(open(f'/proc/{pid}/environ', 'rb').read().decode('latin-1'))\n"
        "        except OSError:\n"
        "            pass\n"
        "leak = any('hunter2' in b for b in blobs)\n"
    )
    result = ok(await open_sb.execute(code))
    assert sorted(result.variables["env"]) == ["HOME", "LANG", "LC_ALL", "PATH", "PWD", "PYTHONIOENCODING"]
    assert result.variables["leak"] is False
    assert "hunter2" not in str(result.to_json())


async def test_files_outside_the_work_dir(open_sb: SubprocessSandbox, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    secret.chmod(0o644)
    tmp_path.chmod(0o777)
    reads = [str(secret), "/etc/shadow", "/etc/passwd", "/root/.bashrc", str(Path.cwd() / "pyproject.toml")]
    writes = [str(tmp_path / "pwned"), "/usr/pwned", "/etc/pwned", "/opt/codeact/runtime/pwned", "/pwned"]
    code = (
        "import os\n"
        "outcomes = {}\n"
        f"for path in {reads!r}:\n"
        "    try:\n"
        "        outcomes[path] = open(path).read()[:20]\n"
        "    except OSError as exc:\n"
        "        outcomes[path] = type(exc).__name__\n"
        "writes = {}\n"
        f"for path in {writes!r}:\n"
        "    try:\n"
        "        open(path, 'w').write('x')\n"
        "        writes[path] = 'written'\n"
        "    except OSError as exc:\n"
        "        writes[path] = type(exc).__name__\n"
        "open('/work/ok.txt', 'w').write('fine')\n"
        "open('/tmp/ok.txt', 'w').write('fine')\n"
    )
    result = ok(await open_sb.execute(code))
    assert all(v in ("FileNotFoundError", "PermissionError") for v in result.variables["outcomes"].values())
    assert "written" not in result.variables["writes"].values()
    assert not (tmp_path / "pwned").exists()
    assert not Path("/usr/pwned").exists()


async def test_no_network(open_sb: SubprocessSandbox) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    try:
        code = (
            "import socket\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
            "    outcome = 'connected'\n"
            "except OSError as exc:\n"
            "    outcome = type(exc).__name__\n"
            "try:\n"
            "    socket.create_connection(('1.1.1.1', 53), timeout=2)\n"
            "    outside = 'connected'\n"
            "except OSError as exc:\n"
            "    outside = type(exc).__name__\n"
        )
        result = ok(await open_sb.execute(code))
    finally:
        listener.close()
    assert result.variables["outcome"] == "ConnectionRefusedError"
    assert result.variables["outside"] != "connected"


async def test_runs_as_nobody_in_its_own_pid_namespace(open_sb: SubprocessSandbox) -> None:
    result = ok(
        await open_sb.execute(
            "import os\nuid = os.getuid()\npids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n"
        )
    )
    assert result.variables["uid"] == 65534
    assert max(result.variables["pids"]) < 10


async def test_missing_bwrap_refuses_to_run() -> None:
    box = SubprocessSandbox(bwrap="/nonexistent/bwrap")
    with pytest.raises(IsolationUnavailableError) as info:
        await box.execute("x = 1")
    assert str(info.value) == (
        "bubblewrap (`bwrap`) is not installed; install it with `apt-get install bubblewrap` "
        '(`make install` does), or pass isolation="process" to run with resource limits and an '
        "environment allow-list only (explicitly weaker)"
    )
    await box.aclose()


async def test_process_mode_reports_weaker_isolation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEACT_TEST_SECRET", "hunter2")
    async with SubprocessSandbox(isolation="process", policy=open_policy()) as box:
        code = "import os\nsecret = os.environ.get('CODEACT_TEST_SECRET', 'absent')\nhome = os.getcwd()"
        result = ok(await box.execute(code))
    assert result.isolation == "process+cgroup+rlimits"
    assert result.variables["secret"] == "absent"
    assert not Path(result.variables["home"]).exists()  # the private work dir is removed on close


# -- lifecycle -------------------------------------------------------------------------------------------


async def test_pool_prestarts_and_replaces() -> None:
    async with SubprocessSandbox(pool_size=1, policy=open_policy()) as box:
        assert box._worker is not None and len(box._pool) == 1
        crashed = await box.execute("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
        assert crashed.status == "crashed"
        ok(await box.execute("x = 1"))


def test_sync_context_manager_across_event_loops() -> None:
    with SubprocessSandbox() as box:
        first = asyncio.run(box.execute("x = 2"))
        second = asyncio.run(box.execute("y = x * 2", variables=first.variables))
    assert second.variables == {"x": 2, "y": 4}


async def test_closed_sandbox_refuses() -> None:
    box = SubprocessSandbox()
    await box.aclose()
    with pytest.raises(Exception, match="is closed"):
        await box.execute("x = 1")


async def test_runtime_killed_between_rounds_is_replaced_without_a_crash_result() -> None:
    import signal

    from codeact.sandbox import SubprocessSandbox

    async with SubprocessSandbox() as box:
        first = await box.execute("x = 41")
        assert first.ok
        worker = box._worker  # the warm runtime of this session
        assert worker is not None
        os.killpg(worker.proc.pid, signal.SIGKILL)  # type: ignore[attr-defined]
        second = await box.execute("y = x + 1", variables=first.variables)
        assert second.status == "ok", second.error
        assert second.variables["y"] == 42


@pytest.mark.parametrize("isolation", ["bwrap", "process"])
async def test_the_cpu_limit_names_itself_and_its_key(isolation: Any) -> None:
    """Death by SIGXCPU (bubblewrap reports exit status 152) is the CPU limit, not a crash (issue 35 item 4)."""
    async with SubprocessSandbox(limits=Limits(cpu_s=1), isolation=isolation) as box:
        first = ok(await box.execute("kept = 1"))
        busy = await box.execute("n = 0\nwhile True:\n    n += 1\n", variables=first.variables)
        assert busy.status == "crashed"
        assert busy.error is not None and busy.error.type == "CpuLimitExceeded"
        assert busy.error.message.startswith("the round ran past its 1 s limit of CPU time")
        assert busy.error.message.endswith("raise the limit (sandbox.limits.cpuSeconds)")
        assert busy.variables == first.variables
        ok(await box.execute("kept += 1", variables=busy.variables))


@pytest.mark.parametrize(
    ("error", "note"),
    [
        pytest.param(
            ExecutionError(type="MemoryError", message=""),
            "the sandbox's memory limit is 1024 MB: hold less in memory at once, or raise the limit "
            "(sandbox.limits.memoryMb)",
            id="memory",
        ),
        pytest.param(
            ExecutionError(type="BlockingIOError", message="[Errno 11] Resource temporarily unavailable"),
            "[Errno 11] Resource temporarily unavailable (the sandbox's limit of 64 processes and threads was "
            "reached: start fewer, or raise the limit (sandbox.limits.pids))",
            id="processes",
        ),
        pytest.param(
            ExecutionError(type="RuntimeError", message="can't start new thread"),
            "can't start new thread (the sandbox's limit of 64 processes and threads was reached: start fewer, "
            "or raise the limit (sandbox.limits.pids))",
            id="threads",
        ),
        pytest.param(ExecutionError(type="RuntimeError", message="boom"), "boom", id="other"),
    ],
)
def test_limit_notes_name_the_limit_and_its_key(error: ExecutionError, note: str) -> None:
    assert limit_note(error, Limits()).message == note
