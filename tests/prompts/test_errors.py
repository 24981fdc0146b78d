"""The error value (``ErrorInfo``) and the exception root: exact JSON in both directions."""

from __future__ import annotations

import pytest

from codeact.prompts.errors import CodeactError, ErrorInfo


@pytest.mark.parametrize(
    "data",
    [
        pytest.param({"code": "run.time_limit", "message": "too slow"}, id="code-message"),
        pytest.param({"code": "x", "message": "m", "retryable": True}, id="with-details"),
        pytest.param({"code": "service.invalid", "message": "m", "errors": [{"loc": ["a"]}]}, id="nested-details"),
    ],
)
def test_round_trip_is_exact(data: dict[str, object]) -> None:
    out = ErrorInfo.from_dict(data).to_dict()
    assert out == data
    assert list(out) == list(data)


def test_to_dict_orders_code_message_then_details() -> None:
    info = ErrorInfo(code="c", message="m", details={"retryable": False})
    assert list(info.to_dict()) == ["code", "message", "retryable"]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(None, ErrorInfo(code="", message=""), id="none"),
        pytest.param("boom", ErrorInfo(code="", message="boom"), id="text"),
        pytest.param({"message": 3}, ErrorInfo(code="", message="3"), id="missing-code"),
    ],
)
def test_from_dict_reads_untrusted_data(data: object, expected: ErrorInfo) -> None:
    assert ErrorInfo.from_dict(data) == expected


def test_exception_info() -> None:
    assert CodeactError("bad", code="a.b").info() == ErrorInfo(code="a.b", message="bad")
    assert CodeactError("bad").info().to_dict() == {"code": "codeact.error", "message": "bad"}
