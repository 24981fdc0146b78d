"""How :class:`~codeact.engine.model.settings.ModelSettings` become litellm calls.

Chat (``messages``) always goes to ``litellm.acompletion(model=<chat model>)``; the chat model is
``<provider>/<model>`` (the prefix is added when the model name lacks it; with ``api_base``, no provider and a model
name that does not start with a litellm provider, the server is taken to be OpenAI-compatible:
``openai/<model>``).

A raw prompt with ``protocol: completion`` must reach a real ``/v1/completions`` endpoint, unwrapped,
because a FIM prompt is meaningless as a chat message. litellm only does that on two routes, so:

==================================================  =============================================
settings                                            raw completion route
==================================================  =============================================
``text-completion-openai/M`` / ``text-completion-   as given
codestral/M``
``openai/M`` (also ``openai-compatible``,           ``text-completion-openai/M`` at ``api_base``
``hosted_vllm``, ``openai_like``, ``lm_studio``,    (OpenAI's own API when ``api_base`` is unset)
``llamafile``, ``vllm``)
``ollama/M`` / ``ollama_chat/M``                    ``text-completion-openai/M`` at
                                                    ``<api_base or http://localhost:11434>/v1``
                                                    (Ollama's OpenAI-compatible API)
``codestral/M`` / ``mistral/codestral-*``           ``text-completion-codestral/M``
``scripted/...``                                    the scripted provider (it records the prompt)
anything else (anthropic, gemini, bedrock, ...)     none: ModelConfigError (use ``--protocol chat``
                                                    or serve the model behind ``--base-url``)
==================================================  =============================================

A raw prompt with ``protocol: chat`` is sent as a single user message.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from codeact.engine.model.scripted import SCRIPTED_PREFIX
from codeact.engine.model.settings import ModelSettings

__all__ = ["Route", "route_for"]

_OPENAI_LIKE = frozenset({"openai", "hosted_vllm", "openai_like", "lm_studio", "llamafile", "vllm"})
_RAW_PREFIXES = ("text-completion-openai/", "text-completion-codestral/")
_OLLAMA_DEFAULT = "http://localhost:11434"


@dataclass(frozen=True, kw_only=True)
class Route:
    """The litellm side of one model route.

    Attributes:
        display: The model as the user named it (``ModelReply.model``).
        chat_model: litellm model for chat calls.
        api_base: Base URL for chat calls.
        text_model: litellm model for raw completion calls; None when the provider has no raw endpoint.
        text_api_base: Base URL for raw completion calls.
        provider: The litellm provider, for error attributes and key lookup.
        scripted: True for the scripted provider.
        text_unavailable: Why ``text_model`` is None (for the error message).
        local: True for a ``local/NAME`` model served by the embedded llama.cpp server.
        min_timeout_s: A floor for the per-attempt timeout (a local model on a busy CPU is slow, not gone).
    """

    display: str
    chat_model: str
    api_base: str | None
    text_model: str | None
    text_api_base: str | None
    provider: str | None
    scripted: bool = False
    text_unavailable: str = ""
    local: bool = False
    min_timeout_s: float = 0.0


def _ensure_v1(base: str) -> str:
    base = base.rstrip("/")
    return base if base.endswith("/v1") else base + "/v1"


def route_for(
    settings: ModelSettings,
    *,
    infer_provider: Callable[[str], str | None],
    is_provider: Callable[[str], bool],
) -> Route:
    """Compute the litellm models and base URLs for ``settings`` (see the module docstring).

    Args:
        settings: The route's settings.
        infer_provider: litellm's guess of the provider for a model name without a prefix
            (``gpt-4.1-mini`` -> ``openai``); None when it cannot tell.
        is_provider: Whether a name is a litellm provider (``qwen/qwen2.5-coder`` at a base URL is an
            OpenAI-compatible model named ``qwen/qwen2.5-coder``, ``ollama/qwen`` is Ollama's ``qwen``).
    """
    model, provider, api_base = settings.model, settings.provider, settings.api_base
    if model.startswith(SCRIPTED_PREFIX) or provider == "scripted":
        full = model if model.startswith(SCRIPTED_PREFIX) else SCRIPTED_PREFIX + model
        return Route(display=full, chat_model=full, api_base=None, text_model=full, text_api_base=None,
                     provider="scripted", scripted=True)  # fmt: skip
    if model.startswith(_RAW_PREFIXES):
        rest = model.split("/", 1)[1]
        chat_provider = "openai" if model.startswith("text-completion-openai/") else "codestral"
        return Route(display=model, chat_model=f"{chat_provider}/{rest}", api_base=api_base, text_model=model,
                     text_api_base=api_base, provider=chat_provider)  # fmt: skip
    head = model.split("/", 1)[0] if "/" in model else None
    if provider is None and api_base is not None and (head is None or not is_provider(head)):
        provider = "openai"
    if provider is not None and not model.startswith(provider + "/"):
        full = f"{provider}/{model}"
    else:
        full = model
    if "/" in full:
        prefix, rest = full.split("/", 1)
    else:
        prefix, rest = infer_provider(full) or "", full

    text_model: str | None = None
    text_base = api_base
    if prefix in _OPENAI_LIKE:
        text_model = f"text-completion-openai/{rest}"
    elif prefix in ("ollama", "ollama_chat"):
        text_model = f"text-completion-openai/{rest}"
        text_base = _ensure_v1(api_base or _OLLAMA_DEFAULT)
    elif prefix == "codestral" or (prefix == "mistral" and rest.startswith("codestral")):
        text_model = f"text-completion-codestral/{rest}"
    unavailable = (
        ""
        if text_model
        else (
            f"protocol 'completion' needs a raw /v1/completions endpoint and provider {prefix or 'unknown'!r} "
            f"(model {full!r}) has none: use --protocol chat, or serve the model behind an OpenAI-compatible "
            "server and pass --base-url"
        )
    )
    # A server on this machine (llama.cpp, vLLM, Ollama, LM Studio) is a local model: on a busy CPU it is
    # slow, not gone, and it has no rate limit to protect (issue 39: a 1.5B reply on a busy machine
    # outlasted the hosted attempt limit, HTTP 408, and the task was lost in round 1).
    on_host = _on_this_machine(text_base if prefix in ("ollama", "ollama_chat") else api_base)
    return Route(display=full, chat_model=full, api_base=api_base, text_model=text_model, text_api_base=text_base,
                 provider=prefix or None, text_unavailable=unavailable,
                 min_timeout_s=LOCAL_SERVER_TIMEOUT_S if on_host else 0.0)  # fmt: skip


LOCAL_SERVER_TIMEOUT_S = 900.0
"""The per-attempt timeout floor of a model served on this machine (``local/NAME`` or a loopback base URL):
a 1,500-token prompt takes 15-30 s on two idle cores and minutes beside busy jobs (docs/models.md)."""


def _on_this_machine(base: str | None) -> bool:
    """Whether ``base`` is a loopback address (127.0.0.0/8, ``localhost``, ``[::1]``)."""
    if not base:
        return False
    from urllib.parse import urlsplit

    try:
        host = urlsplit(base if "//" in base else f"http://{base}").hostname or ""
    except ValueError:
        return False
    return host == "localhost" or host == "::1" or host.startswith("127.")
