"""Fixtures of the tracing tests: an in-memory span exporter installed for one test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from codeact.engine import telemetry
from tests.engine.agent.conftest import probe, registry, sqlite_store  # noqa: F401 - shared fixtures


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on, into memory; off again (and the environment read afresh) afterwards."""
    exporter = InMemorySpanExporter()
    telemetry.configure(exporter=exporter)
    try:
        yield exporter
    finally:
        telemetry.reset()
