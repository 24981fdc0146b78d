"""ai4j files keep ai4j's rules through ``codeact run`` (issue 36 item 2).

The files in ``ai4j_seed/`` are the seed's own examples (seed 000, sections 2, 3, 6.7-6.9): no
``workflow:`` block is ReAct without a word; ai4j's free strings (memory scope and store, compaction
strategy) run as their codeact counterpart or, warned, as the nearest safe value; the sandbox example
(``provider: remote-vm``) passes with the host's allow flag and the run names the backend it used.
Real CLI, real sandbox, the scripted model.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codeact.engine.blueprint import load_path, validate_blueprint
from codeact.engine.model.scripted import ScriptedReplies
from tests.engine.cli_support import cli
from tests.engine.openai_server import OpenAIServer

pytestmark = pytest.mark.usefixtures("cli_home")

SEED = Path(__file__).parent / "ai4j_seed"


def run(tmp_path: Path, name: str, *extra: str) -> tuple[int, str, str]:
    replies = ScriptedReplies(["Six times seven is 42."])
    return cli(
        "run", str(SEED / name), "--input", "What is six times seven?", "--model", replies.model,
        "--store", f"sqlite:///{tmp_path / 's.db'}", *extra,
    )  # fmt: skip


@pytest.mark.parametrize("name", ["no-workflow.yaml", "minimal.yaml"])
def test_a_file_without_workflow_is_react_without_a_word(tmp_path: Path, name: str) -> None:
    assert validate_blueprint(load_path(SEED / name)).issues == ()
    code, out, err = run(tmp_path, name, "--strict")
    assert (code, out) == (0, "Six times seven is 42.\n"), err
    assert "WARNING" not in err and "workflow.codeact" not in err


def test_ai4js_free_strings_are_mapped_and_warned_never_refused(tmp_path: Path) -> None:
    code, out, err = cli("validate", str(SEED / "free-strings.yaml"))
    assert code == 0, out
    assert out.splitlines()[1:] == [
        "  WARNING $.session.memory.scope blueprint.memory.scope.unmapped: session.memory.scope 'tenant' has no "
        "codeact counterpart (session, user, agent, project); this run keeps memory to the session (nothing is "
        "shared beyond it). Set one of them to choose.",
        "  WARNING $.session.memory.store blueprint.memory.store.unmapped: session.memory.store 'es' is not a store "
        "codeact opens; this run keeps memory in the run's own store. Set 'session', sqlite:///PATH or "
        "redis://HOST:PORT/DB to choose.",
        "  WARNING $.session.compact.strategy blueprint.compact.strategy.unmapped: session.compact.strategy "
        "'sliding-window' has no codeact counterpart; this run compacts with structured-summary.",
    ]
    code, out, err = run(tmp_path, "free-strings.yaml")
    assert (code, out) == (0, "Six times seven is 42.\n"), err
    assert "blueprint.memory.scope.unmapped" in err and "blueprint.compact.strategy.unmapped" in err
    # --strict makes warnings errors, as for every warning
    assert run(tmp_path, "free-strings.yaml", "--strict")[0] == 1


def test_the_mapping_the_run_gets(tmp_path: Path) -> None:
    from codeact.engine.blueprint import AgentFactory, HostContext

    spec = AgentFactory().create(load_path(SEED / "free-strings.yaml"), HostContext(model_client=object()))
    assert spec.session.memory is not None and (spec.session.memory.scope, spec.session.memory.store) == (
        "session",
        None,
    )
    assert spec.session.compact is not None and spec.session.compact.strategy == "structured-summary"
    full = load_path(SEED / "coding-assistant.yaml")  # the seed's fuller example: its values are codeact's own
    assert validate_blueprint(full).codes() == []


def test_the_seeds_sandbox_example_passes_with_the_allow_flag_and_names_the_backend(tmp_path: Path) -> None:
    code, out, _ = cli("validate", str(SEED / "sandbox-remote-vm.yaml"))
    assert code == 0, out
    code, out, err = run(tmp_path, "sandbox-remote-vm.yaml", "--allow-sandbox-declaration", "--json")
    assert code == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    assert events[-1]["type"] == "run.completed" and events[-1]["answer"] == "Six times seven is 42."
    assert (
        "WARNING $.sandbox.provider blueprint.sandbox.provider.substituted: sandbox.provider 'remote-vm' is not a "
        "sandbox this host runs; the host allowed the declaration, so this run uses the host's own sandbox backend "
        "instead (the run names it)." in err
    )
    assert "sandbox: remote-vm is not available on this host; the run uses subprocess." in err.splitlines()
    # without the flag the declaration is refused, as before
    code, _, err = run(tmp_path, "sandbox-remote-vm.yaml")
    assert code == 2 and "[blueprint.sandbox.unsupported]" in err


def test_the_allow_flag_exception_is_ai4js_only(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    text = (SEED / "sandbox-remote-vm.yaml").read_text().replace("ai4j.agent/v1", "codeact.agent/v1")
    path.write_text(text)
    replies = ScriptedReplies(["42"])
    code, _, err = cli(
        "run", str(path), "--input", "x", "--model", replies.model, "--allow-sandbox-declaration",
        "--store", f"sqlite:///{tmp_path / 's.db'}",
    )  # fmt: skip
    assert code == 2 and "[blueprint.sandbox.provider.unknown]" in err


@pytest.mark.parametrize("json_output", [pytest.param((), id="text"), pytest.param(("--json",), id="json")])
def test_protocol_responses_and_api_key_as_ai4js_cli_takes_them(
    tmp_path: Path, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch, json_output: tuple[str, ...]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    openai_server.push("Six times seven is 42.")
    code, out, err = cli(
        "run", str(SEED / "minimal.yaml"), "--input", "What is six times seven?",
        "--provider", "openai", "--protocol", "responses", "--model", "gpt-4.1-mini",
        "--base-url", openai_server.base_url, "--api-key", "sk-from-the-command-line",
        "--store", f"sqlite:///{tmp_path / 's.db'}", *json_output,
    )  # fmt: skip
    assert code == 0, err
    assert ("Six times seven is 42." in out) and "sk-from-the-command-line" not in out + err
    request = openai_server.requests[-1]
    assert request.path == "/v1/responses"  # litellm's Responses API route, not /v1/chat/completions
    assert request.body["model"] == "gpt-4.1-mini"
    assert request.headers["authorization"] == "Bearer sk-from-the-command-line"
    assert "What is six times seven?" in json.dumps(request.body["input"])
    # the key is in no record of the run
    for record in tmp_path.glob("s.db*"):
        assert b"sk-from-the-command-line" not in record.read_bytes(), record.name


def test_api_key_never_travels_with_a_queued_run(tmp_path: Path) -> None:
    code, _, err = cli(
        "run", str(SEED / "minimal.yaml"), "--input", "x", "--api-key", "sk-secret", "--queue", "redis://localhost:1/0",
    )  # fmt: skip
    assert code == 2 and "--api-key stays on this machine" in err and "sk-secret" not in err
