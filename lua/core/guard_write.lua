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
-- With more than one operation the whole batch is played first on a
-- model of its keys, in order (each key's type as the batch found it or
-- left it, and a string's value), so that an operation that would fail
-- after an earlier one of the batch wrote is refused before anything is
-- written: the batch commits together or not at all (Redis does not undo
-- a script's writes). INCRBY is checked as Redis checks it: the value a
-- canonical 64-bit integer, the sum within range (decimal strings: Lua's
-- numbers are doubles). A lone operation needs no play: its own failure
-- writes nothing. Out of memory Redis refuses a script's first write,
-- which is then the only one.
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

-- Decimal integers as Redis reads them (string2ll): "0", or an optional
-- '-' and no leading zero, within a signed 64-bit integer.
local I64_MAX, I64_MIN_ABS = '9223372036854775807', '9223372036854775808'
-- Compare two magnitudes (digit strings without leading zeros).
local function mag_cmp(a, b)
  if #a ~= #b then
    return #a < #b and -1 or 1
  end
  return a == b and 0 or (a < b and -1 or 1)
end
local function mag_add(a, b)
  local out, carry, i, j = {}, 0, #a, #b
  while i > 0 or j > 0 or carry > 0 do
    local d = carry + (i > 0 and tonumber(string.sub(a, i, i)) or 0)
      + (j > 0 and tonumber(string.sub(b, j, j)) or 0)
    out[#out + 1], carry = d % 10, math.floor(d / 10)
    i, j = i - 1, j - 1
  end
  return string.reverse(table.concat(out))
end
-- a - b for magnitudes a >= b.
local function mag_sub(a, b)
  local out, borrow, i, j = {}, 0, #a, #b
  while i > 0 do
    local d = tonumber(string.sub(a, i, i)) - borrow - (j > 0 and tonumber(string.sub(b, j, j)) or 0)
    borrow = d < 0 and 1 or 0
    out[#out + 1] = d + 10 * borrow
    i, j = i - 1, j - 1
  end
  local r = string.gsub(string.reverse(table.concat(out)), '^0+', '')
  return r == '' and '0' or r
end
-- A canonical integer in range as {negative, magnitude}, else nil.
local function int_read(s)
  if s == '0' then
    return {false, '0'}
  end
  local neg, m = string.match(s, '^(%-?)([1-9]%d*)$')
  if not m or mag_cmp(m, neg == '-' and I64_MIN_ABS or I64_MAX) > 0 then
    return nil
  end
  return {neg == '-', m}
end
-- x + y as a decimal string, or nil when out of range.
local function int_add(x, y)
  local neg, m
  if x[1] == y[1] then
    neg, m = x[1], mag_add(x[2], y[2])
  elseif mag_cmp(x[2], y[2]) >= 0 then
    neg, m = x[1], mag_sub(x[2], y[2])
  else
    neg, m = y[1], mag_sub(y[2], x[2])
  end
  if m == '0' then
    return '0'
  end
  local s = (neg and '-' or '') .. m
  return int_read(s) and s or nil
end

-- The play of a batch: each key's type ('none', 'string', 'hash' or
-- another) and, for a string an INCRBY reads, its value.
if n > 1 then
  local model = {}
  local function state(k)
    if not model[k] then
      model[k] = {t = redis.call('TYPE', k).ok}
    end
    return model[k]
  end
  for _, o in ipairs(ops) do
    local op, k, a, b = o[1], o[2], o[3], o[4]
    local m = state(k)
    if op == 'set' then
      model[k] = {t = 'string', v = a}
    elseif op == 'del' then
      model[k] = {t = 'none'}
    elseif op == 'hset' then
      if m.t ~= 'none' and m.t ~= 'hash' then
        return redis.error_reply('WRONGTYPE ' .. k)
      end
      m.t = 'hash'
    elseif op == 'get' then
      if m.t ~= 'none' and m.t ~= 'string' then
        return redis.error_reply('WRONGTYPE ' .. k)
      end
    elseif op == 'incrby' then
      if m.t ~= 'none' and m.t ~= 'string' then
        return redis.error_reply('WRONGTYPE ' .. k)
      end
      local v = m.t == 'none' and '0' or m.v or redis.call('GET', k)
      local x, y = int_read(v), int_read(a)
      local sum = x and y and int_add(x, y)
      if not sum then
        return redis.error_reply('BADVALUE ' .. k .. ' not an integer, or out of range')
      end
      model[k] = {t = 'string', v = sum}
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
