-- Redisson's RFairLock, one try: written for deadbolt-bench from the
-- description of Redisson's algorithm, not from its source. The hold is the
-- RLock's hash; waiters queue in a list, and a ZSET gives each queued
-- waiter the time by which it must have taken its turn (else it is stale and
-- dropped). Times are the client's clock, as Redisson sends them.
--
-- KEYS[1]  the lock: hash, field `<client id>:<thread id>` -> hold count
-- KEYS[2]  the queue, `redisson_lock_queue:{<lock>}`: list of waiting fields
-- KEYS[3]  the timeouts, `redisson_lock_timeout:{<lock>}`: ZSET field -> ms
-- ARGV[1]  lease ms (the watchdog's internalLockLeaseTime: 30 s by default)
-- ARGV[2]  this thread's field
-- ARGV[3]  threadWaitTime ms: how long each waiter ahead may take for its
--          turn (Redisson's default: 5 minutes)
-- ARGV[4]  now, ms since the epoch (the client's clock)
--
-- Reply: nil when this thread holds the lock now (its turn came, or a
-- re-entry); else about how long until its turn, ms, the longest the caller
-- waits before it tries again (a message on its own channel wakes it sooner).
--
-- Branches:
-- * stale heads: a head waiter whose timeout passed gave up or died; drop it
--   (queue and ZSET) so it cannot block the waiters behind it.
-- * lock free, and nobody queued or we are the head: take it (count 1, with
--   the lease); leave the queue, and move every remaining waiter's timeout
--   threadWaitTime earlier: there is one turn fewer ahead of each.
-- * our field holds it: a re-entry; one more on the count, a fresh lease.
-- * we are queued already: our turn is due about threadWaitTime before our
--   timeout.
-- * not queued: join at the tail, with the timeout of the waiter before us
--   (or now plus the lock's PTTL when we are the first) plus threadWaitTime.
--   ZADD answers 0 when our field raced in already; then no second RPUSH.
--
-- Uses redisson_lib.lua: drop_stale_heads, reentered.

local wait = tonumber(ARGV[3])
local now = tonumber(ARGV[4])

drop_stale_heads(KEYS[2], KEYS[3], now)

if redis.call('EXISTS', KEYS[1]) == 0
    and (redis.call('EXISTS', KEYS[2]) == 0
      or redis.call('LINDEX', KEYS[2], 0) == ARGV[2]) then
  redis.call('LPOP', KEYS[2])
  redis.call('ZREM', KEYS[3], ARGV[2])
  local queued = redis.call('ZRANGE', KEYS[3], 0, -1)
  for i = 1, #queued do
    redis.call('ZINCRBY', KEYS[3], -wait, queued[i])
  end
  redis.call('HSET', KEYS[1], ARGV[2], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return nil
end

if reentered(KEYS[1], ARGV[2], ARGV[1]) then
  return nil
end

local mine = redis.call('ZSCORE', KEYS[3], ARGV[2])
if mine then
  return tonumber(mine) - wait - now
end

local last = redis.call('LINDEX', KEYS[2], -1)
local ttl
if last and last ~= ARGV[2] then
  ttl = tonumber(redis.call('ZSCORE', KEYS[3], last)) - now
else
  ttl = redis.call('PTTL', KEYS[1])
end
if redis.call('ZADD', KEYS[3], ttl + wait + now, ARGV[2]) == 1 then
  redis.call('RPUSH', KEYS[2], ARGV[2])
end
return ttl
