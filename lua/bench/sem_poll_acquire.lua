-- sem_poll_acquire.lua — the textbook polling semaphore's try (the bench's
-- sem-poll contender, and the poll way of the sem_floor example): a ZSET
-- of holders scored by the server time they took their permit.
--
-- KEYS[1]  holders: ZSET holder id -> server ms it took its permit
-- ARGV[1]  holder id
-- ARGV[2]  permits P
-- ARGV[3]  lease ms
--
-- Reply: 1 taken, 0 busy (P holders younger than the lease)
--
-- Branches: holders older than the lease are dropped first (their permits
-- are free again); then a permit is taken if fewer than P are held. The
-- release is a plain ZREM, sent by the client. Timestamps are the
-- server's (TIME), never a client's.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[3]))
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now, ARGV[1])
  return 1
end
return 0
