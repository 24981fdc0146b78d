"""What the code reads from non-deterministic sources, recorded per round and fed back on replay.

Standard library only (runs inside the sandbox). The code imports ``time``, ``datetime``, ``random``,
``uuid``, ``os`` and ``secrets`` through the sandbox's ``__import__``; the runtime hands it a *view*
of each (:class:`Views`): a module object holding the real module's names, except the functions that
read the clock or the system's randomness, which go through the round's :class:`Tape`:

* record (a normal round): the real value is returned and appended to the tape as ``[kind, value]``;
* replay: the recorded value is returned instead, in order; a read that does not match the tape
  (another kind, or more reads than recorded) is a *divergence*: it is reported and the rest of the
  round reads live values.

The module-level ``random`` functions use one generator, seeded in every round that imports
``random`` with a seed the round records (``random.random()`` is not taped: the seed makes it exact). The views only
change what the code sees: the runtime's own clock, asyncio's and the standard library's internal
reads are untouched (feeding recorded times to asyncio would break its timers).

``random``, ``uuid`` and ``secrets`` are imported here only when the code imports them (a view is
built after the real import): at a runtime's start they would cost a tenth of a cold start.

Not covered (documented in ``docs/replay.md``): modules reached another way (``importlib``, a
toolkit's value), C extensions with their own clocks or generators, ``id()``/memory addresses.
"""

from __future__ import annotations

import binascii
import os as _os
import time as _time
import types

TYPE_CHECKING = False  # not typing's: the runtime does not import typing to start (see protocol.py)
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, Final, TypeAlias, TypeVar

__all__ = ["MAX_READS", "VIEWED", "Tape", "Views"]

MAX_READS: Final = 10_000
"""Reads recorded per round; past it the tape is marked ``truncated`` (a replay reads live after it)."""

_MAX_TAPE_CHARS: Final = 1 << 20
if TYPE_CHECKING:
    _T = TypeVar("_T")
    _F = TypeVar("_F", bound=Callable[..., object])
    _TimeTuple: TypeAlias = tuple[int, int, int, int, int, int, int, int, int]
VIEWED: Final = frozenset({"time", "datetime", "random", "uuid", "os", "secrets"})
"""The modules the code gets a recording view of."""


class Tape:
    """The non-deterministic reads of one round.

    Args:
        replay: The recorded reads to feed back (``[[kind, value], ...]``), or None to record.
    """

    __slots__ = ("_feed", "_pos", "_replaying", "chars", "diverged", "reads", "truncated")

    def __init__(self, replay: list[object] | None = None) -> None:
        self.reads: list[list[object]] = []
        self._feed: list[object] = replay if replay is not None else []
        self._replaying = replay is not None
        self._pos = 0
        self.diverged: str | None = None
        self.truncated = False
        self.chars = 0

    def take(self, kind: str, live: Callable[[], object]) -> Any:  # Any: live()'s value, or the recorded one
        """The value of one read: the recorded one on replay, else ``live()`` (recorded)."""
        if self._replaying:
            pos = self._pos
            feed = self._feed
            if pos < len(feed):
                entry = feed[pos]
                if type(entry) is list and len(entry) == 2 and entry[0] == kind:
                    self._pos = pos + 1
                    self.reads.append(entry)
                    return entry[1]
                recorded = entry[0] if type(entry) is list and entry else entry
                self.diverged = f"read {pos + 1}: the record has {recorded!r}, the code read {kind!r}"
            else:
                self.diverged = f"read {pos + 1}: the code read {kind!r} after the {len(feed)} recorded read(s)"
            self._replaying = False
        value = live()
        if not self.truncated:
            size = len(value) if type(value) is str else 24
            if len(self.reads) >= MAX_READS or self.chars + size > _MAX_TAPE_CHARS:
                self.truncated = True
            else:
                self.chars += size
                self.reads.append([kind, value])
        return value

    @property
    def unread(self) -> int:
        """Recorded reads the replayed code did not make."""
        return max(len(self._feed) - self._pos, 0) if self._replaying else 0


class Views:
    """The recording views of :data:`VIEWED` for one runtime; each round plugs in its own tape."""

    def __init__(self) -> None:
        self.tape = Tape()
        self.seed: int | None = None
        self._recorded_seed: int | None = None
        self.modules: dict[str, types.ModuleType] = {}

    # -- a round ----------------------------------------------------------------------------------
    def begin(self, config: object) -> None:
        """Start a round: a new tape (replaying ``config["reads"]`` when given).

        ``random`` is seeded when the round first imports it (every round that uses it does: names
        are restored by re-running their imports), with ``config["seed"]`` on replay: a round that
        does not use ``random`` pays nothing.
        """
        replay = config.get("reads") if isinstance(config, dict) else None
        seed = config.get("seed") if isinstance(config, dict) else None
        self._recorded_seed = seed if type(seed) is int else None
        self.seed = None
        self.tape = Tape(list(replay) if isinstance(replay, list) else None)

    def seed_random(self) -> None:
        """Seed the module-level ``random`` generator for this round (once)."""
        if self.seed is None:
            seed = self._recorded_seed
            self.seed = seed if seed is not None else int.from_bytes(_os.urandom(8), "big")
            import random as _random

            _random.seed(self.seed)

    def end(self) -> dict[str, object] | None:
        """The round's record: ``{["seed"], "reads"[, "diverged"][, "unread"][, "truncated"]}``.

        None when the round neither used ``random`` nor read anything (nothing to replay).
        """
        tape = self.tape
        self.tape = Tape()
        if self.seed is None and not tape.reads and tape.diverged is None and not tape.unread:
            return None
        out: dict[str, object] = {"reads": tape.reads}
        if self.seed is not None:
            out["seed"] = self.seed
        if tape.diverged is not None:
            out["diverged"] = tape.diverged
        if tape.unread:
            out["unread"] = tape.unread
        if tape.truncated:
            out["truncated"] = True
        return out

    def importer(self, original: Callable[..., object]) -> Callable[..., object]:
        """``__import__`` that returns the views of :data:`VIEWED` modules (after ``original`` allowed them)."""
        original = getattr(original, "_codeact_original", original)
        view = self.view

        def __import__(  # noqa: N807 - the builtin's name
            name: str,
            globals: object = None,  # noqa: A002 - the signature of builtins.__import__
            locals: object = None,  # noqa: A002
            fromlist: object = (),
            level: int = 0,
        ) -> object:
            module = original(name, globals, locals, fromlist, level)
            if level == 0 and type(name) is str:
                target = name if fromlist else name.partition(".")[0]
                if target in VIEWED:
                    return view(target)
            return module

        __import__._codeact_original = original  # type: ignore[attr-defined]
        return __import__

    def view(self, name: str) -> types.ModuleType:
        """The view of module ``name`` (built on first use)."""
        if name == "random" or name == "secrets":
            self.seed_random()
        module = self.modules.get(name)
        if module is None:
            module = self.modules[name] = _BUILDERS[name](self)
        return module

    def take(self, kind: str, live: Callable[[], object]) -> Any:  # as Tape.take
        """One read through the current round's tape."""
        return self.tape.take(kind, live)


def _copy(real: types.ModuleType) -> types.ModuleType:
    module = types.ModuleType(real.__name__, real.__doc__)
    for key, value in vars(real).items():
        if key not in ("__name__", "__doc__", "__loader__", "__spec__"):
            module.__dict__[key] = value
    return module


def _named(module: str, name: str, fn: _F) -> _F:
    fn.__module__ = module
    fn.__name__ = fn.__qualname__ = name
    return fn


def _b64(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")  # base64.b64encode, without the module


def _bytes(text: object) -> bytes:
    return binascii.a2b_base64(text) if isinstance(text, str) else b""  # base64.b64decode


def _time_view(views: Views) -> types.ModuleType:
    m = _copy(_time)
    take = views.take

    def reader(kind: str, real: Callable[[], object]) -> Callable[[], object]:
        return lambda: take(kind, real)

    for name in ("time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns"):
        m.__dict__[name] = _named("time", name, reader(f"time.{name}", getattr(_time, name)))
    now = m.__dict__["time"]

    def localtime(secs: float | None = None) -> _time.struct_time:
        return _time.localtime(now() if secs is None else secs)

    def gmtime(secs: float | None = None) -> _time.struct_time:
        return _time.gmtime(now() if secs is None else secs)

    def ctime(secs: float | None = None) -> str:
        return _time.ctime(now() if secs is None else secs)

    def asctime(t: _time.struct_time | _TimeTuple | None = None) -> str:
        return _time.asctime(localtime() if t is None else t)

    def strftime(format: str, t: _time.struct_time | _TimeTuple | None = None) -> str:  # noqa: A002 - the stdlib's signature
        return _time.strftime(format, localtime() if t is None else t)

    for fn in (localtime, gmtime, ctime, asctime, strftime):
        m.__dict__[fn.__name__] = _named("time", fn.__name__, fn)
    return m


class _Alias(type):
    """Metaclass of the view classes: the real class's instances are instances of the view class."""

    _real: type

    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, cls._real)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, cls._real)


def _datetime_view(views: Views) -> types.ModuleType:
    import datetime as _dt  # here: only a round that imports datetime pays for it

    m = _copy(_dt)
    take = views.take
    real_datetime, real_date = _dt.datetime, _dt.date

    # The views return the real classes' instances (instances of the view by _Alias), not Self: Any.
    class date(_dt.date, metaclass=_Alias):  # noqa: N801 - the stdlib's name
        _real = real_date

        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            return real_date(*args, **kwargs)

        @classmethod
        def today(cls) -> Any:
            return real_date.fromisoformat(take("date.today", lambda: real_date.today().isoformat()))

    class datetime(_dt.datetime, metaclass=_Alias):  # noqa: N801 - the stdlib's name
        _real = real_datetime

        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            return real_datetime(*args, **kwargs)

        @classmethod
        def now(cls, tz: _dt.tzinfo | None = None) -> Any:
            text = take("datetime.now", lambda: real_datetime.now(tz).isoformat())
            value = real_datetime.fromisoformat(text)
            return value if tz is None else value.astimezone(tz)

        @classmethod
        def utcnow(cls) -> Any:
            return real_datetime.fromisoformat(
                take("datetime.utcnow", lambda: real_datetime.now(_dt.UTC).replace(tzinfo=None).isoformat())
            )

        @classmethod
        def today(cls) -> Any:
            return real_datetime.fromisoformat(take("datetime.today", lambda: real_datetime.today().isoformat()))

    for cls in (date, datetime):
        cls.__module__ = "datetime"
        cls.__qualname__ = cls.__name__
    m.__dict__.update(date=date, datetime=datetime)
    return m


def _random_view(views: Views) -> types.ModuleType:
    import random as _random

    m = _copy(_random)
    take = views.take

    def fresh_seed() -> int:
        return int.from_bytes(_os.urandom(16), "big")

    def seed(a: int | float | str | bytes | bytearray | None = None, version: int = 2) -> None:
        _random.seed(take("random.seed", fresh_seed) if a is None else a, version)

    class Random(_random.Random):
        def __init__(self, x: int | float | str | bytes | bytearray | None = None) -> None:
            super().__init__(take("random.Random", fresh_seed) if x is None else x)

    class SystemRandom(_random.SystemRandom):
        def random(self) -> float:
            value: float = take("random.SystemRandom.random", super().random)
            return value

        def getrandbits(self, k: int) -> int:
            value: int = take("random.SystemRandom.getrandbits", lambda: super(SystemRandom, self).getrandbits(k))
            return value

        def randbytes(self, n: int) -> bytes:
            return _bytes(take("random.SystemRandom.randbytes", lambda: _b64(_os.urandom(n))))

    for cls in (Random, SystemRandom):
        cls.__module__ = "random"
        cls.__qualname__ = cls.__name__
    m.__dict__.update(seed=_named("random", "seed", seed), Random=Random, SystemRandom=SystemRandom)
    return m


def _uuid_view(views: Views) -> types.ModuleType:
    import uuid as _uuid

    m = _copy(_uuid)
    take = views.take

    def uuid4() -> _uuid.UUID:
        return _uuid.UUID(take("uuid.uuid4", lambda: _uuid.uuid4().hex))

    def uuid1(node: int | None = None, clock_seq: int | None = None) -> _uuid.UUID:
        return _uuid.UUID(take("uuid.uuid1", lambda: _uuid.uuid1(node, clock_seq).hex))

    m.__dict__.update(uuid4=_named("uuid", "uuid4", uuid4), uuid1=_named("uuid", "uuid1", uuid1))
    return m


def _os_view(views: Views) -> types.ModuleType:
    m = _copy(_os)
    take = views.take

    def urandom(size: int) -> bytes:
        return _bytes(take("os.urandom", lambda: _b64(_os.urandom(size))))

    m.__dict__["urandom"] = _named("os", "urandom", urandom)
    return m


def _secrets_view(views: Views) -> types.ModuleType:
    import secrets as _secrets

    m = _copy(_secrets)
    take = views.take
    system = views.view("random").__dict__["SystemRandom"]

    def token_bytes(nbytes: int | None = None) -> bytes:
        n = _secrets.DEFAULT_ENTROPY if nbytes is None else nbytes
        return _bytes(take("secrets.token_bytes", lambda: _b64(_os.urandom(n))))

    def token_hex(nbytes: int | None = None) -> str:
        return token_bytes(nbytes).hex()

    def token_urlsafe(nbytes: int | None = None) -> str:
        import base64  # as secrets.token_urlsafe does

        return base64.urlsafe_b64encode(token_bytes(nbytes)).rstrip(b"=").decode("ascii")

    def randbelow(exclusive_upper_bound: int) -> int:
        value: int = take("secrets.randbelow", lambda: _secrets.randbelow(exclusive_upper_bound))
        return value

    def randbits(k: int) -> int:
        value: int = take("secrets.randbits", lambda: _secrets.randbits(k))
        return value

    def choice(seq: Sequence[_T]) -> _T:
        return seq[randbelow(len(seq))]

    for fn in (token_bytes, token_hex, token_urlsafe, randbelow, randbits, choice):
        m.__dict__[fn.__name__] = _named("secrets", fn.__name__, fn)
    m.__dict__["SystemRandom"] = system
    return m


_BUILDERS: Final[dict[str, Callable[[Views], types.ModuleType]]] = {
    "time": _time_view,
    "datetime": _datetime_view,
    "random": _random_view,
    "uuid": _uuid_view,
    "os": _os_view,
    "secrets": _secrets_view,
}
