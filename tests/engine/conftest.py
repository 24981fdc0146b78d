"""Fixtures shared by the engine tests (helpers add theirs here; keep additions additive)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.engine.openai_server import OpenAIServer, serve


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    """A local OpenAI-compatible server (``.base_url``, ``.requests``, ``.push(reply)``, ``.fail(status)``)."""
    with serve() as server:
        yield server
