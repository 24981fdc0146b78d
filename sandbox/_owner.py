"""Who owns a sandbox resource: the ``<pid>.<start time>`` tag of the host process that made it.

A leaf of the ``sandbox`` package (it imports nothing of it): the backends and the bridge channel name
their directories and runtimes with these tags (so does a queue worker its folder of unpacked blueprints,
``codeact.engine.queue``), and :mod:`codeact.sandbox.leftovers` reads them back to find what a crashed host
left behind.
"""

from __future__ import annotations

import os
from typing import Final

__all__ = [
    "BLUEPRINTS_DIR_PREFIX",
    "BRIDGE_DIR_PREFIX",
    "WORK_DIR_PREFIX",
    "dir_prefix",
    "host_tag",
    "process_start",
    "session_of",
    "tag_alive",
]

BLUEPRINTS_DIR_PREFIX: Final = "codeact-blueprints-"
BRIDGE_DIR_PREFIX: Final = "codeact-bridge-"
WORK_DIR_PREFIX: Final = "codeact-work-"


def process_start(pid: int) -> str:
    """The kernel start time of ``pid`` (``/proc/<pid>/stat`` field 22), "" when unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return ""
    # The command name (field 2) is in parentheses and may contain spaces: split after it.
    fields = stat[stat.rfind(b")") + 2 :].split()
    return fields[19].decode() if len(fields) > 19 else ""


def host_tag(pid: int | None = None) -> str:
    """``<pid>.<start time>`` of this process (or of ``pid``): names the owner of a sandbox resource."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}.{process_start(pid) or 0}"


def session_of(handler: object) -> str | None:
    """The session id a bridge handler serves (``ToolkitBridge.session_id``, or its wrapped ``bridge``'s)."""
    for candidate in (handler, getattr(handler, "bridge", None)):
        session = getattr(candidate, "session_id", None)
        if isinstance(session, str) and session:
            return session
    return None


def dir_prefix(kind: str) -> str:
    """The ``mkdtemp`` prefix of a resource directory of this host (``kind``: ``bridge``, ``work``, ``blueprints``)."""
    return f"codeact-{kind}-{host_tag()}-"


def tag_alive(tag: str) -> bool:
    """Whether the host process named by a ``<pid>.<start>`` tag is still running.

    Args:
        tag: From :func:`host_tag`.

    Returns:
        False for a malformed tag, a dead pid or a pid now used by another process.
    """
    pid_text, _, start = tag.partition(".")
    try:
        pid = int(pid_text)
    except ValueError:
        return False
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    return start in ("", "0") or start == process_start(pid)
