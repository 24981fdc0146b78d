"""litellm exceptions translated once into :mod:`codeact.engine.model.errors` (``map_litellm_errors``)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from codeact.engine.errors import ModelError
from codeact.engine.model._litellm import _litellm
from codeact.engine.model.errors import (
    ModelAuthError,
    ModelBadRequestError,
    ModelConnectionError,
    ModelContextWindowError,
    ModelNotFoundError,
    ModelProviderError,
    ModelRateLimitError,
    ModelServerError,
    ModelTimeoutError,
)

# A key the client never had (the SDK refuses before any request; litellm reports it as HTTP 500).
MISSING_KEY = re.compile(
    r"missing credentials|api_key client option must be set|api[_ ]key (?:is )?(?:missing|not (?:set|found|provided))"
    r"|set the `?[A-Z][A-Z0-9_]*_API_KEY",
    re.IGNORECASE,
)
_PREFIX = re.compile(r"^(?:litellm\.\w+:\s*)?(?:\w+Error:\s*)?(?:\w+Exception\s*-\s*)?")


def _detail(exc: BaseException) -> str:
    text = str(getattr(exc, "message", None) or exc) or type(exc).__name__
    text = _PREFIX.sub("", text.strip(), count=1).strip()
    text = text.split("\nReceived Model Group", 1)[0]
    return text if len(text) <= 400 else text[:397] + "..."


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        yield current
        seen.add(id(current))
        current = current.__cause__ or current.__context__


def _inner_model_error(exc: BaseException) -> ModelError | None:
    return next((e for e in _chain(exc) if isinstance(e, ModelError)), None)


def _transport_error(exc: BaseException) -> type[ModelProviderError] | None:
    """The real failure under litellm's wrapper (it reports a refused connection as HTTP 500)."""
    import httpx
    import openai

    for inner in _chain(exc):
        if isinstance(inner, openai.APITimeoutError | httpx.TimeoutException | TimeoutError):
            return ModelTimeoutError
        if isinstance(inner, openai.APIConnectionError | httpx.TransportError | ConnectionError):
            return ModelConnectionError
    return None


def retry_after_of(headers: Mapping[str, str] | None) -> float | None:
    """The seconds a response's ``retry-after`` header asks for (None: absent or not a number)."""
    if headers is None:
        return None
    try:
        value = headers.get("retry-after")
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def status_error_class(status: int | None) -> type[ModelProviderError]:
    """The error class an HTTP status means.

    429 rate limited, 401/403 refused credentials, 404 not found, 5xx the server's fault, another 4xx a
    bad request; anything else a provider error.
    """
    if status == 429:
        return ModelRateLimitError
    if status in (401, 403):
        return ModelAuthError
    if status == 404:
        return ModelNotFoundError
    if status is not None and status >= 500:
        return ModelServerError
    if status is not None and 400 <= status < 500:
        return ModelBadRequestError
    return ModelProviderError


def _translate(exc: Exception, *, model: str | None, provider: str | None) -> ModelError:
    inner = _inner_model_error(exc)
    if inner is not None:
        return inner
    litellm = _litellm()  # already imported: the exception came from it

    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    cls: type[ModelProviderError]
    transport = _transport_error(exc)
    if isinstance(exc, litellm.ContextWindowExceededError):
        cls = ModelContextWindowError
    elif any(MISSING_KEY.search(str(e)) for e in _chain(exc)):
        cls = ModelAuthError  # a local configuration error: never retried
        status = None
    elif isinstance(exc, litellm.Timeout):
        cls = ModelTimeoutError
    elif transport is not None:
        cls = transport
        status = None
    else:
        # litellm's own class, else what the status means, in this order (a 429 is rate limiting first)
        by_status = status_error_class(status)
        by_type: tuple[tuple[type[ModelProviderError], tuple[type[BaseException], ...]], ...] = (
            (ModelRateLimitError, (litellm.RateLimitError,)),
            (ModelAuthError, (litellm.AuthenticationError, litellm.PermissionDeniedError)),
            (ModelNotFoundError, (litellm.NotFoundError,)),
            (ModelServerError, (litellm.ServiceUnavailableError, litellm.InternalServerError, litellm.BadGatewayError)),
            (ModelBadRequestError, (litellm.BadRequestError,)),
        )
        cls = next((c for c, types in by_type if isinstance(exc, types) or by_status is c), ModelProviderError)
    return cls(
        _detail(exc),
        status_code=status,
        provider=provider or getattr(exc, "llm_provider", None),
        model=model,
        retry_after=retry_after_of(getattr(getattr(exc, "response", None), "headers", None)),
    )


@contextmanager
def map_litellm_errors(*, model: str | None = None, provider: str | None = None) -> Iterator[None]:
    """Translate any exception raised inside into a :class:`~codeact.engine.errors.ModelError` subclass.

    A ``ModelError`` raised by our own code (the scripted provider) is re-raised as it is, even when
    litellm wrapped it. Retryable classes: rate limit, connection, timeout, 5xx.

    Args:
        model: The model the call was for (an attribute of the error).
        provider: The litellm provider (an attribute of the error).
    """
    try:
        yield
    except ModelError:
        raise
    except Exception as exc:
        raise _translate(exc, model=model, provider=provider) from exc


_WHAT = {
    ModelRateLimitError: "was rate limited",
    ModelTimeoutError: "timed out",
    ModelConnectionError: "could not be reached",
    ModelServerError: "failed on the provider's side",
    ModelAuthError: "refused the credentials",
    ModelContextWindowError: "got a prompt larger than its context window",
    ModelNotFoundError: "was not found",
    ModelBadRequestError: "refused the request",
}


def _what(error: ModelProviderError) -> str:
    for cls in type(error).__mro__:
        if cls in _WHAT:
            return _WHAT[cls]
    return "failed"
