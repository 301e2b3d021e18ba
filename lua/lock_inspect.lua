-- lock_inspect.lua — read a hold hash in one atomic step (is_locked, is_held,
-- hold_count, remaining_ttl, `deadbolt inspect`).
--
-- KEYS[1]  hold hash (layout in lock_acquire.lua)
-- KEYS[2]  fencing counter
-- Reply: {owner or '', hold count, token, pttl, fencing counter}
--   pttl is -2 when the key does not exist (then owner is '' and counts are 0).
--
-- O(1).

local kind = redis.call('TYPE', KEYS[1]).ok
if kind ~= 'none' and kind ~= 'hash' then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1])
end
local fence = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
if kind == 'none' then
  return {'', 0, 0, -2, fence}
end
local f = redis.call('HMGET', KEYS[1], 'o', 'n', 't')
return {f[1] or '', tonumber(f[2] or '0'), tonumber(f[3] or '0'), redis.call('PTTL', KEYS[1]), fence}
