"""The model client: litellm behind one adapter, profiles, the scripted provider.

``import engine.model`` does not import litellm; the first call of a route that needs it does (scripted
models and OpenAI-compatible base URLs never do; see :mod:`codeact.engine.model.client`).
"""

from __future__ import annotations

from codeact.engine.model._progress import on_slow_step
from codeact.engine.model.client import DeltaCallback, ModelClient, map_litellm_errors, stop_background_tasks
from codeact.engine.model.errors import (
    LocalModelError,
    ModelAuthError,
    ModelBadRequestError,
    ModelConfigError,
    ModelConnectionError,
    ModelContextWindowError,
    ModelNotFoundError,
    ModelProviderError,
    ModelRateLimitError,
    ModelServerError,
    ModelStreamCutError,
    ModelTimeoutError,
    ProfileError,
    ScriptExhaustedError,
)
from codeact.engine.model.profiles import (
    NO_MODEL_MESSAGE,
    ProfileConfig,
    ProfilesFile,
    canonical_provider,
    load_profiles,
    profile_paths,
    resolve_model_routes,
    resolve_model_settings,
)
from codeact.engine.model.routes import Route, route_for
from codeact.engine.model.scripted import (
    ScriptedReplies,
    ScriptedReply,
    ScriptedRequest,
    ScriptedToolCall,
    approx_tokens,
)
from codeact.engine.model.settings import ModelProtocol, ModelReply, ModelSettings, ToolCall, normalize_options

__all__ = [
    "DeltaCallback",
    "LocalModelError",
    "ModelAuthError",
    "ModelBadRequestError",
    "ModelClient",
    "ModelConfigError",
    "ModelConnectionError",
    "ModelContextWindowError",
    "ModelNotFoundError",
    "ModelProtocol",
    "ModelProviderError",
    "ModelRateLimitError",
    "ModelReply",
    "ModelServerError",
    "ModelSettings",
    "ModelStreamCutError",
    "ModelTimeoutError",
    "NO_MODEL_MESSAGE",
    "ProfileConfig",
    "ProfileError",
    "ProfilesFile",
    "Route",
    "ScriptExhaustedError",
    "ScriptedReplies",
    "ScriptedReply",
    "ScriptedRequest",
    "ScriptedToolCall",
    "ToolCall",
    "approx_tokens",
    "canonical_provider",
    "load_profiles",
    "map_litellm_errors",
    "normalize_options",
    "on_slow_step",
    "profile_paths",
    "resolve_model_routes",
    "resolve_model_settings",
    "route_for",
    "stop_background_tasks",
]
