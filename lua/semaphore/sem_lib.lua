-- sem_lib.lua — functions shared by the semaphore's scripts.
--
-- Not a script of its own: the script loader joins msg_lib.lua,
-- hold_lib.lua, queue_lib.lua, lease_lib.lua (deadbolt-core's) and this
-- file before every sem_*.lua script. Each hold keeps its own lease
-- (lease_lib.lua); the waiters are a queue (queue_lib.lua).
--
-- Keys of one semaphore (all under the hash tag {name}), as a table K:
--   K.s      <ns>:{name}:sem         hash: p = permits set (absent: never
--                                    set), seq = enqueue counter. No TTL:
--                                    the configuration outlives its holders.
--   K.h      <ns>:{name}:sem:h       ZSET hold attempt -> lease deadline
--                                    (server ms): every hold its own lease
--   K.hn     <ns>:{name}:sem:hn      hash hold attempt -> '<owner id> <n>',
--                                    and '#t' -> permits taken by the holds
--                                    in K.h. Kept beside the holds, not in
--                                    K.s: when the last lease ends, Redis
--                                    expires K.h and K.hn together, and the
--                                    count goes with the holds it counted.
--   K.q      <ns>:{name}:sem:q       ZSET waiting attempt -> enqueue seq
--   K.qo     <ns>:{name}:sem:qo      hash waiting attempt -> its
--                                    registration (reg_entry in
--                                    hold_lib.lua: owner, attempt, claim,
--                                    secret, the server ms it queued, and
--                                    n, the permits wanted)
--   K.alive  <ns>:{name}:sem:alive   ZSET client id -> liveness deadline of
--                                    its waiters (server ms)
-- K.h/K.hn live as long as the longest lease; K.q/K.qo/K.alive 3 ×
-- waiter_timeout past the last heartbeat.
-- Channel of a client's waiters: <ns>:{name}:sem:ch:<client id>
-- (msg_lib.lua builds each message);
--   g:<attempt> 0 <ttl> <secret> <claim>
--                 the permits are yours (granted inside the release), under
--                 a claim lease of <claim> ms that the waiter extends to its
--                 lease; ttl = claim + how long the entry waited, the
--                 validity counted from the request that queued it
--   *             every waiter of the client on this semaphore tries again
--                 now: the semaphore was deleted with their queue entries
--                 (sem_delete.lua), so they queue anew
--
-- The policy (written here once): the oldest live waiter's demand is
-- reserved. A request is granted when available − (the head waiter's n,
-- unless it is the head) ≥ n. So single-permit requests can use permits
-- beyond what the head needs, but never the head's share: a request for
-- many permits is served once enough come back, however many small
-- requests arrive. A release (or added permits) grants the permits to
-- exactly the waiters, from the head on, whose demands fit in what is
-- available, and no more, inside the release (one hop: the waiter takes
-- them from the message, without a try of its own).
--
-- O(log n) per holder or waiter touched; purges and wakes handle at most 64
-- entries per call.

-- The keys, with their types for hold_check_keys (TYPE, for the scripts
-- off the hot path: deletion, permits, inspection, a part's release). The
-- acquire, the release, the renewal and the heartbeat read each key they
-- touch with pcall on its first touch instead (hold_first), before their
-- first write, and send no TYPE.
local function sem_keys(base)
  return hold_keys(base, {'s', 'h', 'hn', 'q', 'qo', 'alive'},
    'hash zset hash zset hash zset')
end

-- A queue entry (a registration, reg_read in hold_lib.lua, with n as its
-- extra word) or a hold's '<owner> <n>' (K.hn): owner, n, and for a queue
-- entry its claim, secret (a string) and the server ms it queued.
local function sem_entry(v)
  local e = reg_read(v)
  if e and e.extra then
    return e.owner, tonumber(e.extra), e.claim, e.secret, e.at
  end
  local owner, n = string.match(v or '', '^(%S+) (%d+)$')
  return owner, tonumber(n) or 0
end

-- Forget hold `a` and give its permits back (`v`: its value in K.hn as the
-- caller read it, false when missing; nil to read it here). Returns the
-- permits taken by the holds left (the count after the change), or nil
-- when the hold had no entry (nothing to give back).
local function sem_drop_hold(K, a, v)
  if v == nil then
    v = redis.call('HGET', K.hn, a)
  end
  local _, n = sem_entry(v)
  redis.call('ZREM', K.h, a)
  redis.call('HDEL', K.hn, a)
  if n > 0 then
    return redis.call('HINCRBY', K.hn, '#t', string.format('%.0f', -n))
  end
end

-- Holds whose lease ended give their permits back (up to 64 per call).
-- Returns lease_purge's values: how many went, nil, whether no hold is
-- left, and the earliest deadline when nothing ended; or nil and the
-- error reply naming K.h. Callers read K.hn first (the drops write it).
local function sem_purge(K, now_ms)
  return lease_purge(K.h, K.hn, now_ms, function(a) sem_drop_hold(K, a) end)
end

-- Permits free now (may be negative after reduce_permits while holders
-- still hold more than the new total), and whether the semaphore was set.
-- `p`: the permits set as the caller read them from K.s (false when
-- missing), or nil to read them here.
local function sem_available(K, p)
  if p == nil then
    p = redis.call('HGET', K.s, 'p')
  end
  local t = redis.call('HGET', K.hn, '#t')
  return (tonumber(p) or 0) - (tonumber(t) or 0), p ~= false
end

-- Until the earliest lease ends (a waiter's sleep bound: its permits come
-- back then), or -1 without holders. `dl`: that deadline (server ms) when
-- the caller read it since K.h last changed (sem_purge gives it), else nil
-- to read it here.
local function sem_next_expiry(K, now_ms, dl)
  if not dl then
    dl = redis.call('ZRANGE', K.h, 0, 0, 'WITHSCORES')[2]
    if dl == nil then
      return -1
    end
  end
  return math.max(tonumber(dl) - now_ms, 1)
end

-- Whether the waiters of `owner`'s client are alive at now_ms. `dl`: its
-- record in K.alive as the caller read it (false when missing), or nil to
-- read it here.
local function sem_alive(K, owner, now_ms, dl)
  if dl == nil then
    dl = owner and redis.call('ZSCORE', K.alive, queue_client(owner))
  end
  return owner and dl and tonumber(dl) >= now_ms
end

local function sem_drop_waiter(K, a)
  redis.call('ZREM', K.q, a)
  redis.call('HDEL', K.qo, a)
end

-- The first live waiter and its demand; drops dead ones on the way (64).
-- Or nil, 0, nil and whether waiters are left (more dead ones than one call
-- drops: false when the queue is empty); or nil, 0 and the error reply
-- naming q, qo or alive (each read with pcall before any drop:
-- queue_live_head).
local function sem_live_head(K, now_ms)
  local head, v, _, err = queue_live_head(K.q, K.qo, K.alive, now_ms, function(_, e)
    local owner = sem_entry(e)
    return owner and queue_client(owner)
  end)
  if not head then
    return nil, 0, err, v == true
  end
  local _, n = sem_entry(v)
  return head, n
end

-- Grant waiter `a` (entry fields as sem_entry gives them) its n permits
-- under its claim (at most its lease), and tell it (published first: a
-- refused PUBLISH leaves everything as it was). `fresh` and `covered` as
-- for sem_wake.
local function sem_grant(K, a, owner, n, claim, secret, ms, now_ms, fresh, covered)
  local msg, c = reg_grant({attempt = a, claim = claim, secret = secret, at = ms}, '0', now_ms)
  msg_publish(K.s .. ':ch:' .. queue_client(owner), msg)
  local sn = string.format('%.0f', n)
  redis.call('ZADD', K.h, now_ms + c, a)
  redis.call('HSET', K.hn, a, owner .. ' ' .. sn)
  redis.call('HINCRBY', K.hn, '#t', sn)
  -- Keys that expire at `covered` or later already outlast the claim.
  if fresh or not covered or now_ms + c > covered then
    lease_added(K.h, K.hn, now_ms + c, fresh)
  end
  sem_drop_waiter(K, a)
end

-- Serve the waiters, from the head on, whose demands fit in `avail`: each
-- is granted its permits (sem_grant). The first
-- that does not fit stops the walk (it is the one the permits are kept
-- for). Dead waiters met on the way are dropped. `list`: the first 64 of
-- K.q as the caller read them, or anything else to read them here (callers
-- pass sem_available(K) last, whose second value is a boolean). `fresh`:
-- the caller saw no holds left (lease_removed deleted their keys), so the
-- first grant's keys have no TTL yet (lease_added). `covered`: a lease
-- deadline (server ms) that K.h and K.hn are known to expire no earlier
-- than (one added to them before, the caller's own or the one it
-- released: lease_added never shortens their expiry), or nil: a grant
-- whose claim ends by then leaves their expiry alone (most do: a claim
-- is a waiter timeout, a lease usually longer). `head`: what the caller
-- read of list's first waiter since, {v = its entry in K.qo, dl = its
-- client's record in K.alive} (false where missing), or nil.
local function sem_wake(K, now_ms, avail, list, fresh, covered, head)
  if avail <= 0 then
    return
  end
  if type(list) ~= 'table' then
    list = redis.call('ZRANGE', K.q, 0, 63)
  end
  local used = 0
  for i, a in ipairs(list) do
    local known = i == 1 and head or nil
    local v
    if known then
      v = known.v
    else
      v = redis.call('HGET', K.qo, a)
    end
    local owner, n, claim, secret, ms = sem_entry(v)
    -- An entry that is no registration (written by something else) has
    -- nobody to grant to: it goes as a dead waiter's does.
    if not claim or not sem_alive(K, owner, now_ms, known and known.dl) then
      sem_drop_waiter(K, a)
    elseif used + n <= avail then
      used = used + n
      sem_grant(K, a, owner, n, claim, secret, ms, now_ms, fresh, covered)
      fresh = false
    else
      return
    end
    if used >= avail then
      return
    end
  end
end

-- The opening of most scripts: hold_open with this semaphore's keys.
local function sem_open(base)
  return hold_open(sem_keys, base)
end
