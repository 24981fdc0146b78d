"""``ServiceState``: everything the HTTP app serves, built once by ``codeact serve`` (or a test)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from codeact.engine.service._run_artifacts import ArtifactPolicy
from codeact.engine.service._run_store import AuditLog

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from codeact.engine.runner import BlueprintRunner
    from codeact.engine.service._auth import Tokens
    from codeact.engine.service._runs import Runs
    from codeact.engine.store import Store
    from codeact.toolkits import ToolkitRegistry

__all__ = ["MAX_BODY_BYTES", "ServiceState"]

MAX_BODY_BYTES = 1 << 20


@dataclass(frozen=True, kw_only=True)
class ServiceState:
    """What ``create_app`` serves.

    Attributes:
        store: The session store (sessions, rounds, variables; shared with the runners), which also keeps
            the run-scoped API's state and storage.
        runners: The runners served, by id.
        tokens: The API tokens and their scopes.
        runs: The run manager (``RunManager``, or the queue's ``QueueRunManager``).
        extra_routes: More routes mounted after the API's (the console's pages).
        registry: The host toolkits, for replays (None: the entry-point toolkits).
        max_body_bytes: The largest request body accepted (HTTP 413 beyond).
        audit: The audit log of run-scoped API calls (default: lines in the service log).
        artifacts: What the run-scoped API serves of a run's artifacts (size, MIME types, time to live).
    """

    store: Store
    runners: Mapping[str, BlueprintRunner]
    tokens: Tokens
    runs: Runs
    extra_routes: Sequence[BaseRoute] = ()
    registry: ToolkitRegistry | None = None
    max_body_bytes: int = MAX_BODY_BYTES
    audit: AuditLog = field(default_factory=AuditLog)
    artifacts: ArtifactPolicy = field(default_factory=ArtifactPolicy)
