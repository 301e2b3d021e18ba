-- hold_inspect.lua — read a hold hash in one atomic step (is_locked, is_held,
-- hold_count, remaining_ttl, `deadbolt inspect`).
--
-- Works for every hold hash laid out as in lock_acquire.lua (Lock, FairLock,
-- the write side of RwLock).
--
-- KEYS[1]  hold hash (layout in lock_acquire.lua)
-- KEYS[2]  fencing counter
-- KEYS[3]  optional: the fair lock's queue ZSET
-- Reply: {owner or '', hold count, token, pttl, fencing counter (-1 when
--   unusable), queued}
--   pttl is -2 when the key does not exist (then owner is '' and counts are 0);
--   queued is the queue's length (0 without KEYS[3]).
--
-- O(1).

local kind = redis.call('TYPE', KEYS[1]).ok
if kind ~= 'none' and kind ~= 'hash' then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1])
end
local fk = redis.call('TYPE', KEYS[2]).ok
if fk ~= 'none' and fk ~= 'string' then
  return redis.error_reply('WRONGTYPE ' .. KEYS[2])
end
-- An unusable counter reads as -1 here (inspection reports; acquire refuses).
local fence = tonumber(redis.call('GET', KEYS[2]) or '0') or -1
if fence ~= fence or fence < 0 or fence >= 9007199254740991 then
  fence = -1
end
local queued = 0
if KEYS[3] and redis.call('TYPE', KEYS[3]).ok == 'zset' then
  queued = redis.call('ZCARD', KEYS[3])
end
if kind == 'none' then
  return {'', 0, 0, -2, fence, queued}
end
local f = redis.call('HMGET', KEYS[1], 'o', 'n', 't')
return {f[1] or '', tonumber(f[2] or '0'), tonumber(f[3] or '0'), redis.call('PTTL', KEYS[1]), fence, queued}
