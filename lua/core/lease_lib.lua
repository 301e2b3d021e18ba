-- lease_lib.lua — holds that each keep their own lease: a ZSET of holds
-- (member -> lease deadline, server ms) and a companion hash (the read-write
-- lock's readers K.r / K.ro, the semaphore's holds K.h / K.hn).
--
-- Not a script of its own: the script loader joins it after hold_lib.lua
-- (LEASE_LIB in deadbolt_core::scripts) for the scripts that keep such
-- holds, so replaying, renewing and forgetting a lease are written once.
--
-- Every function is O(log n) per hold it touches; purges handle at most 64.

-- Leased holds kept in a ZSET (member -> lease deadline, server ms) and a
-- companion hash. Both keys expire no earlier than the longest lease:
-- a hold added or extended to `at` pushes their expiry out to `at`
-- (hold_expire_at_least: never shortened). `fresh`: the caller saw no
-- holds before this one, so the keys were just created and have no TTL
-- yet (one command each instead of three).
local function lease_added(zkey, hkey, at, fresh)
  local s = string.format('%.0f', at)
  hold_expire_at_least('PEXPIREAT', zkey, s, fresh)
  hold_expire_at_least('PEXPIREAT', hkey, s, fresh)
end

-- After holds were removed: when none is left, both keys go at once.
-- Otherwise their expiry stays (at most the removed holds' leases longer
-- than needed), which saves finding the new longest lease on every release.
-- Returns whether the keys went (a hold added next is `fresh` for
-- lease_added).
local function lease_removed(zkey, hkey)
  if redis.call('ZCARD', zkey) == 0 then
    redis.call('DEL', zkey, hkey)
    return true
  end
  return false
end

-- Forget leased holds whose lease ended (up to 64 per call, oldest first),
-- each through `drop(attempt)`, which gives back what the hold took.
-- Returns how many went, nil, whether no hold is left (zkey was empty, or
-- the purge emptied it and lease_removed deleted both keys: a hold added
-- next is `fresh` for lease_added; when zkey was empty hkey is left as it
-- is), and when nothing ended and a hold is left, the earliest deadline
-- (the score read, a string: a caller that needs it reads no more); or
-- nil and the error reply
-- naming zkey when it is of another type (its read, with pcall, comes
-- before any drop: the callers that have not touched zkey before rely on
-- it). The oldest lease is read first: nothing ended (the common case) is
-- one command, as is an empty set. The drops are a repair (ended leases
-- count for nothing): the callers make it before they read the keys that
-- only their later steps touch.
local function lease_purge(zkey, hkey, now_ms, drop)
  local first, err = hold_first(zkey, 'ZRANGE', zkey, 0, 0, 'WITHSCORES')
  if err then
    return nil, err
  end
  if not first[1] then
    return 0, nil, true
  end
  if tonumber(first[2]) > now_ms then
    return 0, nil, false, first[2]
  end
  local gone = redis.call('ZRANGEBYSCORE', zkey, '-inf', now_ms, 'LIMIT', 0, 64)
  for _, a in ipairs(gone) do
    drop(a)
  end
  return #gone, nil, lease_removed(zkey, hkey)
end

-- Renew leased hold `attempt` (ZSET zkey, companion hash hkey; `dl` its
-- deadline as the caller read it from zkey, false when missing) to at
-- least now + lease: returns the ms left of its lease after the call
-- (never shortened), or -1 when it is gone; an ended lease is forgotten
-- through `drop(attempt)` (which gives back what the hold took). O(log n).
local function lease_renew(zkey, hkey, attempt, lease, now_ms, drop, dl)
  if not dl then
    return -1
  end
  if tonumber(dl) <= now_ms then
    drop(attempt)
    lease_removed(zkey, hkey)
    return -1
  end
  local want = now_ms + lease
  if tonumber(dl) < want then
    redis.call('ZADD', zkey, want, attempt)
    lease_added(zkey, hkey, want)
    dl = want
  end
  return tonumber(dl) - now_ms
end

-- A replay of attempt `attempt`, already granted and its lease not ended
-- (dl, its deadline, is past now_ms): counted once, and a grant made under
-- a claim (inside a release) is stretched to the lease asked for. Returns
-- the acquire's reply {1, 0, pttl}, or nil when the attempt holds nothing
-- live. O(log n).
local function lease_replay(zkey, hkey, attempt, dl, lease, now_ms)
  if not dl or tonumber(dl) <= now_ms then
    return nil
  end
  if tonumber(dl) < now_ms + lease then
    redis.call('ZADD', zkey, now_ms + lease, attempt)
    lease_added(zkey, hkey, now_ms + lease)
    return {1, 0, lease}
  end
  return {1, 0, tonumber(dl) - now_ms}
end

-- The renew contract of leased holds (the watchdog's batches, `extend`):
-- ARGV[1] the lease in ms to guarantee from now, ARGV[1+i] the i-th hold's
-- attempt, its keys the i-th group of `width` in KEYS: keys(i) returns
-- the group as a table K, its ZSET of leases, the companion hash, and the
-- ZSET's position in the group (1-based; the hash follows it). Both are
-- read with pcall (the hold's deadline, its entry in the hash) before
-- anything is written for the hold; a key of another type gives that hold
-- -2 - its position in the group, with nothing written, so one bad key
-- does not fail a watchdog round for the holds of others (a key of the
-- group that renewing never touches is not read, and does not refuse it).
-- `drop(K, attempt, entry)` forgets an ended hold, `entry` its value in
-- the hash as read. Returns one integer per hold: ms of lease left after
-- the call (never shortened), -1 gone, or -2 - j. O(log n) per hold.
local function lease_renew_batch(width, keys, drop)
  local lease = tonumber(ARGV[1])
  local now_ms = hold_now()
  local out = {}
  for i = 1, #KEYS / width do
    local K, z, h, at = keys(i)
    local attempt = ARGV[i + 1]
    local f, _, j = hold_first_each({{z, 'ZSCORE', attempt}, {h, 'HGET', attempt}})
    if not f then
      out[i] = -2 - (at + j - 1)
    else
      out[i] = lease_renew(z, h, attempt, lease, now_ms,
        function(a) drop(K, a, f[2]) end, f[1])
    end
  end
  return out
end
