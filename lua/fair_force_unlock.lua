-- fair_force_unlock.lua — delete a fair lock whoever holds it, and pass it on.
-- (fair_lib.lua is prepended.)
--
-- KEYS[1..6]  hold, fence, q, qo, alive, seq  (see fair_lib.lua)
-- ARGV[1]  waiter timeout in ms
-- Reply: 1 when a hold was removed, 0 when the lock was free.
local K = fair_keys(0)
if redis.call('DEL', K.hold) == 0 then
  return 0
end
local now_ms, now_us = fair_now()
fair_pass_on(K, now_ms, now_us, tonumber(ARGV[1]))
return 1
