"""The in-sandbox runtime's pieces: capped output, error formatting, proxies, standalone launch."""

from __future__ import annotations

import asyncio
import base64
import json
import marshal
import socket
from typing import Any

import pytest

from codeact.sandbox.channel import Channel
from codeact.sandbox.runtime.main import CappedWriter, cut_note, format_error
from codeact.sandbox.runtime.proxy import Bridge, ToolkitProxy, build_proxies
from codeact.sandbox.subprocess_sandbox import RUNTIME_DIR, python_interpreter


@pytest.mark.parametrize(
    ("writes", "limit", "expected"),
    [
        pytest.param(["abc", "def"], 10, "abcdef", id="fits"),
        pytest.param(["a" * 10], 10, "a" * 10, id="exactly"),
        pytest.param(
            ["0123456789", "abcdefghij"],
            10,
            "01234\n... [10 bytes cut: output is capped at 10 bytes per stream and round, raise "
            "sandbox.limits.outputBytes] ...\nfghij",
            id="cut",
        ),
        pytest.param(["x"] * 1000 + ["END"], 8, f"xxxx\n... [995 bytes cut{cut_note(8)}] ...\nxEND", id="many-writes"),
    ],
)
def test_capped_writer(writes: list[str], limit: int, expected: str) -> None:
    writer = CappedWriter(limit)
    for chunk in writes:
        writer.write(chunk)
    assert writer.getvalue() == expected


def test_capped_writer_counts_utf8_bytes() -> None:
    writer = CappedWriter(8)
    writer.write("é" * 20)  # 40 bytes
    value = writer.getvalue()
    assert value == f"éé\n... [32 bytes cut{cut_note(8)}] ...\néé"


def test_capped_writer_refuses_bytes() -> None:
    with pytest.raises(TypeError, match="write\\(\\) argument must be str, not bytes"):
        CappedWriter(10).write(b"x")  # type: ignore[arg-type]


def test_format_error_keeps_only_user_frames() -> None:
    source = "def f():\n    return {}['k']\nf()\n"
    code = compile(source, "<code>", "exec")
    try:
        exec(code, {})  # noqa: S102 - a test program
    except KeyError as exc:
        error = format_error(exc, main_file="<code>", user_files={"<code>"}, sources={"<code>": source})
    assert error == {
        "type": "KeyError",
        "message": "'k'",
        "line": 2,
        "traceback": (
            "Traceback (most recent call last):\n"
            '  File "<code>", line 3, in <module>\n'
            "    f()\n"
            '  File "<code>", line 2, in f\n'
            "    return {}['k']\n"
            "KeyError: 'k'"
        ),
    }


def test_proxies_from_a_hostile_manifest() -> None:
    left, right = socket.socketpair()
    try:
        manifest = {
            "toolkits": {
                "good": {"operations": {"op": {"params": ["a"], "required": ["a"]}, "_private": {}, "bad name": {}}},
                "__class__": {"operations": {}},
                "not valid": {},
                "broken": "nope",
            }
        }
        proxies = build_proxies(manifest, Bridge(left), lambda v: v)
        assert sorted(proxies) == ["broken", "good"]
        good = proxies["good"]
        assert isinstance(good, ToolkitProxy)
        assert dir(good) == ["op"]
        assert repr(good) == "<toolkit good: op>"
        with pytest.raises(AttributeError, match="toolkit 'good' is read-only"):
            good.op = 1
    finally:
        left.close()
        right.close()


async def test_runtime_launches_standalone_and_serves_execute() -> None:
    """The runtime as the Docker backend starts it: ``python3 -I -S <dir>/main.py --config JSON``."""
    channel = await Channel.open(None)
    try:
        config = json.dumps({"socket": str(channel.socket_path), "token": channel.token})
        proc = await asyncio.create_subprocess_exec(
            python_interpreter()[0], "-I", "-S", str(RUNTIME_DIR / "main.py"), "--config", config
        )
        await channel.wait_connected(15)
        source = "x = 40 + 2\nprint('hi')\n"
        params: dict[str, Any] = {
            "code": base64.b64encode(marshal.dumps(compile(source, "<code>", "exec"))).decode(),
            "source": source,
            "prelude": None,
            "variables": {"y": 1},
            "restricted": False,
            "allowed_imports": [],
            "limits": {"output_bytes": 1000},
        }
        answer = await channel.request("execute", params, timeout=15)
        assert answer["stdout"] == "hi\n"
        assert answer["error"] is None
        assert answer["variables"] == {"x": 42, "y": 1}
        assert await channel.request("shutdown", {}, timeout=15) == {"ok": True}
        assert await asyncio.wait_for(proc.wait(), 15) == 0
    finally:
        await channel.close()


async def test_runtime_refuses_a_wrong_token() -> None:
    channel = await Channel.open(None)
    try:
        config = json.dumps({"socket": str(channel.socket_path), "token": "wrong"})
        proc = await asyncio.create_subprocess_exec(
            python_interpreter()[0],
            "-I",
            "-S",
            str(RUNTIME_DIR / "main.py"),
            "--config",
            config,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(proc.communicate(), 15)
        assert proc.returncode == 2
        assert err.decode() == "codeact runtime: authentication refused: wrong session token\n"
    finally:
        await channel.close()


async def test_none_variable_and_dataclass_instance_survive_rounds() -> None:
    from codeact.sandbox import SubprocessSandbox

    async with SubprocessSandbox() as box:
        first = await box.execute(
            "from dataclasses import dataclass\n"
            "@dataclass\n"
            "class Point:\n"
            "    x: int\n"
            "    y: int\n"
            "p = Point(1, 2)\n"
            "nothing = None\n"
        )
        assert first.ok, first.error
        assert "nothing" in first.variables and first.variables["nothing"] is None
        second = await box.execute("kind = type(p).__name__\ntotal = p.x + p.y", variables=first.variables)
        assert second.ok, second.error
        assert second.variables["kind"] == "Point"
        assert second.variables["total"] == 3
