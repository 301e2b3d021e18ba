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

-- pcall: a missing key gives 0, a key of another type an error table;
-- either way this attempt holds nothing here (expired, never granted, or
-- replaced by a value of another type).
local held = redis.pcall('HEXISTS', KEYS[1], 'a:' .. ARGV[1])
if held ~= 1 then
  -- Not our hold: it expired, another owner took the lock after ours
  -- expired, or the attempt never got it.
  return 0
end
if tonumber(redis.call('HGET', KEYS[1], 'n')) > 1 then
  -- Inner unlock of a re-entered lock: the outer holds keep their TTL.
  redis.call('HDEL', KEYS[1], 'a:' .. ARGV[1])
  redis.call('HINCRBY', KEYS[1], 'n', -1)
  return 1
end
-- The last hold. '1' asks each subscribed client to wake one local waiter.
-- Published before the delete (the script is atomic, so no waiter can look
-- in between): a user whose ACL forbids the channel gets NOPERM with the
-- hold untouched, instead of a hold deleted with nobody woken.
redis.call('PUBLISH', ARGV[2], '1')
redis.call('DEL', KEYS[1])
return 2
