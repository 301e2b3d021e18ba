-- rw_holds.lua — one owner's holds of a read-write lock, read atomically
-- (read_hold_count, write_hold_count). (The libraries come
-- first, as for every rw script.) Read-only.
--
-- KEYS[1..6]  w, fence, r, ro, ww, alive  (see rw_lib.lua)
-- ARGV[1]  owner id <client id>:<handle id>
--
-- Reply: {live read holds of the owner (re-entries count), write holds of
--   the owner (its re-entry count; 0 when another owner or nobody writes)}
--   error WRONGTYPE <key>
--
-- The owner's count '#<owner>' in K.ro includes read holds whose lease
-- ended and which no acquire has purged yet: those of the owner among the
-- first 64 ended ones (the acquires purge 64 per call) are subtracted, so
-- the count is exact unless more than 64 ended leases await their purge.
--
-- O(log n), plus O(1) per ended lease looked at (at most 64).
local K, now_ms, bad = rw_open(0)
if bad then
  return bad
end
local owner = ARGV[1]
local reads = tonumber(redis.call('HGET', K.ro, '#' .. owner)) or 0
if reads > 0 then
  local ended = redis.call('ZRANGEBYSCORE', K.r, '-inf', now_ms, 'LIMIT', 0, 64)
  for _, a in ipairs(ended) do
    if redis.call('HGET', K.ro, a) == owner then
      reads = reads - 1
    end
  end
end
local w = redis.call('HMGET', K.w, 'o', 'n')
local writes = 0
if w[1] == owner then
  writes = tonumber(w[2]) or 0
end
return {math.max(reads, 0), writes}
