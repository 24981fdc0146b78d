"""The run-scoped API proxy, both directions (codeact under a host; codeact as the host)."""

from __future__ import annotations

from codeact.engine.runner.proxy.authorization import (
    DEFAULT_OPERATIONS,
    STATE_SCOPES,
    STORAGE_AREAS,
    AuthorizationRegistry,
    RateLimit,
    RunAuthorization,
)
from codeact.engine.runner.proxy.client import HostTransport, RunAPIProxy
from codeact.engine.runner.proxy.host_model import HostModelClient
from codeact.engine.runner.proxy.host_tools import HOST_TOOLKIT, KNOWLEDGE_TOOLKIT, HostKnowledge, HostTools
from codeact.engine.runner.proxy.http import HttpHostTransport

__all__ = [
    "DEFAULT_OPERATIONS",
    "HOST_TOOLKIT",
    "KNOWLEDGE_TOOLKIT",
    "STATE_SCOPES",
    "STORAGE_AREAS",
    "AuthorizationRegistry",
    "HostKnowledge",
    "HostModelClient",
    "HostTools",
    "HostTransport",
    "HttpHostTransport",
    "RateLimit",
    "RunAPIProxy",
    "RunAuthorization",
]
