"""The Redis store's Lua scripts: each session change is one atomic script (engine/store/redis_store.py)."""

from __future__ import annotations

_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 4))
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
if tonumber(ARGV[3]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return 1
"""

# KEYS: meta, index. ARGV: session_id, updated_at, ttl_ms, n_delete, fields to delete..., field/value pairs...
_UPDATE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local n_delete = tonumber(ARGV[4])
if n_delete > 0 then redis.call('HDEL', KEYS[1], unpack(ARGV, 5, 4 + n_delete)) end
redis.call('HSET', KEYS[1], unpack(ARGV, 5 + n_delete))
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
if tonumber(ARGV[3]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return 1
"""

# KEYS: meta, rounds, segments, vars, index.
# ARGV: session_id, index, record, updated_at, ttl_ms, previous record's sha1, segments before ('' = any),
#       n_segments, segments..., name/value pairs...
# Returns {0, index} on success (also when this exact round is already recorded), {1, 0} for an
# unknown session, {2, last} for a wrong index, {3, 0} when the record was encoded against another
# previous round than the stored one (the client re-reads and retries). Every check runs before the
# first write, and a script runs atomically, so a round is all or nothing.
_APPEND = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {1, 0} end
local last = tonumber(redis.call('HGET', KEYS[1], 'rounds') or '0')
local index = tonumber(ARGV[2])
if last + 1 ~= index then
  -- The same round again (a client retry after a lost reply): already written, nothing to do.
  if last >= index and redis.call('LINDEX', KEYS[2], index - 1) == ARGV[3] then return {0, index} end
  return {2, last}
end
if index > 1 and redis.sha1hex(redis.call('LINDEX', KEYS[2], index - 2) or '') ~= ARGV[6] then return {3, 0} end
if ARGV[7] ~= '' and redis.call('LLEN', KEYS[3]) ~= tonumber(ARGV[7]) then return {3, 0} end
redis.call('RPUSH', KEYS[2], ARGV[3])
local n_segments = tonumber(ARGV[8])
local first = 9
local stop = first + n_segments - 1
while first <= stop do
  local upto = math.min(first + 199, stop)
  redis.call('RPUSH', KEYS[3], unpack(ARGV, first, upto))
  first = upto + 1
end
redis.call('DEL', KEYS[4])
stop = #ARGV
while first <= stop do
  local upto = math.min(first + 399, stop)
  redis.call('HSET', KEYS[4], unpack(ARGV, first, upto))
  first = upto + 1
end
redis.call('HSET', KEYS[1], 'rounds', ARGV[2], 'updated_at', ARGV[4])
redis.call('ZADD', KEYS[5], ARGV[4], ARGV[1])
local ttl = tonumber(ARGV[5])
if ttl > 0 then
  for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], ttl) end
end
return {0, tonumber(ARGV[2])}
"""

# Fencing (docs/store.md): prepended to the append script, it pops the lock key (last KEYS entry),
# the writer's token and the lock ttl (last ARGV entries; token "" = unfenced) and refuses the write
# with {4, 0} when another token holds the lock (or the forced-unlock marker), in the same atomic
# script as the write. An expired lock nobody took is re-taken.
_FENCE = """
local fence = table.remove(ARGV)
local fence_ttl = table.remove(ARGV)
local lock_key = table.remove(KEYS)
if fence ~= '' then
  local holder = redis.call('GET', lock_key)
  if holder == false then
    -- expired, and nobody took the session since: the writer takes its lock back
    redis.call('SET', lock_key, fence, 'PX', fence_ttl)
  elseif holder ~= fence then
    return {4, 0}
  end
end
"""

# KEYS: lock. ARGV: token, ttl_ms, replace ("" = none). Returns {1, 0} when acquired (or already
# ours, or taken over from the token ``replace``), else {0, holder's PTTL}.
_ACQUIRE = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return {1, 0} end
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] or (ARGV[3] ~= '' and holder == ARGV[3]) or string.sub(holder, 1, 9) == 'unlocked|' then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1, 0}
end
return {0, redis.call('PTTL', KEYS[1])}
"""

# KEYS: meta, lock. ARGV: stale token ("" = none), updated_at. Returns 1 when the status changed.
_MARK_INTERRUPTED = """
local holder = redis.call('GET', KEYS[2])
if holder and holder ~= ARGV[1] and string.sub(holder, 1, 9) ~= 'unlocked|' then return 0 end
if redis.call('HGET', KEYS[1], 'status') ~= 'active' then return 0 end
redis.call('HSET', KEYS[1], 'status', 'interrupted', 'updated_at', ARGV[2])
return 1
"""

# Extends our lock, or re-takes it when it expired and nobody took it; 0 when another token holds it.
_REFRESH = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if holder == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
