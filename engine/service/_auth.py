"""Bearer tokens: where they come from, what each may use, and how a request presents one.

Tokens never come from a blueprint or any YAML file: ``codeact serve`` reads them from the
environment variable ``CODEACT_API_TOKENS`` and/or a ``--tokens-file``. Both use one format::

    # one entry per line (or separated by ';' or whitespace in the variable); '#' starts a comment
    s3cr3t-admin-token                       # may use every runner
    alice-token=devops-assistant,reviewer    # may use these runners only

A token is 8 to 256 characters of letters, digits and ``-._~+/`` (no ``=``, ``,`` or ``;``).
A request presents it as ``Authorization: Bearer TOKEN`` or in the HTTP-only cookie
``codeact_token`` (set by the console's login). Presented tokens are compared in constant time
against every configured token; only a short fingerprint (``sha256`` prefix) ever reaches a log or
a record.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from codeact.engine.service.errors import ServiceError

__all__ = ["TOKENS_ENV", "TOKEN_COOKIE", "TokenScope", "Tokens"]

TOKENS_ENV = "CODEACT_API_TOKENS"
TOKEN_COOKIE = "codeact_token"
_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]{8,256}")
_RUNNER = re.compile(r"[^\s,;=]+")


@dataclass(frozen=True, kw_only=True)
class TokenScope:
    """What one token may do.

    Attributes:
        fingerprint: ``sha256:`` plus the first 12 hex digits of the token's hash (safe to log).
        runners: The runner ids the token may run and read sessions of; None for every runner.
    """

    fingerprint: str
    runners: frozenset[str] | None = None

    def allows(self, runner_id: str) -> bool:
        """True when the token may use runner ``runner_id``."""
        return self.runners is None or runner_id in self.runners


class Tokens:
    """The configured tokens and their scopes (immutable once built).

    Args:
        entries: ``token -> runner ids`` (None for every runner).
    """

    def __init__(self, entries: Mapping[str, frozenset[str] | None] | None = None) -> None:
        self._entries: dict[bytes, TokenScope] = {}
        for token, runners in (entries or {}).items():
            if not _TOKEN.fullmatch(token):
                raise ServiceError(
                    "an API token must be 8-256 characters of letters, digits and '-._~+/'; "
                    "generate one with `python -c 'import secrets; print(secrets.token_urlsafe(24))'`",
                    code="service.invalid_token_config",
                    status=500,
                )
            self._entries[token.encode()] = TokenScope(fingerprint=fingerprint(token), runners=runners)

    def __len__(self) -> int:
        return len(self._entries)

    @classmethod
    def parse(cls, text: str, *, source: str) -> Tokens:
        """Read entries (``TOKEN`` or ``TOKEN=RUNNER,RUNNER``) separated by newlines, ``;`` or whitespace.

        Args:
            text: The entries; ``#`` starts a comment that runs to the end of the line.
            source: Where the text came from, for messages (never the text itself: it holds secrets).

        Raises:
            ServiceError: An entry is malformed (``service.invalid_token_config``), named by its position.
        """
        entries: dict[str, frozenset[str] | None] = {}
        position = 0
        for line in text.splitlines():
            for entry in re.split(r"[;\s]+", line.split("#", 1)[0]):
                if not entry:
                    continue
                position += 1
                token, sep, scope = entry.partition("=")
                runners = [r for r in scope.split(",") if r] if sep else None
                bad_runner = runners is not None and (not runners or not all(_RUNNER.fullmatch(r) for r in runners))
                if not _TOKEN.fullmatch(token) or bad_runner:
                    raise ServiceError(
                        f"API token entry {position} of {source} is malformed: write TOKEN or "
                        "TOKEN=RUNNER[,RUNNER...] (a token is 8-256 letters, digits or '-._~+/')",
                        code="service.invalid_token_config",
                        status=500,
                    )
                previous = entries.get(token, frozenset())
                if previous is None or runners is None or "*" in runners:
                    entries[token] = None
                else:
                    entries[token] = previous | frozenset(runners)
        return cls(entries)

    @classmethod
    def load(cls, *, environ: Mapping[str, str] | None = None, files: Iterable[str | Path] = ()) -> Tokens:
        """The tokens of ``$CODEACT_API_TOKENS`` plus those of each tokens file.

        Raises:
            ServiceError: A file cannot be read or an entry is malformed.
        """
        env = os.environ if environ is None else environ
        merged: dict[str, frozenset[str] | None] = {}
        sources = [(env.get(TOKENS_ENV, ""), f"${TOKENS_ENV}")]
        for file in files:
            try:
                sources.append((Path(file).read_text(encoding="utf-8"), f"tokens file {str(file)!r}"))
            except OSError as exc:
                raise ServiceError(
                    f"cannot read tokens file {str(file)!r}: {exc.strerror}; pass an existing file to --tokens-file",
                    code="service.invalid_token_config",
                    status=500,
                ) from exc
        for text, source in sources:
            for token, scope in cls.parse(text, source=source)._by_token().items():
                previous = merged.get(token, frozenset())
                merged[token] = None if previous is None or scope is None else previous | scope
        return cls(merged)

    def _by_token(self) -> dict[str, frozenset[str] | None]:
        return {token.decode(): scope.runners for token, scope in self._entries.items()}

    def check(self, presented: str) -> TokenScope | None:
        """The scope of ``presented``, or None when it is not a configured token (constant time per token)."""
        candidate = presented.encode("utf-8", "replace")
        found: TokenScope | None = None
        for token, scope in self._entries.items():
            if hmac.compare_digest(token, candidate):
                found = scope
        return found


def fingerprint(token: str) -> str:
    """A token's loggable name: ``sha256:`` and the first 12 hex digits of its hash."""
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()[:12]
