-- hold_watch.lua — what a watch of a primitive reads (deadbolt_core::watch):
-- the exclusive holder of a hold hash, whether a force-unlock removed a
-- hold, and how many shared holds there are, in one atomic step.
--
-- Works for every hold hash laid out as in lock_acquire.lua (Lock, FairLock,
-- the write side of RwLock), and for primitives without one.
--
-- KEYS[1]  hold hash (layout in lock_acquire.lua); a primitive without an
--          exclusive hold passes a key that never exists (its shared key
--          with ':none')
-- KEYS[2]  force-unlock mark  <hold hash>:forced  (string: the token of
--          the hold a force-unlock removed last, for a minute; written by
--          the force-unlock scripts)
-- KEYS[3]  optional: the ZSET of shared holds (an RwLock's readers, a
--          semaphore's holds), counted with ZCARD
-- ARGV[1]  optional (with KEYS[3]): 'permits' when the shared count is
--          the sum of the holds' permits, kept in the hash KEYS[4]
-- KEYS[4]  optional (with ARGV[1]): a hash whose field 'n' holds that sum
--
-- Reply: {owner or '', token, pttl, force-unlocked token or 0, shared}
--   error WRONGTYPE <key>  a key of another type
--
-- O(1). Read-only.

local f = redis.pcall('HMGET', KEYS[1], 'o', 't')
if f.err then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1])
end
local pttl = -2
if f[1] then
  pttl = redis.call('PTTL', KEYS[1])
end
local forced = redis.pcall('GET', KEYS[2])
if type(forced) ~= 'string' then
  forced = '0'
end
local shared = 0
if KEYS[3] then
  if ARGV[1] == 'permits' and KEYS[4] then
    local n = redis.pcall('HGET', KEYS[4], 'n')
    shared = type(n) == 'string' and tonumber(n) or 0
  else
    local n = redis.pcall('ZCARD', KEYS[3])
    if type(n) == 'table' then
      return redis.error_reply('WRONGTYPE ' .. KEYS[3])
    end
    shared = n
  end
end
return {f[1] or '', tonumber(f[2] or '0') or 0, pttl, tonumber(forced) or 0, shared}
