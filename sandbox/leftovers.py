"""What a crashed host leaves behind, and how ``codeact sandbox gc`` finds and removes it.

Every sandbox resource names the host process that made it, as ``<pid>.<start time>`` (the
kernel start time makes a recycled pid harmless):

* bridge socket directories: ``<tmp>/codeact-bridge-<pid>.<start>-XXXX``;
* ``process``-isolation work directories: ``<tmp>/codeact-work-<pid>.<start>-XXXX``;
* a queue worker's unpacked blueprint folders: ``<tmp>/codeact-blueprints-<pid>.<start>-XXXX``
  (``codeact.engine.queue``; the next worker on the machine removes those of dead workers too,
  through :func:`remove_dead_dirs`, when it makes its own);
* subprocess runtimes (and their bubblewrap): ``--host <pid>.<start> --session <id>`` on their
  command line;
* Docker containers: labels (``codeact.sandbox.docker_sandbox``), collected by :func:`remove_leftovers`
  too when the Docker engine is reachable.

A runtime exits by itself within moments of its host's death (it watches its bridge socket), so
``gc`` mostly finds directories and stopped containers; it kills runtimes it finds all the same.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from codeact.sandbox._owner import (
    BLUEPRINTS_DIR_PREFIX,
    BRIDGE_DIR_PREFIX,
    WORK_DIR_PREFIX,
    dir_prefix,
    host_tag,
    session_of,
    tag_alive,
)

__all__ = [
    "BLUEPRINTS_DIR_PREFIX",
    "BRIDGE_DIR_PREFIX",
    "WORK_DIR_PREFIX",
    "DirKind",
    "Leftover",
    "dir_prefix",
    "host_tag",
    "remove_dead_dirs",
    "remove_leftovers",
    "session_of",
    "tag_alive",
]

_UNTAGGED_AGE_S: Final = 3600.0  # a directory without an owner tag (older versions) is stale after this
# A worker of an older version may run for days with its untagged blueprints folder: only --all removes one.
_UNTAGGED_KEPT: Final = frozenset({"blueprints_dir"})

DirKind = Literal["socket_dir", "work_dir", "blueprints_dir"]
_DIR_KINDS: Final[Mapping[str, DirKind]] = {
    BRIDGE_DIR_PREFIX: "socket_dir",
    WORK_DIR_PREFIX: "work_dir",
    BLUEPRINTS_DIR_PREFIX: "blueprints_dir",
}
_RUNTIME_SCRIPT: Final = "runtime/main.py"


@dataclass(frozen=True, kw_only=True)
class Leftover:
    """One resource that :func:`remove_leftovers` removed.

    Attributes:
        kind: ``container``, ``runtime`` (a subprocess runtime or its bubblewrap), ``socket_dir``,
            ``work_dir`` or ``blueprints_dir`` (a queue worker's unpacked blueprint folders).
        id: The container's short id, the process id, or the directory path.
        session: The session it served ("" when unknown).
        host_pid: The host process that made it ("" when unknown).
        status: What it was doing (``running``, ``exited``, ``stale``...).
        name: The container's name ("" for other kinds).
    """

    kind: Literal["container", "runtime"] | DirKind
    id: str
    name: str = ""
    session: str
    host_pid: str
    status: str


def remove_leftovers(
    *, include_live: bool = False, docker: bool = True, temp_dir: str | Path | None = None
) -> tuple[list[Leftover], str | None]:
    """Remove every sandbox leftover whose host is gone (or every one, with ``include_live``).

    Args:
        include_live: Also remove the resources of running hosts (their sandboxes break).
        docker: Also collect Docker containers (by label).
        temp_dir: Where the directories live (default: the system temp dir).

    Returns:
        ``(removed, docker_error)``: what was removed, and why containers could not be collected
        (None when they were, or ``docker`` is False).
    """
    removed = _kill_runtimes(include_live)
    removed += _remove_dirs(Path(temp_dir or tempfile.gettempdir()), include_live, kinds=_DIR_KINDS)
    docker_error: str | None = None
    if docker:
        from codeact.sandbox.errors import SandboxError

        try:
            from codeact.sandbox.docker_sandbox import remove_orphans

            for c in remove_orphans(include_live=include_live):
                removed.append(
                    Leftover(
                        kind="container", id=c.id, name=c.name, session=c.session, host_pid=c.host_pid, status=c.status
                    )
                )
        except SandboxError as exc:
            docker_error = exc.message
        except ImportError as exc:  # the docker SDK is not installed: nothing can have been started
            docker_error = f"the docker SDK is not installed ({exc})"
    return removed, docker_error


def remove_dead_dirs(kind: DirKind, *, temp_dir: str | Path | None = None) -> list[Leftover]:
    """Remove the ``kind`` directories whose host process is gone: what a host runs as it makes its own.

    Cheap: one listing of the temp dir, and a ``/proc`` look-up per directory of that kind. Only
    directories named with an owner tag whose process is dead are removed, never a running host's;
    one without a tag (an older version's) is left to ``codeact sandbox gc``.

    Args:
        kind: ``socket_dir``, ``work_dir`` or ``blueprints_dir``.
        temp_dir: Where the directories live (default: the system temp dir).

    Returns:
        What was removed.
    """
    prefixes = {prefix: k for prefix, k in _DIR_KINDS.items() if k == kind}
    return _remove_dirs(Path(temp_dir or tempfile.gettempdir()), False, kinds=prefixes, untagged=False)


def _runtime_processes() -> list[tuple[int, str, str]]:
    """``(pid, host tag, session)`` of every subprocess runtime (or bubblewrap) visible in /proc."""
    found: list[tuple[int, str, str]] = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
        except OSError:
            continue
        args = [a.decode("utf-8", "replace") for a in argv]
        if "--host" not in args or not any(a.endswith(_RUNTIME_SCRIPT) for a in args):
            continue
        options = dict(zip(args, args[1:], strict=False))
        found.append((int(entry), options.get("--host", ""), options.get("--session", "")))
    return found


def _kill_runtimes(include_live: bool) -> list[Leftover]:
    removed: list[Leftover] = []
    for pid, tag, session in _runtime_processes():
        if not include_live and tag_alive(tag):
            continue
        try:
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
        removed.append(
            Leftover(kind="runtime", id=str(pid), session=session, host_pid=tag.partition(".")[0], status="running")
        )
    return removed


def _remove_dirs(
    tmp: Path, include_live: bool, *, kinds: Mapping[str, DirKind], untagged: bool = True
) -> list[Leftover]:
    """Remove the directories of ``kinds`` (prefix -> kind) in ``tmp`` whose owner is dead (or all: ``include_live``).

    A directory without an owner tag is removed when ``untagged`` allows it: with ``include_live``,
    or once it is ``_UNTAGGED_AGE_S`` old unless its kind is in ``_UNTAGGED_KEPT``.
    """
    removed: list[Leftover] = []
    now = time.time()
    try:
        names = os.listdir(tmp)
    except OSError:
        return removed
    for name in names:
        found = next(((prefix, k) for prefix, k in kinds.items() if name.startswith(prefix)), None)
        if found is None:
            continue
        path, kind, rest = tmp / name, found[1], name[len(found[0]) :]
        with contextlib.suppress(OSError):
            if path.is_symlink() or not path.is_dir() or (path.stat().st_uid != os.geteuid() and os.geteuid() != 0):
                continue
        tag, sep, _ = rest.rpartition("-")
        owner = tag if sep and "." in tag else ""
        if owner:
            if not include_live and tag_alive(owner):
                continue
        elif not untagged or (not include_live and (kind in _UNTAGGED_KEPT or _recent(path, now))):
            continue
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            removed.append(
                Leftover(kind=kind, id=str(path), session="", host_pid=owner.partition(".")[0], status="stale")
            )
    return removed


def _recent(path: Path, now: float) -> bool:
    """Whether an untagged directory may still be in use: younger than ``_UNTAGGED_AGE_S`` (or unreadable)."""
    try:
        return now - path.stat().st_mtime < _UNTAGGED_AGE_S
    except OSError:
        return True
