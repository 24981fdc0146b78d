"""No ``Unknown child process pid N, will report returncode 255`` after a sandbox is killed.

asyncio's child watcher reaps each runtime in a thread of its own (``os.waitpid(pid, 0)``).
Closing the process transport calls ``Popen.poll()``, and a ``Popen`` dropped while its child
is unreaped is reaped by the next ``subprocess.Popen``: either reaps the killed child first when
the watcher's thread is slow to wake (a loaded machine), and the thread then logs that line.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from codeact.sandbox import SubprocessSandbox


@pytest.mark.parametrize("isolation", ["process", "bwrap"])
async def test_killing_runtimes_logs_no_unknown_child(isolation: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="asyncio")
    for _ in range(8):
        box = SubprocessSandbox(isolation=isolation)  # type: ignore[arg-type]
        async with box:
            await box.execute("x = 1")
            worker = box._worker
            assert worker is not None
            worker.kill()
            worker.cleanup()  # at once, as a deadline or Ctrl-C does: no wait for the reap
            proc = worker.proc  # type: ignore[attr-defined]
            await asyncio.wait_for(proc.wait(), 30)
            assert proc.returncode != 255
    await asyncio.sleep(0.2)
    assert [r.getMessage() for r in caplog.records if "child process" in r.getMessage()] == []


async def test_deadline_kill_logs_no_unknown_child(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="asyncio")
    async with SubprocessSandbox() as box:
        for _ in range(3):
            result = await box.execute("n = 0\nwhile True:\n    n += 1\n", deadline=0.5)
            assert result.status == "deadline_exceeded"
        assert (await box.execute("y = 2")).variables["y"] == 2
    await asyncio.sleep(0.2)
    assert [r.getMessage() for r in caplog.records if "child process" in r.getMessage()] == []


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return True
    return stat[stat.rfind(b")") + 2 :].split()[0] == b"Z"


async def test_a_slow_child_watcher_is_not_raced(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watcher's thread wakes late (as on a loaded machine): the killed child is still its to reap."""
    import time
    from asyncio import unix_events

    original = unix_events.ThreadedChildWatcher._do_waitpid

    def late(self: object, *args: object) -> None:
        time.sleep(1.0)
        original(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(unix_events.ThreadedChildWatcher, "_do_waitpid", late)
    caplog.set_level(logging.WARNING, logger="asyncio")
    box = SubprocessSandbox(isolation="process")
    async with box:
        await box.execute("x = 1")
        worker = box._worker
        assert worker is not None
        proc = worker.proc  # type: ignore[attr-defined]
        worker.kill()
        for _ in range(200):
            if _zombie(proc.pid):
                break
            await asyncio.sleep(0.005)
        worker.cleanup()  # what a deadline / Ctrl-C path does before the reap
        await asyncio.wait_for(proc.wait(), 30)
        assert proc.returncode == -9
    assert [r.getMessage() for r in caplog.records if "child process" in r.getMessage()] == []


def test_cli_deadline_kill_prints_no_unknown_child(tmp_path: Path) -> None:
    script = tmp_path / "loop.py"
    script.write_text("n = 0\nwhile True:\n    n += 1\n")
    for isolation in ("bwrap", "process"):
        run = subprocess.run(
            [str(Path(sys.executable).with_name("codeact")), "exec", str(script), "--timeout", "1"]
            + ["--isolation", isolation],
            capture_output=True,
            text=True,
            check=False,
        )
        assert "DeadlineExceeded" in run.stdout + run.stderr
        assert "Unknown child process" not in run.stdout + run.stderr


def _children() -> set[int]:
    """Live (not zombie) child processes of this process."""
    me, found = str(os.getpid()), set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                fields = stat[stat.rindex(")") + 2 :].split()
                if fields[1] == me and fields[0] != "Z":
                    found.add(int(entry.name))
    return found


@pytest.mark.parametrize("isolation", ["process", "bwrap"])
async def test_closing_while_the_pool_starts_a_runtime_leaves_no_process_and_no_open_pipe(isolation: str) -> None:
    """``aclose`` cancels the pool's refill wherever it is, inside the child's start too.

    Cancelled while asyncio connects a new child's pipes, a plain ``create_subprocess_exec`` left a
    pipe transport open (an "unclosed transport" ResourceWarning at a later garbage collection,
    an error under pytest, in whatever test ran then).
    """
    rng = random.Random(1124)
    before = _children()
    for _ in range(30):
        box = SubprocessSandbox(isolation=isolation, pool_size=1)  # type: ignore[arg-type]
        await box.execute("x = 1")  # the pool's refill is now starting a second runtime
        for _ in range(rng.randrange(12)):
            await asyncio.sleep(0)
        await box.aclose()
    gc.collect()  # an unclosed pipe transport warns here
    for _ in range(100):  # killed runtimes are reaped by asyncio's child watcher thread
        if _children() <= before:
            break
        await asyncio.sleep(0.05)
    assert _children() <= before
