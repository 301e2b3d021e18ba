-- fair_release.lua — leave the queue or release one hold, by attempt id.
-- (msg_lib.lua, hold_lib.lua, queue_lib.lua and fair_lib.lua come first.)
--
-- Used by unlock, by the releaser (dropped guards, cancelled or Indeterminate
-- acquires) and by a waiter that gives up. Idempotent: the attempt's queue
-- entry or hold field is removed on the first run.
--
-- KEYS[1..6]  hold, fence, q, qo, alive, seq  (see fair_lib.lua)
-- ARGV[1]  attempt id
-- ARGV[2]  waiter timeout in ms (claim lease of the next holder when its
--          queue entry predates the per-entry waiter timeout)
--
-- Reply:
--   0  nothing to release (expired, taken over, or already released)
--   1  left the queue, or an inner hold released (still held)
--   2  the last hold released; the lock went to the next live waiter, if any
--   error WRONGTYPE <key>  a key of the lock that this call touches is of
--      another type: each is read with pcall (hold_first) before the first
--      write, so the hold and the queue are untouched; no TYPE is sent (a
--      release with nobody queued touches only the hold and q)
--
-- Why each branch: the hold is looked at first (a holder's release is the
-- common call; an attempt is never both queued and holding: a hand-off
-- takes it out of the queue); an attempt that holds nothing may be a
-- waiter that gives up, which leaves the queue and wakes nobody; the last
-- hold passes the lock on to the live head when anyone waits, and the
-- queue's head read here is the first one fair_pass_on looks at (one read
-- of q, not two).
local K = fair_keys(0)
local attempt, wt = ARGV[1], tonumber(ARGV[2])

local r, err = hold_release_checked(K.hold, attempt)
if err then
  return err
end
if r == 0 then
  -- Not held by this attempt (expired, taken over, released already), or
  -- a waiter that gave up: it leaves at once; nobody is woken. Its entry
  -- goes first (the first touch of qo, and the first write).
  local queued
  queued, err = hold_first(K.q, 'ZSCORE', K.q, attempt)
  if err then
    return err
  end
  if not queued then
    return 0
  end
  local _; _, err = hold_first(K.qo, 'HDEL', K.qo, attempt)
  if err then
    return err
  end
  redis.call('ZREM', K.q, attempt)
  return 1
end
if r ~= 2 then
  -- 1: an inner hold released.
  return r
end
-- Last hold (also an unclaimed hand-off whose waiter gave up): pass it on
-- if anyone waits (the clock is read only then); the hand-off replaces the
-- hold hash and publishes before it writes, so a refused PUBLISH (ACL)
-- leaves the hold as it was, and so does a key of another type among
-- those it reads (fair_pass_on). The first touch of the queue: a key of
-- another type is named.
local top
top, err = hold_first(K.q, 'ZRANGE', K.q, 0, 0)
if err then
  return err
end
if top[1] then
  local now_ms, now_us = hold_now()
  local passed
  passed, err = fair_pass_on(K, now_ms, now_us, wt, top)
  if err then
    return err
  end
  if passed then
    return 2
  end
end
redis.call('DEL', K.hold)
return 2
