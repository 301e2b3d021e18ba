-- sem_permits.lua — set, add, reduce, drain or read a semaphore's permits.
-- (The libraries come first, as for every sem script: see sem_lib.lua.)
--
-- KEYS[1..6]  s, h, hn, q, qo, alive  (see sem_lib.lua)
-- ARGV[1]  op: 'set' | 'force' | 'add' | 'reduce' | 'drain' | 'available'
-- ARGV[2]  n (for set, force, add, reduce; 0 .. 2^53-1, checked by the
--          client)
--
-- Reply (an integer):
--   set        1 when the permits were set, 0 when they were set already
--   force      the permits available after setting the total to n, set
--              or not before (may be negative: see below)
--   add        the permits available after adding (sets them when unset)
--   reduce     the permits available after reducing
--   drain      how many available permits were taken away (0 if none)
--   available  the permits available (never counting an ended lease)
--   error INVALID <why>    reduce below zero, or a total beyond 2^53-1:
--                          refused with nothing written
--   error WRONGTYPE <key>
--
-- Available = set − taken by live holds. Reducing below what live holds
-- take makes it negative until they give permits back (the holds keep
-- theirs); the total itself never goes below zero. 'force' (set_permits)
-- may likewise set the total below what live holds take: they keep their
-- permits, and available stays at or below zero until enough come back.
-- Permits that become available wake the waiters they serve (sem_wake),
-- and no more.
--
-- O(log n), plus O(log n) per purged hold or woken waiter.
local K = sem_keys(0)
local op, n = ARGV[1], tonumber(ARGV[2] or '0')
local bad = hold_check_keys(K)
if bad then
  return bad
end
local now_ms = hold_now()
sem_purge(K, now_ms)
local total = tonumber(redis.call('HGET', K.s, 'p')) or -1
if op == 'available' then
  return (sem_available(K))
elseif op == 'set' then
  if total >= 0 then
    return 0
  end
  redis.call('HSET', K.s, 'p', string.format('%.0f', n))
  sem_wake(K, now_ms, sem_available(K))
  return 1
elseif op == 'force' then
  redis.call('HSET', K.s, 'p', string.format('%.0f', n))
  local avail = sem_available(K)
  sem_wake(K, now_ms, avail)
  return avail
elseif op == 'add' then
  local new = math.max(total, 0) + n
  if new > 9007199254740991 then
    return redis.error_reply('INVALID adding ' .. string.format('%.0f', n)
      .. ' permits would take the total beyond 2^53-1')
  end
  redis.call('HSET', K.s, 'p', string.format('%.0f', new))
  local avail = sem_available(K)
  sem_wake(K, now_ms, avail)
  return avail
elseif op == 'reduce' then
  if math.max(total, 0) - n < 0 then
    return redis.error_reply('INVALID cannot reduce ' .. string.format('%.0f', n)
      .. ' permits: the total is ' .. string.format('%.0f', math.max(total, 0)))
  end
  redis.call('HSET', K.s, 'p', string.format('%.0f', total - n))
  return (sem_available(K))
elseif op == 'drain' then
  local avail = sem_available(K)
  if avail <= 0 then
    return 0
  end
  redis.call('HINCRBY', K.s, 'p', string.format('%.0f', -avail))
  return avail
end
return redis.error_reply('INVALID unknown op ' .. tostring(op))
