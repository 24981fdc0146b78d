"""Shared fixtures: the real services that `make test` starts.

`make test` exports ``CODEACT_TEST_REDIS_URL`` and ``CODEACT_REQUIRE_SERVICES=1``. When services
are required (that, or ``CI=true``) a missing service FAILS the test with a message naming the
missing piece; only a developer running pytest by hand without services gets a skip.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def services_required() -> bool:
    """True under `make test` or in CI: missing services are failures, not skips."""
    return os.environ.get("CI") == "true" or os.environ.get("CODEACT_REQUIRE_SERVICES") == "1"


def missing_service(message: str) -> None:
    """Fail (CI, `make test`) or skip (a bare local pytest run) because a service is missing."""
    if services_required():
        pytest.fail(f"{message} (run the tests with `make test`, which starts it)", pytrace=False)
    pytest.skip(f"{message}; run `make test` to start it")


@pytest.fixture(scope="session")
def redis_url() -> str:
    """URL of the real Redis server started by `make test`, checked with PING."""
    url = os.environ.get("CODEACT_TEST_REDIS_URL")
    if not url:
        missing_service("Redis server missing: CODEACT_TEST_REDIS_URL is not set")
        raise AssertionError("unreachable")
    import redis

    try:
        redis.Redis.from_url(url).ping()
    except redis.RedisError as exc:
        missing_service(f"Redis server at {url} does not answer PING: {exc}")
    return url


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    """A docker SDK client for the real Docker engine started by `make test`."""
    import docker
    import docker.errors

    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        missing_service(f"Docker engine missing: {exc}")
        raise AssertionError("unreachable") from exc
    yield client
    client.close()
