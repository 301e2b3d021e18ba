-- floor_lock.lua — the least a reentrant lock with fencing tokens runs to
-- take a hold: for the examples that measure how far deadbolt's Lock is
-- above that floor (lock_floor, redlock_steps). Not a usable lock: no
-- attempt ids (a retried call cannot tell its own grant), no waiting
-- clients' queue, no clock floor under the tokens (a counter lost with a
-- restart from an older snapshot repeats tokens).
--
-- KEYS[1]  the hold: hash o = owner, t = fencing token, n = hold count
-- KEYS[2]  the fencing counter (string, INCR)
-- ARGV[1]  owner id
-- ARGV[2]  lease in ms
--
-- Reply: the fencing token (> 0) of a fresh hold; 1 for a re-entry (one
-- more on the count); 0 when another owner holds it.
--
-- Branches: the owner's own hold is re-entered (HINCRBY, lease renewed);
-- another owner's is left alone; a free lock takes the next token and
-- writes the hold in one HSET, then its lease.

local o = redis.call('HGET', KEYS[1], 'o')
if o == ARGV[1] then
  redis.call('HINCRBY', KEYS[1], 'n', 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
elseif o then
  return 0
end
local t = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'o', ARGV[1], 't', t, 'n', 1)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return t
