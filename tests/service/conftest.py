"""Fixtures of the service tests: one `codeact serve` subprocess per module, models from a local server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine.openai_server import OpenAIServer, serve
from tests.service.helpers import Served, start_server, stop_server

REPO = Path(__file__).resolve().parents[2]
RUNNER = "svc-agent"
BLUEPRINT = f"""\
version: codeact.agent/v1
extend: codeact-base
id: {RUNNER}
description: A test agent served over HTTP.
workflow: {{maxTurns: 4, codeact: {{thought: 'off'}}}}
toolkits:
  - ref: system
  - ref: slow
    approval: ask
"""


@pytest.fixture(scope="module")
def model_server() -> Iterator[OpenAIServer]:
    """The OpenAI-compatible test server every run of the module's service asks (replies pushed per test)."""
    with serve() as server:
        yield server


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, model_server: OpenAIServer) -> Iterator[Served]:
    """`codeact serve` on a free port serving the test blueprint, with the slow toolkit (approval: ask)."""
    tmp = tmp_path_factory.mktemp("service")
    blueprint = tmp / "agent.yaml"
    blueprint.write_text(BLUEPRINT)
    served = start_server(
        tmp,
        [blueprint],
        "--toolkit", "tests.engine.slow_toolkit:Slow",
        "--model", "openai/test-model",
        "--base-url", model_server.base_url,
        env={"PYTHONPATH": str(REPO)},
    )  # fmt: skip
    yield served
    assert stop_server(served) == 0, served.stderr.read_text()


@pytest.fixture
def replies(model_server: OpenAIServer) -> Iterator[OpenAIServer]:
    """The model server, checked empty before and after the test (each test pushes its own replies)."""
    assert model_server.pending == 0
    yield model_server
    while model_server.pending:  # a failed test must not leave replies for the next one
        model_server._next()
