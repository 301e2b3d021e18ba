-- rw_read_renew.lua — renew many read holds in one round trip (watchdog
-- round, or an explicit extend). Each read hold has its own lease.
-- (The libraries come first, as for every rw script; only functions are used.)
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
-- bad lock does not fail a watchdog round for the holds of others). Both
-- keys are read with pcall (hold_first: the hold's deadline, its owner)
-- before anything is written for the hold; no TYPE is sent.
--
-- O(log n) per hold.
-- The loop is lease_renew_batch (lease_lib.lua).
return lease_renew_batch(2, function(i)
  local K = {r = KEYS[2 * i - 1], ro = KEYS[2 * i]}
  return K, K.r, K.ro, 1
end, rw_drop_reader)
