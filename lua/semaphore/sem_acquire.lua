-- sem_acquire.lua — take n permits, replay an attempt, or queue for them.
-- (msg_lib.lua, hold_lib.lua, queue_lib.lua, lease_lib.lua and sem_lib.lua
-- come first: key layout and the policy in sem_lib.lua.)
--
-- KEYS[1..6]  s, h, hn, q, qo, alive  (see sem_lib.lua)
-- ARGV[1]  owner id <client id>:<handle id>
-- ARGV[2]  attempt id
-- ARGV[3]  lease in ms
-- ARGV[4]  mode: 'try' (one attempt, never queues) | 'wait'
-- ARGV[5]  the call's entry secret: stored with the queue entry this call
--          creates, echoed by a grant to it
-- ARGV[6]  the stale-hold bound: unused (each hold is its own attempt's)
--          (ARGV[1..6] are the acquire prefix core always sends, in this
--          order, whatever the spec: deadbolt-core's acquire module)
-- ARGV[7]  waiter timeout in ms (the waiter's liveness window)
-- ARGV[8]  n, the permits wanted (1 .. 2^53-1, checked by the client)
--
-- Reply:
--   {1, 0, pttl}         granted n permits under their own lease (permits
--                        carry no fencing token), or a replay of a granted
--                        attempt (pttl = its lease left; a grant made
--                        inside a release, still under its claim, is
--                        stretched to the lease asked for)
--   {0, pttl}            not enough ('try'); pttl = until the earliest lease
--                        ends (-1 without holders)
--   {2, pttl, fresh, secret}  queued ('wait'): fresh = 1 when this call
--                        added the entry (with this call's secret), else
--                        the entry's secret; its permits are granted to it
--                        inside a release (g:<attempt> ..., sem_lib.lua)
--   error WRONGTYPE <key>  a key of another type that this call touches:
--                        each is read with pcall on its first touch
--                        (hold_first) before the first write, so nothing is
--                        written; no TYPE is sent. h and hn, then s, then
--                        q (and qo, alive when someone queues, or when
--                        this call queues). Ended leases are purged (a
--                        repair) before s and the queue's keys are read.
--
-- Why each branch: expired holds are purged first, so an ended lease never
-- counts as taken; the head waiter's demand is reserved (see sem_lib.lua);
-- a semaphore without a count of taken permits has no holds, so nothing is
-- purged and the first grant's keys get their TTL in one command each;
-- a queue entry that is no registration (written by something else) is
-- written anew in the current form, keeping its place.
--
-- O(log n).
local K = sem_keys(0)
local owner, attempt, lease, mode = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local wt, n = tonumber(ARGV[7]), tonumber(ARGV[8])
-- The first touches of h (this attempt's deadline: a replay) and hn (the
-- permits taken), before anything below writes them.
local f, err = hold_first_each({{K.h, 'ZSCORE', attempt}, {K.hn, 'HGET', '#t'}})
if err then
  return err
end
local now_ms = hold_now()
-- A replay of a granted attempt (lease_replay: a grant made under a
-- claim is stretched to the lease asked for).
local replay = lease_replay(K.h, K.hn, attempt, f[1], lease, now_ms)
if replay then
  return replay
end
-- No count of permits taken: no holds (the count is written with the
-- first and goes with the last), so nothing to purge, and the keys this
-- grant creates have no TTL yet (lease_added's `fresh`).
local taken = f[2]
local fresh = not taken
-- The earliest lease deadline, when the purge read it and nothing ended
-- (a refused try's sleep bound, sem_next_expiry, then needs no read).
local oldest
if not fresh then
  local gone, _, _, dl = sem_purge(K, now_ms)
  if gone > 0 then
    taken = redis.call('HGET', K.hn, '#t')
  else
    oldest = dl
  end
end
local p
p, err = hold_first(K.s, 'HGET', K.s, 'p')
if err then
  return err
end
local avail = (tonumber(p) or 0) - (tonumber(taken) or 0)
local head, head_n, queued
head, head_n, err, queued = sem_live_head(K, now_ms)
if err then
  return err
end
local reserve = 0
if head and head ~= attempt then
  reserve = head_n
end
if avail - reserve >= n then
  redis.call('ZADD', K.h, now_ms + lease, attempt)
  redis.call('HSET', K.hn, attempt, owner .. ' ' .. ARGV[8])
  redis.call('HINCRBY', K.hn, '#t', ARGV[8])
  lease_added(K.h, K.hn, now_ms + lease, fresh)
  -- An empty queue holds no entry of this attempt to take out.
  if (head or queued) and redis.call('ZREM', K.q, attempt) == 1 then
    redis.call('HDEL', K.qo, attempt)
    if head == attempt then
      -- The head is served: what is left may serve those behind it.
      sem_wake(K, now_ms, avail - n, nil, false, now_ms + lease)
    end
  end
  return {1, 0, lease}
end
local wait_ms = sem_next_expiry(K, now_ms, oldest)
if mode == 'try' then
  return {0, wait_ms}
end
-- Queued. An empty queue before this call (created: its keys are made
-- below) was not read by the walk above; otherwise it read qo and alive.
local created = not (head or queued)
-- qo and alive are read (with pcall) before the first write: here when the
-- walk did not (this attempt's entry, and its client's record).
local queued_entry
if created then
  f, err = hold_first_each({{K.qo, 'HGET', attempt}, {K.alive, 'ZSCORE', queue_client(owner)}})
  if err then
    return err
  end
  queued_entry = f[1]
end
-- The queue's keys get their TTLs in full when this call creates them
-- (NX first), else only when due (queue_touch_due: one PTTL).
local touch = created or queue_touch_due(K.q, wt * 3)
local fresh, secret = 0, ARGV[5]
local entry = reg_entry(owner, attempt, ARGV[3], ARGV[7], ARGV[5], now_ms, ARGV[8])
if redis.call('ZSCORE', K.q, attempt) then
  if queued_entry == nil then
    queued_entry = redis.call('HGET', K.qo, attempt)
  end
  local _, _, c, s = sem_entry(queued_entry)
  if c then
    secret = s
  else
    -- An entry that is no registration (written by something else):
    -- queued again in the current form, keeping its place.
    redis.call('HSET', K.qo, attempt, entry)
    fresh = 1
  end
else
  local seq = redis.call('HINCRBY', K.s, 'seq', 1)
  redis.call('ZADD', K.q, seq, attempt)
  redis.call('HSET', K.qo, attempt, entry)
  fresh = 1
end
redis.call('ZADD', K.alive, now_ms + wt, queue_client(owner))
if touch then
  hold_touch({K.q, K.qo}, wt * 3, created)
  hold_touch({K.alive}, wt * 3)
end
return {2, wait_ms, fresh, tonumber(secret)}
