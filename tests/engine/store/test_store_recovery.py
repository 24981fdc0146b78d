"""Recovery primitives on both backends: lock owners and heartbeats, fencing, status repair, pending calls."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time

import pytest

from codeact.engine.store import LockLostError, SessionBusyError, Store
from codeact.engine.store._lock import make_token, parse_token

from ._helpers import append, make_meta, make_round, make_segments


def _dead_pid() -> int:
    """The pid of a process of this host that has exited (and was reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


async def test_a_stale_owner_is_fenced_out(store: Store) -> None:
    await store.create_session(make_meta())
    stale = store.lock("s1", ttl=0.3, beat=10)  # its heartbeat never comes in time: a frozen owner
    await stale.__aenter__()
    await append(store, 1)
    await asyncio.sleep(0.5)  # the stale owner's lock expired ...
    async with store.lock("s1") as fresh:  # ... and a resume took the session over
        record = make_round(2)
        with pytest.raises(LockLostError) as info:
            await store.append_round(record, segments=make_segments(2), variables={"x": 1}, fence=stale.token)
        assert info.value.code == "store.lock_lost"
        assert info.value.message == (
            f"cannot record round 2 of session 's1' in {store.url}: this run no longer holds the session's lock "
            "(no heartbeat for too long, or forced with `codeact sessions unlock`); another run may own the "
            "session now, so this round was not recorded"
        )
        assert [r.index for r in await store.rounds("s1")] == [1]  # nothing of the refused write landed
        assert await store.variables("s1") == make_round(1).variables
        await store.append_round(record, segments=make_segments(2), variables={"x": 2}, fence=fresh.token)
    await stale.__aexit__(None, None, None)  # its release does not drop anyone else's lock
    assert [r.index for r in await store.rounds("s1")] == [1, 2]


async def test_an_expired_lock_nobody_took_is_taken_back_by_its_owner(store: Store) -> None:
    # A run whose event loop stalled past the ttl (a long import) loses no one's data: nobody took
    # the session meanwhile, so its write re-takes the lock and passes.
    await store.create_session(make_meta())
    stalled = store.lock("s1", ttl=0.2, beat=10)
    await stalled.__aenter__()
    await asyncio.sleep(0.4)
    assert await store.lock_info("s1") is None  # expired: free for a resume ...
    await store.append_round(make_round(1), segments=make_segments(1), variables={}, fence=stalled.token)
    info = await store.lock_info("s1")  # ... but nobody came: the owner holds it again
    assert info is not None and info.token == stalled.token
    await stalled.refresh()
    await stalled.__aexit__(None, None, None)
    assert await store.lock_info("s1") is None


async def test_lock_info_names_the_owner_and_unlock_forces_it(store: Store) -> None:
    await store.create_session(make_meta())
    assert await store.lock_info("s1") is None
    async with store.lock("s1") as held:
        info = await store.lock_info("s1")
        assert info is not None
        assert info.owner == f"{socket.gethostname()}:{os.getpid()}"
        assert abs(info.since - time.time()) < 60
        assert info.expires_at > time.time()
        assert info.owner_dead() is False  # ourselves
        assert "token" not in info.to_json()
        forced = await store.force_unlock("s1")
        assert forced is not None and forced.token == held.token
        assert await store.lock_info("s1") is None
        with pytest.raises(LockLostError):  # the forced-out holder cannot write ...
            await store.append_round(make_round(1), segments=make_segments(1), variables={}, fence=held.token)
        with pytest.raises(SessionBusyError):  # ... nor take its lock back
            await held.refresh()
    meta = await store.get_session("s1")
    assert meta is not None and meta.status == "interrupted"  # an active session without its run
    async with store.lock("s1"):  # a new run takes the forced session at once
        await append(store, 1)


async def test_a_dead_local_owner_is_taken_over_at_once(store: Store) -> None:
    await store.create_session(make_meta())
    token = make_token().split("|")
    dead = "|".join([token[0], token[1], str(_dead_pid()), token[3]])
    assert await store._acquire_lock("s1", dead, 600) is None  # a 10-minute lock whose owner is gone
    info = await store.lock_info("s1")
    assert info is not None and info.owner_dead()
    # sessions list / show repair the status without taking the lock
    meta = await store.repair_status("s1")
    assert meta is not None and meta.status == "interrupted"
    async with store.lock("s1") as lock:  # no wait: the resume proceeds now
        assert lock.took_over is not None and lock.took_over.token == dead
        await append(store, 1)


async def test_a_live_owner_keeps_its_session(store: Store) -> None:
    await store.create_session(make_meta())
    async with store.lock("s1"):
        assert (await store.repair_status("s1")).status == "active"  # type: ignore[union-attr]
        # another host's owner is never judged dead, only expired
        remote = parse_token("s1", "ab|some-other-host|1|1.0", time.time() + 10)
        assert remote.owner_dead() is False
        with pytest.raises(SessionBusyError):
            async with store.lock("s1"):
                pass


async def test_pending_entries_are_kept_in_order_until_cleared(store: Store) -> None:
    await store.create_session(make_meta())
    assert await store.pending("s1") == []
    await store.add_pending("s1", {"round": 1, "kind": "code", "code": "x = 1"})
    await store.add_pending("s1", {"round": 1, "kind": "call", "call": {"toolkit": "t", "operation": "a"}})
    await store.add_pending("s1", {"round": 1, "kind": "call", "call": {"toolkit": "t", "operation": "b"}})
    assert [e.get("call", {}).get("operation") for e in await store.pending("s1")] == [None, "a", "b"]
    await store.clear_pending("s1")
    assert await store.pending("s1") == []
    await store.add_pending("s1", {"round": 2, "kind": "call", "call": {}})
    await store.delete_session("s1")
    assert await store.pending("s1") == []
