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
--   error WRONGTYPE <key>
--
-- O(log n) plus O(log n) per waiter woken.
local K, now_ms, bad = sem_open(0)
if bad then
  return bad
end
if redis.call('ZREM', K.q, ARGV[1]) == 1 then
  redis.call('HDEL', K.qo, ARGV[1])
  sem_wake(K, now_ms, sem_available(K))
  return 1
end
local dl = redis.call('ZSCORE', K.h, ARGV[1])
if not dl then
  return 0
end
local live = tonumber(dl) > now_ms
sem_drop_hold(K, ARGV[1])
sem_purge(K, now_ms)
lease_removed(K.h, K.hn)
sem_wake(K, now_ms, sem_available(K))
if live then
  return 2
end
return 0
