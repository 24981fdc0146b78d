"""The host's MCP client session for one server, kept in a thread of its own.

The official SDK's sessions live in anyio task groups bound to one event loop and one task; the
agent may run rounds from several loops (``run_sync``, ``asyncio.run`` per CLI command). So each
server gets a dedicated thread running its own loop: the session is opened there once (on first
use), stays up across the rounds of a session, and every call is handed to that loop. A call
waits at most its timeout; a server that fails to start, exits or breaks its stream fails the
call with :class:`McpServerError` and is started again on the next call. After a call timed out,
the next call pings the server first: one that does not answer (hung, not just slow on one tool)
is stopped and started again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codeact.sandbox.aio import wait_for
from codeact.toolkits.errors import ToolkitError
from codeact.toolkits.mcp._config import McpServerConfig

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.types import CallToolResult, Tool

__all__ = ["McpConnection", "McpServerError"]

_PING_S = 2.0  # a ping after a timed-out call waits this long, and at most a quarter of the next call's timeout


class McpServerError(ToolkitError):
    """An MCP server could not be started, died, or broke its session."""

    code = "toolkit.mcp.server"


@dataclass(frozen=True, kw_only=True)
class _Started:
    tools: list[Tool]
    instructions: str
    server_name: str


class McpConnection:
    """One MCP server and the client session the host keeps with it.

    Args:
        config: Which server and how to reach it.
    """

    def __init__(self, config: McpServerConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._session: ClientSession | None = None
        self._started: _Started | None = None
        self._broken: str | None = None
        self._stderr: Any = None
        self._task: asyncio.Task[None] | None = None
        self._suspect = False  # a call timed out: ping before the next one

    @property
    def running(self) -> bool:
        """Whether the session is open and has not failed."""
        return self._session is not None and self._broken is None

    def start(self) -> _Started:
        """Start the server (if it is not running) and return its tools; blocks up to ``start_timeout``.

        Raises:
            McpServerError: it did not start, initialise or list its tools in time (the message
                quotes the end of its stderr).
            ToolkitLoadError: a named environment variable is missing.
        """
        with self._lock:
            if self.running and self._started is not None:
                return self._started
            self._shutdown()
            env = self.config.environment() if self.config.command else {}
            headers = self.config.header_values() if self.config.url else {}
            ready: concurrent.futures.Future[_Started] = concurrent.futures.Future()
            self._broken = None
            self._stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")  # noqa: SIM115
            thread = threading.Thread(
                target=self._thread_main, args=(ready, env, headers), name=f"mcp-{self.config.name}", daemon=True
            )
            self._thread = thread
            thread.start()
            try:
                started = ready.result(timeout=self.config.start_timeout)
            except concurrent.futures.TimeoutError:
                tail = self._stderr_tail()
                self._shutdown()
                raise McpServerError(
                    f"{self.config.where} did not start within {self.config.start_timeout:g} s{tail}; "
                    "check the command and that the server speaks MCP, or raise mcp.startTimeout"
                ) from None
            except McpServerError:
                self._shutdown()
                raise
            self._started = started
            return started

    async def call(self, tool: str, arguments: dict[str, Any], *, timeout: float) -> CallToolResult:
        """Call ``tool`` with ``arguments`` on the host's session; starts the server when it is not running.

        Raises:
            McpServerError: the server is not running and cannot be started, or the session broke.
            TimeoutError: no answer within ``timeout`` seconds (the request is cancelled).
        """
        if self._suspect and self.running:
            await self._ping(min(_PING_S, timeout / 4))
        if not self.running:
            await asyncio.to_thread(self.start)
        loop, session = self._loop, self._session
        if loop is None or session is None:
            raise McpServerError(f"{self.config.where} is not running")
        future = asyncio.run_coroutine_threadsafe(self._call(session, tool, arguments, timeout), loop)
        try:
            return await wait_for(asyncio.wrap_future(future), timeout + 2.0)
        except (asyncio.CancelledError, TimeoutError):  # timed out, or the bridge's deadline cancelled it
            future.cancel()
            self._suspect = True
            raise

    async def _ping(self, timeout: float) -> None:
        """Mark the session broken (so the server is started again) when it does not answer a ping."""
        loop, session = self._loop, self._session
        self._suspect = False
        if loop is None or session is None:
            return
        future = asyncio.run_coroutine_threadsafe(session.send_ping(), loop)
        try:
            await wait_for(asyncio.wrap_future(future), timeout)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as exc:  # noqa: BLE001 - no answer in time, or a broken stream: start it again
            future.cancel()
            self._broken = f"it did not answer a ping after a call timed out ({type(exc).__name__})"

    async def _call(self, session: ClientSession, tool: str, arguments: dict[str, Any], timeout: float) -> Any:
        from datetime import timedelta

        from mcp.shared.exceptions import McpError

        try:
            # The bridge's deadline fires first (deadline_exceeded); the SDK's own timeout is the backstop.
            return await session.call_tool(tool, arguments, read_timeout_seconds=timedelta(seconds=timeout + 1.0))
        except McpError as exc:
            message = exc.error.message
            if exc.error.code == -32001 or "timed out" in message.lower():  # the SDK's request timeout
                raise TimeoutError(f"{self.config.where}: {tool} did not answer within {timeout:g} s") from None
            if "closed" in message.lower():
                self._broken = message
                raise McpServerError(
                    f"{self.config.where} closed the session during {tool}(): {message}{self._stderr_tail()}; "
                    "it will be started again on the next call"
                ) from None
            raise McpServerError(f"{self.config.where}: {tool}() failed: {message}") from None
        except Exception as exc:  # a broken pipe, a closed stream: the server is gone
            self._broken = f"{type(exc).__name__}: {exc}"
            raise McpServerError(
                f"{self.config.where} is not answering ({type(exc).__name__}: {exc}){self._stderr_tail()}; "
                "it will be started again on the next call"
            ) from None

    def close(self) -> None:
        """Close the session and stop the server (idempotent)."""
        with self._lock:
            self._shutdown()

    async def aclose(self) -> None:
        """:meth:`close` without blocking the caller's event loop."""
        await asyncio.to_thread(self.close)

    # -- the server's thread ---------------------------------------------------------------

    def _thread_main(
        self, ready: concurrent.futures.Future[_Started], env: dict[str, str], headers: dict[str, str]
    ) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._task = loop.create_task(self._serve(ready, env, headers))
            loop.run_until_complete(self._task)
        except BaseException as exc:  # noqa: BLE001 - whatever ended the session, report it once
            if not ready.done():
                ready.set_exception(self._start_error(exc))
            else:
                self._broken = self._broken or f"{type(exc).__name__}: {exc}"
        finally:
            self._session = None
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _serve(
        self, ready: concurrent.futures.Future[_Started], env: dict[str, str], headers: dict[str, str]
    ) -> None:
        from mcp import ClientSession

        self._stop = asyncio.Event()
        async with contextlib.AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(self._transport(env, headers))
            session = await stack.enter_async_context(ClientSession(read, write))
            init = await session.initialize()
            tools: list[Tool] = []
            cursor: str | None = None
            while True:
                page = await session.list_tools(cursor=cursor) if cursor else await session.list_tools()
                tools.extend(page.tools)
                cursor = page.nextCursor
                if not cursor:
                    break
            self._session = session
            ready.set_result(
                _Started(tools=tools, instructions=init.instructions or "", server_name=init.serverInfo.name)
            )
            await self._stop.wait()
            self._session = None

    def _transport(self, env: dict[str, str], headers: dict[str, str]) -> contextlib.AbstractAsyncContextManager[Any]:
        config = self.config
        if config.command:
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            cwd = config.cwd
            if cwd is not None and config.base_dir is not None:
                cwd = str(Path(config.base_dir, cwd))
            params = StdioServerParameters(command=config.command, args=list(config.args), env=env, cwd=cwd)
            return stdio_client(params, errlog=self._stderr)
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        @contextlib.asynccontextmanager
        async def http() -> Any:
            async with (
                create_mcp_http_client(headers=headers) as client,
                streamable_http_client(config.url or "", http_client=client) as (read, write, _session_id),
            ):
                yield read, write

        return http()

    def _start_error(self, exc: BaseException) -> McpServerError:
        inner = exc
        while isinstance(inner, BaseExceptionGroup) and inner.exceptions:
            inner = inner.exceptions[0]
        return McpServerError(
            f"{self.config.where} failed to start: {type(inner).__name__}: {inner}{self._stderr_tail()}; "
            "check mcp.command/args (or mcp.url) in the blueprint and run the server by hand to see why"
        )

    def _stderr_tail(self) -> str:
        stream = self._stderr
        if stream is None:
            return ""
        try:
            stream.flush()
            stream.seek(0)
            text = stream.read()[-600:].strip()
        except (OSError, ValueError):
            return ""
        return f" (its stderr ends: {text!r})" if text else ""

    def _shutdown(self) -> None:
        loop, stop, thread, task = self._loop, self._stop, self._thread, self._task
        if thread is not None and loop is not None and not loop.is_closed():
            # A session that is up closes cleanly; one still starting (or hung) is cancelled.
            with contextlib.suppress(RuntimeError):
                if self._session is not None and stop is not None:
                    loop.call_soon_threadsafe(stop.set)
                elif task is not None:
                    loop.call_soon_threadsafe(task.cancel)
        if thread is not None:
            thread.join(timeout=10)
        self._thread = self._loop = self._stop = self._session = self._task = None
        self._started = None
        if self._stderr is not None:
            with contextlib.suppress(OSError):
                self._stderr.close()
            self._stderr = None
