-- fair_acquire.lua — take, re-enter, pick up, or queue for a fair lock.
-- (fair_lib.lua is prepended: key layout and shared functions are there.)
--
-- KEYS[1..6]  hold, fence, q, qo, alive, seq  (see fair_lib.lua)
-- ARGV[1]  owner id <client uuid>:<handle id>
-- ARGV[2]  attempt id
-- ARGV[3]  lease in ms
-- ARGV[4]  mode: 'try' (one attempt, never joins or jumps the queue)
--                'wait' (joins the queue when it cannot take the lock)
-- ARGV[5]  waiter timeout in ms (claim lease, liveness window)
--
-- Reply:
--   {1, token, pttl}      granted: fresh (queue empty or we are its live head),
--                         re-entry by the holder, pick-up of a hand-off (the
--                         claim lease becomes our lease), or a replay.
--                         When a queued waiter becomes the holder, the next
--                         waiter is told the new lease (fair_wake_next), so
--                         it sleeps exactly until that lease ends.
--   {0, pttl}             busy ('try' only); nothing recorded
--   {2, pttl, fresh}      queued; fresh = 1 when this call added the entry
--                         (first time, or again after a purge)
--   error WRONGTYPE <key>
local K = fair_keys(0)
local owner, attempt, lease, mode = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local wt = tonumber(ARGV[5])
local holder = redis.pcall('HGET', K.hold, 'o')
if type(holder) == 'table' then
  return redis.error_reply('WRONGTYPE ' .. K.hold)
end
local bad = fair_check_types(K)
if bad then
  return bad
end
local now_ms, now_us = fair_now()

local function enqueue(pttl)
  local fresh = 0
  if not redis.call('ZSCORE', K.q, attempt) then
    -- Server order decides the place: the counter, not a client clock.
    local seq = redis.call('INCR', K.seq)
    redis.call('ZADD', K.q, seq, attempt)
    redis.call('HSET', K.qo, attempt, owner .. ' ' .. lease)
    fresh = 1
  end
  -- Every try of a waiter also proves its client alive.
  redis.call('ZADD', K.alive, now_ms + wt, fair_client(owner))
  fair_touch(K, wt * 3)
  return {2, pttl, fresh}
end

if holder then
  local pttl = redis.call('PTTL', K.hold)
  if holder == owner then
    local token = tonumber(redis.call('HGET', K.hold, 't'))
    if redis.call('HEXISTS', K.hold, 'a:' .. attempt) == 1 then
      if redis.call('HGET', K.hold, 'c') == attempt then
        -- Pick-up of a hand-off: the claim lease becomes the waiter's lease.
        redis.call('HDEL', K.hold, 'c')
        redis.call('PEXPIRE', K.hold, lease)
        pttl = tonumber(lease)
        fair_wake_next(K, pttl)
      end
      -- Otherwise a replay of an attempt already granted: counted once.
      return {1, token, pttl}
    end
    -- Re-entry by the holder: never queues behind others.
    redis.call('HSET', K.hold, 'a:' .. attempt, 1)
    redis.call('HINCRBY', K.hold, 'n', 1)
    if pttl >= 0 and pttl < tonumber(lease) then
      redis.call('PEXPIRE', K.hold, lease)
      pttl = tonumber(lease)
    end
    return {1, token, pttl}
  end
  if mode == 'try' then
    return {0, pttl}
  end
  return enqueue(pttl)
end

-- Free. The live head of the queue has the first right to it.
local head, howner, hlease, more = fair_live_head(K, now_ms)
if more then
  -- Too many dead heads for one call: the next call goes on purging.
  if mode == 'try' then
    return {0, 1}
  end
  return enqueue(1)
end
if head == nil or head == attempt then
  local token, stoken = fair_token(K, now_us)
  redis.call('HSET', K.hold, 'o', owner, 't', stoken, 'n', 1, 'a:' .. attempt, 1)
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
-- holder's lease ran out) and stay behind it.
fair_handoff(K, head, howner, hlease, now_us, wt)
if mode == 'try' then
  return {0, wt}
end
return enqueue(wt)
