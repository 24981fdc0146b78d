"""The static provider list ``codeact validate`` checks against (issue 35 item 3), and that it stays litellm's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from codeact.engine.model.providers import LITELLM_PROVIDERS, known_provider, provider_suggestion

ROOT = Path(__file__).resolve().parents[3]


def test_the_static_list_is_litellms_provider_list() -> None:
    import litellm

    # provider_list as litellm imports it; registering a custom provider (codeact's scripted) appends to it.
    custom = {str(entry.get("provider")) for entry in litellm.custom_provider_map}
    installed = {str(getattr(provider, "value", provider)) for provider in litellm.provider_list} - custom
    # On a failure: regenerate LITELLM_PROVIDERS in engine/model/providers.py (its docstring says how).
    assert sorted(installed - LITELLM_PROVIDERS) == []
    assert sorted(LITELLM_PROVIDERS - installed) == []


@pytest.mark.parametrize(
    ("name", "known", "suggestion"),
    [
        pytest.param("openai", True, "openai", id="litellm"),
        pytest.param(" OpenAI ", True, "openai", id="any-case"),
        pytest.param("openai-compatible", True, "openai-compatible", id="codeact-own"),
        pytest.param("local", True, "local", id="local"),
        pytest.param("scripted", True, "scripted", id="scripted"),
        pytest.param("opnai", False, "openai", id="typo"),
        pytest.param("anthropc", False, "anthropic", id="typo-2"),
        pytest.param("openai-compatable", False, "openai-compatible", id="typo-own"),
        pytest.param("p", False, None, id="far"),
    ],
)
def test_known_provider_and_suggestion(name: str, known: bool, suggestion: str | None) -> None:
    assert known_provider(name) is known
    assert provider_suggestion(name) == suggestion


def test_validating_a_provider_does_not_import_litellm() -> None:
    code = (
        "import sys\n"
        "from codeact.engine.blueprint import load_text, validate_blueprint\n"
        "report = validate_blueprint(load_text('version: codeact.agent/v1\\nid: a\\n"
        "model: {provider: opnai, model: gpt-4.1-mini}\\n'))\n"
        "print(report.codes(), 'litellm' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "['blueprint.model.provider.unknown'] False"
