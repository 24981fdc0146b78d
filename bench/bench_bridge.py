"""Toolkit call cost: from sandbox code through the bridge, against an in-process call and a raw socket echo.

Measured in one run (2-core shared machine, so load from other processes moves every figure: the
sandbox rounds and the raw echo are measured in turn, ``REPEAT`` times, and the ratios are the
median of the per-repetition ratios; the other figures are medians):

* ``sequential``: 1,000 calls of a trivial async operation, one after another, from code running in
  the subprocess sandbox (one round; an empty round is subtracted), the faster of the two call
  paths: awaited at module level (``sequential_await_ms``) and from a plain ``def``, which blocks
  on the socket (``sequential_sync_style_ms``). Target: <= 100 ms in total.
* ``gather``: the same 1,000 calls through ``asyncio.gather`` in one round. Target: <= 50 ms.
* ``sequential_sync_op_ms``: the awaited calls of a trivial synchronous (``def``) operation;
  ``sync_op_vs_async_op`` is its ratio to the ``async def`` one. Target: <= 1.3.
* ``in_process``: ``await bridge.handle("call", ...)`` (validation, recording, codec) and a direct
  ``BoundToolkit.call`` on the host, 1,000 times each: what the bridge costs without a socket.
* ``channel_bridge``: 1,000 sequential ``call`` frames from a child process over the real channel
  and bridge, no sandbox runtime: the host's share of a sandbox call.
* ``raw_echo``: 1,000 newline-framed request/response round trips over a Unix socket between a
  child process and an asyncio server that echoes the line: the transport floor.
* ``payload_1mib``: a 1 MiB argument (``echo``) and a 1 MiB result (``big``) from sandbox code;
  host peak memory through ``tracemalloc`` (measured separately, it slows Python down).

Ratios: ``sequential_vs_raw_echo``, ``gather_vs_raw_echo`` (each against the echo measured right
before it) and ``sequential_vs_in_process`` (per call).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import tracemalloc
from pathlib import Path
from typing import Any

from codeact.toolkits import ToolkitBridge, ToolkitContext, ToolkitRegistry, bind_toolkit, operation, toolkit

CALLS = 1000
REPEAT = 7
MiB = 1024 * 1024


@toolkit(name="bench", description="Benchmark operations")
class Bench:
    @operation
    async def ping(self, n: int) -> int:
        """Return n."""
        return n

    @operation
    def ping_sync(self, n: int) -> int:
        """Return n (a plain ``def``: the synchronous operation path)."""
        return n

    @operation
    async def echo(self, value: str) -> int:
        """Return the length of value."""
        return len(value)

    @operation
    async def big(self, size: int) -> str:
        """A string of size bytes."""
        return "x" * size


def _bridge() -> ToolkitBridge:
    return ToolkitBridge(ToolkitRegistry([Bench()]), session_id="bench", default_timeout=60)


_ROUNDS = {
    "empty": "x = 1",
    # Calls in a plain def: the synchronous path (``_codeact_sync_``), a blocking read per call.
    "sync": f"def f(i):\n    return bench.ping(i)\nfor i in range({CALLS}):\n    f(i)\nx = 1",
    "await": f"for i in range({CALLS}):\n    await bench.ping(i)\nx = 1",
    # The same calls of a synchronous (``def``) operation on the host.
    "await_sync_op": f"for i in range({CALLS}):\n    await bench.ping_sync(i)\nx = 1",
    "gather": f"import asyncio\nr = await asyncio.gather(*[bench.ping(i) for i in range({CALLS})])\nr = None",
}


async def _once_ms(box: Any, code: str) -> float:
    started = time.perf_counter()
    result = await box.execute(code, deadline=120)
    elapsed = (time.perf_counter() - started) * 1000
    if result.error is not None:
        raise RuntimeError(f"benchmark round failed: {result.error.type}: {result.error.message}")
    return elapsed


async def _round_ms(box: Any, code: str) -> float:
    return statistics.median([await _once_ms(box, code) for _ in range(REPEAT)])


async def _sandbox_figures() -> dict[str, Any]:
    from codeact.sandbox import SubprocessSandbox

    bridge = _bridge()
    runs: dict[str, list[float]] = {name: [] for name in ("raw", *_ROUNDS)}
    seq_ratios, gather_ratios, sync_op_ratios = [], [], []
    async with SubprocessSandbox(bridge=bridge) as box:
        await box.execute("pass")  # warm: the runtime is started
        for _ in range(REPEAT):  # in turn, so that each ratio compares figures taken under the same load
            raw = await _raw_echo_ms(repeat=1)
            once = {name: await _once_ms(box, code) for name, code in _ROUNDS.items()}
            bridge.drain_calls()
            runs["raw"].append(raw)
            for name, ms in once.items():
                runs[name].append(ms)
            seq_ratios.append((min(once["sync"], once["await"]) - once["empty"]) / raw)
            gather_ratios.append((once["gather"] - once["empty"]) / raw)
            sync_op_ratios.append((once["await_sync_op"] - once["empty"]) / (once["await"] - once["empty"]))
        med = {name: statistics.median(values) for name, values in runs.items()}
        empty, seq_sync, seq_await, gathered = med["empty"], med["sync"], med["await"], med["gather"]
        arg_ms = await _round_ms(box, f"n = bench.echo('x' * {MiB})") - empty
        res_ms = await _round_ms(box, f"n = len(bench.big({MiB}))") - empty
        bridge.drain_calls()
        tracemalloc.start()
        await box.execute(f"n = bench.echo('x' * {MiB})")
        _, arg_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        await box.execute(f"n = len(bench.big({MiB}))")
        _, res_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    seq = min(seq_sync, seq_await) - empty
    return {
        "raw_echo_ms": round(med["raw"], 2),
        "sequential_vs_raw_echo": round(statistics.median(seq_ratios), 2),
        "gather_vs_raw_echo": round(statistics.median(gather_ratios), 2),
        "empty_round_ms": round(empty, 2),
        "sequential_sync_style_ms": round(seq_sync - empty, 2),
        "sequential_await_ms": round(seq_await - empty, 2),
        "sequential_ms": round(seq, 2),
        "sequential_per_call_us": round(seq * 1000 / CALLS, 1),
        "gather_ms": round(gathered - empty, 2),
        "sequential_sync_op_ms": round(med["await_sync_op"] - empty, 2),
        "sync_op_vs_async_op": round(statistics.median(sync_op_ratios), 2),
        "payload_1mib": {
            "argument_ms": round(arg_ms, 2),
            "result_ms": round(res_ms, 2),
            "argument_host_peak_mib": round(arg_peak / MiB, 2),
            "result_host_peak_mib": round(res_peak / MiB, 2),
        },
    }


async def _in_process_figures() -> dict[str, float]:
    bridge = _bridge()
    bound = bind_toolkit(Bench())
    context = ToolkitContext(session_id="bench")
    params = {"toolkit": "bench", "operation": "ping", "arguments": {"n": 1}}
    handle_runs, direct_runs = [], []
    for _ in range(REPEAT):
        started = time.perf_counter()
        for _ in range(CALLS):
            await bridge.handle("call", params)
        handle_runs.append((time.perf_counter() - started) * 1000)
        bridge.drain_calls()
        started = time.perf_counter()
        for i in range(CALLS):
            await bound.call("ping", {"n": i}, context)
        direct_runs.append((time.perf_counter() - started) * 1000)
    handle = statistics.median(handle_runs)
    direct = statistics.median(direct_runs)
    return {
        "bridge_handle_ms": round(handle, 2),
        "bridge_handle_per_call_us": round(handle * 1000 / CALLS, 1),
        "direct_call_ms": round(direct, 2),
        "direct_call_per_call_us": round(direct * 1000 / CALLS, 1),
    }


_CLIENT = textwrap.dedent(
    """
    import socket, sys, time
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(sys.argv[1])
    frame = (b'{"jsonrpc":"2.0","id":1,"method":"call",'
             b'"params":{"toolkit":"bench","operation":"ping","arguments":{"n":1}}}\\n')
    runs = []
    for _ in range(int(sys.argv[3])):
        started = time.perf_counter()
        for _ in range(int(sys.argv[2])):
            sock.sendall(frame)
            buf = b""
            while not buf.endswith(b"\\n"):
                buf += sock.recv(65536)
        runs.append(time.perf_counter() - started)
    print(sorted(runs)[len(runs) // 2] * 1000)
    """
)


_CHANNEL_CLIENT = textwrap.dedent(
    """
    import json, socket, sys, time
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(sys.argv[1])
    auth = {"jsonrpc": "2.0", "id": 0, "method": "auth", "params": {"token": sys.argv[2]}}
    sock.sendall(json.dumps(auth).encode() + b"\\n")
    buf = b""
    while not buf.endswith(b"\\n"):
        buf += sock.recv(65536)
    frame = (b'{"jsonrpc":"2.0","id":%d,"method":"call",'
             b'"params":{"toolkit":"bench","operation":"ping","arguments":{"n":1}}}\\n')
    runs, next_id = [], 1
    for _ in range(int(sys.argv[4])):
        started = time.perf_counter()
        for _ in range(int(sys.argv[3])):
            sock.sendall(frame % next_id)
            next_id += 1
            buf = b""
            while not buf.endswith(b"\\n"):
                buf += sock.recv(65536)
        runs.append(time.perf_counter() - started)
    print(sorted(runs)[len(runs) // 2] * 1000)
    """
)


async def _channel_ms() -> float:
    """1,000 sequential calls from a child process over the real channel + bridge (no sandbox runtime)."""
    from codeact.sandbox.channel import Channel

    bridge = _bridge()
    channel = await Channel.open(bridge)
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _CHANNEL_CLIENT,
            str(channel.socket_path),
            channel.token,
            str(CALLS),
            str(REPEAT),
            stdout=subprocess.PIPE,
        )
        out, _ = await proc.communicate()
    finally:
        await channel.close()
    return float(out.decode().strip())


class _Echo(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: Any = transport
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            self.transport.write(line + b"\n")


async def _raw_echo_ms(repeat: int = REPEAT) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "echo.sock")
        server = await asyncio.get_running_loop().create_unix_server(_Echo, path=path)
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", _CLIENT, path, str(CALLS), str(repeat), stdout=subprocess.PIPE
            )
            out, _ = await proc.communicate()
        finally:
            server.close()
            await server.wait_closed()
    return float(out.decode().strip())


async def _run() -> dict[str, Any]:
    raw = await _raw_echo_ms()
    in_process = await _in_process_figures()
    channel = await _channel_ms()
    figures: dict[str, Any] = {
        "calls": CALLS,
        "raw_echo_ms": round(raw, 2),
        "raw_echo_per_call_us": round(raw * 1000 / CALLS, 1),
        "channel_bridge_ms": round(channel, 2),
        "channel_bridge_per_call_us": round(channel * 1000 / CALLS, 1),
        "in_process": in_process,
    }
    try:
        sandbox = await _sandbox_figures()
    except Exception as exc:  # the sandbox cannot run here: say so instead of failing the whole bench
        figures["sandbox"] = {"error": f"{type(exc).__name__}: {exc}"}
        return figures
    figures["sandbox"] = sandbox
    figures["sequential_vs_raw_echo"] = sandbox.pop("sequential_vs_raw_echo")
    figures["gather_vs_raw_echo"] = sandbox.pop("gather_vs_raw_echo")
    figures["sequential_vs_in_process"] = round(sandbox["sequential_ms"] / in_process["bridge_handle_ms"], 2)
    figures["targets"] = {
        "sequential_ms<=100": sandbox["sequential_ms"] <= 100,
        "gather_ms<=50": sandbox["gather_ms"] <= 50,
        "sync_op_vs_async_op<=1.3": sandbox["sync_op_vs_async_op"] <= 1.3,
    }
    return figures


def run() -> dict[str, Any]:
    """Run the bridge benchmark; returns the figures (see the module docstring)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return asyncio.run(_run())


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
