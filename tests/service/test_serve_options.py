"""`codeact serve --sandbox docker`: the runners' code runs in a container (real Docker); the manifest's description."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.engine.openai_server import OpenAIServer, serve
from tests.service.conftest import BLUEPRINT, RUNNER
from tests.service.helpers import Served, context, read_sse, start_server, stop_server, wait_until

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def docker_service(
    tmp_path_factory: pytest.TempPathFactory, docker_client: Any
) -> Iterator[tuple[Served, OpenAIServer]]:
    from codeact.sandbox.image import ensure_image

    ensure_image(docker_client)
    tmp = tmp_path_factory.mktemp("serve-docker")
    blueprint = tmp / "agent.yaml"
    blueprint.write_text(BLUEPRINT)
    with serve() as model:
        served = start_server(
            tmp,
            [blueprint],
            "--sandbox", "docker",
            "--toolkit", "tests.engine.slow_toolkit:Slow",
            "--model", "openai/test-model",
            "--base-url", model.base_url,
            env={"PYTHONPATH": str(REPO)},
        )  # fmt: skip
        yield served, model
        assert stop_server(served) == 0, served.stderr.read_text()


@pytest.mark.docker
def test_serve_with_docker_runs_the_code_in_a_container(
    docker_service: tuple[Served, OpenAIServer], docker_client: Any
) -> None:
    served, model = docker_service
    model.push(
        "I ping the service, which needs approval.\n```python\npong = await slow.ping()\n```\n",
        "Approved.\n```python\nsystem.finish(pong + ' from the container')\n```\n",
    )

    def containers() -> list[Any]:
        label = f"org.codeact.host_pid={served.process.pid}"
        return list(docker_client.containers.list(ignore_removed=True, filters={"label": label}))

    with served.client() as client:
        [manifest] = client.get("/v1/runners").json()["runners"]
        assert manifest["description"] == {"en_US": "A test agent served over HTTP."}  # the blueprint's description
        ctx = context("Ping it.")
        body = {"runner_id": RUNNER, "context": ctx}
        with client.stream("POST", "/v1/runs", json=body, headers={"Accept": "text/event-stream"}) as stream:
            for event in read_sse(stream):
                if event.event == "action.requested":
                    break
        run_id = ctx["run_id"]
        wait_until(lambda: client.get(f"/v1/runs/{run_id}").json()["status"] == "waiting", timeout=60, what="the pause")
        assert containers(), "no sandbox container of the server is running while its run waits"
        [pending] = client.get(f"/v1/runs/{run_id}").json()["pending"]
        answer = client.post(
            f"/v1/runs/{run_id}/interactions",
            json={"interaction_id": pending["interaction_id"], "action_id": "approve", "values": {}},
        )
        assert answer.status_code == 200, answer.text
        with client.stream("GET", f"/v1/runs/{run_id}/events", headers={"Accept": "text/event-stream"}) as stream:
            rest = list(read_sse(stream))
    assert rest[-1].event == "run.completed", rest[-1]
    said = [e.data["data"]["message"]["content"] for e in rest if e.event == "message.completed"]
    assert "pong from the container" in said


def test_serve_refuses_an_unknown_sandbox(tmp_path: Path) -> None:
    import subprocess
    import sys

    blueprint = tmp_path / "agent.yaml"
    blueprint.write_text(BLUEPRINT)
    codeact = str(Path(sys.executable).parent / "codeact")
    done = subprocess.run(
        [codeact, "serve", "--blueprints", str(blueprint), "--sandbox", "vm", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": str(Path(sys.executable).parent), "CODEACT_HOME": str(tmp_path)},
    )
    assert done.returncode != 0
    assert "--sandbox must be 'subprocess' or 'docker', got 'vm'" in done.stderr
