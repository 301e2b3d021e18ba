-- lock_pass.lua — hand the last hold of a reentrant lock straight to a waiter
-- of the same client (local hand-off), in place of a release, a message and
-- the waiter's acquire. (msg_lib.lua and hold_lib.lua come first.)
--
-- KEYS[1]  hold hash  <ns>:{name}:lock  (layout in lock_acquire.lua)
-- KEYS[2]  fencing counter of the name's slot  <ns>:{<slot tag>}:fence
-- KEYS[3]  waiting clients (not used here: the keys are lock_acquire.lua's)
-- ARGV[1]  attempt id of the hold being given up
-- ARGV[2]  owner id of the waiter it goes to
-- ARGV[3]  attempt id of that waiter's acquire
-- ARGV[4]  the waiter's lease in milliseconds
--
-- Reply:
--   {0}  ARGV[1] holds nothing (expired, taken over, released already):
--        nothing changed; the caller wakes the waiter to try for itself
--   {1}  an inner hold of a re-entered lock was released; the lock stays
--        with its owner and nothing is handed over
--   {2, token, pttl, others}  handed over: the waiter holds the lock under
--        its own attempt id with a fresh fencing token (strictly larger, as
--        for any grant), so inspection shows the true holder; others = 1
--        when a waiter of another client failed a try since the lock was
--        last free (field x, set by lock_acquire.lua), which makes the
--        client count this hand-off against its budget
--   error WRONGTYPE / BADVALUE as in lock_acquire.lua; nothing written
--
-- O(1).

-- The mark x comes in the same HMGET as the hold (one command).
local r, marked = hold_release(KEYS[1], ARGV[1], 'x')
if r ~= 2 then
  return {r}
end
local others = marked and 1 or 0
-- A grant as on a free lock (the fencing counter is advanced by the first
-- write, which a key of another type or an unusable value undoes); the
-- marker x stays, the old attempt's field goes.
local token, err = hold_grant(KEYS[1], KEYS[2], ARGV[2], ARGV[3], ARGV[4])
if err then
  return err
end
redis.call('HDEL', KEYS[1], 'a:' .. ARGV[1])
return {2, token, tonumber(ARGV[4]), others}
