-- sem_release.lua — give back the permits of one hold, or leave the queue,
-- by attempt id (unlock, the background releaser, a waiter that gives up).
-- Idempotent.
-- (The libraries come first, as for every sem script: see sem_lib.lua.)
--
-- KEYS[1..6]  s, h, hn, q, qo, alive  (see sem_lib.lua)
-- ARGV[1]  attempt id
--
-- Reply:
--   0  nothing to release (its lease had ended, or released already)
--   1  left the queue (a woken waiter's permits go to the next ones)
--   2  permits given back; the waiters they serve were woken
--   error WRONGTYPE <key>  a key of another type that this call touches:
--      q first, then h (a hold to release), hn and s, and qo and alive
--      when someone queues (a waiter that leaves reads them all: the
--      permits it kept go to those behind it). Each is read with pcall
--      (hold_first) before the first write, so nothing is written; no TYPE
--      is sent, and a key the call never touches (qo and alive on a
--      release nobody waits for; everything but q and h for an attempt
--      that holds nothing) is not looked at.
--
-- O(log n) plus O(log n) per waiter woken.
local K = sem_keys(0)
local a = ARGV[1]
local queued, err = hold_first(K.q, 'ZSCORE', K.q, a)
if err then
  return err
end
local f
if queued then
  -- A waiter leaves: everything the wake-up below touches is read first.
  f, err = hold_first_each({{K.s, 'HGET', 'p'}, {K.hn, 'HGET', '#t'}, {K.h, 'ZCARD'},
    {K.alive, 'ZCARD'}, {K.qo, 'HDEL', a}})
  if err then
    return err
  end
  redis.call('ZREM', K.q, a)
  local now_ms = hold_now()
  sem_wake(K, now_ms, (tonumber(f[1]) or 0) - (tonumber(f[2]) or 0))
  return 1
end
local dl
dl, err = hold_first(K.h, 'ZSCORE', K.h, a)
if err then
  return err
end
if not dl then
  return 0
end
-- The hold's entry, the permits set and the queue's head, read before the
-- first write; qo and alive too when someone waits.
f, err = hold_first_each({{K.hn, 'HGET', a}, {K.s, 'HGET', 'p'}, {K.q, 'ZRANGE', 0, 63}})
if err then
  return err
end
if f[3][1] then
  local _; _, err = hold_first_each({{K.qo, 'HGET', f[3][1]}, {K.alive, 'ZCARD'}})
  if err then
    return err
  end
end
local now_ms = hold_now()
local live = tonumber(dl) > now_ms
sem_drop_hold(K, a, f[1])
sem_purge(K, now_ms)
lease_removed(K.h, K.hn)
sem_wake(K, now_ms, sem_available(K, f[2]), f[3])
if live then
  return 2
end
return 0
