"""The model cache: ``$CODEACT_MODELS_DIR`` (default ``~/.cache/codeact/models/``).

Each usable model has a manifest ``<name>.json`` (name, sha256, size, path, source). A pulled model's
file is ``<name>.gguf`` beside it, written only after its hash matched the registry's; a model added
with ``codeact models add`` stays where the user keeps it and the manifest records its path and the
sha256 it had when added. A manifest is written last, so a half-written file is never listed.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from codeact.engine.model.errors import LocalModelError
from codeact.engine.model.local.registry import KNOWN_MODELS, known_model

__all__ = [
    "CachedModel",
    "add_model",
    "cached_model",
    "cached_models",
    "models_dir",
    "remove_model",
    "require_model",
    "sha256_of",
    "write_manifest",
]

_CHUNK = 1 << 20


@dataclass(frozen=True, kw_only=True)
class CachedModel:
    """A model the cache can serve.

    Attributes:
        name: The name after ``local/``.
        path: The GGUF file.
        sha256: Its sha256 when it was pulled or added.
        size: Its size in bytes then.
        source: ``pull <package>1..N==<version>`` or ``add <path>``.
    """

    name: str
    path: str
    sha256: str
    size: int
    source: str


def models_dir(env: Mapping[str, str] | None = None) -> Path:
    """The cache directory: ``CODEACT_MODELS_DIR``, else ``~/.cache/codeact/models``."""
    env = os.environ if env is None else env
    if env.get("CODEACT_MODELS_DIR"):
        return Path(env["CODEACT_MODELS_DIR"]).expanduser()
    return Path.home() / ".cache" / "codeact" / "models"


def sha256_of(path: Path, *, on_bytes: Callable[[int], None] | None = None) -> str:
    """The sha256 of a file, read in 1 MiB chunks (``on_bytes`` gets each chunk's length)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
            if on_bytes is not None:
                on_bytes(len(chunk))
    return digest.hexdigest()


def _check_name(name: str) -> None:
    if not name or "/" in name or name.startswith(".") or name != name.strip():
        raise LocalModelError(f"invalid local model name {name!r}: use a plain name such as 'qwen2.5-coder-0.5b'")


def _manifest(name: str, directory: Path) -> Path:
    return directory / f"{name}.json"


def write_manifest(entry: CachedModel, directory: Path) -> None:
    """Record ``entry`` in the cache (atomically: a reader sees the old manifest or the new one)."""
    directory.mkdir(parents=True, exist_ok=True)
    target = _manifest(entry.name, directory)
    partial = target.with_suffix(".json.partial")
    partial.write_text(json.dumps(asdict(entry), indent=2) + "\n", encoding="utf-8")
    partial.replace(target)


def cached_model(name: str, *, directory: Path | None = None) -> CachedModel | None:
    """The cache's entry for ``name`` whose file is still there with its recorded size, or None."""
    _check_name(name)
    directory = models_dir() if directory is None else directory
    try:
        data = json.loads(_manifest(name, directory).read_text(encoding="utf-8"))
        entry = CachedModel(**data)
    except (OSError, ValueError, TypeError):
        return None
    path = Path(entry.path)
    if not path.is_file() or path.stat().st_size != entry.size:
        return None
    return entry


def cached_models(*, directory: Path | None = None) -> list[CachedModel]:
    """Every usable entry of the cache, by name."""
    directory = models_dir() if directory is None else directory
    if not directory.is_dir():
        return []
    found = (cached_model(p.stem, directory=directory) for p in sorted(directory.glob("*.json")))
    return [entry for entry in found if entry is not None]


def require_model(name: str, *, directory: Path | None = None) -> CachedModel:
    """The cached model ``name``, or a :class:`LocalModelError` saying the one command that fixes it."""
    entry = cached_model(name, directory=directory)
    if entry is not None:
        return entry
    where = models_dir() if directory is None else directory
    if known_model(name) is not None:
        raise LocalModelError(
            f"local model {name!r} is not in the model cache ({where}): run `codeact models pull {name}`"
        )
    known = ", ".join(sorted(KNOWN_MODELS))
    raise LocalModelError(
        f"unknown local model {name!r}: pull a known one ({known}) with `codeact models pull NAME`, "
        f"or register your own GGUF file with `codeact models add {name} PATH`"
    )


def add_model(name: str, path: Path, *, directory: Path | None = None,
              on_bytes: Callable[[int], None] | None = None) -> CachedModel:  # fmt: skip
    """Register a GGUF file the user trusts under ``name`` (the file stays where it is; its sha256 is recorded).

    Raises:
        LocalModelError: The name is invalid or the file is missing or not a GGUF file.
    """
    _check_name(name)
    file = path.expanduser().resolve()
    if not file.is_file():
        raise LocalModelError(f"codeact models add: {str(path)!r} is not a file: give the path of a .gguf model file")
    with file.open("rb") as handle:
        magic = handle.read(4)
    if magic != b"GGUF":
        raise LocalModelError(
            f"codeact models add: {str(path)!r} is not a GGUF file (it does not start with b'GGUF'): "
            "llama.cpp serves GGUF models only"
        )
    entry = CachedModel(name=name, path=str(file), sha256=sha256_of(file, on_bytes=on_bytes),
                        size=file.stat().st_size, source=f"add {file}")  # fmt: skip
    write_manifest(entry, models_dir() if directory is None else directory)
    return entry


def remove_model(name: str, *, directory: Path | None = None) -> CachedModel | None:
    """Forget ``name``; a pulled file in the cache is deleted, an added file is left where it is."""
    _check_name(name)
    directory = models_dir() if directory is None else directory
    manifest = _manifest(name, directory)
    entry = cached_model(name, directory=directory)
    owned = directory / f"{name}.gguf"
    manifest.unlink(missing_ok=True)
    owned.unlink(missing_ok=True)
    return entry
