"""The Docker backend: one hardened container per session, full CPython inside.

This package is the ONE adapter that imports the ``docker`` SDK, and it does so lazily (inside
functions), so ``import sandbox`` never loads it. ``_engine`` holds the SDK access (error mapping,
the client, host labels, orphan collection); ``_container`` the container spec, the worker and
:class:`DockerSandbox`. Nothing outside this package catches ``docker.*``.
"""

from __future__ import annotations

from codeact.sandbox.docker_sandbox._container import DockerSandbox, full_python_policy
from codeact.sandbox.docker_sandbox._engine import (
    LABEL_SANDBOX,
    ImageStatus,
    RemovedContainer,
    image_status,
    map_docker_errors,
    remove_orphans,
)

__all__ = [
    "LABEL_SANDBOX",
    "DockerSandbox",
    "ImageStatus",
    "RemovedContainer",
    "full_python_policy",
    "image_status",
    "map_docker_errors",
    "remove_orphans",
]
