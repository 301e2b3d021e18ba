-- guard_lib.lua — the check in front of every guarded write
-- (guard_write.lua, and the callers' own scripts that
-- deadbolt_core::guarded::GuardedScript wraps).
--
-- Not a script of its own: prepended to those scripts.
--
-- KEYS[1..h] are the guard's hold hashes (hold_lib's layout: t = the
-- fencing token, a:<attempt> = 1 per hold counted), ARGV[1] = h, and
-- ARGV[2i], ARGV[2i+1] the attempt id and the token of hold i.

-- Whether every hold of the guard is still the one it was granted: its
-- attempt recorded, with its token (a key of another type is not).
local function guard_live()
  local h = tonumber(ARGV[1])
  for i = 1, h do
    local f = redis.pcall('HMGET', KEYS[i], 't', 'a:' .. ARGV[2 * i])
    if f.err or f[1] ~= ARGV[2 * i + 1] or not f[2] then
      return false, h
    end
  end
  return true, h
end
