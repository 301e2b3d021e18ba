-- simple_acquire.lua — take a non-reentrant lock (examples/simple_lock: a
-- primitive built on deadbolt::primitive alone).
--
-- KEYS[1]  the lock  <ns>:{name}:simple  (string: the holding attempt id)
-- KEYS[2]  fencing counter  <ns>:{name}:simple:fence  (string, TTL one hour)
-- ARGV     the acquire contract (deadbolt-core's acquire module):
--          [owner, attempt, lease_ms, mode, secret, bound]; only the
--          attempt and the lease are needed here (this lock keeps no queue,
--          so a waiting try is a try, and it is not reentrant)
--
-- Reply:
--   {1, token, pttl}  granted, or a replay of this attempt's grant (a retry
--                     after an Indeterminate reply: the same token)
--   {0, pttl}         held by another attempt: sleep at most pttl ms
--   error WRONGTYPE   a key of another type is in the way (SET fails before
--                     anything is written; INCR only runs after a grant)
--
-- O(1).

local holder = redis.call('GET', KEYS[1])
if holder == ARGV[2] then
  -- A replay: nobody else can have been granted since (we hold it).
  return {1, tonumber(redis.call('GET', KEYS[2])), redis.call('PTTL', KEYS[1])}
end
if holder then
  return {0, redis.call('PTTL', KEYS[1])}
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
local token = redis.call('INCR', KEYS[2])
redis.call('PEXPIRE', KEYS[2], 3600000)
return {1, token, tonumber(ARGV[3])}
