"""Model profiles and the resolution of which model a run uses.

Profiles live in YAML files, user level then workspace level (the workspace wins, profile by
profile)::

    $CODEACT_HOME/profiles.yaml   (or ~/.codeact/profiles.yaml)
    ./.codeact/profiles.yaml

    profiles:
      local:
        provider: ollama
        model: qwen2.5-coder
        api_base: http://localhost:11434
        protocol: completion
        options: {temperature: 0}
      work:
        provider: openai
        model: gpt-4.1-mini
        api_key_env: WORK_OPENAI_KEY     # the NAME of a variable; keys are never read from files

Precedence, field by field: command line > profile > blueprint > ``CODEACT_MODEL``. A provider,
base URL or key variable from a lower layer applies to a model chosen by a higher layer only when
that model name has no ``provider/`` prefix of its own (``--model ollama/qwen2.5-coder`` is not
re-routed by a blueprint's ``provider: openai-compatible``). Options merge (blueprint, then profile).
An explicitly requested profile (``--profile`` or the blueprint's ``model.profile``) that is missing,
or whose provider differs from ``--provider``, raises :class:`ProfileError`; nothing falls back.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, Protocol

import yaml
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, model_validator

from codeact.engine.model.errors import ModelConfigError, ProfileError
from codeact.engine.model.settings import ModelSettings, normalize_options

__all__ = [
    "NO_MODEL_MESSAGE",
    "ProfileConfig",
    "ProfilesFile",
    "canonical_provider",
    "load_profiles",
    "profile_paths",
    "resolve_model_routes",
    "resolve_model_settings",
]

NO_MODEL_MESSAGE = (
    "no model configured: pass --model (e.g. --model openai/gpt-4.1-mini or --model ollama/qwen2.5-coder), "
    "--profile NAME, set model in the blueprint, or set CODEACT_MODEL"
)

_PROVIDER_ALIASES = {
    "openai-compatible": "openai",
    "openai_compatible": "openai",
    "openai-compat": "openai",
}

_PURPOSES = ("code", "thought", "utility")


def canonical_provider(provider: str | None) -> str | None:
    """The litellm provider name for a user-facing one (``openai-compatible`` -> ``openai``)."""
    if provider is None or not provider.strip():
        return None
    name = provider.strip().lower()
    return _PROVIDER_ALIASES.get(name, name)


class ProfileConfig(BaseModel):
    """One profile: where and how to reach a model. Holds no secrets."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: str | None = None
    model: str | None = None
    api_base: str | None = Field(default=None, validation_alias=AliasChoices("api_base", "base_url"))
    api_key_env: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    protocol: Literal["chat", "completion"] | None = None
    timeout_s: float | None = None
    max_retries: int | None = Field(default=None, ge=0)
    context_window: int | None = Field(default=None, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _refuse_keys(cls, data: object) -> object:
        if isinstance(data, Mapping):
            for key in ("api_key", "key", "token", "secret"):
                if key in data:
                    raise ValueError(
                        f"{key!r} is not allowed: keys are never read from files; "
                        "set api_key_env to the NAME of an environment variable holding the key"
                    )
        return data


class ProfilesFile(BaseModel):
    """A ``profiles.yaml`` file."""

    model_config = ConfigDict(extra="forbid")

    profiles: dict[str, ProfileConfig] = Field(default_factory=dict)

    @classmethod
    def from_text(cls, text: str, *, source: str = "<memory>") -> ProfilesFile:
        """Parse profiles YAML; an empty file has no profiles."""
        try:
            data = yaml.safe_load(text) or {}
            return cls.model_validate(data)
        except yaml.YAMLError as exc:
            raise ModelConfigError(f"profiles file {source} is not valid YAML: {exc}", code="model.profiles") from exc
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"]) or "<root>"
            raise ModelConfigError(
                f"profiles file {source} is invalid at {where}: {error['msg']}", code="model.profiles"
            ) from exc

    @classmethod
    def from_file(cls, path: str | Path) -> ProfilesFile:
        """Load a profiles file (a missing file has no profiles)."""
        file = Path(path)
        if not file.is_file():
            return cls()
        return cls.from_text(file.read_text(encoding="utf-8"), source=str(file))


def profile_paths(*, env: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> list[Path]:
    """The profiles files, lowest precedence first: user level, then workspace level."""
    env = os.environ if env is None else env
    home = Path(env["CODEACT_HOME"]) if env.get("CODEACT_HOME") else Path.home() / ".codeact"
    workspace = Path(cwd) if cwd is not None else Path.cwd()
    return [home / "profiles.yaml", workspace / ".codeact" / "profiles.yaml"]


def load_profiles(*, env: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> dict[str, ProfileConfig]:
    """All profiles, workspace profiles replacing user profiles of the same name."""
    merged: dict[str, ProfileConfig] = {}
    for path in profile_paths(env=env, cwd=cwd):
        merged.update(ProfilesFile.from_file(path).profiles)
    return merged


def _profile_help(
    name: str, chosen: ProfileConfig | None, provider: str | None, *, env: Mapping[str, str], cwd: str | Path | None
) -> str:
    """Where the profile was looked for, and how to create it (docs/profiles.md)."""
    if chosen is not None:
        return (
            f"profile {name!r} has provider {chosen.provider!r}, but --provider is {provider!r}: "
            "drop --provider, or use a profile of that provider"
        )
    looked = []
    for path in profile_paths(env=env, cwd=cwd):
        if not path.is_file():
            looked.append(f"{path} (no such file)")
        else:
            names = ", ".join(sorted(ProfilesFile.from_file(path).profiles)) or "none"
            looked.append(f"{path} (profiles: {names})")
    user_file = profile_paths(env=env, cwd=cwd)[0]
    return (
        f"looked in {' and '.join(looked)}.\n"
        f"Create it in {user_file} (or .codeact/profiles.yaml in the workspace), e.g.:\n"
        f"  profiles:\n    {name}:\n      provider: openai\n      model: gpt-4.1-mini\n"
        "      api_key_env: OPENAI_API_KEY\n"
        "(see docs/profiles.md), or pass --model instead of a profile"
    )


class _Dumpable(Protocol):
    def model_dump(self) -> dict[str, object]: ...


BlueprintModel = Mapping[str, Any] | str | _Dumpable | None


@dataclass(frozen=True)
class _Layer:
    model: str | None = None
    provider: str | None = None
    api_base: str | None = None
    api_key_env: str | None = None


def _has_prefix(model: str) -> bool:
    return "/" in model


def _blueprint_dict(blueprint_model: BlueprintModel) -> dict[str, Any]:
    if blueprint_model is None:
        return {}
    if isinstance(blueprint_model, str):
        return {"model": blueprint_model}
    if isinstance(blueprint_model, Mapping):
        return dict(blueprint_model)
    return dict(blueprint_model.model_dump())


def _pick(layers: list[_Layer]) -> _Layer:
    """Choose the model and the connection fields that go with it (see the module docstring)."""
    chosen = next((i for i, layer in enumerate(layers) if layer.model), None)
    if chosen is None:
        raise ModelConfigError(NO_MODEL_MESSAGE, code="model.not_configured")
    model = layers[chosen].model or ""
    usable = layers if not _has_prefix(model) else layers[: chosen + 1]

    def first(attr: str) -> str | None:
        return next((getattr(layer, attr) for layer in usable if getattr(layer, attr)), None)

    return _Layer(model=model, provider=first("provider"), api_base=first("api_base"), api_key_env=first("api_key_env"))


def resolve_model_settings(
    *,
    model: str | None = None,
    provider: str | None = None,
    base_url: str | None = None,
    profile: str | None = None,
    protocol: Literal["chat", "completion"] | None = None,
    blueprint_model: BlueprintModel = None,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    profiles: Mapping[str, ProfileConfig] | None = None,
) -> ModelSettings:
    """Decide the model of a run: command line > profile > blueprint > ``CODEACT_MODEL``.

    Args:
        model: ``--model``.
        provider: ``--provider`` (``openai-compatible`` means ``openai`` at ``base_url``).
        base_url: ``--base-url``.
        profile: ``--profile``; else the blueprint's ``model.profile`` is used.
        protocol: ``--protocol``.
        blueprint_model: The blueprint's ``model`` block (a mapping, a pydantic model or a model name).
        env: Environment (``CODEACT_MODEL``, ``CODEACT_HOME``); defaults to ``os.environ``.
        cwd: Workspace directory for ``.codeact/profiles.yaml``; defaults to the current directory.
        profiles: Profiles to use instead of reading the profile files (tests, embedding hosts).

    Returns:
        The settings of the default (``code``) route.

    Raises:
        ProfileError: The requested profile does not exist or its provider differs from ``provider``.
        ModelConfigError: No model is configured anywhere, or a profiles file is invalid.
    """
    env = os.environ if env is None else env
    bp = _blueprint_dict(blueprint_model)
    profile_name = profile or bp.get("profile")
    chosen: ProfileConfig | None = None
    if profile_name:
        known = load_profiles(env=env, cwd=cwd) if profiles is None else profiles
        chosen = known.get(profile_name)
        wanted = canonical_provider(provider)
        if chosen is None or (wanted and chosen.provider and canonical_provider(chosen.provider) != wanted):
            detail = "" if profiles is not None else _profile_help(profile_name, chosen, provider, env=env, cwd=cwd)
            raise ProfileError(profile_name, detail=detail)

    layers = [
        _Layer(model=model, provider=provider, api_base=base_url),
        _Layer(
            model=chosen.model if chosen else None,
            provider=chosen.provider if chosen else None,
            api_base=chosen.api_base if chosen else None,
            api_key_env=chosen.api_key_env if chosen else None,
        ),
        _Layer(
            model=bp.get("model"),
            provider=bp.get("provider"),
            api_base=bp.get("base_url") or bp.get("api_base"),
            api_key_env=bp.get("api_key_env"),
        ),
        _Layer(model=env.get("CODEACT_MODEL")),
    ]
    picked = _pick(layers)
    options = {**normalize_options(bp.get("options") or {}), **normalize_options(chosen.options if chosen else {})}
    settings = ModelSettings(
        model=picked.model or "",
        provider=canonical_provider(picked.provider),
        api_base=picked.api_base,
        api_key_env=picked.api_key_env,
        options=options,
        protocol=protocol or (chosen.protocol if chosen else None) or bp.get("protocol") or "chat",
        context_window=(chosen.context_window if chosen else None) or bp.get("context_window"),
        profile=profile_name,
    )
    if chosen is not None and chosen.timeout_s is not None:
        settings = replace(settings, timeout_s=chosen.timeout_s)
    if chosen is not None and chosen.max_retries is not None:
        settings = replace(settings, max_retries=chosen.max_retries)
    return settings


def resolve_model_routes(
    *,
    model: str | None = None,
    provider: str | None = None,
    base_url: str | None = None,
    profile: str | None = None,
    protocol: Literal["chat", "completion"] | None = None,
    blueprint_model: BlueprintModel = None,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    profiles: Mapping[str, ProfileConfig] | None = None,
) -> dict[str, ModelSettings]:
    """Settings per purpose (``code``, ``thought``, ``utility``) for :class:`~codeact.engine.model.client.ModelClient`.

    The ``code`` route comes from :func:`resolve_model_settings`. The blueprint's ``model.routes``
    override it per purpose (model, provider, options merged over the main options), unless the
    command line chose the model (``model``, ``provider``, ``base_url`` or ``profile`` given): the
    command line pins one model for every purpose.

    Raises:
        ProfileError: See :func:`resolve_model_settings`.
        ModelConfigError: See :func:`resolve_model_settings`.
    """
    base = resolve_model_settings(
        model=model, provider=provider, base_url=base_url, profile=profile, protocol=protocol,
        blueprint_model=blueprint_model, env=env, cwd=cwd, profiles=profiles,
    )  # fmt: skip
    routes = {"code": base}
    if any((model, provider, base_url, profile)):
        return routes
    raw_routes = _blueprint_dict(blueprint_model).get("routes") or {}
    for purpose in _PURPOSES:
        route = raw_routes.get(purpose)
        if not route:
            continue
        route = dict(route)
        route_model = route.get("model")
        route_provider = canonical_provider(route.get("provider"))
        if route_model:
            keep_connection = route_provider is None and not _has_prefix(route_model)
            routes[purpose] = replace(
                base,
                model=route_model,
                provider=route_provider or (base.provider if keep_connection else None),
                api_base=base.api_base if keep_connection or route_provider == base.provider else None,
                options={**base.options, **normalize_options(route.get("options") or {})},
            )
        else:
            routes[purpose] = replace(
                base,
                provider=route_provider or base.provider,
                options={**base.options, **normalize_options(route.get("options") or {})},
            )
    return routes
