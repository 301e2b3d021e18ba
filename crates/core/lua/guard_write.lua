-- guard_write.lua — writes that commit only while the holds guarding them
-- are live (deadbolt_core::guarded): the check and the writes in one
-- atomic script, so a holder paused past its lease writes nothing once
-- the hold is gone or another holder has it.
-- (guard_lib.lua is prepended: the check, guard_live.)
--
-- KEYS[1..h]  the hold hashes of the guard (hold_lib's layout: t = the
--             fencing token, a:<attempt> = 1 per hold counted): one for a
--             lock, one per part of a MultiLock over one slot
-- KEYS[h+1..] the data keys the operations name (same slot)
-- ARGV[1]     h, how many holds
-- ARGV[2..2h+1]  per hold: its attempt id, its fencing token
-- ARGV[2h+2]  how many operations; then each operation: its name, the
--             index of its key in KEYS, and its arguments:
--               set     k value ttl_ms ('0': none)  -> 'OK'
--               del     k                          -> 0 or 1
--               incrby  k n                        -> the new value
--               hset    k field value              -> 0 or 1 (fields added)
--               get     k                          -> the value, or false
--
-- Reply:
--   {0}             a hold is gone or is another attempt's now (expired,
--                   force-unlocked, taken over): nothing written, nothing read
--   {1, r1, r2 ...} every operation ran, in order, with these replies
--   error WRONGTYPE <key>     a key of another type (nothing written)
--   error BADVALUE <key> ...  INCRBY of a value that is not an integer, or
--                             out of range (nothing written)
--
-- With more than one operation every operation is checked first (a key
-- of the wrong type, a value INCRBY cannot add to), so they commit
-- together or not at all: Redis does not undo a script's writes. A lone
-- operation needs no check: its own failure writes nothing. Out of memory
-- Redis refuses a script's first write, which is then the only one.
--
-- O(h + operations).

local live, h = guard_live()
if not live then
  return {0}
end
local n = tonumber(ARGV[2 * h + 2])
local ops = {}
local at = 2 * h + 3
for _ = 1, n do
  local op, k = ARGV[at], KEYS[tonumber(ARGV[at + 1])]
  local argc = (op == 'set' or op == 'hset') and 2 or (op == 'incrby' and 1 or 0)
  ops[#ops + 1] = {op, k, ARGV[at + 2], ARGV[at + 3]}
  at = at + 2 + argc
end

-- The checks of a batch: each operation would succeed.
if n > 1 then
  for _, o in ipairs(ops) do
    local op, k = o[1], o[2]
    if op == 'incrby' or op == 'get' then
      local v = redis.pcall('GET', k)
      if type(v) == 'table' then
        return redis.error_reply('WRONGTYPE ' .. k)
      end
      if op == 'incrby' and v and not string.match(v, '^%-?%d+$') then
        return redis.error_reply('BADVALUE ' .. k .. ' not an integer')
      end
    elseif op == 'hset' then
      -- Read with pcall, as every hot path checks a key's type: an error
      -- table for a key that is not a hash (a missing key reads 0).
      if type(redis.pcall('HLEN', k)) == 'table' then
        return redis.error_reply('WRONGTYPE ' .. k)
      end
    end
  end
end

local out = {1}
for _, o in ipairs(ops) do
  local op, k, a, b = o[1], o[2], o[3], o[4]
  local r
  if op == 'set' then
    if b ~= '0' then
      r = redis.pcall('SET', k, a, 'PX', b)
    else
      r = redis.pcall('SET', k, a)
    end
  elseif op == 'del' then
    r = redis.pcall('DEL', k)
  elseif op == 'incrby' then
    r = redis.pcall('INCRBY', k, a)
  elseif op == 'hset' then
    r = redis.pcall('HSET', k, a, b)
  elseif op == 'get' then
    r = redis.pcall('GET', k)
  else
    return redis.error_reply('INVALID unknown operation ' .. tostring(op))
  end
  if type(r) == 'table' and r.err then
    -- A lone operation failed before writing anything.
    if string.find(r.err, 'WRONGTYPE', 1, true) then
      return redis.error_reply('WRONGTYPE ' .. k)
    end
    if op == 'incrby' and string.sub(r.err, 1, 4) == 'ERR ' then
      return redis.error_reply('BADVALUE ' .. k .. ' not an integer, or out of range')
    end
    return r
  end
  out[#out + 1] = r
end
return out
