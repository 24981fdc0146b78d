"""Input files: ``Sandbox.put_files`` puts a run's files into the working directory the code reads."""

from __future__ import annotations

import uuid

import pytest

from codeact.sandbox import SubprocessSandbox
from codeact.sandbox.docker_sandbox import DockerSandbox
from codeact.sandbox.errors import SandboxError

CSV = b"region,amount\nnorth,3\nsouth,4\n"
READ = (
    "import csv\n"
    "with open('sales.csv', newline='') as f:\n"
    "    total = sum(int(row['amount']) for row in csv.DictReader(f))\n"
    "with open('pixel.png', 'rb') as f:\n"
    "    head = f.read(4)\n"
)


async def test_restricted_code_reads_the_input_files_also_after_a_crash() -> None:
    async with SubprocessSandbox() as sb:
        sb.put_files({"sales.csv": CSV, "pixel.png": b"\x89PNG\r\n"})
        first = await sb.execute(READ)
        crashed = await sb.execute("import time\ntime.sleep(5)", deadline=0.5)
        again = await sb.execute(READ)
        written = await sb.execute("open('sales.csv', 'w')")
    assert first.status == "ok", first.error
    assert first.variables["total"] == 7 and again.variables["total"] == 7, again.error
    assert crashed.status == "deadline_exceeded"
    assert written.error is not None and "may only read files" in written.error.message
    assert sb.input_files == {"sales.csv": len(CSV), "pixel.png": 6}


@pytest.mark.parametrize("name", ["../x.csv", "/etc/x.csv", ".env", "outputs", "a/b.csv", ""])
def test_a_name_that_is_not_a_plain_file_name_is_refused(name: str) -> None:
    sb = SubprocessSandbox()
    with pytest.raises(SandboxError, match="is not a plain file name") as caught:
        sb.put_files({name: b"x"})
    assert caught.value.code == "sandbox.input_files"
    sb.close()


async def test_docker_code_reads_the_input_files() -> None:
    async with DockerSandbox(session_id=f"test-{uuid.uuid4().hex[:8]}", pool_size=0) as sb:
        sb.put_files({"sales.csv": CSV, "pixel.png": b"\x89PNG\r\n"})
        result = await sb.execute(READ)
    assert result.status == "ok", result.error
    assert result.variables["total"] == 7
