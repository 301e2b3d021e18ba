-- latch_wait.lua — has the latch reached zero? (The try of a latch's wait,
-- in the acquire loop's contract; it records nothing.) (msg_lib.lua,
-- hold_lib.lua and latch_lib.lua come first: latch_count.)
--
-- KEYS[1]  the latch  <ns>:{name}:latch
-- ARGV[1..6]  the acquire prefix core always sends (owner, attempt, lease,
--          mode, secret, stale-hold bound; unused: a wait holds nothing)
--
-- Reply:
--   {1, 0, 0}   the count is zero (or the latch was never set): done
--   {0, -1}     not yet; the waiter sleeps until `*` is published on the
--               latch's channel (no lease bounds the wait)
--   error WRONGTYPE <key>
--   error BADVALUE <key> ...  a value that is no count (as latch_op.lua
--               refuses it: latch_count)
-- O(1).
local count, err = latch_count(KEYS[1])
if err then
  return err
end
if count == 0 then
  return {1, 0, 0}
end
return {0, -1}
