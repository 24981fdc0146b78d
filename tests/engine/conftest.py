"""Fixtures shared by the engine tests (helpers add theirs here; keep additions additive)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from codeact.engine.model import stop_background_tasks
from tests.engine.openai_server import OpenAIServer, serve


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    """A local OpenAI-compatible server (``.base_url``, ``.requests``, ``.push(reply)``, ``.fail(status)``)."""
    with serve() as server:
        yield server


@pytest.fixture(autouse=True)
async def _litellm_worker_stopped() -> AsyncIterator[None]:
    """Stop litellm's logging worker on the test's loop before pytest-asyncio closes that loop.

    Tests that build a ``ModelClient`` without closing it would otherwise leave the worker's task
    pending on a closed loop, destroyed (with a warning) during some later test.
    """
    yield
    await stop_background_tasks()


@pytest.fixture
def cli_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CLI test's own world: CODEACT_HOME and the working directory in ``tmp_path``, no model/store/profile
    from the environment, litellm's local price map, a dummy OpenAI key (the local test server takes any)."""
    monkeypatch.setenv("CODEACT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for name in ("CODEACT_MODEL", "CODEACT_STORE", "CODEACT_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
