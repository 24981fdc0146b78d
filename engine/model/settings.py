"""The records of the model client: what to call (:class:`ModelSettings`) and what came back."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

__all__ = ["ModelProtocol", "ModelReply", "ModelSettings", "ToolCall", "normalize_options"]

_V = TypeVar("_V")

ModelProtocol = Literal["chat", "completion"]

# Blueprint (ai4j) spellings -> litellm/OpenAI parameter names. Unknown keys pass through unchanged.
_OPTION_ALIASES = {
    "topP": "top_p",
    "maxOutputTokens": "max_tokens",
    "max_output_tokens": "max_tokens",
    "maxTokens": "max_tokens",
    "presencePenalty": "presence_penalty",
    "frequencyPenalty": "frequency_penalty",
    "stopSequences": "stop",
    "stop_sequences": "stop",
}


def normalize_options(options: Mapping[str, _V]) -> dict[str, _V]:
    """Map blueprint option names (``topP``, ``maxOutputTokens``, ...) to litellm's (``top_p``, ``max_tokens``).

    Args:
        options: Model options as written in a blueprint or profile.

    Returns:
        A new dict with litellm parameter names; unknown names are kept as they are.
    """
    return {_OPTION_ALIASES.get(key, key): value for key, value in options.items()}


@dataclass(frozen=True, kw_only=True)
class ModelSettings:
    """One model route: which model, where, with which options.

    Attributes:
        model: A litellm model name (``openai/gpt-4.1-mini``, ``ollama/qwen2.5-coder``) or
            ``scripted/<path to a reply file>``; without a provider prefix ``provider`` is prepended.
        provider: litellm provider (``openai``, ``ollama``, ``anthropic``...); ``openai-compatible``
            is normalized to ``openai`` (an OpenAI-compatible server at ``api_base``).
        api_base: Base URL of the server (``http://localhost:8000/v1``).
        api_key_env: Name of the environment variable holding the key (never the key itself);
            None lets litellm read its usual variable (``OPENAI_API_KEY``...).
        options: litellm parameters (``temperature``, ``top_p``, ``max_tokens``, ``stop``...).
        protocol: ``chat`` (messages) or ``completion`` (a raw prompt to ``/v1/completions``).
        timeout_s: Per-attempt timeout.
        max_retries: Retries after the first attempt on retryable failures.
        context_window: Overrides the context window litellm reports for the model.
        profile: The profile these settings came from, for messages.
    """

    model: str
    provider: str | None = None
    api_base: str | None = None
    api_key_env: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    protocol: ModelProtocol = "chat"
    timeout_s: float = 120.0
    max_retries: int = 3
    context_window: int | None = None
    profile: str | None = None


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    """A function call the model asked for (react mode).

    Attributes:
        id: The provider's call id (echo it in the ``tool`` message).
        name: The function name.
        arguments: Decoded JSON arguments; ``{}`` when ``raw_arguments`` was not a JSON object.
        raw_arguments: The arguments exactly as the model produced them.
    """

    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str = ""

    @property
    def arguments_valid(self) -> bool:
        """False when the model's arguments were not a JSON object (the loop reports that back)."""
        return bool(self.arguments) or self.raw_arguments.strip() in ("", "{}")


@dataclass(frozen=True, kw_only=True)
class ModelReply:
    """What one model call returned.

    Attributes:
        text: The reply text (the FIM middle for the completion protocol).
        model: The model that answered, as it was routed (``openai/gpt-4.1-mini``, ``scripted/demo.yaml``).
        usage: ``prompt_tokens``, ``completion_tokens``, ``total_tokens`` (zeros when unknown).
        cost_usd: Cost according to litellm's price map; None when the model is not priced.
        finish_reason: ``stop``, ``length``, ``tool_calls``... when the provider said.
        latency_s: Wall time of the successful attempt.
        tool_calls: Function calls requested by the model (react mode).
        attempts: Attempts made (1 + retries).
        purpose: The route used (``code``, ``thought``, ``utility``).
    """

    text: str
    model: str
    usage: dict[str, int]
    cost_usd: float | None
    finish_reason: str | None
    latency_s: float
    tool_calls: tuple[ToolCall, ...] = ()
    attempts: int = 1
    purpose: str = "code"
