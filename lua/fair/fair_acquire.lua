-- fair_acquire.lua — take, re-enter, pick up, or queue for a fair lock.
-- (msg_lib.lua, hold_lib.lua, queue_lib.lua and fair_lib.lua come first:
-- key layout and shared functions are there.)
--
-- KEYS[1..6]  hold, fence, q, qo, alive, seq  (see fair_lib.lua)
-- ARGV[1]  owner id <client id>:<handle id>
-- ARGV[2]  attempt id
-- ARGV[3]  lease in ms
-- ARGV[4]  mode: 'try' (one attempt, never joins or jumps the queue)
--                'wait' (joins the queue when it cannot take the lock)
-- ARGV[5]  secret: a fresh random integer (< 2^53) per call, stored with the
--          queue entry when this call creates it and echoed by the hand-off
-- ARGV[6]  the handle's stale-hold bound (hold_is_stale in hold_lib.lua):
--          '0' when it may hold this lock (a re-entry is expected) or has
--          no bound, else this attempt's sequence number
--          (ARGV[1..6] are the acquire prefix core always sends, in this
--          order, whatever the spec: deadbolt-core's acquire module)
-- ARGV[7]  waiter timeout in ms of this waiter's client (its claim lease on
--          a hand-off, its liveness window); stored with the queue entry
--
-- Reply:
--   {1, token, pttl}      granted (token an integer, or its decimal string
--                         for a fresh grant on an empty queue): fresh
--                         (queue empty or we are its live head),
--                         re-entry by the holder, pick-up of a hand-off (the
--                         claim lease becomes our lease), or a replay.
--                         When a queued waiter becomes the holder, the next
--                         waiter is told the new lease (fair_wake_next), so
--                         it sleeps exactly until that lease ends.
--   {0, pttl}             busy ('try' only); nothing recorded
--   {2, pttl, fresh, secret}
--                         queued; fresh = 1 when this call added the entry
--                         (first time, or again after a purge); secret is
--                         the one stored with the entry (a grant for this
--                         entry carries it)
--   error WRONGTYPE <key>  a key of another type that this call touches:
--                         each key is read with pcall (hold_first) before
--                         the first write, so nothing is written; a key the
--                         call never touches (the queue's, for a try on a
--                         held lock) is not looked at, and no TYPE is sent
--   error BADVALUE <key> ...  unusable fencing counter; nothing written
--   other errors (OOM) as Redis gave them, from the first write
local K = fair_keys(0)
local owner, attempt, lease, mode = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local wt, secret = tonumber(ARGV[7]), ARGV[5]
-- The first touch of the hold hash: a key of another type is named.
local holder, err = hold_first(K.hold, 'HGET', K.hold, 'o')
if err then
  return err
end
local now_ms, now_us, sclock = hold_now()
-- A stale hold of this owner (hold_is_stale) is dropped, not re-entered:
-- the lock is free, and the live head of the queue, if any, gets it below.
-- A repair, the only write before the reads below (as in lock_acquire.lua).
if hold_is_stale(K.hold, holder, owner, attempt, ARGV[6]) then
  redis.call('DEL', K.hold)
  holder = false
end

-- Queue this attempt (or find it queued). Every key it writes is read
-- first (q, qo, alive; seq by the INCR that is the first write, or by a
-- GET when a retry only stretches the queue's TTLs), so a key of another
-- type is refused by name with nothing written.
local function enqueue(pttl)
  local fresh = 0
  local client = queue_client(owner)
  local f, e = hold_first_each({{K.q, 'ZSCORE', attempt}, {K.qo, 'HGET', attempt},
    {K.alive, 'ZSCORE', client}})
  if e then
    return e
  end
  local queued, entry = f[1], f[2]
  local touch = queue_touch_due(K.q, wt * 3)
  if queued then
    -- Already queued (a retry of this attempt): the stored secret stands.
    secret = select(3, fair_entry(entry or ''))
    if touch then
      local _; _, e = hold_first(K.seq, 'GET', K.seq)
      if e then
        return e
      end
    end
  else
    -- Server order decides the place: the counter, not a client clock.
    -- The first write of this path: a counter that is not an integer (or
    -- would overflow: Redis says ERR) is refused here by name with nothing
    -- written; any other refusal (OOM) passes through as Redis gave it.
    local seq = redis.pcall('INCR', K.seq)
    if type(seq) == 'table' then
      if seq.err and string.find(seq.err, '^ERR') then
        return redis.error_reply('BADVALUE ' .. K.seq .. ' enqueue counter: ' .. seq.err)
      end
      return hold_named_error(K.seq, seq)
    end
    redis.call('ZADD', K.q, seq, attempt)
    redis.call('HSET', K.qo, attempt, reg_entry(owner, attempt, lease, ARGV[7], secret, now_ms, lease))
    fresh = 1
  end
  -- Every try of a waiter also proves its client alive.
  redis.call('ZADD', K.alive, now_ms + wt, client)
  if touch then
    hold_touch({K.q, K.qo, K.alive, K.seq}, wt * 3)
  end
  return {2, pttl, fresh, tonumber(secret)}
end

if holder then
  local pttl = redis.call('PTTL', K.hold)
  if holder == owner then
    if redis.call('HGET', K.hold, 'c') == attempt then
      -- Pick-up of a hand-off: the claim lease becomes the waiter's lease.
      -- The next waiter is told first (fair_wake_next reads q and qo, so a
      -- key of another type is refused before anything is written).
      err = fair_wake_next(K, tonumber(lease))
      if err then
        return err
      end
      redis.call('HDEL', K.hold, 'c')
      redis.call('PEXPIRE', K.hold, lease)
      return {1, tonumber(redis.call('HGET', K.hold, 't')), tonumber(lease)}
    end
    -- Re-entry by the holder (never queues behind others), or a replay of
    -- an attempt already granted (counted once).
    return hold_reenter(K.hold, attempt, lease)
  end
  if mode == 'try' then
    return {0, pttl}
  end
  return enqueue(pttl)
end

-- Free. An empty queue, the common case: the lock is this caller's, and
-- the fencing counter advances in one SET ... GET (hold_advance_fence: a
-- key of another type or an unusable value is refused with nothing
-- written). The queue is read first, so its type is known too.
local top
top, err = hold_first(K.q, 'ZRANGE', K.q, 0, 0)
if err then
  return err
end
if not top[1] then
  local stoken, _, bad = hold_advance_fence(K.fence, sclock)
  if bad then
    return bad
  end
  hold_create(K.hold, owner, stoken, attempt)
  redis.call('PEXPIRE', K.hold, lease)
  return {1, stoken, tonumber(lease)}
end
-- Waiters queue. Any grant below needs a token: the counter is read and
-- checked before the first write.
local last
last, err = hold_read_fence(K.fence)
if err then
  return err
end
-- The live head of the queue has the first right to it (q, qo and alive
-- are read before any dead head is dropped; q's head was read above).
local head, e
head, e, err = fair_live_head(K, now_ms, top)
if err then
  return err
end
if e == true then
  -- Too many dead heads for one call: the next call goes on purging.
  if mode == 'try' then
    return {0, 1}
  end
  return enqueue(1)
end
if head == nil or head == attempt then
  local token, stoken = hold_next_token(K.fence, last, now_us)
  hold_create(K.hold, owner, stoken, attempt)
  redis.call('PEXPIRE', K.hold, lease)
  if head then
    -- The head took the lock itself (the holder's lease ran out).
    redis.call('ZREM', K.q, head)
    redis.call('HDEL', K.qo, head)
    fair_wake_next(K, tonumber(lease))
  end
  return {1, token, tonumber(lease)}
end
-- Someone else is first: give it the lock (it may not have noticed the
-- holder's lease ran out) and stay behind it. The queue's counter, which
-- enqueue writes after the hand-off, is read first.
if mode ~= 'try' then
  local _; _, err = hold_first(K.seq, 'GET', K.seq)
  if err then
    return err
  end
end
fair_handoff(K, head, e, last, now_us, wt)
if mode == 'try' then
  return {0, wt}
end
return enqueue(wt)
