-- sem_renew.lua — renew many permit holds in one round trip (watchdog
-- round, or an explicit extend). Each hold has its own lease.
-- (The libraries come first, as for every sem script; only functions are used.)
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
-- round for the holds of others). h and hn are read with pcall (hold_first:
-- the hold's deadline, its entry) before anything is written for the hold;
-- s is never touched, and not looked at: no TYPE is sent.
--
-- O(log n) per hold.
-- The loop is lease_renew_batch (lease_lib.lua).
return lease_renew_batch(3, function(i)
  local K = {s = KEYS[3 * i - 2], h = KEYS[3 * i - 1], hn = KEYS[3 * i]}
  -- Positions in the group: s is 1.
  return K, K.h, K.hn, 2
end, sem_drop_hold)
