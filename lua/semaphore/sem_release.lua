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
--   1  left the queue (the waiters behind it may be served now)
--   2  permits given back; the waiters they serve were woken
--   error WRONGTYPE <key>  a key of another type that this call touches:
--      h first, then q (a hold to release reads hn and q; s, qo and alive
--      too when someone queues; a waiter that leaves reads s, hn, alive and
--      qo: the permits it kept go to those behind it). Each is read with
--      pcall (hold_first) before the first write, so nothing is written;
--      no TYPE is sent, and a key the call never touches (s, qo and alive
--      on a release nobody waits for; everything but h and q for an
--      attempt that holds nothing) is not looked at.
--
-- Why each branch: a hold is looked for first (the common call; a waiter
-- that leaves is the rarer one, and an attempt is never both: a grant
-- takes it out of the queue). A release nobody waits for gives its
-- permits back and is done: ended leases are left to the next acquire's
-- purge (they count for nothing there), and the last hold deletes both
-- keys at once instead of updating the count first. A release with
-- waiters purges ended leases too, so that every permit free serves them.
--
-- O(log n) plus O(log n) per waiter woken.
local K = sem_keys(0)
local a = ARGV[1]
local dl, err = hold_first(K.h, 'ZSCORE', K.h, a)
if err then
  return err
end
local f
if not dl then
  local queued
  queued, err = hold_first(K.q, 'ZSCORE', K.q, a)
  if err then
    return err
  end
  if not queued then
    return 0
  end
  -- A waiter leaves: everything the wake-up below touches is read first.
  f, err = hold_first_each({{K.s, 'HGET', 'p'}, {K.hn, 'HGET', '#t'},
    {K.alive, 'ZCARD'}, {K.qo, 'HDEL', a}})
  if err then
    return err
  end
  redis.call('ZREM', K.q, a)
  local now_ms = hold_now()
  sem_wake(K, now_ms, (tonumber(f[1]) or 0) - (tonumber(f[2]) or 0))
  return 1
end
-- The hold's entry and the queue's head, read before the first write; s,
-- qo and alive too when someone waits.
f, err = hold_first_each({{K.hn, 'HGET', a}, {K.q, 'ZRANGE', 0, 63}})
if err then
  return err
end
local waiting = f[2][1]
local p, head
if waiting then
  local g
  g, err = hold_first_each({{K.s, 'HGET', 'p'}, {K.qo, 'HGET', waiting}})
  if err then
    return err
  end
  p = g[1]
  -- The head's client's liveness record is alive's first touch (sem_wake
  -- takes it with the head's entry, and reads neither again); ZCARD for
  -- an entry that names no client.
  local owner, rec = sem_entry(g[2]), nil
  if owner then
    rec, err = hold_first(K.alive, 'ZSCORE', K.alive, queue_client(owner))
  else
    local _
    _, err = hold_first(K.alive, 'ZCARD', K.alive)
  end
  if err then
    return err
  end
  head = {v = g[2], dl = rec or false}
end
local now_ms = hold_now()
local live = tonumber(dl) > now_ms
if not waiting then
  -- This hold is in h (dl): alone there, it is the last.
  if redis.call('ZCARD', K.h) == 1 then
    redis.call('DEL', K.h, K.hn)
  else
    sem_drop_hold(K, a, f[1])
  end
else
  local taken = sem_drop_hold(K, a, f[1])
  local purged, _, gone = sem_purge(K, now_ms)
  if purged > 0 then
    -- The drops changed the count (and deleted both keys if they emptied
    -- them: gone).
    taken = nil
  elseif gone then
    -- The hold dropped above was the last (h went with it): hn goes too,
    -- and the grants below make both afresh.
    redis.call('DEL', K.h, K.hn)
  end
  local avail
  if gone then
    avail = tonumber(p) or 0
  elseif taken then
    avail = (tonumber(p) or 0) - tonumber(taken)
  else
    avail = sem_available(K, p)
  end
  sem_wake(K, now_ms, avail, f[2], gone, tonumber(dl), head)
end
if live then
  return 2
end
return 0
