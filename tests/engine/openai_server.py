"""A local OpenAI-compatible HTTP server: the real test double for every HTTP model path.

litellm talks to it exactly as it would to OpenAI, vLLM or Ollama's ``/v1`` API, so tests exercise
litellm's real request building, SSE parsing, error mapping and usage parsing without any network.

* ``POST /v1/chat/completions``: JSON or ``stream=true`` (SSE) replies, including ``tool_calls``
  (streamed as OpenAI does: a first fragment with the call's index, id and name, then the
  arguments in pieces of ``Reply.tool_chunk`` characters); ``Reply.drop_after`` cuts a stream off
  after that many events (the connection closes short of the body it announced).
* ``POST /v1/completions``: the raw-prompt endpoint; every request is recorded, so a test can
  assert that a FIM prompt arrived byte for byte (``server.requests[-1].body["prompt"]``).
* ``POST /v1/responses``: OpenAI's Responses API (litellm's ``openai/responses/<model>`` route), JSON or
  its SSE events, one output message per queued reply.
* ``GET /v1/models``: lists the model names seen so far (some clients probe it).
* ``POST /v1/embeddings``: a deterministic bag-of-words vector per input (64 hashed word buckets),
  so texts sharing words are similar; no reply needs to be queued.

Replies are queued with :meth:`OpenAIServer.push`, consumed one per request in order. A queued
:class:`Failure` answers one request with an HTTP error (429 then a reply tests retries, 401 tests
auth errors). An empty queue answers 400 with ``no reply queued`` so a test fails fast instead of
hanging or retrying.

Usage::

    def test_chat(openai_server):
        openai_server.push("hello")
        settings = ModelSettings(model="openai/test-model", api_base=openai_server.base_url, ...)
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Failure", "OpenAIServer", "RecordedRequest", "Reply", "ToolCallReply", "serve"]


_MESSAGES = {
    401: "Incorrect API key provided: sk-no-key. You can find your API key at https://platform.openai.com/account/api-keys.",
    429: "Rate limit reached for requests",
    500: "The server had an error while processing your request.",
    503: "The engine is currently overloaded, please try again later.",
}


@dataclass(frozen=True, kw_only=True)
class ToolCallReply:
    """One tool call in a chat reply (``arguments`` is sent JSON-encoded, as OpenAI does)."""

    name: str
    arguments: dict[str, Any] | str
    id: str | None = None


@dataclass(frozen=True, kw_only=True)
class Reply:
    """A scripted answer: the text, optional tool calls, usage and how to chunk it when streaming."""

    text: str = ""
    tool_calls: tuple[ToolCallReply, ...] = ()
    usage: dict[str, Any] | None = None  # may carry ``prompt_tokens_details: {cached_tokens: N}``
    finish_reason: str | None = None
    chunks: tuple[str, ...] | None = None  # stream pieces; default: split after each space
    tool_chunk: int = 7  # characters of a tool call's arguments per streamed fragment
    drop_after: int | None = None  # stream: the connection drops after this many events (no [DONE])
    delay_s: float = 0.0  # the server "generates" this long before it answers (a slow local model)
    chunk_delay_s: float = 0.0  # stream: the pause before each piece (a model writing a few tokens a second)


@dataclass(frozen=True, kw_only=True)
class Failure:
    """Answer one request with an HTTP error in OpenAI's error shape."""

    status: int
    message: str = "injected failure"
    type: str = "server_error"
    code: str | None = None
    retry_after: float | None = None


@dataclass(frozen=True, kw_only=True)
class RecordedRequest:
    """What the server received: method, path, headers (lower-cased names) and the JSON body."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class OpenAIServer:
    """State shared between the test and the HTTP handler threads."""

    host: str = "127.0.0.1"
    port: int = 0
    requests: list[RecordedRequest] = field(default_factory=list)
    _queue: deque[Reply | Failure] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    responder: Callable[[dict[str, Any]], str | Reply] | None = None
    """Answers a request when no reply is queued, from its body (a model that reads its prompt)."""

    @property
    def base_url(self) -> str:
        """The ``api_base`` to give litellm (ends in ``/v1``)."""
        return f"http://{self.host}:{self.port}/v1"

    def push(self, *replies: str | Reply | Failure) -> None:
        """Queue replies (a bare string is a text reply); each request consumes one."""
        with self._lock:
            for reply in replies:
                self._queue.append(Reply(text=reply) if isinstance(reply, str) else reply)

    def fail(self, status: int, *, times: int = 1, message: str | None = None) -> None:
        """Queue ``times`` failures with HTTP ``status`` (OpenAI's wording for 401/429) before later pushes."""
        kind = {401: "invalid_request_error", 429: "requests"}.get(status, "server_error")
        code = {401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(status)
        text = message or _MESSAGES.get(status, f"injected failure {status}")
        self.push(*[Failure(status=status, message=text, type=kind, code=code) for _ in range(times)])

    @property
    def pending(self) -> int:
        """How many queued replies/failures have not been consumed."""
        with self._lock:
            return len(self._queue)

    def _next(self, body: dict[str, Any] | None = None) -> Reply | Failure | None:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None and body is not None:
            answer = self.responder(body)
            return Reply(text=answer) if isinstance(answer, str) else answer
        return None

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)


def _usage(reply: Reply, prompt_text: str) -> dict[str, Any]:
    if reply.usage is not None:
        return dict(reply.usage)
    prompt_tokens = max(1, len(prompt_text.split()))
    completion_tokens = len(reply.text.split()) + len(reply.tool_calls)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _pieces(reply: Reply) -> list[str]:
    if reply.chunks is not None:
        return list(reply.chunks)
    pieces: list[str] = []
    for word in reply.text.split(" "):
        pieces.append(word + " ")
    if pieces:
        pieces[-1] = pieces[-1][:-1]
    return [p for p in pieces if p]


def _tool_calls_json(reply: Reply) -> list[dict[str, Any]]:
    calls = []
    for index, call in enumerate(reply.tool_calls):
        arguments = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
        calls.append(
            {
                "index": index,
                "id": call.id or f"call_{index}",
                "type": "function",
                "function": {"name": call.name, "arguments": arguments},
            }
        )
    return calls


def _prompt_text(body: dict[str, Any]) -> str:
    if "prompt" in body:
        prompt = body["prompt"]
        return prompt if isinstance(prompt, str) else " ".join(str(p) for p in prompt)
    parts = []
    for message in body.get("messages", []):
        content = message.get("content")
        parts.append(content if isinstance(content, str) else json.dumps(content))
    return " ".join(parts)


def _embeddings_body(body: dict[str, Any]) -> dict[str, Any]:
    import hashlib
    import re

    inputs = body.get("input", [])
    texts = [inputs] if isinstance(inputs, str) else [str(text) for text in inputs]
    data = []
    for index, text in enumerate(texts):
        vector = [0.0] * 64
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % 64] += 1.0  # noqa: S324 - a bucket, not security
        data.append({"object": "embedding", "index": index, "embedding": vector})
    tokens = sum(len(text.split()) for text in texts)
    return {
        "object": "list",
        "data": data,
        "model": str(body.get("model", "test-embedding")),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


class _Handler(BaseHTTPRequestHandler):
    server_version = "codeact-openai-test/1"
    state: OpenAIServer  # set on the subclass made per server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Keep test output clean."""

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self.state._record(RecordedRequest(method="GET", path=self.path, headers=self._headers(), body={}))
        if self.path.rstrip("/") == "/v1/models":
            self._json(200, {"object": "list", "data": []})
        else:
            self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        self.state._record(RecordedRequest(method="POST", path=self.path, headers=self._headers(), body=body))
        path = self.path.split("?")[0].rstrip("/")
        if path == "/v1/embeddings":
            self._json(200, _embeddings_body(body))
            return
        if path not in ("/v1/chat/completions", "/v1/completions", "/v1/responses"):
            self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        reply = self.state._next(body)
        if reply is None:
            self._json(400, {"error": {"message": "no reply queued", "type": "invalid_request_error"}})
            return
        if isinstance(reply, Failure):
            extra = {"retry-after": str(reply.retry_after)} if reply.retry_after is not None else {}
            error = {"message": reply.message, "type": reply.type, "code": reply.code, "param": None}
            self._json(reply.status, {"error": error}, extra)
            return
        if reply.delay_s:
            time.sleep(reply.delay_s)  # this handler's thread only: the server keeps answering others
        chat = path.endswith("/chat/completions")
        model = str(body.get("model", "test-model"))
        usage = _usage(reply, _prompt_text(body))
        if path.endswith("/responses"):
            self._responses(reply, model=model, usage=usage, stream=bool(body.get("stream")))
            return
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._stream(reply, chat=chat, model=model, usage=usage if include_usage else None)
        elif chat:
            self._json(200, self._chat_body(reply, model, usage))
        else:
            self._json(200, self._text_body(reply, model, usage))

    def _headers(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.headers.items()}

    def _json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    @staticmethod
    def _finish(reply: Reply) -> str:
        return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")

    def _chat_body(self, reply: Reply, model: str, usage: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": reply.text if reply.text or not reply.tool_calls else None,
        }
        if reply.tool_calls:
            message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"} for c in _tool_calls_json(reply)]
        return {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": self._finish(reply), "logprobs": None}],
            "usage": usage,
        }

    def _text_body(self, reply: Reply, model: str, usage: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": "cmpl-test",
            "object": "text_completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "text": reply.text, "finish_reason": self._finish(reply), "logprobs": None}],
            "usage": usage,
        }

    def _responses(self, reply: Reply, *, model: str, usage: dict[str, Any], stream: bool) -> None:
        """OpenAI's Responses API (``POST /v1/responses``): one output message, JSON or its SSE events."""
        item = {
            "type": "message",
            "id": "msg_test",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
        }
        done = {
            "id": "resp_test",
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "model": model,
            "output": [item],
            "usage": {
                "input_tokens": usage["prompt_tokens"],
                "output_tokens": usage["completion_tokens"],
                "total_tokens": usage["total_tokens"],
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }
        if not stream:
            self._json(200, done)
            return
        started = {**done, "status": "in_progress", "output": [], "usage": None}
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": started},
            {"type": "response.output_item.added", "output_index": 0, "item": {**item, "content": []}},
        ]
        events += [
            {
                "type": "response.output_text.delta",
                "item_id": "msg_test",
                "output_index": 0,
                "content_index": 0,
                "delta": piece,
            }  # fmt: skip
            for piece in _pieces(reply)
        ]
        events += [
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": done},
        ]
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        for event in events:
            self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
            self.wfile.flush()

    def _stream(self, reply: Reply, *, chat: bool, model: str, usage: dict[str, Any] | None) -> None:
        frames = [
            f"data: {json.dumps(event)}\n\n".encode() for event in _events(reply, chat=chat, model=model, usage=usage)
        ]
        frames.append(b"data: [DONE]\n\n")
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        if reply.drop_after is not None:
            # announce the whole body, send part of it, close: the client sees the connection drop
            self.send_header("content-length", str(sum(len(frame) for frame in frames)))
            self.send_header("connection", "close")
            frames = frames[: reply.drop_after]
        self.end_headers()
        for frame in frames:
            if reply.chunk_delay_s:
                time.sleep(reply.chunk_delay_s)
            self.wfile.write(frame)
            self.wfile.flush()
        if reply.drop_after is not None:
            self.close_connection = True


def _fragments(reply: Reply) -> Iterator[dict[str, Any]]:
    """Each tool call as OpenAI streams it: index, id, type and name first, then argument pieces."""
    for call in _tool_calls_json(reply):
        function = call["function"]
        yield {**call, "function": {"name": function["name"], "arguments": ""}}
        arguments: str = function["arguments"]
        size = max(1, reply.tool_chunk)
        for start in range(0, len(arguments), size):
            yield {"index": call["index"], "function": {"arguments": arguments[start : start + size]}}


def _events(reply: Reply, *, chat: bool, model: str, usage: dict[str, Any] | None) -> Iterator[dict[str, Any]]:
    created = int(time.time())
    finish = _Handler._finish(reply)
    if chat:
        base = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": created, "model": model}
        yield {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}
        for piece in _pieces(reply):
            yield {**base, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
        for fragment in _fragments(reply):
            yield {**base, "choices": [{"index": 0, "delta": {"tool_calls": [fragment]}, "finish_reason": None}]}
        yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
        if usage is not None:
            yield {**base, "choices": [], "usage": usage}
        return
    base = {"id": "cmpl-test", "object": "text_completion", "created": created, "model": model}
    for piece in _pieces(reply):
        yield {**base, "choices": [{"index": 0, "text": piece, "finish_reason": None, "logprobs": None}]}
    yield {**base, "choices": [{"index": 0, "text": "", "finish_reason": finish, "logprobs": None}]}
    if usage is not None:
        yield {**base, "choices": [], "usage": usage}


class serve:  # noqa: N801 - used like a function: `with serve() as server:`
    """Run an :class:`OpenAIServer` on a free 127.0.0.1 port in a background thread."""

    def __init__(self, replies: Sequence[str | Reply | Failure] = ()) -> None:
        self.state = OpenAIServer()
        self.state.push(*replies)
        handler = type("_BoundHandler", (_Handler,), {"state": self.state})
        self._httpd = ThreadingHTTPServer((self.state.host, 0), handler)
        self._httpd.daemon_threads = True
        self.state.port = int(self._httpd.server_address[1])
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="openai-test-server", daemon=True
        )

    def __enter__(self) -> OpenAIServer:
        self._thread.start()
        return self.state

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
