-- sem_delete.lua — delete a semaphore: its permit count, holds and queue
-- (Semaphore::delete). (The libraries come first, as for every sem script: see sem_lib.lua.)
--
-- KEYS[1..6]  s, h, hn, q, qo, alive  (see sem_lib.lua)
-- (no ARGV)
--
-- Reply:
--   1  something was deleted
--   0  none of the keys existed
--   error WRONGTYPE <key>  a key of another type; nothing deleted (deadbolt
--                          removes only what it wrote)
--
-- Afterwards the semaphore is as if never set. Holders learn it at their
-- next renewal or release (their attempts are no longer recorded: Lost,
-- NotHeld). Waiters would sleep on for a grant that can no longer come
-- (their queue entries are gone), so every client with a queued waiter is
-- told `*` on its channel first: its waiters there try again, find the
-- semaphore unset and queue anew, to be granted once the permits are set
-- again (a bounded wait ends at its bound). One message per client, not per
-- waiter. Published before the deletes: a refused PUBLISH (ACL) leaves
-- everything as it was.
--
-- O(waiters) for the clients' names and the deletes (the queue is deleted
-- whole), one PUBLISH per client with waiters.
local K, _, bad = sem_open(0)
if bad then
  return bad
end
local told = {}
for _, v in ipairs(redis.call('HVALS', K.qo)) do
  local owner = sem_entry(v)
  local c = owner and queue_client(owner)
  if c and not told[c] then
    told[c] = true
    msg_publish(K.s .. ':ch:' .. c, msg_everyone())
  end
end
if redis.call('DEL', K.s, K.h, K.hn, K.q, K.qo, K.alive) > 0 then
  return 1
end
return 0
