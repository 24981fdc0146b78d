"""The Docker sandbox image: its tag (a hash of the recipe) and the check that it is built.

The image is built by ``sandbox/image/build.sh`` (``make sandbox-image``) from Debian packages and
tagged ``codeact-sandbox:<first 12 hex digits of sha256(build.sh)>``. :func:`image_tag` computes the
same tag in Python, so a changed recipe names a new image and an unchanged one is reused.

This module does not import ``docker``: :func:`ensure_image` takes a client built by the Docker
backend (``codeact.sandbox.docker_sandbox``), which owns the SDK and its error mapping.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path
from typing import Any, Final

from codeact.sandbox.errors import SandboxImageMissingError

__all__ = ["IMAGE_REPOSITORY", "RECIPE_PATH", "ensure_image", "image_tag"]

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
        SandboxImageMissingError: The image is not built; the message names the make target.
    """
    tag = tag or image_tag()
    # A reference filter answers with an empty list instead of raising ImageNotFound, so this
    # module needs no docker exception types (only sandbox.docker_sandbox imports docker).
    if not client.images.list(filters={"reference": tag}):
        raise SandboxImageMissingError(
            f"the Docker sandbox image {tag!r} is not built; run `make sandbox-image` "
            "(or sandbox/image/build.sh) to build it"
        )
    return tag
