"""Fixtures shared by the engine tests (helpers add theirs here; keep additions additive)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

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
