"""The run-time half of the ``match`` policy (sandbox/policy.py rewrites the statement; docs/sandbox-security.md).

Standard library only: runs INSIDE the sandbox.

A class pattern ``case C(a, k=p)`` makes the interpreter read attributes of the subject natively
(``getattr(subject, name)``), after an ``isinstance(subject, C)`` that ``C``'s metaclass may answer as it
likes. Left raw, ``case object(sys=object(modules={'os': object(system=f)}))`` on a module read past every
attribute guard. So the policy replaces the class of a class pattern with sub-patterns by the class
``pattern_class`` returns: the class itself when the pattern reads nothing (one positional sub-pattern on a
built-in type that matches its subject itself: ``case int(x)``), and otherwise a stand-in of our own
(``_PatternMeta``) with a fixed copy of ``C.__match_args__``. The interpreter asks the stand-in's metaclass
``isinstance(subject, stand_in)``; that answers ``isinstance(subject, C)`` and then reads every attribute
the pattern will read, exactly as ``subject.name`` in the code would (the same name rule and value check),
raising when the read is refused. Only then does the interpreter read the same attributes again and match
them. ``captured`` is the check a case runs on every name its pattern captured before the names are bound.

guards.py names the namespace entries (``PATTERN_CLASS``, ``CAPTURED``, ``MATCH_VALUES``) and imports this
module when a namespace runs its first class pattern (most rounds have none); from then on ``PATTERN_CLASS``
is ``pattern_class`` itself, called each time a case with a class pattern is tried.
"""

from __future__ import annotations

from types import ModuleType

TYPE_CHECKING = False  # not typing's: the runtime does not import typing to start (see protocol.py)
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["PatternClasses"]

_MISSING = object()
_MATCH_SELF = 1 << 22  # _Py_TPFLAGS_MATCH_SELF: `case int(x)` binds the subject itself (inherited by subclasses)
_SELF_MATCHING = (bool, bytearray, bytes, dict, float, frozenset, int, list, set, str, tuple)
_SELF_MATCHING_IDS = frozenset(id(t) for t in _SELF_MATCHING)
_TYPE_FLAGS = type.__dict__["__flags__"]
_TYPE_MRO = type.__dict__["__mro__"]
_CACHE_CAP = 1024


class _PatternMeta(type):
    """The metaclass of the stand-ins: its ``__instancecheck__`` is where a class pattern's reads are checked."""

    _codeact_target: type
    _codeact_reads: tuple[tuple[str, bool], ...]  # (name, needs the per-object name decision)
    _codeact_read: Callable[[object, str], bool]
    _codeact_check: Callable[[object, str, object], None]
    _codeact_checked_ids: frozenset[int]
    _codeact_checked_kinds: tuple[type, ...]

    def __instancecheck__(cls, subject: object) -> bool:
        if not isinstance(subject, cls._codeact_target):  # the class's own answer, as the interpreter would ask
            return False
        for name, decided_per_object in cls._codeact_reads:
            if decided_per_object:  # a private name: whose attribute it is decides
                if not cls._codeact_read(subject, name):
                    return False
                continue
            value = getattr(subject, name, _MISSING)
            if value is _MISSING:  # a missing attribute fails the pattern, as natively
                return False
            # What the check acts on: a module (or a proxy of one: isinstance, not type) or a value in
            # checked_ids; all are instances of checked_kinds: one isinstance() that other values fail at once.
            # An exact int or str is neither (their __class__ is object's), and the commonest field value.
            kind = type(value)
            if kind is int or kind is str:
                continue
            if isinstance(value, cls._codeact_checked_kinds) and (
                isinstance(value, ModuleType) or id(value) in cls._codeact_checked_ids
            ):
                cls._codeact_check(subject, name, value)
        return True


class PatternClasses:
    """``pattern_class`` of one sandbox namespace: the stand-ins it made, by class and reads.

    Args:
        public: ``public(name)``: the code may read ``obj.<name>`` of any object, and the value check acts
            only on modules and the values in ``checked_ids`` (for other names ``read`` decides everything).
        read: ``read(obj, name)``: reads ``obj.<name>`` as the code's ``obj.<name>`` would (the name decided
            for that object, the value checked): True when it is there, False when missing; raises when refused.
        check: ``check(obj, name, value)``: raises when the code's ``obj.<name>`` would not give ``value``.
        checked_ids: The ids of the values (besides modules) the value check acts on.
        checked_kinds: Types every value the check acts on is an instance of (``ModuleType`` among them).
    """

    __slots__ = ("_cache", "_check", "_checked_ids", "_checked_kinds", "_public", "_read")

    def __init__(
        self,
        *,
        public: Callable[[str], bool],
        read: Callable[[object, str], bool],
        check: Callable[[object, str, object], None],
        checked_ids: frozenset[int],
        checked_kinds: tuple[type, ...],
    ) -> None:
        if ModuleType not in checked_kinds:
            raise ValueError("checked_kinds must hold ModuleType: the check acts on every module")
        self._checked_ids = checked_ids
        self._checked_kinds = checked_kinds
        self._public = public
        self._read = read
        self._check = check
        # id(cls) -> (cls, {positional or (positional, keywords): the class to match with})
        self._cache: dict[int, tuple[type, dict[object, type]]] = {}

    def pattern_class(self, cls: object, positional: int, keywords: tuple[str, ...]) -> object:
        """The class to match ``case cls(<positional> sub-patterns, <keywords>=...)`` with.

        Args:
            cls: The pattern's class (already read through the attribute guards).
            positional: How many positional sub-patterns the pattern has.
            keywords: The attribute names of its keyword sub-patterns.

        Returns:
            ``cls`` itself when the pattern reads no attribute (or ``cls`` is no class: the interpreter
            raises its own TypeError), else a stand-in that checks the reads first.

        Raises:
            TypeError: ``cls.__match_args__`` is not a tuple of strings (the interpreter's own message).
        """
        # Called each time a case with a class pattern is tried: the cache is keyed by the class's id (an int:
        # no hash or == of a metaclass is asked) and then by the pattern's shape (an int for the usual shape)
        entry = self._cache.get(id(cls))
        if entry is not None and entry[0] is cls:  # the entry holds cls: its id is not reused meanwhile
            found = entry[1].get((positional, keywords) if keywords else positional)
            if found is not None:
                return found
        if not isinstance(cls, type):
            return cls
        return self._add(cls, positional, keywords)

    def _add(self, cls: type, positional: int, keywords: tuple[str, ...]) -> type:
        matched_with = self._stand_in(cls, positional, keywords) or cls
        entry = self._cache.get(id(cls))
        if entry is None or entry[0] is not cls:
            if len(self._cache) >= _CACHE_CAP:
                self._cache.clear()
            entry = self._cache[id(cls)] = (cls, {})
        entry[1][(positional, keywords) if keywords else positional] = matched_with
        return matched_with

    def _stand_in(self, cls: type, positional: int, keywords: tuple[str, ...]) -> type | None:
        """None when matching with ``cls`` itself reads nothing: no sub-patterns, or ``case int(x)``."""
        if not positional and not keywords:
            return None
        if id(cls) in _SELF_MATCHING_IDS and positional == 1 and not keywords:
            return None  # binds the subject itself
        # Read once, as the interpreter would; the stand-in keeps this copy (a class's __match_args__ is
        # set when it is made: dataclasses, namedtuples).
        match_args = getattr(cls, "__match_args__", _MISSING)
        namespace: dict[str, object] = {
            "_codeact_target": cls,
            "_codeact_read": self._read,
            "_codeact_check": self._check,
            "_codeact_checked_ids": self._checked_ids,
            "_codeact_checked_kinds": self._checked_kinds,
            "__module__": getattr(cls, "__module__", None),
        }
        bases: tuple[type, ...] = ()
        if match_args is not _MISSING:
            if type(match_args) is not tuple:
                raise TypeError(f"{cls.__name__}.__match_args__ must be a tuple (got {type(match_args).__name__})")
            for name in match_args:
                if type(name) is not str:
                    raise TypeError(f"__match_args__ elements must be strings (got {type(name).__name__})")
            namespace["__match_args__"] = match_args
            names = match_args[:positional] + keywords
        elif _TYPE_FLAGS.__get__(cls) & _MATCH_SELF:
            # no __match_args__, derived from a built-in that matches itself: the first positional
            # sub-pattern is the subject; the stand-in derives from that built-in to keep the behaviour
            builtin = next(c for c in _TYPE_MRO.__get__(cls) if id(c) in _SELF_MATCHING_IDS)
            bases = (int if builtin is bool else builtin,)  # bool cannot be derived from; int has the flag
            names = keywords
        else:
            names = keywords  # positional sub-patterns: the interpreter raises "accepts 0 positional"
        namespace["_codeact_reads"] = tuple((name, not self._public(name)) for name in names)
        return _PatternMeta(cls.__name__, bases, namespace)
