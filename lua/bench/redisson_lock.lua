-- Redisson's RLock, one try (its tryLock without a wait): written for
-- deadbolt-bench from the description of Redisson's algorithm, not from its
-- source. A hold is a hash at the lock key: one field per holding thread,
-- `<client id>:<thread id>`, whose value is the thread's hold count.
--
-- KEYS[1]  the lock: hash, field `<client id>:<thread id>` -> hold count
-- ARGV[1]  lease ms (the watchdog's internalLockLeaseTime: 30 s by default)
-- ARGV[2]  this thread's field
--
-- Reply: nil when this thread holds the lock now (a first hold or one more
-- of a re-entered one); else the lock's PTTL in ms, the longest the caller
-- waits before it tries again (the unlock message wakes it sooner).
--
-- Branches:
-- * no lock key: nobody holds it. HINCRBY creates the hash with a count of
--   1; PEXPIRE sets the lease (the watchdog renews it while held).
-- * our field is there: the holding thread takes it again (re-entry); one
--   more on its count, and a fresh lease.
-- * another thread holds it: no change; the PTTL bounds the caller's wait.
--
-- Uses redisson_lib.lua: add_hold, reentered.

if redis.call('EXISTS', KEYS[1]) == 0 then
  add_hold(KEYS[1], ARGV[2], ARGV[1])
  return nil
end
if reentered(KEYS[1], ARGV[2], ARGV[1]) then
  return nil
end
return redis.call('PTTL', KEYS[1])
