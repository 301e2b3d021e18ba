-- rw_read_renew.lua — renew many read holds in one round trip (watchdog
-- round, or an explicit extend). Each read hold has its own lease.
-- (hold_lib.lua and rw_lib.lua are prepended; only their functions are used.)
--
-- KEYS[2i-1], KEYS[2i]  the r and ro keys of the i-th hold's lock (two keys
--                       per hold; the watchdog batches holds of one slot)
-- ARGV[1]    lease in ms to guarantee from now
-- ARGV[1+i]  attempt id of the i-th hold
--
-- Reply: one integer per hold: >= 0 renewed (ms left of its lease after
-- the call; never shortened), -1 gone (its lease had ended or it was
-- released), -2 a key of another type is in the way.
--
-- O(log n) per hold.
local lease = tonumber(ARGV[1])
local now_ms = hold_now()
local out = {}
for i = 1, #KEYS / 2 do
  local K = {r = KEYS[2 * i - 1], ro = KEYS[2 * i]}
  local attempt = ARGV[i + 1]
  if hold_check_types({{K.r, 'zset'}, {K.ro, 'hash'}}) then
    out[i] = -2
  else
    local dl = redis.call('ZSCORE', K.r, attempt)
    if not dl then
      out[i] = -1
    elseif tonumber(dl) <= now_ms then
      rw_drop_reader(K, attempt)
      hold_lease_removed(K.r, K.ro)
      out[i] = -1
    else
      local want = now_ms + lease
      if tonumber(dl) < want then
        redis.call('ZADD', K.r, want, attempt)
        hold_lease_added(K.r, K.ro, want)
        dl = want
      end
      out[i] = tonumber(dl) - now_ms
    end
  end
end
return out
