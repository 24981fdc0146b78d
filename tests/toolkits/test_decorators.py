from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any, Literal

import pytest

from codeact.toolkits import (
    OperationSpec,
    ToolkitContext,
    ToolkitDefinitionError,
    bind_toolkit,
    operation,
    toolkit,
)
from tests.toolkits.sample import DevOps, Weather


def _define_missing_annotation() -> None:
    @toolkit(name="bad", description="d")
    class Bad:
        @operation
        def op(self, project_id) -> str:  # type: ignore[no-untyped-def]
            """Doc."""
            return ""


def _define_callable_param() -> None:
    @toolkit(name="bad", description="d")
    class Bad:
        @operation
        def op(self, callback: Callable[[], None]) -> str:
            """Doc."""
            return ""


def _define_no_docstring() -> None:
    @toolkit(name="bad", description="d")
    class Bad:
        @operation
        def op(self, x: int) -> str:
            return ""


def _define_no_operations() -> None:
    @toolkit(name="bad", description="d")
    class Bad:
        def op(self, x: int) -> str:
            """Doc."""
            return ""


def _define_bad_name() -> None:
    @toolkit(name="my-tools", description="d")
    class Bad:
        @operation
        def op(self) -> str:
            """Doc."""
            return ""


def _define_private_op() -> None:
    @toolkit(name="bad", description="d")
    class Bad:
        @operation
        def _op(self) -> str:
            """Doc."""
            return ""


def _define_varargs() -> None:
    @toolkit(name="bad", description="d")
    class Bad:
        @operation
        def op(self, *items) -> str:  # type: ignore[no-untyped-def]
            """Doc."""
            return ""


def _define_bad_approval() -> None:
    @toolkit(name="bad", description="d")
    class Bad:
        @operation(approval="maybe")  # type: ignore[call-overload]
        def op(self) -> str:
            """Doc."""
            return ""


def _define_bad_timeout() -> None:
    @toolkit(name="bad", description="d")
    class Bad:
        @operation(timeout=0)
        def op(self) -> str:
            """Doc."""
            return ""


def _define_doc_typo() -> None:
    @toolkit(name="bad", description="d")
    class Bad:
        @operation
        def op(self, project_id: str) -> str:
            """Doc.

            Args:
                projectid: The id.
            """
            return ""


def _define_unresolvable_hint() -> None:
    @toolkit(name="bad", description="d")
    class Bad:
        @operation
        def op(self, x: NotDefinedAnywhere) -> str:  # type: ignore[name-defined]  # noqa: F821
            """Doc."""
            return ""


def _define_no_description() -> None:
    @toolkit(name="bad")
    class Bad:
        @operation
        def op(self) -> str:
            """Doc."""
            return ""


@pytest.mark.parametrize(
    ("define", "message"),
    [
        pytest.param(
            _define_missing_annotation,
            "operation _define_missing_annotation.<locals>.Bad.op: parameter 'project_id' has no type annotation; "
            "annotate it (for example `project_id: str`)",
            id="missing-annotation",
        ),
        pytest.param(
            _define_callable_param,
            "operation _define_callable_param.<locals>.Bad.op: parameter 'callback' has type Callable[[], None], "
            "which cannot cross the bridge as JSON; use JSON-able types: str, int, float, bool, None, list, dict, "
            "tuple, set, Literal, datetime, date, Decimal, bytes, a pydantic model or a TypedDict",
            id="callable-param",
        ),
        pytest.param(
            _define_no_docstring,
            "operation _define_no_docstring.<locals>.Bad.op has no docstring: add one; its first line is what the "
            "model reads",
            id="no-docstring",
        ),
        pytest.param(
            _define_no_operations,
            "@toolkit on _define_no_operations.<locals>.Bad: no operations; decorate at least one method with "
            "@operation",
            id="no-operations",
        ),
        pytest.param(
            _define_bad_name,
            "@toolkit on _define_bad_name.<locals>.Bad: toolkit name 'my-tools' is not allowed; use a Python "
            "identifier that does not start with '_' (for example 'devops')",
            id="bad-name",
        ),
        pytest.param(
            _define_private_op,
            "@operation on _define_private_op.<locals>.Bad._op: private methods cannot be operations; rename it "
            "without the leading '_'",
            id="private-op",
        ),
        pytest.param(
            _define_varargs,
            "operation _define_varargs.<locals>.Bad.op: parameter 'items' has no type annotation; annotate it "
            "(for example `*items: str`)",
            id="varargs-unannotated",
        ),
        pytest.param(
            _define_bad_approval,
            "@operation on _define_bad_approval.<locals>.Bad.op: approval must be one of 'auto', 'ask', 'deny', "
            "got 'maybe'",
            id="bad-approval",
        ),
        pytest.param(
            _define_bad_timeout,
            "@operation on _define_bad_timeout.<locals>.Bad.op: timeout must be a positive number of seconds, got 0",
            id="bad-timeout",
        ),
        pytest.param(
            _define_doc_typo,
            "operation _define_doc_typo.<locals>.Bad.op: the docstring describes 'projectid', which is not a "
            "parameter; fix the Args: section",
            id="docstring-typo",
        ),
        pytest.param(
            _define_unresolvable_hint,
            "operation _define_unresolvable_hint.<locals>.Bad.op: cannot resolve its type hints: name "
            "'NotDefinedAnywhere' is not defined",
            id="unresolvable-hint",
        ),
        pytest.param(
            _define_no_description,
            "@toolkit on _define_no_description.<locals>.Bad: no description; pass @toolkit(name='bad', "
            "description=...) or give the class a docstring",
            id="no-description",
        ),
    ],
)
def test_definition_errors_name_the_method(define: Callable[[], None], message: str) -> None:
    with pytest.raises(ToolkitDefinitionError) as info:
        define()
    assert info.value.message == message
    assert info.value.code == "toolkit.definition"


def test_schema_from_hints_and_docstring() -> None:
    bound = bind_toolkit(DevOps)
    spec = bound.operations["search_requirements"]
    assert spec.summary == "Search the requirements of a project."
    assert [(p.name, p.annotation, p.required, p.default) for p in spec.parameters] == [
        ("project_id", "str", True, None),
        ("query", "str", True, None),
        ("limit", "int", False, 10),
    ]
    assert spec.json_schema == {
        "type": "object",
        "properties": {
            "project_id": {"type": "string", "description": "The project's id."},
            "query": {"type": "string", "description": "Words to look for in titles."},
            "limit": {"type": "integer", "default": 10, "description": "At most this many results."},
        },
        "required": ["project_id", "query"],
        "additionalProperties": False,
    }
    assert spec.approval == "auto"
    assert spec.timeout is None


def test_schema_of_models_literals_and_options() -> None:
    bound = bind_toolkit(DevOps)
    deploy = bound.operations["deploy_app"]
    assert deploy.approval == "ask"
    assert deploy.timeout == 5
    assert deploy.parameters[2].annotation == "Literal['rolling', 'blue_green']"
    assert deploy.json_schema["properties"]["strategy"] == {
        "enum": ["rolling", "blue_green"],
        "type": "string",
        "default": "rolling",
        "description": "How to roll it out.",
    }
    create = bound.operations["create_requirement"]
    assert create.parameters[1].annotation == "dict"
    assert create.json_schema["$defs"]["Requirement"]["required"] == ["title"]
    assert create.returns == "str"
    info = bound.operations["get_project_info"]
    assert info.returns == "dict[str, Any]"
    assert info.returns_description == "The project's id, name and status."


def test_context_parameter_is_not_in_the_schema() -> None:
    spec = bind_toolkit(DevOps).operations["whoami"]
    assert spec.parameters == ()
    assert spec.json_schema["properties"] == {}


@pytest.mark.parametrize(
    ("hint", "rendered"),
    [
        pytest.param(int, "int", id="int"),
        pytest.param(list[str], "list[str]", id="list"),
        pytest.param(dict[str, list[int]], "dict[str, list[int]]", id="nested"),
        pytest.param(str | None, "str | None", id="optional"),
        pytest.param(Literal["a", 1], "Literal['a', 1]", id="literal"),
        pytest.param(dt.datetime, "datetime", id="datetime"),
        pytest.param(tuple[int, ...], "tuple[int, ...]", id="tuple"),
        pytest.param(Any, "Any", id="any"),
    ],
)
def test_annotation_rendering(hint: Any, rendered: str) -> None:
    @toolkit(name="t", description="d")
    class T:
        @operation
        def op(self, x: hint) -> None:  # type: ignore[valid-type]
            """Doc."""

    assert bind_toolkit(T).operations["op"].parameters[0].annotation == rendered


def test_parameter_named_like_a_basemodel_attribute() -> None:
    @toolkit(name="t", description="d")
    class T:
        @operation
        def op(self, json: int, schema: str = "x", model_config: bool = False) -> list[Any]:
            """Doc."""
            return [json, schema, model_config]

    bound = bind_toolkit(T)
    assert bound.validate("op", {"json": "3"}) == {"json": 3, "schema": "x", "model_config": False}


def test_sync_and_async_methods_both_run() -> None:
    import asyncio

    bound = bind_toolkit(DevOps)
    ctx = ToolkitContext(session_id="s")
    assert asyncio.run(bound.call("get_project_info", {"project_id": "1"}, ctx))["id"] == "1"
    assert asyncio.run(bound.call("search_requirements", {"project_id": "1", "query": "q", "limit": 1}, ctx)) == [
        {"id": "R0", "title": "q #0"}
    ]


def test_dynamic_toolkit_spec_from_json_schema() -> None:
    bound = bind_toolkit(Weather())
    spec = bound.operations["forecast"]
    assert [(p.name, p.annotation, p.required) for p in spec.parameters] == [
        ("city", "str", True),
        ("days", "int", False),
        ("unit", "Literal['C', 'F'] | None", False),
    ]
    assert bound.validate("forecast", {"city": "Paris"}) == {"city": "Paris"}


def test_operation_spec_rejects_bad_names() -> None:
    with pytest.raises(ToolkitDefinitionError) as info:
        OperationSpec(name="_hidden", description="d")
    assert info.value.message == (
        "operation name '_hidden' is not allowed: use a Python identifier that does not start with '_'"
    )
