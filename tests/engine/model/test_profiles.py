"""Profiles files and the precedence: command line > profile > blueprint > CODEACT_MODEL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from codeact.engine.blueprint.models import ModelBlock
from codeact.engine.model import (
    NO_MODEL_MESSAGE,
    ModelConfigError,
    ModelSettings,
    ProfileConfig,
    ProfileError,
    load_profiles,
    resolve_model_routes,
    resolve_model_settings,
)

PROFILES = {
    "local": ProfileConfig(
        provider="ollama", model="qwen2.5-coder", api_base="http://gpu:11434", protocol="completion"
    ),
    "work": ProfileConfig(
        provider="openai", model="gpt-4.1-mini", api_key_env="WORK_KEY", options={"temperature": 0.1, "topP": 0.9}
    ),
    "bare": ProfileConfig(options={"max_tokens": 99}),
}


def _resolve(**kw: Any) -> ModelSettings:
    kw.setdefault("env", {})
    kw.setdefault("profiles", PROFILES)
    return resolve_model_settings(**kw)


def test_no_model_anywhere() -> None:
    with pytest.raises(ModelConfigError) as info:
        _resolve()
    assert str(info.value) == NO_MODEL_MESSAGE
    assert str(info.value) == (
        "no model configured: pass --model (e.g. --model openai/gpt-4.1-mini or --model ollama/qwen2.5-coder), "
        "--profile NAME, set model in the blueprint, or set CODEACT_MODEL"
    )
    assert info.value.code == "model.not_configured"


@pytest.mark.parametrize(
    ("kw", "model"),
    [
        pytest.param({"env": {"CODEACT_MODEL": "env/m"}}, "env/m", id="env"),
        pytest.param({"env": {"CODEACT_MODEL": "env/m"}, "blueprint_model": {"model": "bp/m"}}, "bp/m", id="bp>env"),
        pytest.param({"blueprint_model": {"model": "bp/m", "profile": "work"}}, "gpt-4.1-mini", id="profile>bp"),
        pytest.param({"model": "cli/m", "profile": "work"}, "cli/m", id="cli>profile"),
        pytest.param({"model": "cli/m", "blueprint_model": "bp/m"}, "cli/m", id="cli>bp"),
        pytest.param({"profile": "bare", "blueprint_model": {"model": "bp/m"}}, "bp/m", id="profile-without-model"),
    ],
)
def test_model_precedence(kw: dict[str, Any], model: str) -> None:
    assert _resolve(**kw).model == model


def test_profile_fills_connection_and_options() -> None:
    settings = _resolve(profile="work", blueprint_model={"options": {"temperature": 0.7, "maxOutputTokens": 500}})
    assert settings == ModelSettings(
        model="gpt-4.1-mini",
        provider="openai",
        api_key_env="WORK_KEY",
        options={"temperature": 0.1, "max_tokens": 500, "top_p": 0.9},
        profile="work",
    )


def test_cli_model_keeps_the_profile_server() -> None:
    settings = _resolve(profile="local", model="deepseek-coder")
    assert (settings.model, settings.provider, settings.api_base, settings.protocol) == (
        "deepseek-coder",
        "ollama",
        "http://gpu:11434",
        "completion",
    )


def test_prefixed_model_is_not_rerouted_by_a_lower_layer() -> None:
    settings = _resolve(model="ollama/qwen2.5-coder", blueprint_model={"provider": "openai-compatible", "model": "x"})
    assert (settings.model, settings.provider) == ("ollama/qwen2.5-coder", None)


def test_openai_compatible_provider_and_base_url() -> None:
    settings = _resolve(provider="openai-compatible", base_url="http://127.0.0.1:8000/v1", model="qwen")
    assert (settings.provider, settings.api_base) == ("openai", "http://127.0.0.1:8000/v1")


def test_blueprint_provider_applies_to_its_own_model() -> None:
    settings = _resolve(blueprint_model=ModelBlock(provider="openai-compatible", model="gpt-4.1-mini"))
    assert (settings.model, settings.provider) == ("gpt-4.1-mini", "openai")


@pytest.mark.parametrize(
    "kw",
    [
        pytest.param({"profile": "nope"}, id="cli-missing"),
        pytest.param({"blueprint_model": {"profile": "nope", "model": "m"}}, id="blueprint-missing"),
        pytest.param({"profile": "work", "provider": "anthropic"}, id="incompatible-provider"),
        pytest.param({"profile": "local", "provider": "openai-compatible"}, id="incompatible-alias"),
    ],
)
def test_requested_profile_missing_or_incompatible(kw: dict[str, Any]) -> None:
    with pytest.raises(ProfileError) as info:
        _resolve(**kw)
    name = kw.get("profile") or kw["blueprint_model"]["profile"]
    assert str(info.value) == f"profile not found or incompatible with provider: {name}"
    assert info.value.profile == name


def test_provider_alias_is_compatible() -> None:
    assert _resolve(profile="work", provider="openai-compatible").provider == "openai"


def test_cli_profile_wins_over_blueprint_profile() -> None:
    assert _resolve(profile="work", blueprint_model={"profile": "nope"}).profile == "work"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_profile_files_workspace_overrides_user(tmp_path: Path) -> None:
    home, workspace = tmp_path / "home", tmp_path / "ws"
    _write(home / "profiles.yaml", "profiles:\n  a: {model: user-a}\n  b: {model: user-b}\n")
    _write(workspace / ".codeact" / "profiles.yaml", "profiles:\n  a: {model: ws-a, base_url: http://x/v1}\n")
    env = {"CODEACT_HOME": str(home)}
    profiles = load_profiles(env=env, cwd=workspace)
    assert {name: p.model for name, p in profiles.items()} == {"a": "ws-a", "b": "user-b"}
    settings = resolve_model_settings(profile="a", env=env, cwd=workspace)
    assert (settings.model, settings.api_base) == ("ws-a", "http://x/v1")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "profiles:\n  p: {model: m, api_key: sk-123}\n",
            "profiles file {path} is invalid at profiles.p: Value error, 'api_key' is not allowed: keys are never "
            "read from files; set api_key_env to the NAME of an environment variable holding the key",
            id="key-in-file",
        ),
        pytest.param(
            "profiles:\n  p: {modle: m}\n",
            "profiles file {path} is invalid at profiles.p.modle: Extra inputs are not permitted",
            id="typo",
        ),
        pytest.param("profiles: [\n", "profiles file {path} is not valid YAML", id="yaml"),
    ],
)
def test_invalid_profile_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "profiles.yaml"
    _write(path, text)
    with pytest.raises(ModelConfigError) as info:
        load_profiles(env={"CODEACT_HOME": str(tmp_path)}, cwd=tmp_path / "elsewhere")
    assert str(info.value).startswith(message.format(path=path))
    assert info.value.code == "model.profiles"


def test_missing_files_mean_no_profiles(tmp_path: Path) -> None:
    assert load_profiles(env={"CODEACT_HOME": str(tmp_path / "none")}, cwd=tmp_path) == {}


def test_routes_from_the_blueprint() -> None:
    block = ModelBlock.model_validate(
        {
            "provider": "openai",
            "model": "gpt-4.1",
            "options": {"temperature": 0.2},
            "routes": {
                "thought": {"model": "gpt-4.1-mini", "options": {"temperature": 0.8}},
                "utility": {"model": "ollama/qwen2.5-coder"},
            },
        }
    )
    routes = resolve_model_routes(blueprint_model=block, env={}, profiles={})
    assert set(routes) == {"code", "thought", "utility"}
    assert (routes["code"].model, routes["code"].provider, routes["code"].options) == (
        "gpt-4.1",
        "openai",
        {"temperature": 0.2},
    )
    assert (routes["thought"].model, routes["thought"].provider, routes["thought"].options) == (
        "gpt-4.1-mini",
        "openai",
        {"temperature": 0.8},
    )
    assert (routes["utility"].model, routes["utility"].provider) == ("ollama/qwen2.5-coder", None)


def test_command_line_model_pins_every_route() -> None:
    bp = {"model": "gpt-4.1", "routes": {"thought": {"model": "gpt-4.1-mini"}}}
    routes = resolve_model_routes(model="scripted/demo.yaml", blueprint_model=bp, env={}, profiles={})
    assert list(routes) == ["code"]
    assert routes["code"].model == "scripted/demo.yaml"
