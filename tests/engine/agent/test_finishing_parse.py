"""How a final-answer reply is read, and which layout a model gets (issue 39)."""

from __future__ import annotations

from typing import Any

import pytest

from codeact.engine.agent.finishing import parse_answer
from codeact.engine.model.local import choose_layout


@pytest.mark.parametrize(
    ("reply", "found", "answer"),
    [
        pytest.param("3", True, 3, id="number"),
        pytest.param("Answer: 0.697", True, 0.697, id="labelled"),
        pytest.param("The shortest sequence is GC.\n2", True, 2, id="prose-then-value"),
        pytest.param("```python\nawait system.finish(answer='fchahcufcu')\n```", True, "fchahcufcu", id="finish-call"),
        pytest.param("['A', 4]", True, ["A", 4], id="tuple-as-list"),
        pytest.param("bring three lanterns", True, "bring three lanterns", id="text"),
        pytest.param("answer", True, 3, id="a-variable-name"),
        pytest.param("UNKNOWN", False, None, id="unknown"),
        pytest.param("x = 1", False, None, id="an-assignment"),
        pytest.param("Thought: I count.\n```python\nk += 1\nprint(k)\n```", False, None, id="prose-and-code"),
        pytest.param("Done.\n```python\nawait system.finish(answer=2)\n```", True, 2, id="prose-and-finish"),
        pytest.param("print(shortest)", False, None, id="a-call"),
        pytest.param("   ", False, None, id="empty"),
    ],
)
def test_a_final_answer_reply_is_read_as_small_models_write_it(reply: str, found: bool, answer: Any) -> None:
    assert parse_answer(reply, variables={"answer": 3}) == (found, answer)


@pytest.mark.parametrize(
    ("model", "provider", "layout", "reason"),
    [
        pytest.param("local/qwen2.5-coder-1.5b", "local", "turns", "qwen2.5-coder-1.5b, a known model", id="local"),
        pytest.param(
            "openai/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            None,
            "turns",
            "qwen2.5-coder-1.5b, a known model",
            id="url",
        ),
        pytest.param("ollama/qwen2.5-coder:1.5b", None, "turns", "qwen2.5-coder-1.5b, a known model", id="ollama"),
        pytest.param(
            "hosted_vllm/Qwen/Qwen2.5-Coder-0.5B-Instruct", None, "turns", "qwen2.5-coder-0.5b, a known model", id="hf"
        ),
        pytest.param("openai/llama3.2:3b", None, "turns", "a 3B model", id="small-by-size"),
        pytest.param("openai/llama-3.1-70b-instruct", None, "frame", "a 70B model", id="large-by-size"),
        pytest.param("local/my-model", "local", "turns", "a local model", id="unknown-local"),
        pytest.param("gpt-4.1-mini", "openai", "frame", "the default for a model of unstated size", id="hosted"),
    ],
)
def test_the_layout_follows_the_model_not_the_route(model: str, provider: str | None, layout: str, reason: str) -> None:
    choice = choose_layout(model, provider)
    assert (choice.layout, choice.reason) == (layout, reason)
