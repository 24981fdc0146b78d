"""The embedded llama.cpp server (the ``xllamacpp`` wheel), one per model per process.

Started lazily, the first time a route needs ``local/NAME``: on a free loopback port (port 0, the
server reports the port it bound), with as many threads as this process may use
(``os.sched_getaffinity``; ``CODEACT_LOCAL_THREADS`` overrides — llama.cpp's threads spin-wait, so
more threads than free cores makes it slower, not faster), one slot (so the prompt cache of that slot
serves every round of a run), and the context size the run asks for. Stopped at interpreter exit.

xllamacpp is imported here only, lazily: ``import codeact`` never loads it.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codeact.engine.model.errors import LocalModelError

__all__ = ["LocalServer", "default_threads", "ensure_server", "start_server", "stop_servers"]

_lock = threading.Lock()
_servers: dict[str, LocalServer] = {}
_atexit_registered = False


def default_threads(env: dict[str, str] | None = None) -> int:
    """Threads for llama.cpp: ``CODEACT_LOCAL_THREADS``, else the cores this process may run on."""
    env = dict(os.environ) if env is None else env
    value = env.get("CODEACT_LOCAL_THREADS", "").strip()
    if value:
        try:
            return max(1, int(value))
        except ValueError:
            raise LocalModelError(f"CODEACT_LOCAL_THREADS must be a whole number, got {value!r}") from None
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


@dataclass
class LocalServer:
    """One running llama.cpp server.

    Attributes:
        model_path: The GGUF file it serves.
        n_ctx: Its context size in tokens.
        threads: Its generation and prompt threads.
        base_url: ``http://127.0.0.1:PORT`` (no ``/v1``).
        started_s: Seconds from start to ready.
    """

    model_path: str
    n_ctx: int
    threads: int
    base_url: str
    started_s: float
    _handle: Any = None

    def stop(self) -> None:
        """Stop the server (its HTTP thread and the model are released with the handle)."""
        self._handle = None


def _start(model_path: Path, *, n_ctx: int, threads: int, port: int = 0) -> LocalServer:
    try:
        import xllamacpp
    except ImportError:
        raise LocalModelError(
            "local models need the llama.cpp runtime: pip install 'codeact[local]' (the xllamacpp wheel)"
        ) from None
    params = xllamacpp.CommonParams()
    params.model.path = str(model_path)
    params.n_ctx = n_ctx
    params.n_parallel = 1
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.cache_prompt = True
    params.warmup = False
    params.ui = False
    params.verbosity = -1
    started = time.monotonic()
    try:
        handle = xllamacpp.Server(params)
    except Exception as exc:  # the runtime raises RuntimeError/ValueError for a bad file or an unusable port
        raise LocalModelError(f"the llama.cpp server could not start for {str(model_path)!r}: {exc}") from exc
    address = str(handle.listening_address or "").rstrip("/")
    if not address:
        raise LocalModelError(f"the llama.cpp server for {str(model_path)!r} started but reports no address")
    return LocalServer(model_path=str(model_path), n_ctx=n_ctx, threads=threads, base_url=address,
                       started_s=time.monotonic() - started, _handle=handle)  # fmt: skip


def ensure_server(model_path: Path, *, n_ctx: int, threads: int | None = None) -> LocalServer:
    """The running server for ``model_path``, started now if there is none.

    A server started with a smaller context than ``n_ctx`` is restarted with the larger one.
    """
    global _atexit_registered
    key = str(model_path)
    with _lock:
        server = _servers.get(key)
        if server is not None and server.n_ctx >= n_ctx:
            return server
        if server is not None:
            server.stop()
        server = _start(model_path, n_ctx=n_ctx, threads=threads or default_threads())
        _servers[key] = server
        if not _atexit_registered:
            atexit.register(stop_servers)
            _atexit_registered = True
        return server


def start_server(model_path: Path, *, n_ctx: int, threads: int | None = None, port: int = 0) -> LocalServer:
    """A new server for ``model_path`` on ``127.0.0.1:port`` (0: a free port), owned by the caller.

    For ``codeact models serve``: the same OpenAI-compatible server a ``local/NAME`` run starts, for any
    client. Call :meth:`LocalServer.stop` when done.
    """
    return _start(model_path, n_ctx=n_ctx, threads=threads or default_threads(), port=port)


def stop_servers() -> None:
    """Stop every server this process started."""
    with _lock:
        for server in _servers.values():
            server.stop()
        _servers.clear()
