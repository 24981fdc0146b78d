"""Which models get image parts (docs/runner.md "Images and files in the input"): the option, else litellm."""

from __future__ import annotations

import pytest

from codeact.engine.model import ModelClient, ModelSettings


@pytest.mark.parametrize(
    ("model", "options", "expected"),
    [
        pytest.param("openai/gpt-4o", {}, True, id="litellm-says-vision"),
        pytest.param("openai/test-model", {}, False, id="unknown-model"),
        pytest.param("openai/gpt-3.5-turbo", {}, False, id="litellm-says-text"),
        pytest.param("openai/test-model", {"vision": True}, True, id="option-true"),
        pytest.param("openai/gpt-4o", {"vision": False}, False, id="option-false"),
    ],
)
def test_the_option_decides_else_litellms_model_info(
    monkeypatch: pytest.MonkeyPatch, model: str, options: dict[str, bool], expected: bool
) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    client = ModelClient(ModelSettings(model=model, options=options))
    assert client.supports_vision(purpose="code") is expected


def test_vision_is_never_sent_to_the_provider() -> None:
    client = ModelClient(ModelSettings(model="openai/test-model", options={"vision": True, "temperature": 0.1}))
    settings = client.settings_for("code")
    kwargs = client._kwargs(settings, client._route("code"), purpose="code", raw=False, stop=None, tools=None)
    assert "vision" not in kwargs and kwargs["temperature"] == 0.1
