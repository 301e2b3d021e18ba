-- lock_release.lua — release one hold of a reentrant lock, named by its attempt id.
--
-- Used by unlock, by the background releaser for dropped guards, and for acquire
-- attempts that were cancelled or ended Indeterminate. Idempotent: the attempt's
-- field is removed on the first run, so a replay finds nothing to release.
--
-- KEYS[1]  hold hash  <ns>:{name}:lock  (layout in lock_acquire.lua)
-- ARGV[1]  attempt id of the hold
-- ARGV[2]  unlock channel  <ns>:{name}:lock:ch
--
-- Reply:
--   0  nothing released: the hold expired, was taken over, or was already released
--   1  an inner hold released; the lock is still held (its TTL is left alone)
--   2  the last hold released: key deleted and one waiter per client woken
--
-- O(1).

local r = hold_release(KEYS[1], ARGV[1])
if r ~= 2 then
  -- 0: not our hold (expired, taken over, never granted, released already);
  -- 1: an inner unlock of a re-entered lock (the outer holds keep their TTL).
  return r
end
-- The last hold. '1' asks each subscribed client to wake one local waiter.
-- Published before the delete (the script is atomic, so no waiter can look
-- in between): a user whose ACL forbids the channel gets NOPERM with the
-- hold untouched, instead of a hold deleted with nobody woken.
redis.call('PUBLISH', ARGV[2], '1')
redis.call('DEL', KEYS[1])
return 2
