-- latch_wait.lua — has the latch reached zero? (The try of a latch's wait,
-- in the acquire loop's contract; it records nothing.) (hold_lib.lua is
-- prepended: hold_named_error.)
--
-- KEYS[1]  the latch  <ns>:{name}:latch
-- ARGV[1..4]  owner, attempt, lease, mode (unused: a wait holds nothing)
--
-- Reply:
--   {1, 0, 0}   the count is zero (or the latch was never set): done
--   {0, -1}     not yet; the waiter sleeps until `0` is published on the
--               latch's channel (no lease bounds the wait)
--   error WRONGTYPE <key>
-- O(1).
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then
  return hold_named_error(KEYS[1], v)
end
if not v or (tonumber(v) or 0) <= 0 then
  return {1, 0, 0}
end
return {0, -1}
