"""How a blueprint names an MCP server: stdio (command, args, env names) or streamable HTTP (url, header env names).

Values that could be secrets never appear in a blueprint: ``env`` lists names of the host's
environment variables and ``headers`` maps each header to the name of the variable holding its
value. :func:`config_problems` refuses anything that looks like a literal value.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from codeact.toolkits.errors import ToolkitLoadError

__all__ = ["DEFAULT_CALL_TIMEOUT", "DEFAULT_START_TIMEOUT", "McpServerConfig", "config_problems"]

DEFAULT_START_TIMEOUT = 30.0
DEFAULT_CALL_TIMEOUT = 60.0
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_HEADER = re.compile(r"^[A-Za-z0-9-]+$")


@dataclass(frozen=True, kw_only=True)
class McpServerConfig:
    """One MCP server: either ``command`` (stdio) or ``url`` (streamable HTTP).

    Attributes:
        name: The toolkit name (the object in the sandbox).
        command: The program to start (stdio transport).
        args: Its arguments.
        env: Names of host environment variables passed to the server (their values stay on the host).
        cwd: The server's working directory (relative to ``base_dir``).
        url: The streamable HTTP endpoint.
        headers: ``{header: ENV_NAME}``: each header's value comes from the host environment.
        start_timeout: Seconds to start the server, initialise the session and list its tools.
        call_timeout: Seconds per tool call (the bridge's per-operation timeout).
        base_dir: Where relative ``cwd`` is resolved (the blueprint's folder).
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    start_timeout: float = DEFAULT_START_TIMEOUT
    call_timeout: float = DEFAULT_CALL_TIMEOUT
    base_dir: str | None = None

    @property
    def transport(self) -> str:
        """``"stdio"`` or ``"http"``."""
        return "stdio" if self.command else "http"

    @property
    def where(self) -> str:
        """A short description for messages (never includes values taken from the environment)."""
        if self.command:
            return f"MCP server {self.name!r} ({' '.join([self.command, *self.args])})"
        return f"MCP server {self.name!r} ({self.url})"

    @classmethod
    def from_mapping(cls, name: str, data: Mapping[str, Any], *, base_dir: str | None = None) -> McpServerConfig:
        """Build from a blueprint's ``mcp:`` mapping (checked with :func:`config_problems` first).

        Raises:
            ToolkitLoadError: the mapping is not a valid server description (the message lists why).
        """
        problems = config_problems(data)
        if problems:
            raise ToolkitLoadError(f"toolkit {name!r}: " + "; ".join(problems))
        return cls(
            name=name,
            command=data.get("command") or None,
            args=tuple(str(a) for a in data.get("args") or ()),
            env=tuple(str(e) for e in data.get("env") or ()),
            cwd=data.get("cwd") or None,
            url=data.get("url") or None,
            headers={str(k): str(v) for k, v in (data.get("headers") or {}).items()},
            start_timeout=float(data.get("startTimeout") or data.get("start_timeout") or DEFAULT_START_TIMEOUT),
            call_timeout=float(data.get("timeout") or DEFAULT_CALL_TIMEOUT),
            base_dir=base_dir,
        )

    def environment(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """The named variables' values from the host environment.

        Raises:
            ToolkitLoadError: a named variable is not set.
        """
        environ = os.environ if environ is None else environ
        missing = [n for n in self.env if n not in environ]
        if missing:
            raise ToolkitLoadError(
                f"{self.where}: the host environment variable(s) {', '.join(missing)} named in its mcp.env "
                "are not set; export them before running, or remove them from the blueprint"
            )
        return {n: environ[n] for n in self.env}

    def header_values(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """The HTTP headers with their values from the host environment.

        Raises:
            ToolkitLoadError: a named variable is not set.
        """
        environ = os.environ if environ is None else environ
        missing = [f"{h} (from {n})" for h, n in self.headers.items() if n not in environ]
        if missing:
            raise ToolkitLoadError(
                f"{self.where}: the header value(s) {', '.join(missing)} come from host environment variables "
                "that are not set; export them before running"
            )
        return {h: environ[n] for h, n in self.headers.items()}


def config_problems(data: Any) -> list[str]:
    """What is wrong with a blueprint's ``mcp:`` mapping (empty when it is valid).

    Messages name the field and say what to write instead; a value that looks like a literal
    secret (``env: [TOKEN=abc]``, ``headers: {Authorization: "Bearer abc"}``) is refused.
    """
    if not isinstance(data, Mapping):
        return ["mcp must be a map with either command (stdio) or url (streamable HTTP)"]
    problems: list[str] = []
    command, url = data.get("command"), data.get("url")
    if bool(command) == bool(url):
        problems.append("mcp needs exactly one of command (a stdio server) or url (a streamable HTTP server)")
    if command is not None and not (isinstance(command, str) and command.strip()):
        problems.append("mcp.command must be a program name or path")
    args = data.get("args") or []
    if not isinstance(args, Sequence) or isinstance(args, str) or not all(isinstance(a, str) for a in args):
        problems.append('mcp.args must be a list of strings, e.g. ["server.py", "--flag"]')
    problems.extend(_names("mcp.env", data.get("env") or []))
    if url is not None:
        problems.extend(_url_problems(url))
    headers = data.get("headers") or {}
    if not isinstance(headers, Mapping):
        problems.append("mcp.headers must map header names to host environment variable names")
    else:
        for header, value in headers.items():
            if not isinstance(header, str) or not _HEADER.match(header):
                problems.append(f"mcp.headers: {header!r} is not an HTTP header name")
            elif not isinstance(value, str) or not _ENV_NAME.match(value):
                problems.append(
                    f"mcp.headers.{header} must name a host environment variable holding the value (for example "
                    f"{header}: TRACKER_AUTH), not the value itself: literal values (secrets) are refused in blueprints"
                )
    if (headers or data.get("env")) and command and headers:
        problems.append("mcp.headers apply to url servers only; a stdio server gets its secrets through mcp.env")
    for key in ("timeout", "startTimeout"):
        value = data.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value <= 0):
            problems.append(f"mcp.{key} must be a positive number of seconds, got {value!r}")
    known = {"command", "args", "env", "cwd", "url", "headers", "timeout", "startTimeout"}
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(str(key), sorted(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(f"mcp.{key} is not a known field{hint}; known fields: {', '.join(sorted(known))}")
    return problems


def _names(where: str, names: Any) -> list[str]:
    if not isinstance(names, Sequence) or isinstance(names, str):
        return [f"{where} must be a list of host environment variable names, e.g. [API_TOKEN]"]
    problems = []
    for name in names:
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            problems.append(
                f"{where}: {name!r} is not an environment variable name (UPPER_CASE); list the names of host "
                "variables to pass, e.g. [API_TOKEN], never NAME=value: literal values (secrets) are refused in "
                "blueprints"
            )
    return problems


def _url_problems(url: Any) -> list[str]:
    if not isinstance(url, str):
        return ["mcp.url must be a string such as http://127.0.0.1:8931/mcp"]
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return [f"mcp.url {url!r} must be an http:// or https:// address"]
    if parts.username or parts.password:
        return ["mcp.url must not carry credentials (user:password@); pass them in mcp.headers by env name"]
    return []
