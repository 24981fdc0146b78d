"""``KeyValues``: small named values a host keeps beside its sessions (docs/store.md, "Key-values").

A leaf of ``codeact.engine.store`` (it imports nothing of the package): ``Store`` (``base.py``) is a
``KeyValues``, and both backends implement the four methods. A value lives in a **namespace** (the
caller's name for whose values they are: ``codeact serve`` names one per state scope and storage area,
engine/service/_host_state.py) under a **key**; values are bytes, written and read as they are (a caller
that keeps JSON encodes it), never pickled. Unlike a session's records, key-values belong to no session:
deleting a session leaves them.

Listing is by key in code point order (UTF-8 byte order, the same in SQLite, Redis and Python), from an
optional prefix, at most ``limit`` keys with ``has_more`` telling whether more match.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass

from codeact.engine.errors import StoreError

__all__ = [
    "KeyPage",
    "KeyValues",
    "MAX_KEY_CHARS",
    "MAX_VALUE_BYTES",
    "check_key",
    "check_limit",
    "check_namespace",
    "check_prefix",
    "check_value",
    "page_of",
]

MAX_KEY_CHARS = 256
"""The longest key (characters)."""
MAX_VALUE_BYTES = 4 * 1024 * 1024
"""The largest value a store keeps (the run-scoped API's own caps are lower: its request is at most 4 MiB)."""

_NAMESPACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/\-]{0,199}")


@dataclass(frozen=True, kw_only=True)
class KeyPage:
    """Keys of a namespace, in order.

    Attributes:
        keys: The keys found (at most the ``limit`` asked for).
        has_more: True when more keys match than were returned.
    """

    keys: tuple[str, ...]
    has_more: bool = False


def check_namespace(namespace: str) -> str:
    """Return ``namespace`` if it is 1-200 letters, digits and ``._:/-`` (starting with a letter or digit)."""
    if not isinstance(namespace, str) or not _NAMESPACE.fullmatch(namespace):
        raise StoreError(
            f"invalid key-value namespace {namespace!r}: use 1-200 letters, digits, '.', '_', ':', '/' or '-', "
            "starting with a letter or digit",
            code="store.invalid_key",
        )
    return namespace


def check_key(key: object) -> str:
    """Return ``key`` if it is a non-empty string of at most ``MAX_KEY_CHARS`` characters that UTF-8 can carry."""
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS:
        raise StoreError(
            f"a key must be a non-empty string of at most {MAX_KEY_CHARS} characters, got "
            f"{type(key).__name__ if not isinstance(key, str) else f'{len(key)} characters'}",
            code="store.invalid_key",
        )
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise StoreError(
            f"key {key!r} holds a lone surrogate, which UTF-8 cannot carry; send the key as valid Unicode",
            code="store.invalid_key",
        ) from None
    return key


def check_value(namespace: str, key: str, value: bytes) -> bytes:
    """Return ``value`` if it is bytes of at most ``MAX_VALUE_BYTES``; else ``StoreError`` ``store.too_large``."""
    if not isinstance(value, bytes | bytearray | memoryview):
        raise StoreError(
            f"the value of {key!r} in {namespace!r} must be bytes, got {type(value).__name__}; encode it first",
            code="store.not_serializable",
        )
    value = bytes(value)
    if len(value) > MAX_VALUE_BYTES:
        raise StoreError(
            f"the value of {key!r} in {namespace!r} is {len(value)} bytes; a store keeps at most {MAX_VALUE_BYTES}",
            code="store.too_large",
        )
    return value


def check_prefix(prefix: object) -> str:
    """Return ``prefix`` if it is a string (empty: every key) that could start a key."""
    if prefix == "":
        return ""
    if not isinstance(prefix, str):
        raise StoreError(f"a key prefix must be a string, got {type(prefix).__name__}", code="store.invalid_key")
    return check_key(prefix)


def check_limit(limit: int | None) -> int | None:
    """Return ``limit`` if it is None (no limit) or a whole number of at least 1."""
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise StoreError(f"a key listing's limit must be None or at least 1, got {limit!r}", code="store.invalid_key")
    return limit


def page_of(found: list[str], prefix: str, limit: int | None) -> KeyPage:
    """The page of ``found`` (sorted keys from ``prefix`` on, at most ``limit + 1``): those with the prefix."""
    keys: list[str] = []
    for key in found:
        if not key.startswith(prefix):
            break  # sorted: the keys with the prefix come first, together
        keys.append(key)
    if limit is not None and len(keys) > limit:
        return KeyPage(keys=tuple(keys[:limit]), has_more=True)
    return KeyPage(keys=tuple(keys))


class KeyValues(ABC):
    """Named byte values by namespace: what a store keeps besides sessions (both backends implement it)."""

    @abstractmethod
    async def kv_get(self, namespace: str, key: str) -> bytes | None:
        """The value of ``key`` in ``namespace``, or None when it is not set."""

    @abstractmethod
    async def kv_set(self, namespace: str, key: str, value: bytes) -> None:
        """Set ``key`` in ``namespace`` to ``value`` (replacing any value it had).

        Raises:
            StoreError: ``store.invalid_key`` for a bad namespace or key, ``store.too_large`` for a value of
                more than ``MAX_VALUE_BYTES``.
        """

    @abstractmethod
    async def kv_delete(self, namespace: str, key: str) -> bool:
        """Remove ``key`` from ``namespace``; True when it was set."""

    @abstractmethod
    async def kv_list(self, namespace: str, *, prefix: str = "", limit: int | None = None) -> KeyPage:
        """The keys of ``namespace`` that start with ``prefix``, in order: at most ``limit`` (None: all)."""
