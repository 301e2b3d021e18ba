-- fair_lib.lua — functions shared by the fair lock's scripts.
--
-- Not a script of its own: the script loader prepends this file to
-- fair_acquire.lua, fair_release.lua, fair_force_unlock.lua and
-- fair_heartbeat.lua, so the queue rules live in one place.
--
-- Keys of one fair lock (all under the hash tag {name}), as a table K:
--   K.hold   <ns>:{name}:fair          hold hash: o owner, t token, n count,
--                                      a:<attempt> per hold, c = attempt
--                                      holding an unclaimed hand-off
--   K.fence  <ns>:{name}:fair:fence    fencing counter (string, TTL 1 h)
--   K.q      <ns>:{name}:fair:q        queue ZSET: attempt -> enqueue seq
--   K.qo     <ns>:{name}:fair:qo       hash: attempt -> '<owner id> <lease ms>'
--   K.alive  <ns>:{name}:fair:alive    ZSET: client uuid -> liveness deadline
--                                      (server clock, ms)
--   K.seq    <ns>:{name}:fair:seq      enqueue counter (server order)
-- Channel of a client's waiters: <hold>:ch:<client uuid>; messages
--   g:<attempt> <token> <ttl>  hand-off: the lock is yours with this token
--                              under a claim lease of ttl ms
--   t:<attempt> <pttl>         you are next; the holder's lease ends in pttl ms
--   t:<attempt>                try again now
--
-- Every function is O(log n) in the queue length, except fair_live_head,
-- which removes up to 64 dead heads (O(log n) each) per call.

local function fair_keys(base)
  return {
    hold = KEYS[base + 1], fence = KEYS[base + 2], q = KEYS[base + 3],
    qo = KEYS[base + 4], alive = KEYS[base + 5], seq = KEYS[base + 6],
  }
end

-- Server time as milliseconds and microseconds.
local function fair_now()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]), tonumber(t[2])
  return s * 1000 + math.floor(us / 1000), s * 1000000 + us
end

-- Next fencing token: max(counter + 1, server time in µs), stored with a TTL.
-- One SET ... GET in the common case (the counter behind the clock); a
-- second SET only when the counter is ahead.
local function fair_token(K, now_us)
  local s = string.format('%.0f', now_us)
  local last = tonumber(redis.call('SET', K.fence, s, 'PX', 3600000, 'GET')) or 0
  if last >= now_us then
    local token = last + 1
    s = string.format('%.0f', token)
    redis.call('SET', K.fence, s, 'PX', 3600000)
    return token, s
  end
  return now_us, s
end

local function fair_client(owner)
  return string.match(owner, '^([^:]+)')
end

-- A queue entry's value: owner id and requested lease.
local function fair_entry(v)
  local owner, lease = string.match(v, '^(%S+) (%d+)$')
  if owner then
    return owner, tonumber(lease)
  end
  return v, nil
end

-- The first live waiter: drops heads whose client's liveness record is
-- missing or past its deadline. Returns attempt, owner, lease; or nil; or
-- nil, nil, nil, true when more dead heads remain than one call may remove.
local function fair_live_head(K, now_ms)
  for _ = 1, 64 do
    local head = redis.call('ZRANGE', K.q, 0, 0)[1]
    if not head then
      return nil
    end
    local v = redis.call('HGET', K.qo, head)
    if v then
      local owner, lease = fair_entry(v)
      local alive = redis.call('ZSCORE', K.alive, fair_client(owner))
      if alive and tonumber(alive) >= now_ms then
        return head, owner, lease
      end
    end
    redis.call('ZREM', K.q, head)
    redis.call('HDEL', K.qo, head)
  end
  return nil, nil, nil, true
end

-- Tell the waiter now first in line when the new holder's lease ends
-- (`t:<attempt> <pttl>`): it may be sleeping on a claim lease of
-- waiter_timeout or on the previous holder's lease. It moves its sleep bound
-- without a round trip. One waiter, one message.
local function fair_wake_next(K, pttl)
  local head = redis.call('ZRANGE', K.q, 0, 0)[1]
  if head then
    local v = redis.call('HGET', K.qo, head)
    if v then
      redis.call('PUBLISH', K.hold .. ':ch:' .. fair_client(fair_entry(v)),
        't:' .. head .. ' ' .. string.format('%.0f', pttl))
    end
  end
end

-- Hand the free lock to a waiter under a claim lease: min(its lease,
-- waiter_timeout), so a dead head blocks the queue for at most
-- waiter_timeout. Only that waiter's client is told, with the token and the
-- claim lease: the waiter holds the lock from that message on and extends
-- the claim to its own lease in the background (or, if the message came too
-- late to trust, picks it up with fair_acquire). The next waiter in line is
-- told when the claim ends.
local function fair_handoff(K, head, owner, lease, now_us, wt_ms)
  -- The token first: if the counter key is of another type, this fails
  -- before the head leaves the queue.
  local _, stoken = fair_token(K, now_us)
  redis.call('ZREM', K.q, head)
  redis.call('HDEL', K.qo, head)
  local ttl = wt_ms
  if lease and lease < wt_ms then
    ttl = lease
  end
  redis.call('DEL', K.hold)
  redis.call('HSET', K.hold, 'o', owner, 't', stoken, 'n', 1, 'a:' .. head, 1, 'c', head)
  redis.call('PEXPIRE', K.hold, ttl)
  redis.call('PUBLISH', K.hold .. ':ch:' .. fair_client(owner),
    'g:' .. head .. ' ' .. stoken .. ' ' .. string.format('%.0f', ttl))
  fair_wake_next(K, ttl)
end

-- Hand off to the live head if the lock is free and someone waits.
local function fair_pass_on(K, now_ms, now_us, wt_ms)
  local head, owner, lease = fair_live_head(K, now_ms)
  if head then
    fair_handoff(K, head, owner, lease, now_us, wt_ms)
  end
end

-- Queue keys live while waiters keep them alive, then expire.
local function fair_touch(K, ttl_ms)
  redis.call('PEXPIRE', K.q, ttl_ms)
  redis.call('PEXPIRE', K.qo, ttl_ms)
  redis.call('PEXPIRE', K.alive, ttl_ms)
  redis.call('PEXPIRE', K.seq, ttl_ms)
end

-- Keys of another type in the way are reported by name before anything is
-- written. The hold hash is checked by the caller (pcall HGET, which it needs
-- anyway); the queue and the fence here.
local function fair_check_types(K)
  local q = redis.call('TYPE', K.q).ok
  if q ~= 'none' and q ~= 'zset' then
    return redis.error_reply('WRONGTYPE ' .. K.q)
  end
  local f = redis.call('TYPE', K.fence).ok
  if f ~= 'none' and f ~= 'string' then
    return redis.error_reply('WRONGTYPE ' .. K.fence)
  end
  return nil
end
