"""gVisor: the Docker backend's strongest setting, through the CLI and the public API.

Real Docker with the ``runsc`` runtime (``scripts/services.sh up`` registers it): the code sees
gVisor's kernel, not the host's; the pool, limits, the bridge mount and the variables work the same;
a missing runtime is a clear error, never a silent fallback to runc.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from codeact.sandbox import DockerSandbox, IsolationUnavailableError, Limits, SandboxImageMissingError
from codeact.sandbox.docker_sandbox._container import _check_runtime

pytestmark = [pytest.mark.slow, pytest.mark.integration]

CODEACT = str(Path(sys.executable).parent / "codeact")
KERNEL_PROBE = "import platform\nkernel = platform.release()\nprint('kernel', kernel)\n"


@pytest.fixture(scope="module")
def gvisor(docker_client: Any) -> None:
    from codeact.sandbox.image import ensure_image

    try:
        ensure_image(docker_client)
    except SandboxImageMissingError as exc:
        pytest.fail(str(exc), pytrace=False)
    if "runsc" not in (docker_client.info().get("Runtimes") or {}):
        pytest.fail("the Docker engine has no runsc (gVisor) runtime: run `scripts/services.sh up`", pytrace=False)


def _codeact(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CODEACT_HOME": str(cwd / "home"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("CODEACT_MODEL", None)
    return subprocess.run([CODEACT, *args], capture_output=True, text=True, env=env, cwd=cwd, check=False, timeout=180)


def test_exec_runs_on_gvisor_kernel(tmp_path: Path, gvisor: None) -> None:
    script = tmp_path / "probe.py"
    script.write_text(KERNEL_PROBE)
    done = _codeact("exec", str(script), "--sandbox", "docker", "--runtime", "gvisor", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["status"] == "ok"
    assert data["backend"] == "docker"
    assert data["isolation"].startswith("docker(gvisor,")
    assert data["variables"]["kernel"] != os.uname().release  # gVisor's kernel answers, not the host's


GREETER = """
from codeact.toolkits import operation, toolkit


@toolkit(name="greeter", description="Greets people")
class Greeter:
    @operation
    async def greet(self, name: str) -> str:
        \"\"\"Greet someone.

        Args:
            name: Who to greet.
        \"\"\"
        return f"hello {name}"
"""


def test_toolkit_calls_cross_the_bridge_mount_on_gvisor(tmp_path: Path, gvisor: None) -> None:
    tools = tmp_path / "greeter_tools.py"
    tools.write_text(GREETER)
    script = tmp_path / "call.py"
    script.write_text(
        "def greet_all(names):\n    return [greeter.greet(n) for n in names]\n\nprint(greet_all(['ada', 'bo']))\n"
    )
    done = _codeact(
        "exec", str(script), "--sandbox", "docker", "--runtime", "gvisor", "--toolkit", f"{tools}:Greeter", "--json",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["stdout"] == "['hello ada', 'hello bo']\n"
    assert data["rpc_count"] == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["--runtime", "gvisor"], "--runtime gvisor runs Docker containers: pass --sandbox docker", id="subprocess"
        ),
        pytest.param(
            ["--sandbox", "docker", "--runtime", "kata"], "--runtime must be 'runc' or 'gvisor', got 'kata'", id="bad"
        ),
    ],
)
def test_exec_runtime_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    script = tmp_path / "x.py"
    script.write_text("x = 1\n")
    done = _codeact("exec", str(script), *args, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == f"codeact exec: {message}"


def test_run_with_a_blueprint_declaring_gvisor(tmp_path: Path, gvisor: None) -> None:
    (tmp_path / "replies.yaml").write_text(
        json.dumps(
            [
                "import platform\n\ndef kernel_name():\n    return platform.release()\n\nk = kernel_name()\nprint(k)",
                "system.finish(k)",
            ]
        )
    )
    bp = tmp_path / "agent.yaml"
    bp.write_text(
        "version: codeact.agent/v1\nextend: codeact-base\nid: gv\n"
        "model: {provider: scripted, model: scripted/replies.yaml}\n"
        "workflow: {maxTurns: 4, codeact: {thought: 'off'}}\n"
        "sandbox: {backend: docker, runtime: gvisor, limits: {memoryMb: 256}}\n"
    )
    store = f"sqlite:///{tmp_path / 's.db'}"
    done = _codeact(
        "run", str(bp), "--input", "which kernel?", "--store", store, "--allow-sandbox-declaration", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    answer = done.stdout.strip()
    assert answer and answer != os.uname().release


def test_blueprint_gvisor_needs_the_docker_backend(tmp_path: Path) -> None:
    bp = tmp_path / "agent.yaml"
    bp.write_text(
        "version: codeact.agent/v1\nextend: codeact-base\nid: gv\n"
        "model: {provider: scripted, model: scripted/replies.yaml}\n"
        "sandbox: {backend: subprocess, runtime: gvisor}\n"
    )
    done = _codeact("validate", str(bp), cwd=tmp_path)
    assert done.returncode != 0
    assert "sandbox.runtime gvisor runs Docker containers on gVisor: set sandbox.backend to docker." in (
        done.stdout + done.stderr
    )


@pytest.mark.asyncio
async def test_pool_limits_and_variables_work_the_same(gvisor: None) -> None:
    limits = Limits(memory_bytes=256 * 1024 * 1024, processes=32)
    async with DockerSandbox(runtime="gvisor", pool_size=1, limits=limits) as sandbox:
        first = await sandbox.execute("rows = [i * i for i in range(10)]\ntotal = sum(rows)", deadline=30)
        assert first.ok, first.error
        second = await sandbox.execute("total += 1", variables=first.variables, deadline=30)
        assert second.ok and second.variables["total"] == 286
        bomb = await sandbox.execute("x = bytearray(2 * 1024 ** 3)", deadline=30)
        assert bomb.status in ("error", "crashed")  # the memory limit holds
        storm = await sandbox.execute(
            "import subprocess\nps = [subprocess.Popen(['sleep', '60']) for _ in range(50)]", deadline=30
        )
        assert storm.status == "error" and storm.error is not None
        assert "Resource temporarily unavailable" in storm.error.message
        after = await sandbox.execute("y = 2", deadline=30)
        assert after.ok


def test_missing_runtime_is_refused_never_runc() -> None:
    class _EngineWithoutGvisor:  # a stand-in for the engine's /info answer: only runc registered
        def info(self) -> dict[str, Any]:
            return {"Runtimes": {"runc": {"path": "runc"}}}

    with pytest.raises(IsolationUnavailableError) as caught:
        _check_runtime(_EngineWithoutGvisor(), "runsc")
    message = str(caught.value)
    assert "the Docker engine has no 'runsc' runtime (gVisor) registered (it has: runc)" in message
    assert "scripts/services.sh up" in message


def test_bad_runtime_name_is_refused() -> None:
    with pytest.raises(ValueError, match="runtime must be one of"):
        DockerSandbox(runtime="kata")  # type: ignore[arg-type]


def test_a_gvisor_session_replays_on_gvisor() -> None:
    from codeact.engine.replay import _sandbox_from_note

    note = {
        "backend": "docker",
        "restricted": False,
        "isolation": "docker(gvisor,no-net,ro-root,caps-dropped,non-root)",
    }
    replayed = _sandbox_from_note(note)(None)  # type: ignore[arg-type]
    assert isinstance(replayed, DockerSandbox) and replayed.runtime == "gvisor"
    plain = _sandbox_from_note({**note, "isolation": "docker(no-net,ro-root,caps-dropped,non-root)"})(None)  # type: ignore[arg-type]
    assert isinstance(plain, DockerSandbox) and plain.runtime == "runc"
