"""CLI messages and options of issue 11 (profiles help, --json load errors, validate --toolkit, ...)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from codeact.engine.cli import app


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


REPO = Path(__file__).resolve().parents[2]
DEVOPS = f"{REPO / 'examples' / 'devops' / 'toolkit.py'}:DevOps"


def scripted(tmp_path: Path, *replies: str, body: str = "") -> Path:
    (tmp_path / "r.yaml").write_text(json.dumps(list(replies)))
    path = tmp_path / "agent.yaml"
    path.write_text(
        "version: codeact.agent/v1\nextend: codeact-base\nid: a\n"
        "model: {provider: scripted, model: scripted/r.yaml}\n"
        "workflow: {maxTurns: 4, codeact: {thought: 'off'}}\n" + body
    )
    return path


def test_validate_json_prints_a_load_error_on_stdout(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("version: [\n")
    code, out, err = cli("validate", str(tmp_path / "bad.yaml"), "--json")
    assert code == 2
    data = json.loads(out)
    assert data["valid"] is False and data["issues"] == []
    assert data["error"]["code"] == "blueprint.yaml.invalid"
    assert err.startswith("Blueprint load error [blueprint.yaml.invalid]")


def test_run_json_prints_a_load_error_on_stdout(tmp_path: Path) -> None:
    code, out, err = cli("run", str(tmp_path / "missing.yaml"), "--input", "x", "--json")
    assert code == 2
    line = json.loads(out)
    assert line["type"] == "run.error" and line["error"]["code"] == "blueprint.io"
    assert "missing.yaml" in line["error"]["message"] and "missing.yaml" in err


def test_validate_toolkit_catches_an_unknown_ref(tmp_path: Path) -> None:
    path = scripted(tmp_path, body="toolkits:\n  - ref: system\n  - ref: devopz\n")
    assert cli("validate", str(path))[0] == 0  # without --toolkit the refs are left to `run`
    code, out, _ = cli("validate", str(path), "--toolkit", DEVOPS)
    assert code == 1
    assert (
        "  ERROR $.toolkits[1].ref blueprint.toolkit.notFound: toolkit 'devopz' is not installed nor given with "
        "--toolkit (loaded: devops, system); did you mean 'devops'? pass --toolkit MODULE:OBJECT for it."
    ) in out.splitlines()
    good = scripted(tmp_path, body="toolkits:\n  - ref: system\n  - ref: devops\n")
    assert cli("validate", str(good), "--toolkit", DEVOPS)[0] == 0
    code, out, err = cli("validate", str(good), "--toolkit", "nocolon", "--json")
    assert code == 2 and "MODULE:OBJECT" in err and json.loads(out)["valid"] is False


def test_ask_user_hint_repeats_the_original_options(tmp_path: Path) -> None:
    path = scripted(
        tmp_path, "system.ask_user('Which environment?')", body="toolkits:\n  - ref: system\n  - ref: devops\n"
    )
    store = f"sqlite:///{tmp_path / 's.db'}"
    code, out, err = cli("run", str(path), "--input", "deploy", "--toolkit", DEVOPS, "--store", store, "--deny-all")
    assert code == 0 and out == "Which environment?\n"
    hint = next(line for line in err.splitlines() if line.startswith("paused:"))
    session = json.loads(cli("sessions", "list", "--store", store, "--json")[1])[0]["session_id"]
    assert hint == (
        f"paused: the agent asks the question above; answer with codeact run {path} --store {store} "
        f"--toolkit {DEVOPS} --deny-all --session {session} --input ANSWER"
    )


def test_resume_command_quotes_and_repeats() -> None:
    from codeact.engine.cli._resume import resume_command

    line = resume_command(
        "my agent.yaml",
        [("--base-url", "http://h:1/v1"), ("--toolkit", ["a:B", "c.py:D"]), ("--json", True), ("--model", None)],
        session="S1",
    )
    assert line == (
        "codeact run 'my agent.yaml' --base-url http://h:1/v1 --toolkit a:B --toolkit c.py:D --json "
        "--session S1 --input ANSWER"
    )


def test_help_keeps_option_names_whole_at_80_columns() -> None:
    result = CliRunner().invoke(app, ["run", "--help"], terminal_width=80, env={"COLUMNS": "80"})
    assert result.exit_code == 0
    assert "--allow-sandbox-declaration" in result.stdout and "…" not in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()) <= 80


def test_sessions_list_prints_full_values_when_piped(tmp_path: Path) -> None:
    long_id = "session-with-a-rather-long-name-" + "x" * 40
    path = scripted(tmp_path, "system.finish('ok')")
    store = f"sqlite:///{tmp_path / 's.db'}"
    assert cli("run", str(path), "--input", "x", "--store", store, "--session", long_id)[0] == 0
    code, out, _ = cli("sessions", "list", "--store", store)
    assert code == 0 and "…" not in out
    header, row = out.splitlines()
    assert header.split() == ["ID", "BLUEPRINT", "MODEL", "STATUS", "ROUNDS", "UPDATED"]
    assert row.split()[:5] == [long_id, "a", "scripted/r.yaml", "completed", "1"]


def test_a_variable_dropped_for_size_is_reported_in_the_run_output(tmp_path: Path) -> None:
    path = scripted(tmp_path, 'big = "x" * 3_000_000\nsmall = 1', "system.finish(small)")
    code, out, err = cli("run", str(path), "--input", "x", "--store", f"sqlite:///{tmp_path / 's.db'}")
    assert code == 0 and out == "1\n"
    # the value stays in the run's warm sandbox; only the store (a resume) lacks it
    assert (
        "! variable big (str) is kept in this run's sandbox only, not saved: exceeds the 1 MiB per-variable cap" in err
    )


def test_approval_denial_says_why_once(tmp_path: Path) -> None:
    code_ = (
        'try:\n    devops.deploy_app(app_id="checkout-api", version="2.4.0")\nexcept Exception as e:\n    r = str(e)'
    )
    path = scripted(
        tmp_path, code_, "system.finish(r)", body="toolkits:\n  - ref: system\n  - ref: devops\n    approval: ask\n"
    )
    code, out, err = cli(
        "run", str(path), "--input", "x", "--store", f"sqlite:///{tmp_path / 's.db'}", "--toolkit", DEVOPS, "--deny-all"
    )
    assert code == 0
    assert out == "devops.deploy_app was not approved: --deny-all\n"
    assert "denied by" not in err + out
