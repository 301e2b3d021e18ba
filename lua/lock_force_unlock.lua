-- lock_force_unlock.lua — delete a lock whoever holds it, and wake a waiter.
--
-- KEYS[1]  hold hash
-- KEYS[2]  optional: force-unlock mark  <hold hash>:forced  (string, set
--          to the removed hold's token for a minute: a watch tells a
--          force-unlock from a release by it, hold_watch.lua)
-- ARGV[1]  unlock channel
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
local token = t == 'hash' and redis.call('HGET', KEYS[1], 't')
if redis.call('DEL', KEYS[1]) == 1 then
  if KEYS[2] and token then
    redis.call('SET', KEYS[2], token, 'PX', 60000)
  end
  redis.call('PUBLISH', ARGV[1], '1')
  return 1
end
return 0
