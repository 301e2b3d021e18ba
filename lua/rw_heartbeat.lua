-- rw_heartbeat.lua — keep one client's waiting writers alive on many
-- read-write locks. (hold_lib.lua and rw_lib.lua are prepended.)
--
-- Sent by each client every waiter_timeout/3 while it has writers waiting:
-- one liveness record per (client, lock), on the server clock. Readers hold
-- back only behind a writer whose client is alive.
--
-- KEYS  six keys per lock (w, fence, r, ro, ww, alive), repeated
-- ARGV[1]  client uuid
-- ARGV[2]  waiter timeout in ms
--
-- Reply: the number of locks refreshed (a lock with a key of another type
-- is skipped; its waiters' own tries report it).
--
-- O(log n) per lock.
local wt = tonumber(ARGV[2])
local now_ms = hold_now()
local done = 0
for i = 0, #KEYS / 6 - 1 do
  local K = rw_keys(i * 6)
  if not rw_check_types(K) then
    redis.call('ZADD', K.alive, now_ms + wt, ARGV[1])
    -- Records of clients silent for a whole window are of no further use.
    redis.call('ZREMRANGEBYSCORE', K.alive, '-inf', now_ms - wt)
    hold_touch({K.ww, K.alive}, wt * 3)
    done = done + 1
  end
end
return done
