-- simple_renew.lua — renew holds of non-reentrant locks (examples/
-- simple_lock), in the renew contract of deadbolt-core (HoldSpec::renew).
--
-- KEYS[i]    the lock of the i-th hold (layout in simple_acquire.lua)
-- ARGV[1]    lease in ms to guarantee from now
-- ARGV[1+i]  attempt id of the i-th hold
--
-- Reply: one integer per hold: the TTL after the call (never shortened),
-- -1 when the hold is gone, -3 when its key has another type (nothing
-- written: a pcall'd GET fails before the PEXPIRE).
--
-- O(number of holds).

local out = {}
for i, key in ipairs(KEYS) do
  local v = redis.pcall('GET', key)
  if type(v) == 'table' then
    out[i] = -3
  elseif v ~= ARGV[1 + i] then
    out[i] = -1
  else
    if redis.call('PTTL', key) < tonumber(ARGV[1]) then
      redis.call('PEXPIRE', key, ARGV[1])
    end
    out[i] = redis.call('PTTL', key)
  end
end
return out
