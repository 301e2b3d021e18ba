-- sem_heartbeat.lua — keep one client's waiters alive on many semaphores.
-- (hold_lib.lua and sem_lib.lua are prepended.)
--
-- Sent by each client every waiter_timeout/3 while it has queued waiters:
-- one liveness record per (client, semaphore), on the server clock.
--
-- KEYS  six keys per semaphore (s, h, hn, q, qo, alive), repeated
-- ARGV[1]  client uuid
-- ARGV[2]  waiter timeout in ms
--
-- Reply: the number of semaphores refreshed (one with a key of another type
-- is skipped; its waiters' own tries report it).
--
-- Besides refreshing, it purges ended leases and wakes the waiters that
-- the permits they gave back serve (nobody else would notice), dropping
-- dead waiters on the way: a dead head keeps its reservation for at most
-- waiter_timeout.
--
-- O(log n) per semaphore, plus purged and woken entries.
local wt = tonumber(ARGV[2])
local now_ms = hold_now()
local done = 0
for i = 0, #KEYS / 6 - 1 do
  local K = sem_keys(i * 6)
  if not sem_check_types(K) then
    redis.call('ZADD', K.alive, now_ms + wt, ARGV[1])
    redis.call('ZREMRANGEBYSCORE', K.alive, '-inf', now_ms - wt)
    hold_touch({K.q, K.qo, K.alive}, wt * 3)
    sem_purge(K, now_ms)
    sem_wake(K, now_ms, sem_available(K))
    done = done + 1
  end
end
return done
