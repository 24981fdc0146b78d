"""An agent on the Docker backend runs full CPython in the container (the container is the boundary)."""

from __future__ import annotations

from typing import Any

from codeact.engine.agent import default_sandbox_factory

from .conftest import MakeAgent, code


async def test_docker_agent_runs_full_python_and_calls_host_toolkits(make_agent: MakeAgent, docker_client: Any) -> None:
    built = make_agent(
        replies=[
            code(
                "import sys, os\n"
                "major = sys.version_info[0]\n"
                "uid = os.getuid()\n"
                'project = await devops.get_project_info("P-123")\n'
                "system.finish(f\"{major} {uid} {project['name']}\")"
            )
        ],
        sandbox_factory=default_sandbox_factory(backend="docker"),
    )
    events = await built.run("go")
    assert events[-1].type == "run.completed", events[-1]
    assert events[-1].answer == "3 65534 Checkout"  # type: ignore[attr-defined]
