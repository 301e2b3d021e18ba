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
-- released), -2 - j the hold's j-th key (r, ro) has another type: nothing
-- written for that hold (the caller names the key; a per-hold code, so one
-- bad lock does not fail a watchdog round for the holds of others).
--
-- O(log n) per hold.
local lease = tonumber(ARGV[1])
local now_ms = hold_now()
local out = {}
for i = 1, #KEYS / 2 do
  local K = {r = KEYS[2 * i - 1], ro = KEYS[2 * i]}
  local attempt = ARGV[i + 1]
  local bad, j = hold_check_types({{K.r, 'zset'}, {K.ro, 'hash'}})
  if bad then
    out[i] = -2 - j
  else
    out[i] = hold_renew_lease(K.r, K.ro, attempt, lease, now_ms,
      function(a) rw_drop_reader(K, a) end)
  end
end
return out
