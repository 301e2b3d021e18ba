-- fence_write.lua — the resource side of fencing, for a value kept in
-- Redis apart from the lock (another slot, another server): a write is
-- applied only with a fencing token at least the largest one applied
-- (deadbolt_core::fence::Fenced).
--
-- KEYS[1]  the fenced value  (hash: v = the value, t = the largest token
--          applied, as a decimal string)
-- ARGV[1]  the writer's fencing token (decimal, below 2^53)
-- ARGV[2]  'set' (ARGV[3] is the new value), 'del' (the value goes, the
--          token stays: a later write with a smaller token is still
--          refused) or 'get' (a read: ARGV[1] is not looked at)
--
-- Reply:
--   {1, token}  applied; token is the writer's
--   {0, token}  refused: a write with the larger token `token` was applied
--               (the writer's hold is older than one that already wrote)
--   {2, token, value}  ('get') the largest token applied (0: none) and the
--               value (false when none)
--   error WRONGTYPE <key>  a key of another type (nothing written)
--
-- O(1). An equal token is applied (the same holder writing again).

local t = redis.pcall('HGET', KEYS[1], 't')
if type(t) == 'table' then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1])
end
if ARGV[2] == 'get' then
  return {2, tonumber(t or '0') or 0, redis.call('HGET', KEYS[1], 'v')}
end
local mine = tonumber(ARGV[1])
local last = tonumber(t or '0') or 0
if mine < last then
  return {0, last}
end
if ARGV[2] == 'del' then
  redis.call('HDEL', KEYS[1], 'v')
  redis.call('HSET', KEYS[1], 't', ARGV[1])
else
  redis.call('HSET', KEYS[1], 'v', ARGV[3], 't', ARGV[1])
end
return {1, mine}
