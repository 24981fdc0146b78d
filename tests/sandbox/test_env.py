"""Declared environments (``codeact.sandbox.env``): recipes, the cache, build errors, list/prune.

Real pip, real Docker: small packages from the host's index, each test in its own cache directory
(``CODEACT_ENV_CACHE``), so pruning here never touches the shared cache of the preset tests.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from codeact.sandbox import SubprocessSandbox
from codeact.sandbox.env import (
    PRESETS,
    EnvSpec,
    cache_root,
    ensure_environment,
    list_environments,
    normalize_requirement,
    prune_environments,
    recipe_for,
)
from codeact.sandbox.errors import EnvironmentBuildError
from codeact.sandbox.policy import Policy

CODEACT = str(Path(sys.executable).parent / "codeact")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "envs"
    monkeypatch.setenv("CODEACT_ENV_CACHE", str(root))
    monkeypatch.delenv("CODEACT_ENV_INDEX_URL", raising=False)
    return root


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- recipes ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        pytest.param("NumPy", "numpy", id="name-case"),
        pytest.param("python_dateutil >= 2.8", "python-dateutil>=2.8", id="separators-and-blanks"),
        pytest.param("pandas[Excel, html]<3,>=2.2", "pandas[excel,html]<3,>=2.2", id="extras-and-specs-sorted"),
    ],
)
def test_requirements_are_canonical(text: str, canonical: str) -> None:
    assert normalize_requirement(text) == canonical


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("--index-url=http://evil", id="pip-option"),
        pytest.param("https://example.com/pkg.whl", id="url"),
        pytest.param("pkg ; python_version<'3'", id="marker"),
        pytest.param("../local/path", id="path"),
    ],
)
def test_pip_arguments_are_not_requirements(text: str) -> None:
    with pytest.raises(EnvironmentBuildError, match="is not a pip requirement"):
        normalize_requirement(text)


def test_the_key_is_a_content_hash_of_base_python_and_packages(cache: Path) -> None:
    one = recipe_for(EnvSpec(packages=("tabulate", "six")), backend="subprocess")
    same = recipe_for(EnvSpec(packages=("Six", "tabulate")), backend="subprocess")
    other = recipe_for(EnvSpec(packages=("tabulate",)), backend="subprocess")
    assert one.key == same.key != other.key
    assert one.python == f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert one.base == "host"


def test_unknown_preset_names_the_presets() -> None:
    with pytest.raises(EnvironmentBuildError) as info:
        EnvSpec(preset="bigdata").requirements()
    assert info.value.message == (
        "unknown sandbox preset 'bigdata'; the presets are: datascience (docs/sandbox.md says what each holds)"
    )


def test_datascience_preset_holds_what_model_code_imports() -> None:
    names = {normalize_requirement(p).split(">")[0].split("<")[0] for p in PRESETS["datascience"].packages}
    assert {"numpy", "pandas", "scipy", "sympy", "networkx", "matplotlib"} <= names


# --- build, cache hit, the sandbox sees the packages --------------------------------------------------


async def test_build_once_then_hit_and_the_sandbox_imports_the_package(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = EnvSpec(packages=("tabulate",))
    lines: list[str] = []
    built = ensure_environment(spec, backend="subprocess", progress=lines.append)
    assert built is not None and built.built is True
    assert "tabulate" in built.modules
    assert any("building sandbox environment" in line for line in lines)
    assert any("Successfully installed tabulate" in line for line in lines)

    again: list[str] = []
    hit = ensure_environment(spec, backend="subprocess", progress=again.append)
    assert hit is not None and hit.built is False and hit.key == built.key and again == []

    assert built.site is not None
    async with SubprocessSandbox(policy=Policy().widen(*built.modules), env_dir=str(built.site)) as sb:
        result = await sb.execute("from tabulate import tabulate\ntable = tabulate([[1, 2]], headers=['a', 'b'])\n")
    assert result.status == "ok", result.error
    assert "a" in result.variables["table"] and "b" in result.variables["table"]


async def test_the_environment_is_read_only_inside_the_sandbox(cache: Path) -> None:
    env = ensure_environment(EnvSpec(packages=("tabulate",)), backend="subprocess", progress=lambda _: None)
    assert env is not None and env.site is not None
    async with SubprocessSandbox(policy=Policy(restricted=False), env_dir=str(env.site)) as sb:
        result = await sb.execute(
            "try:\n    open('/opt/codeact/env/x', 'w')\n    wrote = True\nexcept OSError:\n    wrote = False\n"
        )
    assert result.status == "ok", result.error
    assert result.variables["wrote"] is False
    assert not (env.site / "x").exists()


def test_a_package_that_does_not_exist_is_one_clear_error_and_nothing_is_cached(cache: Path) -> None:
    name = "codeact-no-such-package-7f3a"
    with pytest.raises(EnvironmentBuildError) as info:
        ensure_environment(EnvSpec(packages=(name,)), backend="subprocess", progress=lambda _: None)
    error = info.value
    assert error.package == name
    assert error.code == "sandbox.env.build"
    assert error.message.startswith(f"cannot install package {name!r} into the sandbox environment for the host: ")
    assert "No matching distribution found for codeact-no-such-package-7f3a" in error.pip_message
    assert error.message.endswith("nothing was cached.")
    assert [p.name for p in cache.iterdir() if not p.name.startswith(".lock-")] == []


def test_an_unreachable_index_is_one_clear_error(cache: Path) -> None:
    index = f"http://127.0.0.1:{_closed_port()}/simple"
    with pytest.raises(EnvironmentBuildError) as info:
        ensure_environment(EnvSpec(packages=("tabulate",)), backend="subprocess", index_url=index, progress=print)
    error = info.value
    assert error.package == "tabulate"
    assert "Connection refused" in error.pip_message
    assert "the package index could not be reached; pip says: " in error.message
    assert list_environments() == []


# --- the CLI: build / list / prune ------------------------------------------------------------------


def _codeact(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CODEACT, *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def _blueprint(tmp_path: Path, sandbox: str) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(
        "version: codeact.agent/v1\nid: envs\nmodel: {provider: scripted, model: scripted/r.yaml}\n"
        f"workflow: {{mode: codeact}}\nsandbox: {sandbox}\n"
    )
    return path


def test_cli_build_list_prune(cache: Path, tmp_path: Path) -> None:
    bp = _blueprint(tmp_path, "{packages: [tabulate, 'six>=1.10']}")
    first = _codeact("sandbox", "build", str(bp))
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("built: ")
    assert "[sandbox env] building sandbox environment" in first.stderr  # progress
    again = _codeact("sandbox", "build", str(bp), "--json")
    assert again.returncode == 0, again.stderr
    data = json.loads(again.stdout)
    assert data["built"] is False and data["backend"] == "subprocess" and {"six", "tabulate"} <= set(data["modules"])

    listed = _codeact("sandbox", "list", "--json")
    entries: list[dict[str, Any]] = json.loads(listed.stdout)
    assert [(e["key"], e["label"]) for e in entries] == [(data["key"], "tabulate, six>=1.10")]
    assert entries[0]["size_bytes"] > 10_000 and entries[0]["last_used"] >= entries[0]["built_at"]
    human = _codeact("sandbox", "list")
    assert data["key"] in human.stdout and "used" in human.stdout and "1 environments" in human.stdout

    pruned = _codeact("sandbox", "prune")
    assert pruned.returncode == 0
    assert f"removed {data['key']} (subprocess, tabulate, six>=1.10" in pruned.stdout
    assert json.loads(_codeact("sandbox", "list", "--json").stdout) == []
    assert not (cache / data["key"]).exists()


def test_cli_build_unknown_package_and_offline(cache: Path, tmp_path: Path) -> None:
    bp = _blueprint(tmp_path, "{packages: [codeact-no-such-package-7f3a]}")
    missing = _codeact("sandbox", "build", str(bp))
    assert missing.returncode == 3
    assert "codeact sandbox build: cannot install package 'codeact-no-such-package-7f3a'" in missing.stderr
    assert "No matching distribution found" in missing.stderr

    offline = _codeact(
        "sandbox", "build", str(_blueprint(tmp_path, "{packages: [tabulate]}")), "--index-url",
        f"http://127.0.0.1:{_closed_port()}/simple",
    )  # fmt: skip
    assert offline.returncode == 3
    assert "cannot install package 'tabulate'" in offline.stderr
    assert json.loads(_codeact("sandbox", "list", "--json").stdout) == []


def test_cli_prune_keeps_recently_used(cache: Path, tmp_path: Path) -> None:
    assert _codeact("sandbox", "build", str(_blueprint(tmp_path, "{packages: [six]}"))).returncode == 0
    kept = _codeact("sandbox", "prune", "--unused-days", "1")
    assert kept.stdout.strip().endswith("0 environments removed, 0 B freed")
    assert len(json.loads(_codeact("sandbox", "list", "--json").stdout)) == 1
    assert prune_environments(keys=("0000",)) == []
    assert len(prune_environments()) == 1


def test_invalid_declarations_are_blueprint_errors(tmp_path: Path) -> None:
    bad = _codeact("validate", str(_blueprint(tmp_path, "{packages: ['--pre'], preset: bigdata}")))
    assert bad.returncode == 1
    assert "blueprint.sandbox.packages.invalid" in bad.stdout + bad.stderr
    assert "blueprint.sandbox.preset.unknown" in bad.stdout + bad.stderr


# --- docker -------------------------------------------------------------------------------------------


@pytest.fixture
def base_image(docker_client: Any) -> str:
    from codeact.sandbox.errors import SandboxImageMissingError
    from codeact.sandbox.image import ensure_image

    try:
        return ensure_image(docker_client)
    except SandboxImageMissingError as exc:
        pytest.fail(f"{exc.message} (make test builds it)")


def test_docker_environment_is_an_image_on_the_base_and_prune_removes_it(
    cache: Path, base_image: str, docker_client: Any
) -> None:
    spec = EnvSpec(packages=("tabulate",))
    env = ensure_environment(spec, backend="docker", progress=lambda _: None)
    assert env is not None and env.built and env.image == f"codeact-sandbox-env:{env.key}"
    image = docker_client.images.get(env.image)
    assert image.labels.get("org.codeact.env") == env.key
    assert recipe_for(spec, backend="docker").python == "3.11"  # Debian bookworm's python3
    hit = ensure_environment(spec, backend="docker", progress=lambda _: None)
    assert hit is not None and not hit.built
    removed = prune_environments()
    assert [e.key for e in removed] == [env.key]
    assert docker_client.images.list(filters={"reference": env.image}) == []
    # The image is gone: the next use builds it again instead of failing.
    rebuilt = ensure_environment(spec, backend="docker", progress=lambda _: None)
    assert rebuilt is not None and rebuilt.built
    prune_environments()


def test_cache_root_is_overridable(cache: Path) -> None:
    assert cache_root() == cache
