"""Artifacts: files the code writes into ``outputs/`` come back to the host with the round.

Runs INSIDE the sandbox (standard library only). The runtime creates ``outputs/`` in its working
directory when it starts; at the end of each round it

1. saves every matplotlib figure still open as ``outputs/figure-N.png`` and closes it (figures the
   code showed with ``plt.show()`` were saved at that moment by :mod:`codeact.sandbox.runtime.mpl_backend`,
   the headless backend ``MPLBACKEND`` names);
2. lists the regular files under ``outputs/`` that are new or changed since the last round;
3. sends each one (base64) within the per-file and per-round byte caps of the ``execute`` request's
   ``limits``; a file over a cap is REFUSED with a note (name, size, reason), never dropped silently.

The host checks every entry again (names, sizes, content) and decides the MIME type itself.
"""

from __future__ import annotations

import binascii
import os
import sys

TYPE_CHECKING = False  # not typing's: the runtime does not import typing to start (see protocol.py)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Final

__all__ = ["OUTPUTS_DIR", "Outputs", "keep_files", "outputs", "prepare", "save_open_figures"]

OUTPUTS_DIR: Final = "outputs"
_MAX_FILES: Final = 64
_DEFAULT_FILE_BYTES: Final = 2 * 1024 * 1024
_DEFAULT_ROUND_BYTES: Final = 4 * 1024 * 1024

_current: Outputs | None = None


class Outputs:
    """The ``outputs/`` folder of one runtime and what the host has already been sent.

    Args:
        root: The folder (absolute).
    """

    def __init__(self, root: str) -> None:
        self.root = root
        self._sent: dict[str, tuple[int, int]] = {}
        self._figures = 0

    def _scan(self) -> dict[str, tuple[int, int]]:
        found: dict[str, tuple[int, int]] = {}
        for dirpath, dirnames, filenames in os.walk(self.root, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if not os.path.islink(os.path.join(dirpath, d)))
            for filename in sorted(filenames):
                path = os.path.join(dirpath, filename)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                if not _is_regular(st.st_mode):
                    continue
                found[os.path.relpath(path, self.root)] = (st.st_size, st.st_mtime_ns)
                if len(found) > 4 * _MAX_FILES:
                    return found
        return found

    def save_figures(self) -> None:
        """Save each open matplotlib figure as ``figure-N.png`` and close it (no-op without pyplot)."""
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is None:
            return
        try:
            numbers = list(pyplot.get_fignums())
        except Exception:
            return
        for number in numbers:
            try:
                figure = pyplot.figure(number)
                self._figures += 1
                os.makedirs(self.root, exist_ok=True)
                figure.savefig(os.path.join(self.root, f"figure-{self._figures}.png"), format="png")
            except Exception as exc:  # a broken figure must not break the round's result
                sys.stderr.write(f"codeact: could not save figure {number}: {type(exc).__name__}: {exc}\n")
            finally:
                try:
                    pyplot.close(number)
                except Exception:
                    pass

    def collect(self, limits: Mapping[str, object]) -> list[dict[str, str | int]]:
        """The round's artifacts: ``{"name", "size", "data"}`` or ``{"name", "size", "refused"}``."""
        self.save_figures()
        file_cap = _int(limits.get("artifact_bytes"), _DEFAULT_FILE_BYTES)
        round_cap = _int(limits.get("round_artifact_bytes"), _DEFAULT_ROUND_BYTES)
        now = self._scan()
        changed = [name for name, sig in now.items() if self._sent.get(name) != sig]
        self._sent = now
        out: list[dict[str, str | int]] = []
        total = 0
        for index, name in enumerate(changed):
            size = now[name][0]
            if index >= _MAX_FILES:
                out.append({"name": name, "size": size, "refused": f"more than {_MAX_FILES} files in one round"})
                continue
            if size > file_cap:
                reason = f"{size} bytes is over the {file_cap}-byte limit per file"
                out.append({"name": name, "size": size, "refused": reason})
                continue
            if total + size > round_cap:
                reason = f"the round's artifacts would exceed the {round_cap}-byte limit per round"
                out.append({"name": name, "size": size, "refused": reason})
                continue
            try:
                data = _read_regular(os.path.join(self.root, name), file_cap + 1)
            except OSError as exc:
                out.append({"name": name, "size": size, "refused": f"could not be read: {exc.strerror or exc}"})
                continue
            if len(data) > file_cap:
                out.append({"name": name, "size": len(data), "refused": f"over the {file_cap}-byte limit per file"})
                continue
            total += len(data)
            out.append(
                {"name": name, "size": len(data), "data": binascii.b2a_base64(data, newline=False).decode("ascii")}
            )
        return out


def _read_regular(path: str, limit: int) -> bytes:
    """At most ``limit`` bytes of the regular file ``path``; never follows a symlink, never blocks on a FIFO.

    (A thread the code left running could swap the file between the listing and the read.)
    """
    import stat

    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError("not a regular file")
        chunks = []
        remaining = limit
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _is_regular(mode: int) -> bool:
    import stat

    return stat.S_ISREG(mode)


def _int(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default


def prepare(cwd: str | None = None) -> Outputs:
    """Create ``outputs/`` and select the headless matplotlib backend (before any user code runs)."""
    global _current
    root = os.path.join(os.path.abspath(cwd or os.getcwd()), OUTPUTS_DIR)
    try:
        os.makedirs(root, exist_ok=True)
    except OSError:
        pass  # a read-only working directory: no artifacts, the round still runs
    if _findable("numpy"):
        # BLAS thread pools count against the sandbox's process limit: one thread each.
        for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(name, "1")
    if _findable("matplotlib"):
        os.environ.setdefault("MPLBACKEND", "module://codeact.sandbox.runtime.mpl_backend")
        config = os.environ.setdefault("MPLCONFIGDIR", os.path.join("/tmp", "codeact-matplotlib"))
        _seed_font_cache(config)
    _current = Outputs(root)
    return _current


def keep_files(value: object) -> None:
    """Write the files a toolkit result carries into ``outputs/`` (they become the round's artifacts).

    A toolkit (an MCP tool returning an image) marks a file as ``{"artifact": NAME, "data": bytes, ...}``
    at the top level of its result or in a top-level list. ``NAME`` must be a plain file name; others
    are ignored. The round's byte caps apply when the files are sent, as for any file in ``outputs/``.
    """
    if _current is None:
        return
    items = value if type(value) is list else [value]
    for item in items[:_MAX_FILES]:
        if type(item) is not dict:
            continue
        name, data = item.get("artifact"), item.get("data")
        if type(name) is not str or type(data) is not bytes:
            continue
        if not name or name.startswith(".") or "/" in name or "\\" in name or "\x00" in name or len(name) > 128:
            continue
        try:
            os.makedirs(_current.root, exist_ok=True)
            with open(os.path.join(_current.root, name), "wb") as handle:
                handle.write(data)
        except OSError as exc:
            sys.stderr.write(f"codeact: could not keep {name!r} in outputs/: {exc}\n")


def _findable(package: str) -> bool:
    """True when a ``sys.path`` entry holds ``package`` (a few ``stat`` calls: no import machinery on start-up)."""
    return any(os.path.isfile(os.path.join(entry, package, "__init__.py")) for entry in sys.path if entry)


def _seed_font_cache(config: str) -> None:
    """Copy the environment's prebuilt matplotlib font list (``.codeact-mplconfig``) into ``config``."""
    for entry in sys.path:
        prebuilt = os.path.join(entry, ".codeact-mplconfig")
        if not os.path.isdir(prebuilt):
            continue
        try:
            os.makedirs(config, exist_ok=True)
            for name in os.listdir(prebuilt):
                if name.startswith("fontlist-") and name.endswith(".json"):
                    with open(os.path.join(prebuilt, name), "rb") as src, open(os.path.join(config, name), "wb") as dst:
                        dst.write(src.read())
        except OSError:
            pass
        return


def outputs() -> Outputs | None:
    """The runtime's outputs folder, once :func:`prepare` ran."""
    return _current


def save_open_figures() -> None:
    """Save and close the open figures now (``plt.show()`` under the headless backend)."""
    if _current is not None:
        _current.save_figures()
