-- lock_release.lua — release one hold of a reentrant lock, named by its attempt id.
--
-- Used by unlock, by the background releaser for dropped guards, and for acquire
-- attempts that were cancelled or ended Indeterminate. Idempotent: the attempt's
-- field is removed on the first run, so a replay finds nothing to release.
--
-- KEYS[1]  hold hash  <ns>:{name}:lock  (layout in lock_acquire.lua)
-- KEYS[2]  optional: waiting clients  <ns>:{name}:lock:waiters (ZSET, layout
--          in lock_acquire.lua); composites that release plain locks in
--          their own scripts leave it out and wake one waiter per client
-- KEYS[3]  optional (with KEYS[2]): reservation  <ns>:{name}:lock:next
-- ARGV[1]  attempt id of the hold
-- ARGV[2]  unlock channel  <ns>:{name}:lock:ch
-- ARGV[3]  optional (with KEYS[3]): how long a reservation lasts, in ms
--
-- Reply:
--   0  nothing released: the hold expired, was taken over, or was already released
--   1  an inner hold released; the lock is still held (its TTL is left alone)
--   2  the last hold released: key deleted, and '1' published (one waiter
--      per client tries) when a waiter marked the hold (x or w, see
--      lock_acquire.lua); an unmarked hold had nobody waiting for it, and
--      its release sends nothing
--   3  the last hold released: key deleted, 'c:<client id>' published: a
--      client other than the releasing one is queued, and the one that has
--      waited longest goes first: the lock is reserved for it for ARGV[3]
--      ms (lock_acquire.lua refuses the others' waiting tries meanwhile;
--      they, the releasing client's new acquires included, hold back as
--      long), and its waiter's try takes the lock and ends the reservation
--
-- O(log n) in the waiting clients.

local r, marked, holder, waited = hold_release(KEYS[1], ARGV[1], 'x', 'o', 'w')
if r ~= 2 then
  -- 0: not our hold (expired, taken over, never granted, released already);
  -- 1: an inner unlock of a re-entered lock (the outer holds keep their TTL).
  return r
end
-- The last hold. Only a hold that a waiter of another client found busy
-- (x) looks at the queue of clients: an uncontended release does not.
-- The releasing client is skipped (its waiters were served by local
-- hand-offs; they queue again if they still wait).
local msg, named = '1', nil
if KEYS[2] and marked then
  local me = string.match(holder, '^(.*):')
  for _ = 1, 2 do
    local head = redis.pcall('ZPOPMIN', KEYS[2])
    if type(head) ~= 'table' or head.err or not head[1] then
      break
    end
    if head[1] ~= me then
      named = head[1]
      msg = 'c:' .. named
      break
    end
  end
end
-- Published before the delete (the script is atomic, so no waiter can look
-- in between): a user whose ACL forbids the channel gets NOPERM with the
-- hold untouched, instead of a hold deleted with nobody woken. Only for a
-- marked hold: every waiter marks the hold it fails a try on (a waiter
-- that finds the lock free takes it), so an unmarked one has nobody to
-- wake, and a PUBLISH costs the server (and each replica, and the AOF).
if marked or waited then
  redis.call('PUBLISH', ARGV[2], msg)
end
redis.call('DEL', KEYS[1])
if not named then
  return 2
end
if KEYS[3] and ARGV[3] then
  redis.call('SET', KEYS[3], named, 'PX', ARGV[3])
end
return 3
