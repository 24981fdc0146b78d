"""``--model oracle``: a model that answers each task with its reference solution, in the run's mode.

* CodeAct modes: round k of the solution is the reply to the k-th code call, written the way the
  mode's models write: the bare FIM middle (``fim-chat``, ``fim-completion``) or prose with a fenced
  block (``chat-blocks``). The code runs in the real sandbox and calls the real toolkits.
* ``react``: the solution runs here, in a thread, against proxies: each toolkit call it makes
  becomes one JSON function call of the reply, and the ``tool`` message the loop sends back
  (the real toolkit's result) is what the proxy returns. ``system.finish`` is the last call.

Usage is counted with litellm's gpt-4o tokenizer when litellm is importable (else about four
characters per token), prompt and tool schemas included, so modes compare on prompt size.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from codeact.engine.model.scripted import approx_tokens
from codeact.engine.model.settings import ModelReply, ToolCall

__all__ = ["ORACLE", "OracleModel", "count_tokens"]

ORACLE = "oracle"
_CODE_MODES = frozenset({"fim-chat", "fim-completion", "chat-blocks"})


def _litellm_counter() -> Callable[..., int] | None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # offline: the bundled price map
    try:
        import litellm
    except ImportError:  # pragma: no cover - litellm is a core dependency
        return None
    counter: Callable[..., int] = litellm.token_counter
    return counter


_COUNTER: list[Callable[..., int] | None] = []


def count_tokens(
    *, messages: Sequence[Mapping[str, Any]] | None = None, text: str | None = None, tools: object = None
) -> int:
    """Tokens of a prompt (chat ``messages`` with ``tools`` schemas, or raw ``text``) for gpt-4o."""
    if not _COUNTER:
        _COUNTER.append(_litellm_counter())
    counter = _COUNTER[0]
    if counter is not None:
        with contextlib.suppress(Exception):
            if text is not None:
                return int(counter(model="gpt-4o", text=text))
            return int(counter(model="gpt-4o", messages=[dict(m) for m in messages or ()], tools=tools))
    body = text if text is not None else json.dumps([dict(m) for m in messages or ()]) + json.dumps(tools or [])
    return approx_tokens(body)


class _Stop(BaseException):  # noqa: N818 - ends the solution's thread after system.finish
    pass


class _ReactSolution:
    """Runs a solution's code in a thread; every toolkit call is handed out as a function call."""

    def __init__(self, code: str, toolkits: Sequence[str], signatures: Mapping[str, Sequence[str]]) -> None:
        self._signatures = signatures
        self._calls: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._results: queue.Queue[tuple[bool, object]] = queue.Queue()
        self._code = code
        self._toolkits = tuple(toolkits)
        self._thread: threading.Thread | None = None

    def _proxy(self, toolkit: str) -> object:
        outer = self

        class _Toolkit:
            def __getattr__(self, operation: str) -> Callable[..., object]:
                def call(*args: object, **kwargs: object) -> object:
                    name = f"{toolkit}__{operation}"
                    if args:  # the function call names every argument, as models must
                        names = outer._signatures.get(name, ())
                        if len(args) > len(names):
                            raise TypeError(f"{toolkit}.{operation}() takes {len(names)} arguments")
                        kwargs = {**dict(zip(names, args, strict=False)), **kwargs}
                    outer._calls.put(("call", (name, kwargs)))
                    if name in ("system__finish", "system__ask_user"):
                        raise _Stop
                    ok, value = outer._results.get()
                    if not ok:
                        raise RuntimeError(value)
                    return value

                return call

        return _Toolkit()

    def _main(self) -> None:
        namespace: dict[str, object] = {name: self._proxy(name) for name in (*self._toolkits, "system")}
        namespace["print"] = lambda *a, **k: None
        try:
            exec(compile(self._code, "<solution>", "exec"), namespace)  # noqa: S102 - the suite's own reference code
        except _Stop:
            return
        except Exception as exc:
            self._calls.put(("error", f"{type(exc).__name__}: {exc}"))
            return
        self._calls.put(("error", "the solution ended without system.finish"))

    async def next(self, tool_result: str | None) -> tuple[str, Any]:
        """The next call (``("call", (name, arguments))``) or ``("error", text)``, after feeding a result."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._main, daemon=True, name="oracle-react")
            self._thread.start()
        elif tool_result is not None:
            self._results.put(_decode_result(tool_result))
        return await asyncio.to_thread(self._calls.get)


def _signatures(toolkits: Sequence[object]) -> tuple[list[str], dict[str, list[str]]]:
    """Toolkit names and ``toolkit__operation -> parameter names`` (``system`` included)."""
    from codeact.toolkits.builtin.system import SystemToolkit
    from codeact.toolkits.decorators import toolkit_spec

    names: list[str] = []
    signatures: dict[str, list[str]] = {}
    for obj in (*toolkits, SystemToolkit):
        spec = toolkit_spec(obj)
        if spec is None:
            continue
        names.append(spec.name)
        for op_name, op in spec.operations.items():
            signatures[f"{spec.name}__{op_name}"] = [p.name for p in op.spec.parameters]
    return names, signatures


def _decode_result(content: str) -> tuple[bool, object]:
    try:
        value = json.loads(content)
    except ValueError:
        return True, content
    if isinstance(value, dict) and set(value) == {"error", "message"}:
        return False, f"{value['error']}: {value['message']}"
    return True, value


class OracleModel:
    """Quacks like :class:`~codeact.engine.model.ModelClient` for one task in one mode."""

    def __init__(
        self,
        *,
        mode: str,
        solution: Sequence[str],
        toolkits: Sequence[object] = (),
    ) -> None:
        self.mode = mode
        self.solution = tuple(solution)
        self._round = 0
        self._react: _ReactSolution | None = None
        if mode == "react":
            names, signatures = _signatures(toolkits)
            self._react = _ReactSolution("\n".join(solution), names, signatures)
        self.model = f"{ORACLE}/{mode}"

    def context_window(self, *, purpose: str = "code") -> int | None:
        """Large enough never to compact."""
        return 1_000_000

    async def aclose(self) -> None:
        """Nothing to close."""

    async def complete(
        self,
        *,
        purpose: str = "code",
        messages: Sequence[Mapping[str, Any]] | None = None,
        prompt: str | None = None,
        stop: Sequence[str] | None = None,
        on_delta: object = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> ModelReply:
        """The reference solution's next step."""
        t0 = time.perf_counter()
        if prompt is not None:
            prompt_tokens = count_tokens(text=prompt)
        else:
            prompt_tokens = count_tokens(messages=messages or (), tools=tools)
        calls: tuple[ToolCall, ...] = ()
        finish = "stop"
        if purpose != "code":
            text = "DONE"
        elif self._react is not None:
            last = (messages or [{}])[-1]
            result = str(last.get("content", "")) if last.get("role") == "tool" else None
            kind, value = await self._react.next(result)
            if kind == "call":
                name, arguments = value
                raw = json.dumps(arguments, ensure_ascii=False)
                calls = (ToolCall(id=f"call_{self._round}", name=name, arguments=dict(arguments), raw_arguments=raw),)
                text, finish = "", "tool_calls"
            else:
                text = f"I could not finish the task: {value}"
            self._round += 1
        else:
            text = self._code_reply()
        completion = text or "".join(c.name + c.raw_arguments for c in calls)
        return ModelReply(
            text=text,
            model=self.model,
            usage={
                "prompt_tokens": prompt_tokens,
                "completion_tokens": count_tokens(text=completion),
                "total_tokens": 0,
            },
            cost_usd=None,
            finish_reason=finish,
            latency_s=time.perf_counter() - t0,
            tool_calls=calls,
            purpose=purpose,
        )

    def _code_reply(self) -> str:
        index, self._round = self._round, self._round + 1
        if index < len(self.solution):
            code = self.solution[index]
        else:
            code = 'system.finish("the reference solution has no more rounds")'
        if self.mode == "chat-blocks":
            return f"Next step of the plan.\n```python\n{code}\n```"
        return code
