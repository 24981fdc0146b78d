"""The recording views of time/datetime/random/uuid/os/secrets and the round's tape (in process)."""

from __future__ import annotations

import datetime as real_datetime
import os.path
import random
import time
from typing import Any

from codeact.sandbox.runtime.nondet import MAX_READS, Tape, Views


def importer(views: Views) -> Any:
    return views.importer(__import__)


def test_a_tape_records_then_replays_in_order() -> None:
    tape = Tape()
    assert tape.take("time.time", lambda: 1.5) == 1.5
    assert tape.take("uuid.uuid4", lambda: "ab") == "ab"
    assert tape.reads == [["time.time", 1.5], ["uuid.uuid4", "ab"]]
    replay = Tape(tape.reads)
    assert replay.take("time.time", lambda: 99.0) == 1.5
    assert replay.take("uuid.uuid4", lambda: "zz") == "ab"
    assert (replay.diverged, replay.unread) == (None, 0)


def test_a_read_the_record_does_not_have_is_a_divergence_and_goes_live() -> None:
    replay = Tape([["time.time", 1.5]])
    assert replay.take("datetime.now", lambda: "live") == "live"
    assert replay.diverged == "read 1: the record has 'time.time', the code read 'datetime.now'"
    assert replay.take("time.time", lambda: 2.0) == 2.0  # live from now on
    extra = Tape([])
    extra.take("time.time", lambda: 3.0)
    assert extra.diverged == "read 1: the code read 'time.time' after the 0 recorded read(s)"
    fewer = Tape([["time.time", 1.5], ["time.time", 1.6]])
    fewer.take("time.time", lambda: 0.0)
    assert fewer.unread == 1


def test_a_chatty_round_is_recorded_up_to_the_cap() -> None:
    tape = Tape()
    for i in range(MAX_READS + 5):
        tape.take("time.monotonic", lambda i=i: float(i))
    assert len(tape.reads) == MAX_READS
    assert tape.truncated


def test_imports_get_views_only_where_the_code_binds_the_module() -> None:
    views = Views()
    views.begin(None)
    imp = importer(views)
    assert imp("time") is views.modules["time"] and imp("time") is not time
    assert imp("time", None, None, ("time",), 0) is views.modules["time"]
    assert imp("os.path") is views.view("os")  # `import os.path` binds `os`
    assert imp("os.path", None, None, ("join",), 0) is os.path  # `from os.path import join`: the real one
    assert imp("json") is __import__("json")
    assert importer(views)  # wrapping twice does not stack
    assert views.importer(imp)._codeact_original is __import__  # type: ignore[attr-defined]


def test_random_is_seeded_only_in_a_round_that_imports_it_and_replays_from_its_seed() -> None:
    views = Views()
    views.begin(None)
    assert views.end() is None  # nothing used, nothing recorded
    views.begin(None)
    importer(views)("random")
    first = [random.random() for _ in range(3)]
    record = views.end()
    assert record is not None and isinstance(record["seed"], int) and record["reads"] == []
    views.begin(record)
    importer(views)("random")
    assert [random.random() for _ in range(3)] == first


def test_the_clock_views_record_and_feed_back() -> None:
    views = Views()
    views.begin(None)
    t = importer(views)("time")
    dt = importer(views)("datetime")
    recorded = (t.time(), t.monotonic_ns(), dt.datetime.now(), dt.datetime.now(real_datetime.UTC), dt.date.today())
    record = views.end()
    assert record is not None
    assert [kind for kind, _ in record["reads"]] == [
        "time.time", "time.monotonic_ns", "datetime.now", "datetime.now", "date.today",
    ]  # fmt: skip
    views.begin(record)
    replayed = (t.time(), t.monotonic_ns(), dt.datetime.now(), dt.datetime.now(real_datetime.UTC), dt.date.today())
    assert replayed == recorded
    assert type(replayed[2]) is real_datetime.datetime and replayed[3].tzinfo is real_datetime.UTC
    assert views.end() == record


def test_the_datetime_view_classes_stand_for_the_real_ones() -> None:
    views = Views()
    dt = views.view("datetime")
    real = real_datetime.datetime(2020, 1, 2, 3, 4)
    assert isinstance(real, dt.datetime) and isinstance(real, dt.date)
    assert issubclass(real_datetime.datetime, dt.datetime)
    made = dt.datetime(2020, 1, 2, 3, 4)
    assert type(made) is real_datetime.datetime and made == real
    assert type(dt.datetime.fromtimestamp(0)) is real_datetime.datetime
    assert dt.timedelta is real_datetime.timedelta
    assert dt.datetime.__module__ == "datetime" and dt.datetime.__qualname__ == "datetime"


def test_uuid_urandom_and_secrets_replay() -> None:
    views = Views()
    views.begin(None)
    imp = importer(views)
    uuid_view, os_view, secrets_view = imp("uuid"), imp("os"), imp("secrets")
    recorded = (
        uuid_view.uuid4(),
        os_view.urandom(8),
        secrets_view.token_hex(4),
        secrets_view.choice("abcdef"),
        secrets_view.SystemRandom().random(),
    )
    record = views.end()
    views.begin(record)
    uuid_view, os_view, secrets_view = imp("uuid"), imp("os"), imp("secrets")  # each round imports again
    replayed = (
        uuid_view.uuid4(),
        os_view.urandom(8),
        secrets_view.token_hex(4),
        secrets_view.choice("abcdef"),
        secrets_view.SystemRandom().random(),
    )
    assert replayed == recorded
    assert views.end() == record
