"""Docker SDK access: error mapping, the client, host identity labels and orphan collection.

Part of the Docker adapter (``codeact.sandbox.docker_sandbox``), the only code that imports the ``docker``
SDK, always lazily (inside functions), so ``import sandbox`` never loads it. Every SDK call runs
inside :func:`map_docker_errors`, which translates ``docker.errors.*`` (and the transport errors
under them) into :class:`~codeact.sandbox.errors.SandboxError` subclasses once, here.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from codeact.sandbox._owner import process_start, tag_alive
from codeact.sandbox.errors import SandboxError, SandboxImageMissingError
from codeact.sandbox.image import image_tag

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container

__all__ = [
    "LABEL_HOSTNAME",
    "LABEL_HOST_PID",
    "LABEL_HOST_START",
    "LABEL_SANDBOX",
    "LABEL_SESSION",
    "ImageStatus",
    "RemovedContainer",
    "image_status",
    "map_docker_errors",
    "remove_orphans",
]

LABEL_SANDBOX: Final = "org.codeact.sandbox"
LABEL_SESSION: Final = "org.codeact.session"
LABEL_HOST_PID: Final = "org.codeact.host_pid"
LABEL_HOST_START: Final = "org.codeact.host_start"
LABEL_HOSTNAME: Final = "org.codeact.hostname"

_REMOVE_PATIENCE_S: Final = 30.0
"""How long a refused container removal is retried before the error is raised."""


@contextmanager
def map_docker_errors(action: str) -> Iterator[None]:
    """Translate Docker SDK errors raised inside the block into ``SandboxError`` subclasses.

    Args:
        action: What was being done, for the message (``"start a sandbox container"``).

    Raises:
        SandboxImageMissingError: The engine reports the sandbox image missing.
        SandboxError: Any other Docker failure; ``code`` is ``sandbox.docker.unavailable`` when
            the engine cannot be reached, ``sandbox.docker.not_found`` for a vanished object and
            ``sandbox.docker.api`` when the engine refused the request.
    """
    import docker.errors

    try:
        yield
    except docker.errors.ImageNotFound as exc:
        raise SandboxImageMissingError(
            f"cannot {action}: the Docker sandbox image is missing ({_explain(exc)}); "
            "run `codeact sandbox image build` to build it"
        ) from None
    except docker.errors.NotFound as exc:
        raise SandboxError(
            f"cannot {action}: the Docker engine no longer knows the object ({_explain(exc)}); "
            "the container was probably removed from outside, retry the round",
            code="sandbox.docker.not_found",
        ) from None
    except docker.errors.APIError as exc:
        raise SandboxError(
            f"cannot {action}: the Docker engine refused the request ({_explain(exc)}); "
            "check `docker info` and the engine's log",
            code="sandbox.docker.api",
        ) from None
    except (docker.errors.DockerException, OSError) as exc:
        # OSError covers requests' ConnectionError and socket errors when the engine goes away.
        raise SandboxError(
            f"cannot {action}: the Docker engine is not reachable ({exc}); "
            "start Docker or point DOCKER_HOST at it, or use the subprocess sandbox",
            code="sandbox.docker.unavailable",
        ) from None


def _explain(exc: BaseException) -> str:
    explanation = getattr(exc, "explanation", None)
    return str(explanation or exc)


def _client() -> DockerClient:
    """A Docker SDK client from the environment (DOCKER_HOST, ...), checked with a ping."""
    import docker

    with map_docker_errors("connect to the Docker engine"):
        client = docker.from_env()
        try:
            client.ping()
        except BaseException:
            client.close()
            raise
    return client


@dataclass(frozen=True, kw_only=True)
class ImageStatus:
    """Whether the Docker engine has the sandbox image of the installed recipe.

    Attributes:
        tag: The image the recipe names (``codeact.sandbox.image.image_tag``).
        built: Whether the engine has it.
        image_id: Its short id, "" when not built.
        size_bytes: Its size, 0 when not built.
        created: When it was built (the engine's ISO-8601 string), "" when not built.
    """

    tag: str
    built: bool
    image_id: str = ""
    size_bytes: int = 0
    created: str = ""


def image_status(tag: str | None = None) -> ImageStatus:
    """Ask the Docker engine (from the environment) whether it has the sandbox image ``tag``.

    Args:
        tag: The image (default: the installed recipe's, ``codeact.sandbox.image.image_tag``).

    Raises:
        SandboxError: The engine cannot be reached (``sandbox.docker.unavailable``) or refused.
    """
    tag = tag or image_tag()
    client = _client()
    try:
        with map_docker_errors("look up the sandbox image"):
            found = client.images.list(filters={"reference": tag})
    finally:
        client.close()
    if not found:
        return ImageStatus(tag=tag, built=False)
    attrs = found[0].attrs
    return ImageStatus(
        tag=tag,
        built=True,
        image_id=str(found[0].short_id).removeprefix("sha256:"),
        size_bytes=int(attrs.get("Size") or 0),
        created=str(attrs.get("Created") or ""),
    )


# ---------------------------------------------------------------------------------------------
# Host identity labels and orphan collection


def _host_labels(session_id: str) -> dict[str, str]:
    pid = os.getpid()
    return {
        LABEL_SANDBOX: "1",
        LABEL_SESSION: session_id,
        LABEL_HOST_PID: str(pid),
        LABEL_HOST_START: process_start(pid),
        LABEL_HOSTNAME: socket.gethostname(),
    }


def _owner_alive(labels: dict[str, str]) -> bool:
    """Whether the host process that started a container (by its labels) is still running.

    Containers started on another machine (a shared engine) count as alive: their owner cannot
    be checked from here.
    """
    if labels.get(LABEL_HOSTNAME, socket.gethostname()) != socket.gethostname():
        return True
    return tag_alive(f"{labels.get(LABEL_HOST_PID, '')}.{labels.get(LABEL_HOST_START, '')}")


@dataclass(frozen=True, kw_only=True)
class RemovedContainer:
    """A sandbox container that :func:`remove_orphans` removed.

    Attributes:
        id: The short container id.
        name: The container name.
        session: The ``org.codeact.session`` label.
        host_pid: The ``org.codeact.host_pid`` label (the host process that started it).
        status: The container's state before removal (``running``, ``exited``, ...).
    """

    id: str
    name: str
    session: str
    host_pid: str
    status: str


def remove_orphans(*, include_live: bool = False, client: DockerClient | None = None) -> list[RemovedContainer]:
    """Remove sandbox containers (label ``org.codeact.sandbox``) whose host process is gone.

    Args:
        include_live: Remove every sandbox container, also those of running hosts.
        client: A ``docker.DockerClient``; one is built from the environment when omitted.

    Returns:
        The removed containers, in the engine's listing order.

    Raises:
        SandboxError: The Docker engine is unreachable or refused the request.
    """
    own_client = client is None
    docker_client = _client() if client is None else client
    removed: list[RemovedContainer] = []
    try:
        with map_docker_errors("list sandbox containers"):
            containers = docker_client.containers.list(
                all=True, ignore_removed=True, filters={"label": f"{LABEL_SANDBOX}=1"}
            )
        for container in containers:
            labels: dict[str, str] = dict(container.labels or {})
            if not include_live and _owner_alive(labels):
                continue
            if _force_remove(container):
                removed.append(
                    RemovedContainer(
                        id=container.short_id,
                        name=container.name,
                        session=labels.get(LABEL_SESSION, ""),
                        host_pid=labels.get(LABEL_HOST_PID, ""),
                        status=container.status,
                    )
                )
    finally:
        if own_client:
            docker_client.close()
    return removed


def _force_remove(container: Container, *, patience_s: float = _REMOVE_PATIENCE_S) -> bool:
    """Kill and remove ``container``; False when it was already gone (auto-remove raced us).

    The engine may refuse a removal for a while after the runtime was OOM-killed (gVisor on a busy
    machine answers 500 "could not kill" or 409 "removal already in progress"): the removal is
    retried, and an in-progress one waited for, until the container is gone or ``patience_s`` passed.
    """
    import docker.errors

    give_up = time.monotonic() + patience_s
    delay = 0.2
    ours = True  # False once the engine said another removal is in progress (409)
    attempts = 0
    while True:
        try:
            container.remove(force=True)
            return ours
        except docker.errors.NotFound:
            return attempts > 0 and ours  # gone: already on the first try, or finished meanwhile
        except docker.errors.APIError as exc:
            if exc.status_code == 409:
                ours = False
            if time.monotonic() > give_up:
                if exc.status_code == 409:
                    return False
                with map_docker_errors(f"remove sandbox container {container.short_id}"):
                    raise
        attempts += 1
        time.sleep(delay)
        delay = min(delay * 2, 2.0)
