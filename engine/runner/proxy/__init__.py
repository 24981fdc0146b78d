"""The run-scoped API proxy, both directions (codeact under a host; codeact as the host)."""

from __future__ import annotations

from engine.runner.proxy.authorization import DEFAULT_OPERATIONS, AuthorizationRegistry, RunAuthorization
from engine.runner.proxy.client import HostTransport, RunAPIProxy
from engine.runner.proxy.host_model import HostModelClient
from engine.runner.proxy.host_tools import HOST_TOOLKIT, HostTools

__all__ = [
    "DEFAULT_OPERATIONS",
    "HOST_TOOLKIT",
    "AuthorizationRegistry",
    "HostModelClient",
    "HostTools",
    "HostTransport",
    "RunAPIProxy",
    "RunAuthorization",
]
