-- Redisson's RFairLock unlock: written for deadbolt-bench from the
-- description of Redisson's algorithm, not from its source. The RLock's
-- unlock (with its idempotency latch) that wakes only the head waiter, on
-- that waiter's own channel.
--
-- KEYS[1]  the lock: hash, field `<client id>:<thread id>` -> hold count
-- KEYS[2]  the queue, `redisson_lock_queue:{<lock>}`: list of waiting fields
-- KEYS[3]  the timeouts, `redisson_lock_timeout:{<lock>}`: ZSET field -> ms
-- KEYS[4]  this request's latch, `redisson_unlock_latch:{<lock>}:<request id>`
-- ARGV[1]  the unlock message (0)
-- ARGV[2]  lease ms, renewed when a re-entered hold is still held
-- ARGV[3]  this thread's field
-- ARGV[4]  now, ms since the epoch (the client's clock)
-- ARGV[5]  the lock's channel, `redisson_lock__channel:{<lock>}`; a waiter
--          listens on it plus `:<its field>`
-- ARGV[6]  how long the latch is kept, ms
--
-- Reply: 1 released (or nothing left to release: the lock was gone); 0 one
-- hold of a re-entered lock given back, still held; nil this thread holds no
-- part of the lock. A retried request gets the reply of its first run.
--
-- Branches:
-- * stale heads: dropped as the acquire does, so the message goes to a
--   waiter that is still there.
-- * the latch is there: this request ran before; answer as it did then.
-- * no lock key (its lease ran out): wake the head waiter, whose turn it is.
-- * our field is missing: not ours; change nothing.
-- * count still above 0 after one off: a re-entered hold; renew the lease.
-- * count down to 0: delete the lock, keep the reply, wake the head waiter.
--
-- Uses redisson_lib.lua: drop_stale_heads, latched, give_back.

local now = tonumber(ARGV[4])

-- Wake the head waiter, if any: its turn has come.
local function wake_head()
  local next_waiter = redis.call('LINDEX', KEYS[2], 0)
  if next_waiter then
    redis.call('PUBLISH', ARGV[5] .. ':' .. next_waiter, ARGV[1])
  end
end

drop_stale_heads(KEYS[2], KEYS[3], now)

local seen, reply = latched(KEYS[4])
if seen then
  return reply
end

if redis.call('EXISTS', KEYS[1]) == 0 then
  wake_head()
  return 1
end

local given = give_back(KEYS[1], ARGV[3], ARGV[2], KEYS[4], ARGV[6])
if given ~= 1 then
  return given
end
redis.call('SET', KEYS[4], 1, 'PX', ARGV[6])
wake_head()
return 1
