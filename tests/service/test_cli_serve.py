"""`codeact serve` refuses a bad configuration with a message and exit 2, before it listens."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from codeact.engine.cli import app

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = str(REPO / "examples" / "serve" / "agent.yaml")


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEACT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CODEACT_API_TOKENS", raising=False)


def serve(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["serve", *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param((), "codeact serve: no blueprint to serve: pass --blueprints FILE or --blueprints DIR", id="none"),
        pytest.param(
            ("--blueprints", "{tmp}/missing.yaml"),
            "codeact serve: --blueprints '{tmp}/missing.yaml': no such file or folder",
            id="missing",
        ),
        pytest.param(
            ("--blueprints", "{tmp}"),
            "codeact serve: --blueprints '{tmp}': the folder holds no *.yaml or *.yml blueprint",
            id="empty-folder",
        ),
        pytest.param(
            ("--blueprints", EXAMPLE, "--tokens-file", "{tmp}/tokens"),
            "codeact serve: cannot read tokens file '{tmp}/tokens': No such file or directory; "
            "pass an existing file to --tokens-file",
            id="tokens-file",
        ),
        pytest.param(
            ("--blueprints", EXAMPLE, "--blueprints", EXAMPLE),
            f"codeact serve: two blueprints give runner id 'word-counter': {EXAMPLE!r} and {EXAMPLE!r}; "
            "give each blueprint its own id",
            id="duplicate-id",
        ),
        pytest.param(
            ("--blueprints", EXAMPLE, "--toolkit", "no_such_module:Thing"),
            "codeact serve: --toolkit: ",
            id="toolkit",
        ),
    ],
)
def test_a_bad_configuration_exits_2_with_its_reason(args: tuple[str, ...], message: str, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, err = serve(*(a.replace("{tmp}", str(empty)) for a in args))
    assert code == 2
    assert err.startswith(message.replace("{tmp}", str(empty)))


def test_a_malformed_token_variable_is_refused_without_echoing_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEACT_API_TOKENS", "ok-token-1234 bad")
    code, err = serve("--blueprints", EXAMPLE)
    assert code == 2
    assert err == (
        "codeact serve: API token entry 2 of $CODEACT_API_TOKENS is malformed: write TOKEN or "
        "TOKEN=RUNNER[,RUNNER...] (a token is 8-256 letters, digits or '-._~+/')\n"
    )
    assert "ok-token-1234" not in err


@pytest.mark.parametrize(
    ("permissions", "message"),
    [
        pytest.param(
            "{telepathy: [read], history: [page]}",
            "extensions.runner.permissions: unknown permission kind 'telepathy'; the kinds are models, tools, "
            "knowledge_bases, history, events, artifacts, storage, platform_api, interactions",
            id="unknown-kind",
        ),
        pytest.param(
            "{artifacts: [write]}",
            "extensions.runner.permissions: artifacts.0: Input should be 'metadata' or 'read'",
            id="unknown-operation",
        ),
        pytest.param(
            "{platform_api: ['interaction.requested']}",
            "extensions.runner.permissions: platform_api action 'interaction.requested' is the protocol's own "
            "(an interaction request); name a platform action instead",
            id="reserved-action",
        ),
    ],
)
def test_a_blueprint_declaring_what_the_protocol_does_not_list_is_refused(
    permissions: str, message: str, tmp_path: Path
) -> None:
    blueprint = tmp_path / "agent.yaml"
    source = Path(EXAMPLE).read_text().replace("scripted/replies.yaml", str(Path(EXAMPLE).parent / "replies.yaml"))
    blueprint.write_text(source + f"extensions:\n  runner:\n    permissions: {permissions}\n")
    code, err = serve("--blueprints", str(blueprint))
    assert code == 2
    assert err == f"codeact serve: --blueprints {str(blueprint)!r}: blueprint 'word-counter': {message}\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ("--artifact-mime", "images"),
            "'images' is not a MIME type: give TYPE/SUBTYPE (image/png) or TYPE/* (image/*), in lower case",
            id="mime",
        ),
        pytest.param(("--artifact-ttl", "-5"), "an artifact's time to live must be positive seconds, got -5", id="ttl"),
    ],
)
def test_a_bad_artifact_policy_exits_2(args: tuple[str, ...], message: str) -> None:
    code, err = serve("--blueprints", EXAMPLE, *args)
    assert code == 2
    assert err == f"codeact serve: --artifact-max-bytes/--artifact-mime/--artifact-ttl: {message}\n"
