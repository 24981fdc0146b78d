"""A run's input files and images: read from message parts, bounded, placed in the sandbox, shown to the model.

1. :func:`file_from_part` reads an image part (``{"type": "image_url", "image_url": {"url":
   "data:image/png;base64,..."}}``) or a file part (``{"type": "file", "file": {"filename":
   "sales.csv", "file_data": "data:text/csv;base64,..."}}``; ``file_data`` may also be plain base64
   or ``bytes``) into an :class:`InputFile`. The name must be a plain file name (no folder, no
   ``..``, no leading dot: refused, never rewritten into something else); the content is base64,
   decoded once its size is known to be within the limit; nothing is unpickled and no URL is fetched.
2. :func:`check_files` bounds the count, each file and their total (:func:`input_limits`; the
   error names the limit and the environment variable that raises it).
3. :func:`task_with_files` ends the task with the files the code can open (name, size, type; at
   most ``_NOTE_FILES`` lines), rendered by ``prompts/input_files.j2``.
4. :func:`use_files` gives the run its files: the sandbox gets them in its working directory
   (:func:`place_files`, ``Sandbox.put_files``), and :class:`ImageParts` adds the images to the user
   message of the run's chat calls when the model takes images (``ModelClient.supports_vision``:
   ``model.options.vision``, else litellm's model info). For a text-only model an image is a file only.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import mimetypes
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from codeact.engine.errors import CodeactError

__all__ = [
    "IMAGE_PARTS",
    "ImageParts",
    "InputFile",
    "InputLimits",
    "check_files",
    "file_from_part",
    "image_parts",
    "input_artifacts",
    "input_limits",
    "place_files",
    "task_with_files",
]

IMAGE_PARTS = frozenset({"image_url", "input_image"})
FILE_PARTS = frozenset({"file", "input_file"})

_MiB = 1024 * 1024
_FRAME_FILE_CAP = 6 * _MiB  # one file crosses the sandbox bridge in one frame (8 MiB, base64 adds a third)
_NOTE_FILES = 20
_MAX_FILES = 20


@dataclass(frozen=True, kw_only=True)
class InputLimits:
    """The bounds of a run's input files.

    Attributes:
        file_bytes: The largest file (``CODEACT_INPUT_FILE_BYTES``, default 4 MiB, at most 6 MiB).
        total_bytes: All files of a run together (``CODEACT_INPUT_TOTAL_BYTES``, default 16 MiB).
        files: The most files of a run (20).
    """

    file_bytes: int = 4 * _MiB
    total_bytes: int = 16 * _MiB
    files: int = _MAX_FILES


def _env_bytes(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) <= 0:
        raise CodeactError(f"{name}={raw!r} must be a positive number of bytes", code="config.invalid")
    return int(raw)


def input_limits() -> InputLimits:
    """The limits in force: the defaults, changed by ``CODEACT_INPUT_FILE_BYTES`` / ``CODEACT_INPUT_TOTAL_BYTES``."""
    return InputLimits(
        file_bytes=min(_env_bytes("CODEACT_INPUT_FILE_BYTES", 4 * _MiB), _FRAME_FILE_CAP),
        total_bytes=_env_bytes("CODEACT_INPUT_TOTAL_BYTES", 16 * _MiB),
    )


@dataclass(frozen=True, kw_only=True)
class InputFile:
    """One file of a run's input.

    Attributes:
        name: A plain file name: the code opens it with ``open(name)``.
        data: Its bytes.
        mime: Its type (from the data URL or the part, else guessed from the name).
        image: Whether it came as an image part (vision models also see it).
    """

    name: str
    data: bytes = field(repr=False)
    mime: str
    image: bool = False

    @property
    def size(self) -> int:
        """Its size in bytes."""
        return len(self.data)

    def data_url(self) -> str:
        """``data:<mime>;base64,...``: the image part's URL."""
        return f"data:{self.mime};base64,{base64.b64encode(self.data).decode('ascii')}"


def _invalid(message: str, code: str = "input.invalid") -> CodeactError:
    return CodeactError(message, code=code)


def _too_large(what: str, size: int, limit: int, variable: str) -> CodeactError:
    return CodeactError(
        f"{what} is {size} bytes, over the limit of {limit} bytes; send a smaller file, or raise the limit "
        f"with the environment variable {variable} (file limit at most {_FRAME_FILE_CAP} bytes)",
        code="input.too_large",
    )


def check_name(name: object, where: str) -> str:
    """``name`` when it is a plain file name; else ``input.file_name`` saying why.

    Raises:
        CodeactError: ``input.file_name``.
    """
    if not isinstance(name, str) or not name.strip():
        raise _invalid(f"{where}: a file needs a name (file.filename)", "input.file_name")
    text = name.strip()
    reason = None
    if "/" in text or "\\" in text:
        reason = "it has a folder in it (absolute paths and '..' are refused)"
    elif text.startswith("."):
        reason = "it starts with a dot ('..' and hidden files are refused)"
    elif any(ord(c) < 32 or ord(c) == 127 for c in text):
        reason = "it has control characters"
    elif len(text.encode()) > 255:
        reason = "it is longer than 255 bytes"
    elif text == "outputs":
        reason = "'outputs' is the folder of the run's artifacts"
    if reason is not None:
        raise _invalid(f"{where}: file name {name!r} is refused: {reason}; send a plain file name", "input.file_name")
    return text


def _decode(text: str, where: str, limit: int) -> bytes:
    """Base64 (or a ``data:`` URL's base64 body) -> bytes; the size is checked before decoding."""
    body = text.strip()
    size = len(body) * 3 // 4 - (len(body) - len(body.rstrip("=")))  # the decoded size, padding off
    if size > limit:
        raise _too_large(where, size, limit, "CODEACT_INPUT_FILE_BYTES")
    try:
        return base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        raise _invalid(f"{where}: the content is not valid base64") from None


def _data_url(url: str, where: str, limit: int) -> tuple[str, bytes]:
    """``data:<mime>;base64,<body>`` -> (mime, bytes)."""
    head, comma, body = url.partition(",")
    if not comma or ";base64" not in head:
        raise _invalid(f"{where}: a data: URL must be base64 (data:<type>;base64,...)")
    mime = head[len("data:") :].split(";", 1)[0].strip() or "application/octet-stream"
    return mime, _decode(body, where, limit)


_IMAGE_EXTENSIONS = {"image/jpeg": ".jpg", "image/png": ".png", "image/gif": ".gif", "image/webp": ".webp"}


def file_from_part(part: Mapping[str, object], where: str, *, image_number: int, limits: InputLimits) -> InputFile:
    """The :class:`InputFile` of an image or file part (see the module docstring for the shapes).

    Args:
        part: The content part.
        where: Where it is, for messages (``message 0, part 2``).
        image_number: The image's number, for its name (``image-1.png``) when the part gives none.
        limits: The size limits.

    Raises:
        CodeactError: ``input.invalid``, ``input.file_name``, ``input.image_url`` (a URL that is not
            a ``data:`` URL: codeact fetches nothing) or ``input.too_large``.
    """
    kind = part.get("type")
    if kind in IMAGE_PARTS:
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, Mapping) else image
        if not isinstance(url, str) or not url:
            raise _invalid(f'{where}: an image part needs image_url {{"url": "data:image/...;base64,..."}}')
        if not url.startswith("data:"):
            raise _invalid(
                f"{where}: the image is a URL ({url[:60]!r}); codeact fetches no URLs: send it inline as a "
                "data:image/...;base64 URL",
                "input.image_url",
            )
        declared = url[len("data:") :].split(";", 1)[0].split(",", 1)[0].strip()
        given = part.get("name") or (image.get("name") if isinstance(image, Mapping) else None)
        ext = _IMAGE_EXTENSIONS.get(declared, mimetypes.guess_extension(declared) or "")
        name = check_name(given, where) if given is not None else f"image-{image_number}{ext}"
        mime, data = _data_url(url, f"{where}: image {name!r}", limits.file_bytes)
        if not mime.startswith("image/"):
            raise _invalid(f"{where}: an image part's data URL has type {mime!r}, not image/...")
        return _sized(InputFile(name=name, data=data, mime=mime, image=True), where, limits)
    if kind in FILE_PARTS:
        nested = part.get("file")
        spec: Mapping[str, object] = nested if isinstance(nested, Mapping) else part
        name = check_name(spec.get("filename") or spec.get("name"), where)
        what = f"{where}: file {name!r}"
        content = spec.get("file_data", spec.get("data"))
        given_mime = spec.get("mime_type")
        file_mime: str | None = given_mime if isinstance(given_mime, str) else None
        if isinstance(content, bytes | bytearray):
            data = bytes(content)
        elif isinstance(content, str) and content.startswith("data:"):
            file_mime, data = _data_url(content, what, limits.file_bytes)
        elif isinstance(content, str):
            data = _decode(content, what, limits.file_bytes)
        else:
            raise _invalid(f"{where}: a file part needs file_data (a data: URL, base64 or bytes)")
        file_mime = file_mime or mimetypes.guess_type(name)[0] or "application/octet-stream"
        return _sized(InputFile(name=name, data=data, mime=file_mime), where, limits)
    raise _invalid(f"{where}: {kind!r} is not an image or file part")


def _sized(item: InputFile, where: str, limits: InputLimits) -> InputFile:
    if item.size > limits.file_bytes:
        raise _too_large(f"{where}: file {item.name!r}", item.size, limits.file_bytes, "CODEACT_INPUT_FILE_BYTES")
    return item


def check_files(files: Sequence[InputFile], limits: InputLimits) -> tuple[InputFile, ...]:
    """``files`` with unique names (a repeated name gets ``-2``, ``-3`` before its extension), within the limits.

    Raises:
        CodeactError: ``input.too_large`` past the count or the total.
    """
    if len(files) > limits.files:
        raise CodeactError(
            f"the input has {len(files)} files; at most {limits.files} per message: send the rest in a later one",
            code="input.too_large",
        )
    total = sum(f.size for f in files)
    if total > limits.total_bytes:
        raise _too_large("the input's files together", total, limits.total_bytes, "CODEACT_INPUT_TOTAL_BYTES")
    seen: set[str] = set()
    out: list[InputFile] = []
    for item in files:
        name, n = item.name, 1
        stem, dot, ext = item.name.rpartition(".")
        while name in seen:
            n += 1
            name = f"{stem}-{n}.{ext}" if dot and stem else f"{item.name}-{n}"
        seen.add(name)
        out.append(item if name == item.name else dataclasses.replace(item, name=name))
    return tuple(out)


def task_with_files(task: str, files: Sequence[InputFile], *, kind: str) -> str:
    """The task, ended with the files the code can open (codeact agents only: a react agent has no sandbox).

    Raises:
        CodeactError: ``input.files_unsupported`` for files given to a react agent.
    """
    if not files:
        return task
    if kind != "codeact":
        raise CodeactError(
            f"a {kind} agent has no sandbox to put files in ({', '.join(f.name for f in files)}); "
            "send image and file parts to a codeact agent (workflow.mode: codeact)",
            code="input.files_unsupported",
        )
    from codeact import prompts

    shown = [{"name": f.name, "size": f.size, "mime": f.mime, "image": f.image} for f in files[:_NOTE_FILES]]
    note = prompts.render("input_files.j2", files=shown, more=len(files) - len(shown)).strip()
    return f"{task}\n\n{note}" if task else note


class ImageParts:
    """A model interceptor: the run's images as image parts of the last user message of its chat calls.

    Only for chat calls (a raw completion prompt has no parts), not for ``utility`` calls (summaries,
    compaction), and only when the purpose's model takes images (``supports_vision(purpose)``).

    Args:
        images: The run's images.
        supports_vision: Whether the model of a purpose takes images.
    """

    def __init__(self, images: Sequence[InputFile], supports_vision: Callable[[str], bool]) -> None:
        self.images = tuple(images)
        self._supports = supports_vision
        self._decided: dict[str, bool] = {}

    def vision(self, purpose: str) -> bool:
        """Whether the model of ``purpose`` gets the images (decided once per purpose)."""
        if purpose not in self._decided:
            self._decided[purpose] = bool(self._supports(purpose))
        return self._decided[purpose]

    async def intercept_model(self, request: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        """Add the image parts, then go on."""
        messages = list(request.messages)
        if (
            request.prompt is not None
            or request.purpose == "utility"
            or not messages
            or not self.vision(request.purpose)
        ):
            return await call_next(request)
        last = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
        if last is None:
            return await call_next(request)
        content = messages[last].get("content")
        parts: list[object] = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        parts += [{"type": "image_url", "image_url": {"url": image.data_url()}} for image in self.images]
        messages[last] = {**messages[last], "content": parts}
        return await call_next(dataclasses.replace(request, messages=tuple(messages)))


def image_parts(model: object, spec: Any, files: Sequence[InputFile]) -> ImageParts | None:
    """The model interceptor that shows the run's input images to a vision model; None without images."""
    images = [f for f in files if f.image]
    if not images:
        return None

    def supports(purpose: str) -> bool:
        check = getattr(model, "supports_vision", None)
        if callable(check):  # codeact's model client: the option, else litellm's model info
            return bool(check(purpose=purpose))
        # another client (a host's model through the run-scoped API): only the blueprint's option
        routes = getattr(spec, "routes", {})
        options = getattr(routes.get(purpose, spec.model), "options", None)
        return getattr(options, "vision", None) is True

    return ImageParts(images, supports)


INPUTS_PREFIX = "inputs/"


def input_artifacts(files: Sequence[InputFile]) -> tuple[dict[str, object], ...]:
    """The input files as artifacts of the run's first round (``inputs/<name>``, ``"input": true``).

    The store keeps them with the round's other artifacts (the sessions API serves them, replay
    places them in the sandbox again before it re-executes the round).
    """
    return tuple(
        {
            "name": INPUTS_PREFIX + f.name,
            "mime": f.mime,
            "size": f.size,
            "refused": None,
            "input": True,
            "data_b64": base64.b64encode(f.data).decode("ascii"),
        }
        for f in files
    )


def place_files(sandbox: Any, files: Sequence[InputFile]) -> None:
    """Put the input files into the sandbox's working directory (``Sandbox.put_files``)."""
    if files:
        sandbox.put_files({f.name: f.data for f in files})
