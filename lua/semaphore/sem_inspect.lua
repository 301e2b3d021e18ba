-- sem_inspect.lua — read a semaphore's state in one step (`deadbolt
-- inspect`, available_permits). (The libraries come first, as for
-- every sem script.) Ended leases are purged first, so they never count as taken.
--
-- KEYS[1..6]  s, h, hn, q, qo, alive  (see sem_lib.lua)
-- ARGV[1]  how many holders and waiters to list at most
--
-- Reply: {permits set (-1 when never set), available, holds, waiters,
--   {{attempt, owner, n, ms left}, ...} holders, longest lease first,
--   {{attempt, owner, n}, ...} waiters in queue order}
--   error WRONGTYPE <key>
--
-- O(log n + listed).
local K, now_ms, bad = sem_open(0)
if bad then
  return bad
end
sem_purge(K, now_ms)
local limit = tonumber(ARGV[1])
local total = tonumber(redis.call('HGET', K.s, 'p')) or -1
local holders = {}
local top = redis.call('ZREVRANGE', K.h, 0, limit - 1, 'WITHSCORES')
for i = 1, #top, 2 do
  local owner, n = sem_entry(redis.call('HGET', K.hn, top[i]))
  holders[#holders + 1] = {top[i], owner or '', n, tonumber(top[i + 1]) - now_ms}
end
local waiters = {}
for _, a in ipairs(redis.call('ZRANGE', K.q, 0, limit - 1)) do
  local owner, n = sem_entry(redis.call('HGET', K.qo, a))
  waiters[#waiters + 1] = {a, owner or '', n}
end
return {total, (sem_available(K)), redis.call('ZCARD', K.h), redis.call('ZCARD', K.q),
  holders, waiters}
