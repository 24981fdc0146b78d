"""Retrieval: BM25 over memory records (``bm25s``), with an index cached per store version.

The index of a ``(store, kind, scope)`` is built once from the records and kept in the process; a
retrieval reads the scope's version counter (one cheap store read) and rebuilds only when a write
changed it. So SQLite and Redis behave the same: the store holds the records, BM25 ranks them here.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from codeact.engine.errors import MissingExtraError
from codeact.engine.memory.records import MemoryItem

if TYPE_CHECKING:
    import bm25s

__all__ = ["LexicalIndex", "tokenize"]

_WORD = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])|\d+|[\u3400-\u9fff]")
_STOPWORDS = frozenset(
    """a about above after again all am an and any are as at be because been before being below between both
    but by can could did do does doing down during each few for from further had has have having he her here
    hers him his how i if in into is it its itself just me more most my no nor not now of off on once only or
    other our ours out over own please same she should so some such than that the their theirs them then there
    these they this those through to too under until up very was we were what when where which while who whom
    why will with would you your yours""".split()
)


def _stem(word: str) -> str:
    if len(word) <= 3 or not word.isascii():
        return word
    for suffix, keep in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", ""), ("ly", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + keep
            break
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiouls":  # running -> runn -> run
        word = word[:-1]
    if word.endswith("e") and len(word) > 4:  # "deployed/deploying/deploys" and "compute/computed" meet
        word = word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    """Lower-case word stems of ``text`` without stop words (camelCase and snake_case split; CJK per character)."""
    tokens = []
    for match in _WORD.finditer(text):
        word = match.group(0).lower()
        if word in _STOPWORDS:
            continue
        tokens.append(_stem(word))
    return tokens


class _Indexed(Protocol):
    @property
    def title(self) -> str: ...

    @property
    def text(self) -> str: ...


_T = TypeVar("_T", bound=_Indexed)


class LexicalIndex(Generic[_T]):
    """A BM25 index over records (``bm25s``): memory records, knowledge chunks, anything with a title and a text.

    Args:
        items: The records; each one's ``title`` and ``text`` are indexed.
    """

    def __init__(self, items: Sequence[_T]) -> None:
        self.items = list(items)
        self._retriever: bm25s.BM25 | None = None
        self._vocab: dict[str, int] = {}
        if not self.items:
            return
        try:
            import bm25s
        except ImportError:
            raise MissingExtraError("lexical memory retrieval", extra="memory", module="bm25s") from None
        corpus = [tokenize(f"{item.title}\n{item.text}") or ["\x00"] for item in self.items]
        retriever = bm25s.BM25()
        retriever.index(corpus, show_progress=False)
        self._retriever = retriever
        self._vocab = dict(retriever.vocab_dict)

    def search(self, query: str, k: int) -> list[tuple[_T, float]]:
        """The ``k`` best records for ``query`` with a score > 0, best first."""
        if self._retriever is None or k <= 0:
            return []
        tokens = [t for t in tokenize(query) if t in self._vocab]
        if not tokens:
            return []
        scores = self._retriever.get_scores(tokens)
        import numpy as np

        count = min(k, len(self.items))
        top = np.argpartition(-scores, count - 1)[:count]
        ranked = sorted(((float(scores[i]), int(i)) for i in top), key=lambda pair: (-pair[0], pair[1]))
        return [(self.items[i], score) for score, i in ranked if score > 0]


@dataclass
class _Cached:
    version: int
    index: LexicalIndex[MemoryItem]


_CACHE: dict[tuple[str, ...], _Cached] = {}
_CACHE_LOCK = threading.Lock()
_CACHE_SIZE = 32


def cached_index(
    key: tuple[str, ...], version: int, build: Callable[[], Sequence[MemoryItem]]
) -> LexicalIndex[MemoryItem]:
    """The index for ``key`` at ``version``: the cached one, or one built from ``build()``."""
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None and hit.version == version:
            return hit.index
    index: LexicalIndex[MemoryItem] = LexicalIndex(build())
    with _CACHE_LOCK:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = _Cached(version=version, index=index)
    return index


def cached_items(key: tuple[str, ...], version: int) -> list[MemoryItem] | None:
    """The items of the index cached under ``key`` when it is of ``version``, else None."""
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        return hit.index.items if hit is not None and hit.version == version else None


def clear_cache() -> None:
    """Forget every cached index (tests and benchmarks)."""
    with _CACHE_LOCK:
        _CACHE.clear()
