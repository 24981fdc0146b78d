"""The Docker sandbox image: its tag (a hash of the recipe), the check that it is built, and the build.

The recipe is ``image/build.sh`` beside this module: it ships in the wheel as package data, so
``codeact sandbox image build`` (:func:`build_image`) runs the very file ``make sandbox-image`` runs in a
clone. It builds the image from Debian packages (debootstrap + ``docker import``; no image registry is
needed) and tags it ``codeact-sandbox:<first 12 hex digits of sha256(build.sh)>``. :func:`image_tag`
computes the same tag in Python, so a changed recipe names a new image and an unchanged one is reused.

This module does not import ``docker``: :func:`ensure_image` takes a client built by the Docker
backend (``codeact.sandbox.docker_sandbox``), which owns the SDK and its error mapping.
"""

from __future__ import annotations

import hashlib
import os
import queue
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final

from codeact.sandbox.errors import SandboxError, SandboxImageMissingError

__all__ = ["BUILD_COMMAND", "IMAGE_REPOSITORY", "RECIPE_PATH", "ImageBuild", "build_image", "ensure_image", "image_tag"]

BUILD_COMMAND: Final = "codeact sandbox image build"
"""The command that builds the image (from a clone, ``make sandbox-image`` does the same)."""

IMAGE_REPOSITORY: Final = "codeact-sandbox"
RECIPE_PATH: Final = Path(__file__).resolve().parent / "image" / "build.sh"


@cache
def image_tag() -> str:
    """The tag of the sandbox image the current recipe builds, e.g. ``codeact-sandbox:676c02d06832``.

    Returns:
        ``codeact-sandbox:`` followed by the first 12 hex digits of the SHA-256 of ``build.sh``
        (the same value ``sandbox/image/build.sh --tag`` prints).

    Raises:
        SandboxImageMissingError: The recipe file is not where the package expects it.
    """
    try:
        digest = hashlib.sha256(RECIPE_PATH.read_bytes()).hexdigest()
    except OSError as exc:
        raise SandboxImageMissingError(
            f"cannot read the sandbox image recipe {str(RECIPE_PATH)!r}: {exc.strerror}; "
            "reinstall codeact (the recipe ships with the sandbox package)"
        ) from None
    return f"{IMAGE_REPOSITORY}:{digest[:12]}"


def ensure_image(client: Any, tag: str | None = None) -> str:
    """Check that the sandbox image is present in the Docker engine ``client`` talks to.

    Args:
        client: A ``docker.DockerClient``. Only ``client.images.list`` is used; call this
            inside ``codeact.sandbox.docker_sandbox.map_docker_errors()`` so engine errors are translated.
        tag: The image to look for (default: :func:`image_tag`).

    Returns:
        The image tag.

    Raises:
        SandboxImageMissingError: The image is not built; the message names the command that builds it.
    """
    tag = tag or image_tag()
    # A reference filter answers with an empty list instead of raising ImageNotFound, so this
    # module needs no docker exception types (only sandbox.docker_sandbox imports docker).
    if not client.images.list(filters={"reference": tag}):
        raise SandboxImageMissingError(
            f"the Docker sandbox image {tag!r} is not built; run `{BUILD_COMMAND}` to build it "
            "(about a minute, from Debian packages; `make sandbox-image` in a clone)"
        )
    return tag


@dataclass(frozen=True, kw_only=True)
class ImageBuild:
    """What :func:`build_image` did.

    Attributes:
        tag: The image tag (``codeact-sandbox:<recipe hash>``).
        built: True when it was built now, False when it was already there.
        seconds: Wall time of the call.
    """

    tag: str
    built: bool
    seconds: float


_HEARTBEAT_S: Final = 10.0
"""How often a build that prints nothing says it is still going."""
_ROOTFS: Final = re.compile(r"\binto (/\S+?), ")
"""The recipe's debootstrap line names the root it fills; its log is that path plus ``.log``."""


def _last_step(log: Path | None) -> str:
    """The latest ``I: ...`` line of debootstrap's log (``Retrieving libc6``), or "" when none can be read."""
    if log is None:
        return ""
    try:
        with log.open("rb") as f:
            f.seek(max(f.seek(0, os.SEEK_END) - 4096, 0))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    steps = [line[3:].strip() for line in tail.splitlines() if line.startswith("I: ")]
    return steps[-1][:120] if steps else ""


def build_image(*, progress: Callable[[str], None], mirror: str | None = None) -> ImageBuild:
    """Build the sandbox image with the shipped recipe unless the Docker engine has it already.

    Runs ``bash image/build.sh`` (the recipe of :func:`image_tag`), relays its step lines to
    ``progress`` and, while a step is silent (debootstrap takes about a minute), a line every
    ten seconds with the time so far.

    Args:
        progress: Receives one line per step (``[sandbox-image] ...``).
        mirror: A Debian mirror instead of ``http://deb.debian.org/debian`` (``CODEACT_DEBIAN_MIRROR``).

    Returns:
        The tag, whether it was built now, and the time taken.

    Raises:
        SandboxError: ``sandbox.image.build`` when bash or docker is missing or the recipe failed
            (the message quotes the recipe's last lines).
    """
    tag = image_tag()
    for tool in ("bash", "docker"):
        if shutil.which(tool) is None:
            raise SandboxError(
                f"cannot build the Docker sandbox image {tag!r}: `{tool}` is not on the PATH; "
                + ("install Docker and start it" if tool == "docker" else "install bash"),
                code="sandbox.image.build",
            )
    env = dict(os.environ)
    if mirror:
        env["CODEACT_DEBIAN_MIRROR"] = mirror
    started = time.perf_counter()
    try:
        proc = subprocess.Popen(
            ["bash", str(RECIPE_PATH)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            env=env,
        )
    except OSError as exc:
        raise SandboxError(
            f"cannot run the image recipe {str(RECIPE_PATH)!r}: {exc}", code="sandbox.image.build"
        ) from None
    lines: queue.Queue[str | None] = queue.Queue()
    assert proc.stderr is not None and proc.stdout is not None  # noqa: S101 - both are PIPE

    def pump() -> None:
        assert proc.stderr is not None  # noqa: S101
        for raw in proc.stderr:
            lines.put(raw.rstrip())
        lines.put(None)

    threading.Thread(target=pump, name="sandbox-image-build", daemon=True).start()
    said: list[str] = []
    cached = False
    step_log: Path | None = None  # debootstrap's log, named in the recipe's step line
    with proc:  # closes the pipes and waits, also when progress() raises
        while True:
            try:
                line = lines.get(timeout=_HEARTBEAT_S)
            except queue.Empty:
                step = _last_step(step_log)
                progress(
                    f"[sandbox-image] still building {tag} ({time.perf_counter() - started:.0f} s so far"
                    + (f"; debootstrap: {step})" if step else ")")
                )
                continue
            if line is None:
                break
            said.append(line)
            cached = cached or "is cached" in line
            if (found := _ROOTFS.search(line)) is not None:
                step_log = Path(found.group(1) + ".log")
            progress(line if line.startswith("[sandbox-image]") else f"[sandbox-image] {line}")
        out = proc.stdout.read()
        returncode = proc.wait()
    if returncode != 0:
        tail = "; ".join(said[-8:]) or "no output"
        raise SandboxError(
            f"cannot build the Docker sandbox image {tag!r}: the recipe {str(RECIPE_PATH)!r} exited with status "
            f"{returncode}: {tail[-800:]}",
            code="sandbox.image.build",
        )
    built_tag = out.strip().splitlines()[-1] if out.strip() else tag
    return ImageBuild(tag=built_tag, built=not cached, seconds=time.perf_counter() - started)
