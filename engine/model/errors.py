"""Errors of the model client (all :class:`~codeact.engine.errors.ModelError` subclasses).

::

    ModelError                          engine.errors
    ├── ModelConfigError                no model / bad profile file / unusable route (before any call)
    │   ├── ProfileError                a requested profile is missing or does not fit --provider
    │   └── LocalModelError             a local model is unknown, not pulled, fails its hash or cannot start
    ├── ScriptExhaustedError            the scripted model has no reply left
    └── ModelProviderError              the provider call failed (after retries); .retryable etc.
        ├── ModelRateLimitError         429                      retryable
        ├── ModelConnectionError        no connection            retryable
        │   ├── ModelTimeoutError       the call timed out       retryable
        │   └── ModelStreamCutError     a streamed reply broke off mid-way
        ├── ModelServerError            5xx                      retryable
        ├── ModelAuthError              401/403, missing key
        └── ModelBadRequestError        other 4xx
            ├── ModelNotFoundError      404: unknown model/route
            └── ModelContextWindowError the prompt is larger than the context window

litellm exceptions are translated once, in :func:`codeact.engine.model.client.map_litellm_errors`; code above
the model client only ever sees these classes.
"""

from __future__ import annotations

from typing import Any

from codeact.engine.errors import ModelError

__all__ = [
    "LocalModelError",
    "ModelAuthError",
    "ModelBadRequestError",
    "ModelConfigError",
    "ModelConnectionError",
    "ModelContextWindowError",
    "ModelNotFoundError",
    "ModelProviderError",
    "ModelRateLimitError",
    "ModelServerError",
    "ModelStreamCutError",
    "ModelTimeoutError",
    "ProfileError",
    "ScriptExhaustedError",
]


class ModelConfigError(ModelError):
    """The model configuration is unusable: nothing was sent to any provider."""

    code = "model.config"


class LocalModelError(ModelConfigError):
    """A local model (``local/NAME``) cannot be used: unknown, not in the cache, a wrong hash, no runtime."""

    code = "model.local"


class ProfileError(ModelConfigError):
    """An explicitly requested profile does not exist or does not fit ``--provider`` (CLI exit 2).

    Args:
        name: The requested profile name; the message is
            ``profile not found or incompatible with provider: NAME``, followed by ``detail``.
        detail: Where the profile was looked for and how to create it (empty: no detail).
    """

    code = "model.profile"

    def __init__(self, name: str, *, detail: str = "") -> None:
        message = f"profile not found or incompatible with provider: {name}"
        super().__init__(f"{message}\n{detail}" if detail else message)
        self.profile = name


class ScriptExhaustedError(ModelError):
    """The scripted model was asked for more replies than its script holds.

    Args:
        consumed: Replies served so far.
        source: The reply file (or ``<memory>``).
        purpose: The purpose that found no reply.
    """

    code = "model.scripted.exhausted"

    def __init__(self, *, consumed: int, source: str, purpose: str) -> None:
        super().__init__(
            f"scripted model ran out of replies after {consumed} (file {source}): "
            f"add a reply for purpose {purpose!r} to the script"
        )
        self.consumed = consumed
        self.source = source
        self.purpose = purpose


class ModelProviderError(ModelError):
    """A call to the model provider failed.

    Args:
        message: What failed, where, and what to do.
        retryable: Whether trying again may succeed (rate limits, connection, timeouts, 5xx).
        status_code: The HTTP status, when there was one.
        provider: The litellm provider (``openai``, ``ollama``, ``scripted``, ...), when known.
        model: The model the call was for.
        attempts: How many attempts were made before giving up.
        retry_after: Seconds the provider asked to wait (``Retry-After``), when it said.
    """

    code = "model.provider"
    default_retryable = False

    def __init__(
        self,
        message: str,
        *,
        retryable: bool | None = None,
        status_code: int | None = None,
        provider: str | None = None,
        model: str | None = None,
        attempts: int = 1,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = self.default_retryable if retryable is None else retryable
        self.status_code = status_code
        self.provider = provider
        self.model = model
        self.attempts = attempts
        self.retry_after = retry_after


class ModelRateLimitError(ModelProviderError):
    """The provider answered 429 (rate limit or quota)."""

    code = "model.rate_limited"
    default_retryable = True


class ModelConnectionError(ModelProviderError):
    """The provider could not be reached (refused, reset, DNS, TLS)."""

    code = "model.connection"
    default_retryable = True


class ModelTimeoutError(ModelConnectionError):
    """The call did not complete within ``timeout_s``."""

    code = "model.timeout"


class ModelStreamCutError(ModelConnectionError):
    """A streamed reply broke off part-way (the connection dropped after some chunks had arrived).

    It is raised only when the call cannot simply be repeated: its text was already streamed as
    ``message.delta`` events (a stream cut before any text reached the caller is retried like any
    connection error). Nothing of the partial reply is used: a half-received tool call never runs.

    Attributes:
        chunks: How many stream chunks had arrived.
        partial_text: The reply text received before the cut.
        partial_tool_calls: ``(name, raw arguments so far)`` of the tool calls being streamed.
    """

    code = "model.stream_cut"

    def __init__(
        self,
        message: str,
        *,
        chunks: int = 0,
        partial_text: str = "",
        partial_tool_calls: tuple[tuple[str, str], ...] = (),
        **fields: Any,
    ) -> None:
        super().__init__(message, **fields)
        self.chunks = chunks
        self.partial_text = partial_text
        self.partial_tool_calls = partial_tool_calls


class ModelServerError(ModelProviderError):
    """The provider failed on its side (HTTP 5xx)."""

    code = "model.server"
    default_retryable = True


class ModelAuthError(ModelProviderError):
    """The provider refused the credentials (401/403) or no key was available."""

    code = "model.auth"


class ModelBadRequestError(ModelProviderError):
    """The provider refused the request (4xx other than 401/403/429)."""

    code = "model.bad_request"


class ModelNotFoundError(ModelBadRequestError):
    """The provider does not know the model (404)."""

    code = "model.not_found"


class ModelContextWindowError(ModelBadRequestError):
    """The prompt does not fit the model's context window."""

    code = "model.context_window"
