-- lock_force_unlock.lua — delete a lock whoever holds it, and wake a waiter.
-- (msg_lib.lua comes first: the messages.)
--
-- KEYS[1]  hold hash
-- KEYS[2]  its force-unlock record, '<hold hash>:forced' (hold_forced)
-- ARGV[1]  unlock channel (and '<hold hash>:watch' gets 'f:<hold hash>
--          <token>', the removed hold's token, for watches)
-- Reply: 1 when a hold was removed, 0 when the lock was free;
--   error WRONGTYPE <key> when the key holds another type (nothing deleted:
--   force-unlock removes locks, not whatever sits at the key).
-- The previous holder's next renewal or unlock finds its attempt gone and
-- reports the hold Lost / NotHeld.
--
-- O(1) (the hash holds at most one field per re-entry).

local t = redis.call('TYPE', KEYS[1]).ok
if t ~= 'none' and t ~= 'hash' then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1])
end
if t == 'hash' then
  hold_forced(KEYS[1], KEYS[2])
end
if redis.call('DEL', KEYS[1]) == 1 then
  msg_publish(ARGV[1], msg_one())
  return 1
end
return 0
