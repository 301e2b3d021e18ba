-- rw_read_acquire.lua — take, re-enter or replay a read hold.
-- (hold_lib.lua and rw_lib.lua are prepended: key layout there.)
--
-- KEYS[1..6]  w, fence, r, ro, ww, alive  (see rw_lib.lua)
-- ARGV[1]  owner id <client uuid>:<handle id>
-- ARGV[2]  attempt id
-- ARGV[3]  lease in ms
-- ARGV[4]  mode: 'try' | 'wait' (the same for a reader: readers never queue)
--
-- Reply:
--   {1, 0, pttl}   granted (read holds carry no fencing token): a fresh read
--                  hold, a re-entry (every hold has its own lease), or a
--                  replay of an attempt already granted
--   {0, pttl}      refused: another owner writes (pttl = its lease left), or
--                  a live writer waits and this owner holds no read yet
--                  (write preference; pttl = how long that writer's client
--                  stays alive without a heartbeat)
--   error WRONGTYPE <key>  a key of another type; checked before any write
--
-- Why each branch: the writer's own owner may read (downgrade: it keeps
-- reading after it releases the write hold). An owner that already reads
-- may read again even while a writer waits: refusing it could deadlock it
-- against itself. Everyone else waits behind a waiting writer, so readers
-- taking the lock in a loop cannot starve it.
--
-- O(log n) in the readers and waiting writers (plus expired ones removed).
local K = rw_keys(0)
local owner, attempt, lease = ARGV[1], ARGV[2], tonumber(ARGV[3])
local bad = rw_check_types(K)
if bad then
  return bad
end
local now_ms = hold_now()
local writer = redis.call('HGET', K.w, 'o')
if writer and writer ~= owner then
  return {0, redis.call('PTTL', K.w)}
end
local dl = redis.call('ZSCORE', K.r, attempt)
if dl and tonumber(dl) > now_ms then
  -- A retry of an attempt already granted: counted once.
  return {1, 0, tonumber(dl) - now_ms}
end
rw_purge_readers(K, now_ms)
if not writer and (tonumber(redis.call('HGET', K.ro, '#' .. owner)) or 0) == 0 then
  local head, left = rw_live_waiting_writer(K, now_ms)
  if head then
    return {0, left}
  end
end
redis.call('ZADD', K.r, now_ms + lease, attempt)
redis.call('HSET', K.ro, attempt, owner)
redis.call('HINCRBY', K.ro, '#' .. owner, 1)
hold_lease_added(K.r, K.ro, now_ms + lease)
return {1, 0, lease}
