"""Progress of a slow step of the model client (litellm's import, a local model's load), told after a second.

A step wrapped in :func:`slow_step` says nothing when it is quick. When it has run ``CODEACT_PROGRESS_AFTER_S``
seconds (default 1), every listener registered with :func:`on_slow_step` gets ``"WHAT..."``, and when it
ends ``"WHAT: done in N.N s"`` (``codeact run`` prints them on stderr); with no listener they go to the
``codeact.model`` logger at INFO. A leaf module: it imports nothing of the product.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["on_slow_step", "slow_step"]

_log = logging.getLogger("codeact.model")
_listeners: list[Callable[[str], None]] = []
_lock = threading.Lock()


def on_slow_step(listener: Callable[[str], None]) -> Callable[[], None]:
    """Call ``listener(line)`` for each progress line; returns the function that removes it."""
    with _lock:
        _listeners.append(listener)

    def remove() -> None:
        with _lock:
            if listener in _listeners:
                _listeners.remove(listener)

    return remove


def _emit(line: str) -> None:
    with _lock:
        listeners = list(_listeners)
    if not listeners:
        _log.info("%s", line)
    for listener in listeners:
        try:
            listener(line)
        except Exception:  # a broken listener must not break the model call
            _log.exception("progress listener failed")


def _after() -> float:
    try:
        return max(0.0, float(os.environ.get("CODEACT_PROGRESS_AFTER_S", "1")))
    except ValueError:
        return 1.0


@contextmanager
def slow_step(what: str) -> Iterator[None]:
    """Tell the listeners about ``what`` if it takes longer than the threshold (see the module docstring)."""
    after = _after()
    started = time.monotonic()
    done = threading.Event()
    told = threading.Event()

    def watch() -> None:
        if not done.wait(after):
            told.set()
            _emit(f"{what}...")

    if after == 0:
        watch()
    else:
        threading.Thread(target=watch, name="codeact-progress", daemon=True).start()
    try:
        yield
    finally:
        done.set()
        if told.is_set():
            _emit(f"{what}: done in {time.monotonic() - started:.1f} s")
