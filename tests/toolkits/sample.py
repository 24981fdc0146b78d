"""Toolkits used by the toolkit tests (also loaded by path in test_registry)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from codeact.toolkits import DynamicToolkit, OperationSpec, ToolkitContext, operation, toolkit


class Requirement(BaseModel):
    title: str
    priority: int = 3


@dataclass
class Calls:
    """What ran, so tests can assert an operation was (not) executed."""

    log: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    intervals: list[tuple[float, float]] = field(default_factory=list)

    def names(self) -> list[str]:
        return [name for name, _ in self.log]


@toolkit(name="devops", description="DevOps platform: projects, requirements, deployments")
class DevOps:
    """Not used: the decorator's description wins."""

    def __init__(self, calls: Calls | None = None) -> None:
        self.calls = calls if calls is not None else Calls()

    @operation
    async def get_project_info(self, project_id: str) -> dict[str, Any]:
        """Basic info of a project.

        Args:
            project_id: The project's id, for example "123".

        Returns:
            The project's id, name and status.
        """
        self.calls.log.append(("get_project_info", {"project_id": project_id}))
        return {"id": project_id, "name": f"project {project_id}", "status": "active"}

    @operation
    def search_requirements(self, project_id: str, query: str, limit: int = 10) -> list[dict[str, Any]]:
        """Search the requirements of a project.

        Args:
            project_id: The project's id.
            query: Words to look for in titles.
            limit: At most this many results.
        """
        self.calls.log.append(("search_requirements", {"project_id": project_id, "query": query, "limit": limit}))
        return [{"id": f"R{i}", "title": f"{query} #{i}"} for i in range(min(limit, 2))]

    @operation
    async def create_requirement(self, project_id: str, requirement: Requirement) -> str:
        """Create a requirement.

        Args:
            project_id: The project's id.
            requirement: Title and priority (1 = highest).
        """
        self.calls.log.append(("create_requirement", {"project_id": project_id, "requirement": requirement}))
        return f"{project_id}-{requirement.title}-{requirement.priority}"

    @operation(approval="ask", timeout=5)
    def deploy_app(self, app_id: str, version: str, strategy: Literal["rolling", "blue_green"] = "rolling") -> dict:
        """Deploy a version of an app.

        Args:
            app_id: The app.
            version: The version to deploy, for example "1.4.2".
            strategy: How to roll it out.
        """
        self.calls.log.append(("deploy_app", {"app_id": app_id, "version": version, "strategy": strategy}))
        return {"deploy_id": f"D-{app_id}-{version}", "strategy": strategy}

    @operation(approval="deny")
    async def drop_database(self, name: str) -> None:
        """Drop a database (never allowed)."""
        self.calls.log.append(("drop_database", {"name": name}))

    @operation(timeout=1.0)  # far above the concurrency tests' sleeps, so a loaded machine does not trip it
    async def slow(self, seconds: float) -> float:
        """Sleep on the host (used for timeouts and concurrency).

        Args:
            seconds: How long.
        """
        start = time.monotonic()
        self.calls.log.append(("slow", {"seconds": seconds}))
        await asyncio.sleep(seconds)
        self.calls.intervals.append((start, time.monotonic()))
        return seconds

    @operation
    async def nap(self, seconds: float) -> float:
        """Sleep on the host with no timeout of its own (the bridge default applies).

        Args:
            seconds: How long.
        """
        self.calls.log.append(("nap", {"seconds": seconds}))
        await asyncio.sleep(seconds)
        return seconds

    @operation
    async def fail(self, message: str) -> None:
        """Raise an error with this message.

        Args:
            message: The error message.
        """
        self.calls.log.append(("fail", {"message": message}))
        raise RuntimeError(message)

    @operation
    async def whoami(self, context: ToolkitContext) -> dict[str, Any]:
        """The calling session."""
        self.calls.log.append(("whoami", {}))
        return {"session_id": context.session_id, "user": context.user, "has_deadline": context.deadline is not None}

    @operation
    async def big(self, size: int) -> str:
        """A string of ``size`` bytes.

        Args:
            size: How many bytes.
        """
        return "x" * size

    @operation
    async def echo(self, value: Any) -> Any:
        """Return the value unchanged.

        Args:
            value: Anything JSON-able.
        """
        return value


@toolkit(name="canary", description="Must never run unless granted")
class Canary:
    def __init__(self) -> None:
        self.ran: list[str] = []

    @operation
    async def trip(self, note: str = "") -> str:
        """Record that the canary ran.

        Args:
            note: Anything.
        """
        self.ran.append(note)
        return "tripped"

    @operation
    async def trip_sync_too(self) -> str:
        """Another canary."""
        self.ran.append("sync")
        return "tripped"


class Weather(DynamicToolkit):
    """A dynamic toolkit, as an MCP adapter would build one."""

    name = "weather"
    description = "Weather forecasts (dynamic)"

    def __init__(self) -> None:
        self.executed: list[tuple[str, dict[str, Any]]] = []

    def operations(self) -> list[OperationSpec]:
        return [
            OperationSpec.from_json_schema(
                "forecast",
                description="The forecast for a city.",
                schema={
                    "type": "object",
                    "properties": {
                        "city": {"type": "string", "description": "City name."},
                        "days": {"type": "integer", "description": "How many days.", "default": 1},
                        "unit": {"enum": ["C", "F"]},
                    },
                    "required": ["city"],
                },
                returns="dict",
            )
        ]

    async def execute(self, operation: str, params: dict[str, Any], context: ToolkitContext) -> Any:
        self.executed.append((operation, params))
        return {"city": params["city"], "days": params.get("days", 1), "temps": [21.5]}


devops_instance = DevOps()
not_a_toolkit = 42
