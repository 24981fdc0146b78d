"""``codeact sandbox image build`` / ``status`` through the CLI, against the real Docker engine.

The image ``make test`` builds is the one the command finds: the recipe the package ships is the file
``sandbox/image/build.sh`` hashes, so both name the same tag and a built image is reused, not rebuilt.
(tests/packaging/test_install.py runs the command from an installed wheel.)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from codeact.sandbox.image import image_tag

pytestmark = [pytest.mark.integration, pytest.mark.docker]

CODEACT = str(Path(sys.executable).parent / "codeact")


def _codeact(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CODEACT, *args], capture_output=True, text=True, check=False, timeout=600, env={**os.environ, **(env or {})}
    )


@pytest.fixture(scope="module")
def built() -> str:
    out = _codeact("sandbox", "image", "build")
    assert out.returncode == 0, out.stdout + out.stderr
    return image_tag()


def test_status_names_the_built_image(built: str) -> None:
    out = _codeact("sandbox", "image", "status", "--json")
    assert out.returncode == 0, out.stderr
    status = json.loads(out.stdout)
    assert status["tag"] == built
    assert status["built"] is True
    assert status["size_bytes"] > 0
    human = _codeact("sandbox", "image", "status")
    assert human.stdout.startswith(f"built: {built} (")


def test_build_reuses_the_image_of_the_same_recipe(built: str) -> None:
    out = _codeact("sandbox", "image", "build", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert (result["ok"], result["tag"], result["built"]) == (True, built, False)
    assert f"[sandbox-image] {built} is cached; nothing to build" in out.stderr
    human = _codeact("sandbox", "image", "build")
    assert human.stdout.startswith(f"cached: {built} (")


def test_the_recipe_tag_is_the_build_scripts(built: str) -> None:
    recipe = Path(__file__).resolve().parents[2] / "sandbox" / "image" / "build.sh"
    out = subprocess.run(["bash", str(recipe), "--tag"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == built


def test_build_without_docker_says_what_to_install(tmp_path: Path) -> None:
    bash = shutil.which("bash")
    assert bash is not None
    (tmp_path / "bash").symlink_to(bash)
    out = subprocess.run(
        [sys.executable, "-c", "from codeact.engine.cli import main; main()", "sandbox", "image", "build"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**os.environ, "PATH": str(tmp_path)},
    )
    assert out.returncode == 3, out.stdout + out.stderr
    assert out.stderr.strip() == (
        f"codeact sandbox image build: cannot build the Docker sandbox image {image_tag()!r}: "
        "`docker` is not on the PATH; install Docker and start it"
    )


# docker-py leaks the socket of a failed connection; collect it here, where the warning is expected.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_status_without_an_engine_is_exit_3() -> None:
    out = _codeact("sandbox", "image", "status", env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"})
    assert out.returncode == 3, out.stdout + out.stderr
    assert out.stderr.startswith("codeact sandbox image status: cannot connect to the Docker engine: ")
    assert "start Docker or point DOCKER_HOST at it" in out.stderr


def test_a_failing_recipe_is_one_error_quoting_its_last_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from codeact.sandbox import image
    from codeact.sandbox.errors import SandboxError

    recipe = tmp_path / "build.sh"
    recipe.write_text(
        "echo '[sandbox-image] debootstrap bookworm (minbase + python3) into /tmp/x, about a minute' >&2\n"
        "echo 'E: Failed getting release file http://deb.debian.org/debian/dists/bookworm/Release' >&2\nexit 1\n"
    )
    monkeypatch.setattr(image, "RECIPE_PATH", recipe)
    seen: list[str] = []
    with pytest.raises(SandboxError) as info:
        image.build_image(progress=seen.append)
    assert info.value.code == "sandbox.image.build"
    assert info.value.message.endswith(
        f"the recipe {str(recipe)!r} exited with status 1: [sandbox-image] debootstrap bookworm (minbase + python3) "
        "into /tmp/x, about a minute; E: Failed getting release file "
        "http://deb.debian.org/debian/dists/bookworm/Release"
    )
    assert seen == [
        "[sandbox-image] debootstrap bookworm (minbase + python3) into /tmp/x, about a minute",
        "[sandbox-image] E: Failed getting release file http://deb.debian.org/debian/dists/bookworm/Release",
    ]


def test_the_progress_line_names_debootstraps_latest_step(tmp_path: Path) -> None:
    from codeact.sandbox.image import _ROOTFS, RECIPE_PATH, _last_step

    recipe = RECIPE_PATH.read_text()
    step_line = next(line for line in recipe.splitlines() if "debootstrap $SUITE" in line and "echo" in line)
    shown = step_line.split('"')[1].replace("$SUITE", "bookworm").replace("$ROOT", str(tmp_path / "rootfs"))
    found = _ROOTFS.search(shown)
    assert found is not None and found.group(1) == str(tmp_path / "rootfs")
    (tmp_path / "rootfs.log").write_text("I: Retrieving InRelease \nI: Retrieving libc6 2.36-9\nsome other line\n")
    assert _last_step(Path(found.group(1) + ".log")) == "Retrieving libc6 2.36-9"
    assert _last_step(tmp_path / "missing.log") == ""
