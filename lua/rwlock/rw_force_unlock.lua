-- rw_force_unlock.lua — remove every hold of a read-write lock, whoever
-- holds it, and wake every waiter. Waiting writers keep their marks (they
-- hold nothing; they get the lock next).
-- (The libraries come first, as for every rw script: see rw_lib.lua.)
--
-- KEYS[1..6]  w, fence, r, ro, ww, alive  (see rw_lib.lua)
-- KEYS[7]  the force-unlock record, '<w>:forced' (hold_forced)
-- ARGV[1]  the lock's channel
--
-- Reply: {write holds removed (0 or 1), read holds removed}
--   error WRONGTYPE <key>  a key of another type; nothing is deleted
--
-- O(n) in the read holds it removes (an administrator's command).
local K, now_ms, bad = rw_open(0)
if bad then
  return bad
end
-- K.w may hold only registrations of waiting readers: no writer then.
local writer = redis.call('HEXISTS', K.w, 'o')
-- Only live read holds count: ended leases held nothing any more.
local readers = redis.call('ZCOUNT', K.r, '(' .. now_ms, '+inf')
if writer + readers == 0 then
  redis.call('DEL', K.r, K.ro)
  return {0, 0}
end
if writer == 1 then
  hold_forced(K.w, KEYS[7])
end
msg_publish(ARGV[1], msg_everyone())
redis.call('DEL', K.w, K.r, K.ro)
return {writer, readers}
