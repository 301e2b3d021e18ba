-- rw_force_unlock.lua — remove every hold of a read-write lock, whoever
-- holds it, and wake every waiter. Waiting writers keep their marks (they
-- hold nothing; they get the lock next).
-- (hold_lib.lua and rw_lib.lua are prepended.)
--
-- KEYS[1..6]  w, fence, r, ro, ww, alive  (see rw_lib.lua)
-- ARGV[1]  the lock's channel
--
-- Reply: {write holds removed (0 or 1), read holds removed}
--   error WRONGTYPE <key>  a key of another type; nothing is deleted
--
-- O(n) in the read holds it removes (an administrator's command).
local K = rw_keys(0)
local bad = rw_check_types(K)
if bad then
  return bad
end
local writer = redis.call('EXISTS', K.w)
local readers = redis.call('ZCARD', K.r)
if writer + readers == 0 then
  return {0, 0}
end
redis.call('PUBLISH', ARGV[1], 'w')
redis.call('DEL', K.w, K.r, K.ro)
return {writer, readers}
