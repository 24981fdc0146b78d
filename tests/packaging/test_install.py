"""The distribution as a user installs it: one top-level package, beside PyPI projects named like our folders.

The wheel and the sdist are built from this checkout by ``make dist``; the wheel goes into a fresh venv with the
PyPI projects ``segments``, ``prompts`` and ``toolkits`` and a local package named ``engine`` (the names the
repository's folders have), with the runtime dependencies of ``uv.lock`` and no extra. Then, from another
directory, with no checkout on any path, the commands a new user runs first: ``codeact --version``,
``codeact --help``, ``codeact exec``, ``codeact run`` (the scripted DevOps example), ``codeact sandbox image
build`` (from the recipe the wheel ships; the image of the same recipe is reused, so this is quick when
``make test`` has built it) and a round in that Docker sandbox, and ``from codeact import Agent``; and each
command of a missing extra gives its one line and exit 2. uv's cache keeps the second install quick.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
UV = str(Path(sys.executable).with_name("uv"))

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Installed:
    venv: Path
    wheel: Path
    sdist: Path
    home: Path  # a directory outside the checkout, with the example's files

    def run(self, *argv: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))}
        env["PATH"] = f"{self.venv / 'bin'}:{env.get('PATH', '')}"
        env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
        env["HOME"] = str(self.home)  # profiles and the default store stay in the test's directory
        return subprocess.run(argv, cwd=self.home, env=env, capture_output=True, text=True, timeout=timeout)


def _uv(*argv: str, cwd: Path | None = None) -> None:
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    env.pop("VIRTUAL_ENV", None)
    subprocess.run([UV, *argv], cwd=cwd, env=env, check=True, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    root = tmp_path_factory.mktemp("install")
    dist = root / "dist"
    # `make dist`, as the README says, into this test's directory (DIST) with this venv's uv.
    made = subprocess.run(
        ["make", "-s", "-C", str(REPO), "dist", f"UV={UV}", f"DIST={dist}"], capture_output=True, text=True, timeout=600
    )
    assert made.returncode == 0, made.stdout + made.stderr
    (wheel,) = dist.glob("codeact-*.whl")
    (sdist,) = dist.glob("codeact-*.tar.gz")
    # A user's own package named `engine`, as a project of theirs would have.
    user = root / "user-engine"
    (user / "engine").mkdir(parents=True)
    (user / "engine" / "__init__.py").write_text("WHO = 'the user'\n")
    (user / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "user-engine"\nversion = "1.0"\n[tool.setuptools]\npackages = ["engine"]\n'
    )
    requirements = root / "requirements.txt"
    _uv("export", "--quiet", "--frozen", "--no-dev", "--no-emit-project", "-o", str(requirements), cwd=REPO)
    venv = root / "venv"
    _uv("venv", "--quiet", "--seed", "--python", sys.executable, str(venv))
    python = str(venv / "bin" / "python")
    _uv("pip", "install", "--quiet", "--python", python, "-r", str(requirements))
    # The PyPI projects named like our folders go in last, so theirs are the files at those names.
    _uv("pip", "install", "--quiet", "--python", python, str(wheel), "segments", "prompts", "toolkits", str(user))
    home = root / "home"
    (home / "devops").mkdir(parents=True)
    for name in ("agent.yaml", "replies.yaml", "toolkit.py"):
        shutil.copy(REPO / "examples" / "devops" / name, home / "devops" / name)
    (home / "hello.py").write_text("x = 6 * 7\nprint('hello from the sandbox', x)\n")
    (home / "one" / "replies.yaml").parent.mkdir()
    (home / "one" / "replies.yaml").write_text(
        "replies:\n  - |\n    Thought: One line answers it; the container says where it runs.\n    ```python\n"
        "    import os\n    system.finish(f\"{6 * 7} in docker: {os.path.exists('/.dockerenv')}\")\n    ```\n"
    )
    (home / "one" / "agent.yaml").write_text(
        "version: codeact.agent/v1\nid: one-round\nmodel: {provider: scripted, model: scripted/replies.yaml}\n"
        "toolkits:\n  - ref: system\nworkflow: {mode: codeact, maxTurns: 2, codeact: {thought: inline}}\n"
    )
    yield Installed(venv=venv, wheel=wheel, sdist=sdist, home=home)


def test_the_wheel_and_the_sdist_hold_one_top_level_package(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        tops = {name.split("/")[0] for name in wheel.namelist()}
        entry_points = next(n for n in wheel.namelist() if n.endswith("entry_points.txt"))
        assert "codeact = codeact.engine.cli:main" in wheel.read(entry_points).decode()
    assert tops == {"codeact", f"{installed.wheel.name.split('-py3')[0]}.dist-info"}
    listing = subprocess.run(["tar", "tzf", str(installed.sdist)], capture_output=True, text=True, check=True).stdout
    packaged = {line.split("/")[1] for line in listing.splitlines() if line.endswith(".py") and line.count("/") > 1}
    assert packaged == {"codeact"}


def test_pip_show_lists_one_top_level_package(installed: Installed) -> None:
    shown = installed.run(str(installed.venv / "bin" / "python"), "-m", "pip", "show", "-f", "codeact")
    assert shown.returncode == 0, shown.stderr
    files = shown.stdout.split("Files:", 1)[1].split()
    tops = {f.split("/")[0] for f in files if not f.startswith("..")}  # ../../../bin/codeact is the script
    assert tops == {"codeact", "codeact-0.1.0.dist-info"}


def test_the_pypi_projects_and_the_users_engine_keep_their_names(installed: Installed) -> None:
    probe = (
        "import engine, segments, toolkits, codeact.engine, codeact.segments, codeact.toolkits\n"
        "print(engine.WHO, segments.__file__.split('site-packages/')[1], codeact.segments.__name__)\n"
    )
    out = installed.run(str(installed.venv / "bin" / "python"), "-c", probe)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["the", "user", "segments/__init__.py", "codeact.segments"]


def test_from_codeact_import_agent(installed: Installed) -> None:
    out = installed.run(str(installed.venv / "bin" / "python"), "-c", "from codeact import Agent; print(Agent)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "<class 'codeact.engine.agent.agent.Agent'>"
    assert out.stderr == ""


def test_codeact_version(installed: Installed) -> None:
    out = installed.run("codeact", "--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "codeact 0.1.0\n"


def test_the_checkout_is_on_no_path(installed: Installed) -> None:
    probe = "import codeact, sys; print(codeact.__file__); print(*sys.path, sep='\\n')"
    out = installed.run(str(installed.venv / "bin" / "python"), "-c", probe)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(str(installed.venv / "lib"))
    assert not [p for p in out.stdout.splitlines() if p.startswith(str(REPO))]


@pytest.mark.docker
def test_the_docker_sandbox_from_the_wheel_alone(installed: Installed) -> None:
    from codeact.sandbox.image import image_tag

    built = installed.run("codeact", "sandbox", "image", "build", "--json", timeout=900)
    assert built.returncode == 0, built.stdout + built.stderr
    assert json.loads(built.stdout)["tag"] == image_tag()  # the wheel's recipe is the checkout's: one tag
    assert "[sandbox-image] " in built.stderr  # what it did (built step by step, or found cached)
    status = installed.run("codeact", "sandbox", "image", "status")
    assert status.returncode == 0, status.stdout + status.stderr
    assert status.stdout.startswith(f"built: {image_tag()} (")
    out = installed.run("codeact", "run", "one/agent.yaml", "--sandbox", "docker", "--input", "What is 6 * 7?")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout == "42 in docker: True\n"  # Docker makes /.dockerenv in every container
    assert "✔ finished after 1 round" in out.stderr


def test_codeact_help(installed: Installed) -> None:
    out = installed.run("codeact", "--help")
    assert out.returncode == 0, out.stderr
    assert "codeact: a code-driven agent engine" in out.stdout


def test_codeact_exec(installed: Installed) -> None:
    out = installed.run("codeact", "exec", "hello.py", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["stdout"] == "hello from the sandbox 42\n"


def test_codeact_run_the_scripted_example_prints_no_warning(installed: Installed) -> None:
    out = installed.run(
        "codeact", "run", "devops/agent.yaml", "--toolkit", "devops/toolkit.py:DevOps",
        "--input", "Which login requirements of project P-123 are still open? Then deploy version 2.4.0 of its API.",
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Deployed checkout-api 2.4.0 as D-1001" in out.stdout
    assert "Warning" not in out.stdout + out.stderr
    assert "warnings.warn" not in out.stdout + out.stderr


@pytest.mark.parametrize(
    ("argv", "extra"),
    [
        pytest.param(["mcp", "serve"], "mcp", id="mcp-serve"),
        pytest.param(["worker", "--queue", "redis://127.0.0.1:1/0"], "queue", id="worker"),
        pytest.param(["serve", "--port", "0"], "serve", id="serve"),
        pytest.param(["a2a", "serve", "devops/agent.yaml", "--port", "0"], "a2a", id="a2a-serve"),
        pytest.param(
            ["run", "devops/agent.yaml", "--toolkit", "devops/toolkit.py:DevOps", "--input", "hi", "--trace", "t.json"],
            "otel",
            id="run-trace",
        ),
    ],
)
def test_a_missing_extra_is_one_line_naming_it(installed: Installed, argv: list[str], extra: str) -> None:
    out = installed.run("codeact", *argv)
    assert out.returncode == 2, out.stdout + out.stderr
    lines = (out.stdout + out.stderr).strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("codeact: ")
    assert f"pip install 'codeact[{extra}]'" in lines[0]
