"""CLI messages and options of issue 11 (profiles help, --json load errors, validate --toolkit, ...)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from engine.cli import app


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEACT_HOME", str(tmp_path / "home"))
    for name in ("CODEACT_MODEL", "CODEACT_STORE", "CODEACT_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def agent(tmp_path: Path, model: str = "{provider: openai, profile: default}") -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(f"version: codeact.agent/v1\nextend: codeact-base\nid: a\nmodel: {model}\n")
    return path


def test_missing_profile_says_where_it_looked_and_how_to_create_it(tmp_path: Path) -> None:
    code, out, err = cli("run", str(agent(tmp_path)), "--input", "hi")
    assert (code, out) == (2, "")
    assert err.splitlines()[:3] == [
        "profile not found or incompatible with provider: default",
        f"looked in {tmp_path}/home/profiles.yaml (no such file) and {tmp_path}/.codeact/profiles.yaml (no such file).",
        f"Create it in {tmp_path}/home/profiles.yaml (or .codeact/profiles.yaml in the workspace), e.g.:",
    ]
    assert "docs/profiles.md" in err


def test_the_documented_profile_example_works(tmp_path: Path) -> None:
    # The profile the message suggests, written where it says, is found.
    doc = (Path(__file__).resolve().parents[2] / "docs" / "profiles.md").read_text()
    example = doc.split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "profiles.yaml").write_text(example)
    (tmp_path / "r.yaml").write_text(json.dumps(["system.finish('ok')"]))
    code, out, err = cli(
        "run",
        str(agent(tmp_path)),
        "--input",
        "hi",
        "--profile",
        "default",
        "--model",
        "scripted/r.yaml",
        "--store",
        f"sqlite:///{tmp_path / 's.db'}",
    )
    assert "profile not found" not in err


def test_profile_of_another_provider(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "profiles.yaml").write_text("profiles:\n  work: {provider: anthropic, model: claude}\n")
    code, _, err = cli("run", str(agent(tmp_path)), "--input", "hi", "--profile", "work", "--provider", "openai")
    assert code == 2
    assert err.splitlines() == [
        "profile not found or incompatible with provider: work",
        "profile 'work' has provider 'anthropic', but --provider is 'openai': drop --provider, or use a profile "
        "of that provider",
    ]
