-- floor_sem_acquire.lua — the least a strict-FIFO semaphore with leased
-- permits and grants inside the release runs to take a permit or queue
-- for one: for the sem_floor example, which measures how far deadbolt's
-- Semaphore is above that floor. Not a usable semaphore: no attempt ids
-- kept for a retried call, no liveness of waiters (a dead waiter's turn
-- would hold a permit for a lease), no waiter that leaves the queue, no
-- TTL on the keys, one permit per request, and ended leases free permits
-- only for the next acquire (floor_sem_release.lua grants only what it
-- gives back).
--
-- KEYS[1]  the holds: ZSET attempt -> lease deadline (server ms)
-- KEYS[2]  the queue: LIST of '<attempt> <client>', oldest first
-- ARGV[1]  attempt id (no spaces)
-- ARGV[2]  lease in ms
-- ARGV[3]  permits
-- ARGV[4]  client id (no spaces): a grant goes to <KEYS[1]>:ch:<client>
--
-- Reply: 1 granted; 0 queued (floor_sem_release.lua publishes the attempt
-- id on the client's channel when the permit is its).
--
-- Branches: ended leases go first, so that they count for nothing; a free
-- permit is taken only when nobody queues (strict FIFO: a newcomer never
-- passes a waiter); otherwise the request joins the queue's tail.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('LLEN', KEYS[2]) == 0 and redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
  return 1
end
redis.call('RPUSH', KEYS[2], ARGV[1] .. ' ' .. ARGV[4])
return 0
