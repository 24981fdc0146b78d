"""Declared sandbox environments: the packages a blueprint's ``sandbox:`` block asks for.

A blueprint declares ``sandbox.packages`` (pip requirement strings) and/or ``sandbox.preset``
(:data:`PRESETS`). :func:`ensure_environment` turns that :class:`EnvSpec` into an
:class:`Environment` for one backend, building it the first time and reusing it after that:

1. the spec is resolved into a :class:`Recipe` (requirements + base + Python version + platform);
2. the recipe's content hash names a cache entry (``$CODEACT_ENV_CACHE``, else
   ``~/.cache/codeact/envs``); a complete entry is a hit (one ``stat``, one ``utime``);
3. a miss builds it under a per-key lock into a temporary directory and renames it into place
   (subprocess: a directory installed with the host's pip, mounted read-only into bubblewrap;
   docker: an image ``codeact-sandbox-env:<key>`` built on the base sandbox image);
4. the sandbox puts :data:`MOUNT_POINT` on the runtime's ``sys.path`` and lets the code import
   :attr:`Environment.modules`.

This package does not import the ``docker`` SDK: images are built with the ``docker`` CLI, like
``sandbox/image/build.sh`` builds the base image.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from codeact.sandbox.env._build import ENV_IMAGE_REPOSITORY, MOUNT_POINT, build_entry, docker_base_info, host_base_info
from codeact.sandbox.env._cache import CacheEntry, cache_root, entry_lock, list_entries, read_entry, remove_entry, touch
from codeact.sandbox.env._recipe import PRESETS, EnvSpec, Preset, Recipe, normalize_requirement
from codeact.sandbox.errors import EnvironmentBuildError

__all__ = [
    "CacheEntry",
    "ENV_IMAGE_REPOSITORY",
    "EnvSpec",
    "Environment",
    "MOUNT_POINT",
    "PRESETS",
    "Preset",
    "Recipe",
    "cache_root",
    "ensure_environment",
    "list_environments",
    "normalize_requirement",
    "prune_environments",
    "recipe_for",
]

Progress = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class Environment:
    """A built environment, ready to be handed to a sandbox.

    Attributes:
        key: The recipe's content hash.
        backend: ``subprocess`` or ``docker``.
        label: What the blueprint declared.
        site: Host directory of the installed packages (subprocess backend), else None.
        image: The image to run (docker backend), else None.
        modules: Top-level modules the environment makes importable (added to the import policy).
        built: True when this call built it; False on a cache hit.
    """

    key: str
    backend: Literal["subprocess", "docker"]
    label: str
    site: Path | None
    image: str | None
    modules: frozenset[str]
    built: bool = False


def recipe_for(spec: EnvSpec, *, backend: Literal["subprocess", "docker"], base_image: str | None = None) -> Recipe:
    """The recipe of ``spec`` on ``backend`` (docker: on ``base_image``, default the base sandbox image).

    Raises:
        EnvironmentBuildError: An unknown preset, a malformed requirement, or (docker) a base image
            that cannot be asked for its Python version.
    """
    requirements = spec.requirements()
    if backend == "docker":
        if base_image is None:
            from codeact.sandbox.image import image_tag

            base_image = image_tag()
        python, plat = docker_base_info(base_image)
        base = base_image
    else:
        python, plat = host_base_info()
        base = "host"
    return Recipe(
        backend=backend, base=base, python=python, platform=plat, requirements=requirements, label=spec.describe()
    )


def ensure_environment(
    spec: EnvSpec,
    *,
    backend: Literal["subprocess", "docker"],
    base_image: str | None = None,
    index_url: str | None = None,
    progress: Progress | None = None,
) -> Environment | None:
    """The environment ``spec`` declares on ``backend``: from the cache, or built now.

    Args:
        spec: The declared packages / preset.
        backend: The sandbox backend that will run it.
        base_image: (docker) The base image (default: the base sandbox image's tag).
        index_url: A package index replacing the host's pip configuration (also
            ``$CODEACT_ENV_INDEX_URL``), or None.
        progress: Receives a line per build step (default: written to stderr). Not called on a hit.

    Returns:
        The environment, or None when ``spec`` declares nothing.

    Raises:
        EnvironmentBuildError: A package could not be installed (the message names it and quotes
            pip), or the image could not be built. Nothing half-built is cached.
    """
    if spec.empty:
        return None
    import os

    recipe = recipe_for(spec, backend=backend, base_image=base_image)
    entry_dir = cache_root() / recipe.key
    entry = _usable(entry_dir)
    built = False
    if entry is None:
        say = progress or _stderr
        with entry_lock(recipe.key):
            entry = _usable(entry_dir)
            if entry is None:
                if entry_dir.exists():
                    stale = read_entry(entry_dir)
                    if stale is not None:
                        remove_entry(stale)  # its image was removed behind the cache's back
                index = index_url or os.environ.get("CODEACT_ENV_INDEX_URL") or None
                build_entry(recipe, index_url=index, progress=say)
                entry = read_entry(entry_dir)
                built = True
        if entry is None:
            raise EnvironmentBuildError(f"the sandbox environment {recipe.key} was built but cannot be read")
    else:
        touch(entry_dir)
    return Environment(
        key=recipe.key,
        backend=backend,
        label=recipe.label,
        site=entry.site,
        image=entry.image,
        modules=entry.modules,
        built=built,
    )


def _usable(entry_dir: Path) -> CacheEntry | None:
    entry = read_entry(entry_dir)
    if entry is None:
        return None
    if entry.image is not None and not _image_exists(entry.image):
        return None
    if entry.image is None and entry.site is None:
        return None
    return entry


def _image_exists(image: str) -> bool:
    """Whether the Docker engine has ``image``: one HTTP request on its Unix socket (~1 ms), else the CLI."""
    answer = _engine_has_image(image)
    if answer is not None:
        return answer
    try:
        out = subprocess.run(
            ["docker", "image", "inspect", "--format", "{{.Id}}", image],
            capture_output=True,
            check=False,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0


def _engine_has_image(image: str) -> bool | None:
    """Ask the engine's API socket directly (no ``docker`` process); None when that is not possible."""
    import http.client
    import os
    import socket
    from urllib.parse import quote

    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not host.startswith("unix://"):
        return None
    path = host.removeprefix("unix://")

    class _UnixConnection(http.client.HTTPConnection):
        def connect(self) -> None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(10)
            sock.connect(path)
            self.sock = sock

    connection = _UnixConnection("localhost", timeout=10)
    try:
        connection.request("GET", f"/images/{quote(image, safe='')}/json")
        status = connection.getresponse().status
    except OSError:
        return None
    finally:
        connection.close()
    if status == 200:
        return True
    return False if status == 404 else None


def _stderr(line: str) -> None:
    sys.stderr.write(f"[sandbox env] {line}\n")
    sys.stderr.flush()


def list_environments() -> list[CacheEntry]:
    """Every cached environment with its size, most recently used first."""
    return list_entries(with_size=True)


def prune_environments(*, keys: tuple[str, ...] = (), unused_for_s: float | None = None) -> list[CacheEntry]:
    """Remove cached environments (their directories and, for docker, their images).

    Args:
        keys: Only these keys (prefixes accepted); empty: every entry that passes ``unused_for_s``.
        unused_for_s: Only entries not used for at least this many seconds; None: regardless of use.

    Returns:
        The removed entries.
    """
    import time

    from codeact.sandbox.env._cache import remove_stale_builds

    remove_stale_builds()
    now = time.time()
    removed = []
    for entry in list_entries(with_size=True):
        if keys and not any(entry.key.startswith(k) for k in keys):
            continue
        if unused_for_s is not None and now - entry.last_used < unused_for_s:
            continue
        with entry_lock(entry.key):
            remove_entry(entry)
        removed.append(entry)
    return removed
