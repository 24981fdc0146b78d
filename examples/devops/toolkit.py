"""An example DevOps toolkit with realistic in-memory data (projects, requirements, apps, deployments).

It runs on the host; generated code reaches it only through the bridge, e.g.
``await devops.get_project_info(project_id="P-123")``.
"""

from __future__ import annotations

import itertools
from typing import Any

from codeact import operation, toolkit
from codeact.toolkits import ToolkitContext

_PROJECTS: dict[str, dict[str, Any]] = {
    "P-123": {"id": "P-123", "name": "Checkout", "owner": "lin.wei", "apps": ["checkout-api", "checkout-web"]},
    "P-200": {"id": "P-200", "name": "Identity", "owner": "sara.k", "apps": ["auth-service"]},
}
_REQUIREMENTS: dict[str, list[dict[str, Any]]] = {
    "P-123": [
        {"id": "R-1", "title": "Login with passkeys", "status": "in_progress", "points": 5},
        {"id": "R-2", "title": "Login rate limiting", "status": "done", "points": 3},
        {"id": "R-3", "title": "Guest checkout", "status": "todo", "points": 8},
        {"id": "R-4", "title": "Login audit log", "status": "todo", "points": 2},
    ],
    "P-200": [{"id": "R-9", "title": "Rotate signing keys", "status": "todo", "points": 3}],
}
_APPS: dict[str, dict[str, Any]] = {
    "checkout-api": {"id": "checkout-api", "project_id": "P-123", "version": "2.3.1", "healthy": True},
    "checkout-web": {"id": "checkout-web", "project_id": "P-123", "version": "1.9.0", "healthy": True},
    "auth-service": {"id": "auth-service", "project_id": "P-200", "version": "4.0.2", "healthy": False},
}


@toolkit(name="devops", description="DevOps platform: projects, requirements, applications and deployments")
class DevOps:
    """In-memory DevOps platform; every instance starts from the same data."""

    def __init__(self) -> None:
        self._deploy_ids = itertools.count(1001)
        self._deployments: dict[str, dict[str, Any]] = {}
        # Idempotency: call id -> (the arguments, the deployment it made). A real platform keeps this
        # with the deployment (most deploy APIs take an idempotency key); here it lives as long as the toolkit.
        self._by_call: dict[str, tuple[tuple[str, str], str]] = {}

    @operation
    async def get_project_info(self, project_id: str) -> dict[str, Any]:
        """Basic information about a project.

        Args:
            project_id: The project id, e.g. "P-123".
        """
        try:
            return dict(_PROJECTS[project_id])
        except KeyError:
            raise LookupError(f"project {project_id!r} does not exist (known: {', '.join(_PROJECTS)})") from None

    @operation
    async def search_requirements(self, project_id: str, query: str = "") -> list[dict[str, Any]]:
        """Search a project's requirements by a keyword in the title.

        Args:
            project_id: The project id.
            query: A case-insensitive keyword; empty returns all requirements.
        """
        if project_id not in _REQUIREMENTS:
            raise LookupError(f"project {project_id!r} does not exist (known: {', '.join(_PROJECTS)})")
        q = query.lower()
        return [dict(r) for r in _REQUIREMENTS[project_id] if q in r["title"].lower()]

    @operation
    async def get_app_list(self, project_id: str) -> list[dict[str, Any]]:
        """The applications of a project with their current version and health.

        Args:
            project_id: The project id.
        """
        return [dict(a) for a in _APPS.values() if a["project_id"] == project_id]

    @operation(approval="auto", timeout=30)
    def deploy_app(self, app_id: str, version: str, context: ToolkitContext) -> dict[str, Any]:
        """Deploy a version of an application.

        Args:
            app_id: The application id, e.g. "checkout-api".
            version: The version to deploy, e.g. "2.4.0".
        """
        # The call id is the same when a round that crashed is run again (docs/toolkits.md, "Idempotent
        # operations"): the same call with the same arguments gets the deployment it made, not a second one.
        key = context.call_id
        done = self._by_call.get(key) if key is not None else None
        if done is not None and done[0] == (app_id, version):
            return dict(self._deployments[done[1]])
        if app_id not in _APPS:
            raise LookupError(f"application {app_id!r} does not exist")
        deploy_id = f"D-{next(self._deploy_ids)}"
        self._deployments[deploy_id] = {"id": deploy_id, "app_id": app_id, "version": version, "status": "succeeded"}
        if key is not None:
            self._by_call[key] = ((app_id, version), deploy_id)
        return dict(self._deployments[deploy_id])

    @operation
    async def get_deploy_status(self, deploy_id: str) -> dict[str, Any]:
        """The status of a deployment.

        Args:
            deploy_id: The deployment id returned by deploy_app.
        """
        if deploy_id not in self._deployments:
            raise LookupError(f"deployment {deploy_id!r} does not exist")
        return dict(self._deployments[deploy_id])
