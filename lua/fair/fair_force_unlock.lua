-- fair_force_unlock.lua — delete a fair lock whoever holds it, and pass it on.
-- (msg_lib.lua, hold_lib.lua, queue_lib.lua and fair_lib.lua come first.)
--
-- KEYS[1..6]  hold, fence, q, qo, alive, seq  (see fair_lib.lua)
-- KEYS[7]  the force-unlock record, '<hold>:forced' (hold_forced)
-- ARGV[1]  waiter timeout in ms
-- Reply: 1 when a hold was removed, 0 when the lock was free;
--   error WRONGTYPE <key> when a key of the lock is of another type (nothing
--   is deleted: force-unlock removes locks, not whatever sits at the key).
local K = fair_keys(0)
local bad = hold_check_keys(K)
if bad then
  return bad
end
if redis.call('EXISTS', K.hold) == 0 then
  return 0
end
-- A write that changes nothing (the hold hash has no field '-'), so that
-- the hand-off's writes cannot be refused after its message: Redis refuses
-- only a script's first write under maxmemory. Without it, a refused HSET
-- after the grant's message left the waiter holding beside the holder
-- (a_hand_off_refused_under_maxmemory_tells_nobody, crates/fair/tests).
-- Then, out of memory, the hand-off is made in full or the PUBLISH (ACL)
-- fails with nothing changed.
redis.call('HDEL', K.hold, '-')
hold_forced(K.hold, KEYS[7])
local now_ms, now_us = hold_now()
if not fair_pass_on(K, now_ms, now_us, tonumber(ARGV[1])) then
  redis.call('DEL', K.hold)
end
return 1
