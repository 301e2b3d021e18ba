-- fair_heartbeat.lua — keep one client's waiters alive on many fair locks.
-- (hold_lib.lua and fair_lib.lua are prepended.)
--
-- Sent by each client every waiter_timeout/3 while it has queued waiters:
-- one liveness record per (client, name), refreshed for all of that client's
-- waiters at once, on the server clock.
--
-- KEYS  six keys per fair lock (hold, fence, q, qo, alive, seq), repeated
-- ARGV[1]  client uuid
-- ARGV[2]  waiter timeout in ms
--
-- Reply: the number of locks refreshed. A lock with a key of another type
-- is skipped (nothing written there); its waiters' own tries report it.
--
-- Besides refreshing, each lock whose hold ran out (a holder or a claimed
-- head that died) while waiters queue is handed to its live head: nobody
-- else would notice, so the queue moves on within waiter_timeout/3.
local wt = tonumber(ARGV[2])
local now_ms, now_us = hold_now()
local n = #KEYS / 6
local done = 0
for i = 0, n - 1 do
  local K = fair_keys(i * 6)
  if not fair_check_types(K) then
    redis.call('ZADD', K.alive, now_ms + wt, ARGV[1])
    -- Records of clients silent for two windows are of no further use.
    redis.call('ZREMRANGEBYSCORE', K.alive, '-inf', now_ms - wt)
    fair_touch(K, wt * 3)
    if redis.call('EXISTS', K.hold) == 0 and redis.call('ZCARD', K.q) > 0 then
      fair_pass_on(K, now_ms, now_us, wt)
    end
    done = done + 1
  end
end
return done
