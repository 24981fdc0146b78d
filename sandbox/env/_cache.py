"""The environment cache on disk: where it lives, what an entry holds, listing and pruning.

Layout (``$CODEACT_ENV_CACHE``, else ``~/.cache/codeact/envs``)::

    <key>/env.json     the recipe, the build time, the importable modules, the image tag (docker)
    <key>/site/        the installed packages (subprocess backend; mounted read-only at run time)
    <key>/last_used    its modification time is the last use
    .build-<key>-XXXX/ an entry being built (renamed to <key>/ when complete, removed on failure)
    .lock-<key>        serialises two builds of the same key

An entry exists only once it is complete: it is built in a temporary directory and renamed into
place atomically, so nothing half-built is ever found by a later run.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

__all__ = ["CacheEntry", "cache_root", "entry_lock", "list_entries", "read_entry", "remove_entry", "touch"]

CACHE_ENV_VAR: Final = "CODEACT_ENV_CACHE"
ENV_FILE: Final = "env.json"
SITE_DIR: Final = "site"
USED_FILE: Final = "last_used"


def cache_root() -> Path:
    """The cache directory (``$CODEACT_ENV_CACHE``, else ``~/.cache/codeact/envs``), created if missing."""
    configured = os.environ.get(CACHE_ENV_VAR)
    root = Path(configured).expanduser() if configured else Path.home() / ".cache" / "codeact" / "envs"
    root.mkdir(parents=True, exist_ok=True)
    return root


@dataclass(frozen=True, kw_only=True)
class CacheEntry:
    """One cached environment.

    Attributes:
        key: The recipe's content hash (the directory name).
        backend: ``subprocess`` or ``docker``.
        label: What the blueprint declared (``preset datascience``, ``numpy, sympy``).
        requirements: The canonical requirement strings.
        python: ``MAJOR.MINOR`` of the interpreter the packages are for.
        base: ``host`` or the Docker base image.
        image: The image tag (docker backend), else None.
        site: The installed packages' directory (subprocess backend), else None.
        modules: Top-level modules the environment makes importable.
        size_bytes: Disk used (the directory; the image's size for docker when known).
        built_at: When it was built (epoch seconds).
        last_used: When a run last used it (epoch seconds).
        path: The entry's directory.
    """

    key: str
    backend: str
    label: str
    requirements: tuple[str, ...]
    python: str
    base: str
    image: str | None
    site: Path | None
    modules: frozenset[str]
    size_bytes: int
    built_at: float
    last_used: float
    path: Path

    def to_json(self) -> dict[str, Any]:
        """A JSON object for ``codeact sandbox list --json``."""
        return {
            "key": self.key,
            "backend": self.backend,
            "label": self.label,
            "requirements": list(self.requirements),
            "python": self.python,
            "base": self.base,
            "image": self.image,
            "path": str(self.path),
            "modules": sorted(self.modules),
            "size_bytes": self.size_bytes,
            "built_at": self.built_at,
            "last_used": self.last_used,
        }


def read_entry(path: Path, *, with_size: bool = False) -> CacheEntry | None:
    """The entry in ``path``, or None when it is not a complete entry."""
    try:
        data = json.loads((path / ENV_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    try:
        used = (path / USED_FILE).stat().st_mtime
    except OSError:
        used = float(data.get("built_at", 0.0))
    image = data.get("image")
    site = path / SITE_DIR
    size = 0
    if with_size:
        size = _dir_size(path)
        if isinstance(image, str):
            size += _image_size(image)
    return CacheEntry(
        key=path.name,
        backend=str(data.get("backend", "?")),
        label=str(data.get("label", "")),
        requirements=tuple(str(r) for r in data.get("requirements") or ()),
        python=str(data.get("python", "")),
        base=str(data.get("base", "")),
        image=image if isinstance(image, str) else None,
        site=site if site.is_dir() else None,
        modules=frozenset(str(m) for m in data.get("modules") or ()),
        size_bytes=size,
        built_at=float(data.get("built_at", 0.0)),
        last_used=used,
        path=path,
    )


def touch(path: Path) -> None:
    """Record a use of the entry in ``path`` (one ``utime``; the hot path of a cache hit)."""
    used = path / USED_FILE
    try:
        os.utime(used)
    except FileNotFoundError:
        with contextlib.suppress(OSError):
            used.touch()
    except OSError:
        pass


def list_entries(*, with_size: bool = True) -> list[CacheEntry]:
    """Every complete entry in the cache, most recently used first."""
    root = cache_root()
    entries = []
    for child in root.iterdir():
        if child.name.startswith(".") or not child.is_dir():
            continue
        entry = read_entry(child, with_size=with_size)
        if entry is not None:
            entries.append(entry)
    return sorted(entries, key=lambda e: e.last_used, reverse=True)


def remove_entry(entry: CacheEntry) -> None:
    """Delete an entry: its image first (docker), then its directory (renamed away first, atomically)."""
    if entry.image is not None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(["docker", "image", "rm", "-f", entry.image], capture_output=True, check=False, timeout=120)
    doomed = entry.path.with_name(f".prune-{entry.key}-{os.getpid()}-{time.monotonic_ns()}")
    try:
        entry.path.rename(doomed)
    except OSError:
        return
    shutil.rmtree(doomed, ignore_errors=True)


def remove_stale_builds(max_age_s: float = 3600.0) -> int:
    """Remove leftovers of builds that died (``.build-*``, ``.prune-*``) older than ``max_age_s``."""
    removed = 0
    now = time.time()
    for child in cache_root().iterdir():
        if child.name.startswith((".build-", ".prune-")):
            with contextlib.suppress(OSError):
                if now - child.stat().st_mtime > max_age_s:
                    shutil.rmtree(child, ignore_errors=True)
                    removed += 1
    return removed


@contextlib.contextmanager
def entry_lock(key: str) -> Iterator[None]:
    """Hold the build lock of ``key`` (another process building the same key waits)."""
    lock_path = cache_root() / f".lock-{key}"
    with open(lock_path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _dir_size(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


def _image_size(image: str) -> int:
    try:
        out = subprocess.run(
            ["docker", "image", "inspect", "-f", "{{.Size}}", image],
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return 0
    try:
        return int(out.stdout.strip()) if out.returncode == 0 else 0
    except ValueError:
        return 0
