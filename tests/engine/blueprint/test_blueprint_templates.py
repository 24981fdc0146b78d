from __future__ import annotations

import datetime as dt

import pytest

from codeact.engine.blueprint.templates import BUILTIN_VARIABLES, builtin_variables, render_template
from codeact.engine.errors import TemplateError


def test_variables_and_builtins_render() -> None:
    variables = {**builtin_variables(now=dt.datetime(2025, 1, 2, tzinfo=dt.UTC), work_dir="/w"), "name": "Ada"}
    text = "{{ name }} | {{ work_dir }} | {{ now.year }} | {{ os }}"
    assert render_template("instructions.system", text, variables).split(" | ")[:3] == ["Ada", "/w", "2025"]
    assert BUILTIN_VARIABLES == ("now", "os", "work_dir")


def test_undefined_variable_names_template_and_variable() -> None:
    with pytest.raises(TemplateError) as caught:
        render_template("instructions.developer", "{{ a }} {{ zed }} {{ b }}", {"a": 1})
    assert (caught.value.template, caught.value.variable) == ("instructions.developer", "b")
    assert caught.value.message == (
        "instructions.developer uses undefined variable 'b'; define it under instructions.variables "
        "(built-ins: now, os, work_dir)."
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "{{ cfg.missing }}",
            "instructions.system uses an undefined value: 'dict object' has no attribute 'missing'. "
            "Define it under instructions.variables.",
            id="undefined-attribute",
        ),
        pytest.param(
            "{{ ''.__class__.__mro__ }}",
            "instructions.system failed to render: access to attribute '__class__' of 'str' object is unsafe. "
            "Fix the template.",
            id="sandboxed",
        ),
        pytest.param(
            "{% set x = cfg.update({'a': 1}) %}",
            "instructions.system failed to render: access to attribute 'update' of 'dict' object is unsafe. "
            "Fix the template.",
            id="immutable",
        ),
        pytest.param(
            "{{ 1 + }}",
            "instructions.system is not a valid template: unexpected 'end of print statement' "
            "(line 1). Fix the Jinja syntax.",
            id="syntax",
        ),
    ],
)
def test_template_failures(text: str, message: str) -> None:
    with pytest.raises(TemplateError) as caught:
        render_template("instructions.system", text, {"cfg": {}})
    assert caught.value.message == message and caught.value.variable is None
