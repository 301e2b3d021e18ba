-- floor_unlock.lua — the release that floor_lock.lua's hold needs: read
-- the holder and its count, give one hold back.
--
-- KEYS[1]  the hold (floor_lock.lua)
-- ARGV[1]  owner id
--
-- Reply: -1 when the owner holds nothing; else the holds left (0: the
-- last hold went, and the key with it).
--
-- Branches: not the owner's: nothing to do; an inner hold: one off the
-- count; the last: the key goes.

local f = redis.call('HMGET', KEYS[1], 'o', 'n')
if f[1] ~= ARGV[1] then
  return -1
end
if tonumber(f[2]) > 1 then
  return redis.call('HINCRBY', KEYS[1], 'n', -1)
end
redis.call('DEL', KEYS[1])
return 0
