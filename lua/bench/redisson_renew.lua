-- Redisson's watchdog renewal (RLock and RFairLock): written for
-- deadbolt-bench from the description of Redisson's algorithm, not from its
-- source. Sent every lease/3 while a thread holds the lock.
--
-- KEYS[1]  the lock: hash, field `<client id>:<thread id>` -> hold count
-- ARGV[1]  lease ms
-- ARGV[2]  the holding thread's field
--
-- Reply: 1 renewed; 0 the thread holds it no more (released, or the lease
-- ran out and someone else took it): the watchdog stops.
--
-- Branches:
-- * our field is there: we hold it; push the lease out again.
-- * it is not: renewing would extend someone else's hold; leave it.

if redis.call('HEXISTS', KEYS[1], ARGV[2]) == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return 1
end
return 0
