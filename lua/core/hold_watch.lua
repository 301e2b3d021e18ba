-- hold_watch.lua — what a watch of a primitive reads (deadbolt_core::watch):
-- the exclusive holder of a hold hash, whether a force-unlock removed a
-- hold, and how many shared holds there are, in one atomic step.
--
-- Works for every hold hash laid out as in lock_acquire.lua (Lock, FairLock,
-- the write side of RwLock), and for primitives without one.
--
-- KEYS[1]  hold hash (layout in lock_acquire.lua); a primitive without an
--          exclusive hold passes a hash without an owner field (the
--          semaphore's configuration hash)
-- KEYS[2]  its force-unlock record, '<KEYS[1]>:forced' (hold_forced in
--          hold_lib.lua: the token of the last hold a force-unlock removed,
--          kept for 10 s)
-- KEYS[3]  optional: the ZSET of shared holds (an RwLock's readers, a
--          semaphore's holds: attempt -> lease deadline), the live ones counted
-- ARGV[1]  optional (with KEYS[3]): 'permits' when the shared count is
--          the sum of the holds' permits, kept in the hash KEYS[4]
-- KEYS[4]  optional (with ARGV[1]): a hash whose field '#t' holds that sum
--          (a semaphore's K.hn)
--
-- Reply: {owner or '', token, pttl, forced, shared, next_end}  forced is
--   the token KEYS[2] records (0: none), so that a watch that saw a hold go
--   tells a force-unlock from a release; shared counts live holds only (a
--   lease that ended counts as nothing, purged or not); next_end is the ms
--   until the next live shared lease ends (-1: none), when the count
--   drops without any call, so the watch reads again then
--   error WRONGTYPE <key>  a key of another type
--
-- O(log n) in the shared holds, plus the ended ones not yet purged (with
-- 'permits': their permits are taken from the sum). Read-only.

local f = redis.pcall('HMGET', KEYS[1], 'o', 't')
if f.err then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1])
end
local pttl = -2
if f[1] then
  pttl = redis.call('PTTL', KEYS[1])
end
local forced = redis.pcall('GET', KEYS[2])
forced = type(forced) == 'string' and tonumber(forced) or 0
local shared, next_end = 0, -1
if KEYS[3] then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local live = redis.pcall('ZRANGEBYSCORE', KEYS[3], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if live.err then
    return redis.error_reply('WRONGTYPE ' .. KEYS[3])
  end
  if live[2] then
    next_end = tonumber(live[2]) - now
  end
  if ARGV[1] == 'permits' and KEYS[4] then
    local n = redis.pcall('HGET', KEYS[4], '#t')
    shared = type(n) == 'string' and tonumber(n) or 0
    for _, a in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)) do
      local v = redis.pcall('HGET', KEYS[4], a)
      shared = shared - (type(v) == 'string' and tonumber(string.match(v, ' (%d+)$')) or 0)
    end
    shared = math.max(shared, 0)
  else
    shared = redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf')
  end
end
return {f[1] or '', tonumber(f[2] or '0') or 0, pttl, forced, shared, next_end}
