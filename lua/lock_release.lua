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
local removed = redis.pcall('HDEL', KEYS[1], 'a:' .. ARGV[1])
if type(removed) ~= 'number' or removed == 0 then
  -- Not our hold: it expired, another owner took the lock after ours
  -- expired, or the attempt never got it.
  return 0
end
if redis.call('HINCRBY', KEYS[1], 'n', -1) > 0 then
  -- Inner unlock of a re-entered lock: the outer holds keep their TTL.
  return 1
end
redis.call('DEL', KEYS[1])
-- '1' asks each subscribed client to wake one local waiter.
redis.call('PUBLISH', ARGV[2], '1')
return 2
