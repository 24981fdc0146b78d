"""The bridge token is never readable by the sandboxed code, on either backend.

The code runs as plain CPython (no RestrictedPython) so that it can really try: its own and pid
1's environment and command line, the bridge directory, and every file under the usual places.
"""

from __future__ import annotations

import sys
import uuid
from typing import Any

import pytest

from codeact.sandbox import DockerSandbox, Sandbox, SubprocessSandbox
from codeact.sandbox.errors import SandboxImageMissingError
from codeact.sandbox.image import ensure_image
from codeact.sandbox.policy import Policy

LOOK = r"""
import os
seen = []
for path in ("/proc/self/environ", "/proc/1/environ", "/proc/self/cmdline", "/proc/1/cmdline"):
    try:
        with open(path, "rb") as handle:
            seen.append(handle.read().decode("utf-8", "replace"))
    except OSError as exc:
        seen.append(f"{path}: {exc}")
seen.append(repr(dict(os.environ)))
bridge_files = []
for top in ("/opt/codeact", os.getcwd()):  # the work dir is the cwd
    for root, _dirs, files in os.walk(top):
        for name in files:
            path = os.path.join(root, name)
            bridge_files.append(path)
            try:
                with open(path, "rb") as handle:
                    seen.append(handle.read(1 << 20).decode("utf-8", "replace"))
            except OSError:
                pass
# Only the token-shaped runs of what was read come back (the runtime's files, bytecode included, would
# exceed the per-variable cap as one string): the token, if anything read held it, is inside one of them.
import re
blob = "\n".join(sorted(set(re.findall(r"[A-Za-z0-9_\-]{20,}", "\n".join(seen)))))
env_seen = "PATH=" in "\n".join(seen)
"""

PLAIN = Policy(restricted=False, allowed_imports=frozenset(sys.stdlib_module_names))


async def _look(box: Sandbox) -> tuple[str, list[str], str]:
    async with box:
        result = await box.execute(LOOK)
        assert result.error is None, result.error
        worker = box._worker
        assert worker is not None
        assert result.variables["env_seen"] is True  # the environment was read: the look saw something
        return str(result.variables["blob"]), list(result.variables["bridge_files"]), worker.channel.token


@pytest.mark.parametrize("isolation", ["process", "bwrap"])
async def test_subprocess_code_cannot_read_the_token(isolation: Any) -> None:
    blob, _files, token = await _look(SubprocessSandbox(isolation=isolation, policy=PLAIN))
    assert len(token) > 20
    assert token not in blob


@pytest.mark.integration
@pytest.mark.docker
async def test_docker_code_cannot_read_the_token(docker_client: Any) -> None:
    try:
        ensure_image(docker_client)
    except SandboxImageMissingError as exc:
        pytest.fail(str(exc), pytrace=False)
    box = DockerSandbox(session_id=f"token-{uuid.uuid4().hex[:8]}", pool_size=0)
    blob, files, token = await _look(box)
    assert token not in blob
    # the config file is gone: only the socket is left
    assert [f for f in files if f.startswith("/opt/codeact/bridge")] == ["/opt/codeact/bridge/bridge.sock"]


def test_the_config_file_is_deleted_on_authentication() -> None:
    import asyncio
    import socket

    from codeact.sandbox.channel import Channel
    from codeact.sandbox.runtime import protocol as p

    async def main() -> tuple[bool, bool]:
        channel = await Channel.open()
        try:
            path = channel.write_config({"token": channel.token})
            before = path.exists() and oct(path.stat().st_mode & 0o777) == "0o600"
            loop = asyncio.get_running_loop()
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.setblocking(False)
            await loop.sock_connect(sock, str(channel.socket_path))
            frame = p.encode_frame(p.request(0, "auth", {"token": channel.token, "protocol": p.PROTOCOL_VERSION}))
            await loop.sock_sendall(sock, frame)
            await channel.wait_connected(5)
            sock.close()
            return before, path.exists()
        finally:
            await channel.close()

    before, after = asyncio.run(main())
    assert before and not after
