-- Redisson's RLock unlock: written for deadbolt-bench from the description
-- of Redisson's algorithm, not from its source. Idempotent by an "unlock
-- latch": the reply of each unlock request is kept under a key of its own
-- for a while, so that a retry of the same request (after a timeout, or a
-- fail-over) gets the first reply instead of giving back a second hold.
--
-- KEYS[1]  the lock: hash, field `<client id>:<thread id>` -> hold count
-- KEYS[2]  the lock's channel, `redisson_lock__channel:{<lock>}`
-- KEYS[3]  this request's latch, `redisson_unlock_latch:{<lock>}:<request id>`
-- ARGV[1]  the unlock message (0)
-- ARGV[2]  lease ms, renewed when a re-entered hold is still held
-- ARGV[3]  this thread's field
-- ARGV[4]  how long the latch is kept, ms (Redisson: (response timeout +
--          retry interval) x retry attempts)
--
-- Reply: 1 released (lock deleted, message published); 0 one hold of a
-- re-entered lock given back, the lock still held; nil this thread holds no
-- part of the lock (Redisson throws IllegalMonitorStateException). A retried
-- request gets the reply of its first run (from the latch).
--
-- Branches:
-- * the latch is there: this request ran before; answer as it did then.
-- * our field is missing: not ours (or the lease ran out); change nothing.
-- * count still above 0 after one off: a re-entered hold; renew the lease.
-- * count down to 0: delete the lock and tell the waiters on its channel.
--
-- Uses redisson_lib.lua: latched, give_back.

local seen, reply = latched(KEYS[3])
if seen then
  return reply
end
local given = give_back(KEYS[1], ARGV[3], ARGV[2], KEYS[3], ARGV[4])
if given ~= 1 then
  return given
end
redis.call('PUBLISH', KEYS[2], ARGV[1])
redis.call('SET', KEYS[3], 1, 'PX', ARGV[4])
return 1
