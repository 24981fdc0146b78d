"""Local models: a registry (data), the model cache, ``pull``, and the embedded llama.cpp server.

``--model local/NAME`` (or ``provider: local``) routes a run to the GGUF file cached under NAME:
:func:`local_route` starts the server the first time it is needed and returns an OpenAI-compatible
:class:`~codeact.engine.model.routes.Route` (chat at ``/v1/chat/completions``, raw FIM at ``/v1/completions``),
so litellm talks to it like to any other server. Nothing here imports xllamacpp or litellm at import time.
"""

from __future__ import annotations

from pathlib import Path

from codeact.engine.model.errors import LocalModelError
from codeact.engine.model.local.cache import (
    CachedModel,
    add_model,
    cached_model,
    cached_models,
    models_dir,
    remove_model,
    require_model,
    sha256_of,
)
from codeact.engine.model.local.pull import PullProgress, pull_model
from codeact.engine.model.local.registry import (
    KNOWN_MODELS,
    LayoutChoice,
    LocalModel,
    choose_layout,
    known_model,
    match_model,
)
from codeact.engine.model.local.server import LocalServer, default_threads, ensure_server, start_server, stop_servers
from codeact.engine.model.routes import LOCAL_SERVER_TIMEOUT_S, Route
from codeact.engine.model.settings import ModelSettings

__all__ = [
    "KNOWN_MODELS",
    "LOCAL_PREFIX",
    "CachedModel",
    "LayoutChoice",
    "LocalModel",
    "LocalModelError",
    "LocalServer",
    "PullProgress",
    "add_model",
    "cached_model",
    "cached_models",
    "choose_layout",
    "default_threads",
    "ensure_server",
    "is_local",
    "known_model",
    "local_context_window",
    "local_name",
    "local_route",
    "match_model",
    "models_dir",
    "pull_model",
    "remove_model",
    "require_model",
    "sha256_of",
    "start_server",
    "stop_servers",
]

LOCAL_PREFIX = "local/"

_DEFAULT_WINDOW = 8192


def is_local(settings: ModelSettings) -> bool:
    """Whether ``settings`` name a local model (``local/NAME`` or ``provider: local``)."""
    return settings.model.startswith(LOCAL_PREFIX) or settings.provider == "local"


def local_name(settings: ModelSettings) -> str:
    """NAME of ``local/NAME``."""
    model = settings.model
    return model[len(LOCAL_PREFIX) :] if model.startswith(LOCAL_PREFIX) else model


def local_context_window(settings: ModelSettings) -> int:
    """The context size the server gets: the run's ``context_window``, else the registry's, else 8192."""
    if settings.context_window:
        return settings.context_window
    entry = known_model(local_name(settings))
    return entry.context_window if entry is not None else _DEFAULT_WINDOW


def local_route(settings: ModelSettings, *, directory: Path | None = None) -> Route:
    """Start (once per process) the server for ``settings``' local model and route to it.

    Raises:
        LocalModelError: The model is not in the cache (the message names ``codeact models pull NAME``),
            the runtime is not installed, or the server could not start.
    """
    name = local_name(settings)
    entry = require_model(name, directory=directory)
    server = ensure_server(Path(entry.path), n_ctx=local_context_window(settings))
    base = server.base_url + "/v1"
    return Route(display=LOCAL_PREFIX + name, chat_model=f"openai/{name}", api_base=base,
                 text_model=f"text-completion-openai/{name}", text_api_base=base, provider="openai",
                 local=True, min_timeout_s=LOCAL_SERVER_TIMEOUT_S)  # fmt: skip
