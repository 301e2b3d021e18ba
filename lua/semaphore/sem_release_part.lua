-- sem_release_part.lua — give back part of one hold's permits, keeping the
-- rest under the same attempt and lease (Permits::release_permits).
-- (The libraries come first, as for every sem script: see sem_lib.lua.)
--
-- KEYS[1..6]  s, h, hn, q, qo, alive  (see sem_lib.lua)
-- ARGV[1]  attempt id of the hold
-- ARGV[2]  keep: the permits the hold keeps (1 .. 2^53-1, checked by the
--          client; giving back every permit is sem_release.lua's work)
--
-- Reply:
--   n >= 1  the permits the hold has after the call: min(keep, what it
--           had); those beyond `keep` were given back and serve the
--           waiters that now fit (sem_wake), granted inside this call
--   -1      the hold is not recorded: released, its lease ended (its
--           permits are given back now), or the semaphore was deleted
--   error INVALID <why>     keep < 1; nothing written
--   error WRONGTYPE <key>   a key of another type; nothing written
--
-- Why each branch: the call states what the hold keeps, not how many go,
-- so it is idempotent: a retry after a lost reply (or a call whose future
-- was dropped, followed by another) finds the hold at or below `keep` and
-- gives back nothing more; the reply tells the guard what it really holds.
-- An ended lease is dropped as sem_purge would drop it. The lease itself
-- is untouched: the watchdog keeps renewing the attempt.
--
-- O(log n) plus O(log n) per waiter granted.
local K, now_ms, bad = sem_open(0)
if bad then
  return bad
end
local attempt, keep = ARGV[1], tonumber(ARGV[2])
if not keep or keep < 1 then
  return redis.error_reply('INVALID a partial release keeps at least one permit')
end
local dl = redis.call('ZSCORE', K.h, attempt)
if not dl then
  return -1
end
if tonumber(dl) <= now_ms then
  sem_drop_hold(K, attempt)
  lease_removed(K.h, K.hn)
  return -1
end
local owner, n = sem_entry(redis.call('HGET', K.hn, attempt))
if not owner then
  -- A lease without its record (not written by deadbolt): nothing to count.
  return -1
end
if n <= keep then
  return n
end
redis.call('HSET', K.hn, attempt, owner .. ' ' .. string.format('%.0f', keep))
redis.call('HINCRBY', K.hn, '#t', string.format('%.0f', keep - n))
sem_purge(K, now_ms)
sem_wake(K, now_ms, sem_available(K))
return keep
