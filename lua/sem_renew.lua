-- sem_renew.lua — renew many permit holds in one round trip (watchdog
-- round, or an explicit extend). Each hold has its own lease.
-- (hold_lib.lua and sem_lib.lua are prepended; only functions are used.)
--
-- KEYS[3i-2..3i]  the s, h and hn keys of the i-th hold's semaphore (three
--                 keys per hold; the watchdog batches holds of one slot)
-- ARGV[1]    lease in ms to guarantee from now
-- ARGV[1+i]  attempt id of the i-th hold
--
-- Reply: one integer per hold: >= 0 renewed (ms left of its lease after the
-- call; never shortened), -1 gone (its lease had ended: its permits are
-- given back now; or it was released), -2 - j the hold's j-th key (s, h,
-- hn) has another type: nothing written for that hold (the caller names the
-- key; a per-hold code, so one bad semaphore does not fail a watchdog
-- round for the holds of others).
--
-- O(log n) per hold.
local lease = tonumber(ARGV[1])
local now_ms = hold_now()
local out = {}
for i = 1, #KEYS / 3 do
  local K = {s = KEYS[3 * i - 2], h = KEYS[3 * i - 1], hn = KEYS[3 * i]}
  local attempt = ARGV[i + 1]
  local bad, j = hold_check_types({{K.s, 'hash'}, {K.h, 'zset'}, {K.hn, 'hash'}})
  if bad then
    out[i] = -2 - j
  else
    out[i] = hold_renew_lease(K.h, K.hn, attempt, lease, now_ms,
      function(a) sem_drop_hold(K, a) end)
  end
end
return out
