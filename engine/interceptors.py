"""The one guard around an interceptor, for model calls (``engine/agent``) and toolkit calls (``engine/calls``).

An interceptor wraps a call: ``await interceptor.intercept_model(request, call_next)`` (or ``intercept_tool``).
:func:`chain` composes a list of them around the call, the first one outermost, and tells apart what an
interceptor raised itself from what came out of its ``call_next``: only the first is handed to ``on_error``
with the interceptor's name (:func:`interceptor_name`), so the refusal or failure names the interceptor that
raised, never one that merely passed an error of the call on.

A leaf: it imports nothing of the product, so a toolkit call that goes through it never runs the run's code
(``tests/engine/agent/test_call_path.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

__all__ = ["chain", "interceptor_name"]

_Req = TypeVar("_Req")  # what a chain of interceptors passes along: a ModelCall or a ToolCall
_Resp = TypeVar("_Resp")  # and what comes back


def interceptor_name(hook: object) -> str:
    """A hook's or interceptor's name: its ``name`` attribute unless left at the default, else its class name."""
    name = getattr(hook, "name", None)
    return name if isinstance(name, str) and name and name != "hook" else type(hook).__name__


def chain(
    interceptors: Sequence[object],
    method: str,
    final: Callable[[_Req], Awaitable[_Resp]],
    *,
    on_error: Callable[[str, Exception], BaseException] | None = None,
) -> Callable[[_Req], Awaitable[_Resp]]:
    """Compose ``interceptors`` around ``final``; the first one is the outermost.

    Args:
        interceptors: The interceptors; those without ``method`` are left out.
        method: ``intercept_model`` or ``intercept_tool``.
        final: The call the innermost interceptor's ``call_next`` makes.
        on_error: Given the name of an interceptor and an exception it raised itself (one that did not
            come out of its ``call_next`` unchanged), returns the exception to raise instead (or the same).
    """
    call: Callable[[_Req], Awaitable[_Resp]] = final
    for interceptor in reversed([i for i in interceptors if hasattr(i, method)]):
        call = _guarded(getattr(interceptor, method), interceptor_name(interceptor), call, on_error)
    return call


def _guarded(
    bound: Callable[[_Req, Callable[[_Req], Awaitable[_Resp]]], Awaitable[_Resp]],
    name: str,
    inner: Callable[[_Req], Awaitable[_Resp]],
    on_error: Callable[[str, Exception], BaseException] | None,
) -> Callable[[_Req], Awaitable[_Resp]]:
    async def _call(request: _Req) -> _Resp:
        if on_error is None:
            return await bound(request, inner)
        passed: list[BaseException] = []  # what came out of call_next: not this interceptor's own

        async def call_next(request: _Req) -> _Resp:
            try:
                return await inner(request)
            except BaseException as exc:
                passed.append(exc)
                raise

        try:
            return await bound(request, call_next)
        except Exception as exc:
            if any(exc is seen for seen in passed):
                raise
            named = on_error(name, exc)
            if named is exc:
                raise
            raise named from exc

    return _call
