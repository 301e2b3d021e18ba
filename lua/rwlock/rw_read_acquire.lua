-- rw_read_acquire.lua — take, re-enter or replay a read hold, or register
-- a waiting reader for admission by the release it waits for.
-- (msg_lib.lua, hold_lib.lua, queue_lib.lua, lease_lib.lua and rw_lib.lua
-- come first: key layout in rw_lib.lua.)
--
-- KEYS[1..6]  w, fence, r, ro, ww, alive  (see rw_lib.lua)
-- ARGV[1]  owner id <client id>:<handle id>
-- ARGV[2]  attempt id
-- ARGV[3]  lease in ms
-- ARGV[4]  mode: 'try' (one attempt) | 'wait' (the first try of an acquire
--          that waits) | 'again' (a later try of that acquire)
-- ARGV[5]  the call's entry secret (random): stored with the registration
--          this call makes, echoed by the admission message
-- ARGV[6]  the stale-hold bound: unused (read holds are counted one per
--          attempt, each with its own lease)
--          (ARGV[1..6] are the acquire prefix core always sends, in this
--          order, whatever the spec: deadbolt-core's acquire module)
-- ARGV[7]  claim lease in ms of an admission made to this reader by a
--          release (rw_admit_readers)
--
-- Reply:
--   {1, 0, pttl}   granted (read holds carry no fencing token): a fresh read
--                  hold, a re-entry (every hold has its own lease), or a
--                  replay of an attempt already granted (an admission made
--                  under a claim is stretched to the lease asked for)
--   {0, pttl}      refused ('try', or a registration refused under OOM):
--                  another owner writes (pttl = its lease left), or a live
--                  writer waits and this owner holds no read yet (write
--                  preference; pttl = how long that writer's client stays
--                  alive without a heartbeat)
--   {2, pttl, fresh, secret}  refused as above ('wait' / 'again'), and the
--                  attempt is registered (q:<attempt> in K.w; fresh = 1
--                  when this call registered it, with this call's secret,
--                  else the registration's secret): the release it waits
--                  for admits it inside the release (g: line, rw_lib.lua);
--                  the attempt's release removes the registration when it
--                  gives up
--   error WRONGTYPE <key>  a key of another type that this call touches:
--                  each is read with pcall on its first touch (hold_first),
--                  w, then r and ro, then ww and alive when the call looks
--                  for a waiting writer, before the first write, so nothing
--                  is written; no TYPE is sent. A key the call never
--                  touches is not looked at: the fence never, r, ro, ww and
--                  alive not when another owner writes (the call is refused
--                  or registers on K.w alone), ww and alive not when the
--                  caller writes or reads already. Ended read leases are
--                  purged (a repair, as a stale hold's removal in
--                  rw_write_acquire.lua) before ww and alive are read.
--
-- Why each branch: the writer's own owner may read (downgrade: it keeps
-- reading after it releases the write hold). An owner that already reads
-- may read again even while a writer waits: refusing it could deadlock it
-- against itself. Everyone else waits behind a waiting writer, so readers
-- taking the lock in a loop cannot starve it. A later try that is granted
-- drops its registration, so no release admits it twice.
--
-- O(log n) in the readers and waiting writers (plus expired ones removed).
local K = rw_keys(0)
local owner, attempt, lease = ARGV[1], ARGV[2], tonumber(ARGV[3])
-- The first touch of the writer's hash: a key of another type is named.
local writer, err = hold_first(K.w, 'HGET', K.w, 'o')
if err then
  return err
end
local now_ms = hold_now()
local mode = ARGV[4]

-- Refused: a waiting reader registers (not a one-shot try).
local function refused(pttl, writer)
  if mode ~= 'try' then
    local fresh, secret = rw_register_reader(K, owner, attempt, ARGV[3], ARGV[7], ARGV[5],
      now_ms, writer, pttl)
    if fresh then
      return {2, pttl, fresh, tonumber(secret)}
    end
  end
  return {0, pttl}
end

if writer and writer ~= owner then
  return refused(redis.call('PTTL', K.w), true)
end
-- The first touches of r and ro, before anything below writes them: this
-- attempt's deadline (a replay) and the owner's read holds.
local f
f, err = hold_first_each({{K.r, 'ZSCORE', attempt}, {K.ro, 'HGET', '#' .. owner}})
if err then
  return err
end
local mine = f[2]
-- A retry of an attempt already granted: counted once; an admission
-- under a claim gets the lease asked for (lease_replay).
local replay = lease_replay(K.r, K.ro, attempt, f[1], lease, now_ms)
if replay then
  return replay
end
local gone, _, empty = rw_purge_readers(K, now_ms)
if gone > 0 then
  -- Ended holds of this owner may have gone: count again.
  mine = redis.call('HGET', K.ro, '#' .. owner)
end
if not writer and (tonumber(mine) or 0) == 0 then
  local head, left
  head, left, err = rw_live_waiting_writer(K, now_ms)
  if err then
    return err
  end
  if head then
    return refused(left, false)
  end
end
if mode == 'again' then
  rw_unregister_reader(K, attempt)
end
redis.call('ZADD', K.r, now_ms + lease, attempt)
redis.call('HSET', K.ro, attempt, owner)
redis.call('HINCRBY', K.ro, '#' .. owner, 1)
-- No read hold before this one: the keys are new, without a TTL yet.
lease_added(K.r, K.ro, now_ms + lease, empty)
return {1, 0, lease}
