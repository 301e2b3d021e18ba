-- fair_lib.lua — functions shared by the fair lock's scripts.
--
-- Not a script of its own: the script loader joins msg_lib.lua,
-- hold_lib.lua, queue_lib.lua (deadbolt-core's) and this file before
-- fair_acquire.lua, fair_release.lua, fair_force_unlock.lua,
-- fair_heartbeat.lua and fair_queue.lua, so the queue rules live in one
-- place (the walk to the live head and the heartbeat are queue_lib.lua's).
--
-- Keys of one fair lock (all under the hash tag {name}), as a table K:
--   K.hold   <ns>:{name}:fair          hold hash: o owner, t token, n count,
--                                      a:<attempt> per hold, s newest
--                                      attempt's number (hold_is_stale),
--                                      c = attempt holding an unclaimed
--                                      hand-off
--   K.fence  <ns>:{<slot tag>}:fence   the slot's fencing counter (string,
--                                      no TTL; see hold_next_token)
--   K.q      <ns>:{name}:fair:q        queue ZSET: attempt -> enqueue seq
--   K.qo     <ns>:{name}:fair:qo       hash: attempt -> its registration
--                                      (reg_entry in hold_lib.lua; claim =
--                                      min(lease, the waiter's waiter
--                                      timeout); extra word: the lease)
--   K.alive  <ns>:{name}:fair:alive    ZSET: client id -> liveness deadline
--                                      (server clock, ms)
--   K.seq    <ns>:{name}:fair:seq      enqueue counter (server order)
-- Channel of a client's waiters: <hold>:ch:<client id>; messages
-- (msg_lib.lua builds each)
--   g:<attempt> <token> <ttl> <secret>
--                              hand-off: the lock is yours with this token
--                              under a claim lease of ttl ms. The secret is
--                              the one stored with the queue entry: the
--                              waiter accepts only a grant for its current
--                              entry (not a late one for an entry it already
--                              lost), and a client that may PUBLISH but not
--                              read the queue cannot forge one.
--   t:<attempt> <pttl>         you are next; the holder's lease ends in pttl ms
--   t:<attempt>                try again now
--
-- Every function is O(log n) in the queue length, except fair_live_head,
-- which removes up to 64 dead heads (O(log n) each) per call.

-- A queue entry's value (a registration, reg_read in hold_lib.lua, whose
-- claim is min(the waiter's lease, its own waiter_timeout): its claim
-- lease on a hand-off; its extra word the lease it asked for, for
-- inspection): owner id, claim, the entry's secret and that lease. A value
-- that is no registration (written by something else) reads as an owner
-- alone, with secret '0' (no grant can match it).
local function fair_entry(v)
  local e = reg_read(v)
  if not e then
    return v, nil, '0'
  end
  return e.owner, e.claim, e.secret, tonumber(e.extra)
end

-- The keys, with their types for hold_check_keys: the scripts off the hot
-- path (force-unlock, the queue's listing) check them all before their
-- first write; fair_acquire.lua, fair_release.lua and the heartbeat read
-- each key they touch with pcall instead (hold_first, hold_first_each),
-- with no TYPE call.
local function fair_keys(base)
  return hold_keys(base, {'hold', 'fence', 'q', 'qo', 'alive', 'seq'},
    'hash string zset hash zset string')
end

-- The first live waiter (queue_live_head): drops heads whose client's
-- liveness record is missing or past its deadline. Returns attempt and its
-- entry (owner, lease, waiter timeout, secret); or nil; or nil and true
-- when more dead heads remain than one call may remove; or nil, nil and
-- the error reply naming a key of another type (q, qo or alive: read
-- before anything is dropped). `first` as for queue_live_head.
local function fair_live_head(K, now_ms, first)
  local head, v, _, err = queue_live_head(K.q, K.qo, K.alive, now_ms, function(_, e)
    return queue_client(fair_entry(e))
  end, first)
  if not head then
    return nil, v, err
  end
  return head, {fair_entry(v)}
end

-- Tell the waiter now first in line when the new holder's lease ends
-- (`t:<attempt> <pttl>`): it may be sleeping on a claim lease or on the
-- previous holder's lease. It moves its sleep bound without a round trip.
-- One waiter, one message. Sent when a waiter took the lock by its own
-- call (a lease ran out, or it picked up a hand-off that came too late),
-- which is rare; a hand-off does without it (fair_handoff). Returns nil,
-- or the error reply naming q or qo when one is of another type (read
-- first: nothing is published then).
local function fair_wake_next(K, pttl)
  local top, err = hold_first(K.q, 'ZRANGE', K.q, 0, 0)
  if err then
    return err
  end
  local head = top[1]
  if head then
    local v
    v, err = hold_first(K.qo, 'HGET', K.qo, head)
    if err then
      return err
    end
    if v then
      msg_publish(K.hold .. ':ch:' .. queue_client(fair_entry(v)), msg_turn(head, pttl))
    end
  end
end

-- Hand the free lock to waiter `head` (entry e) under a claim lease:
-- min(its lease, its own waiter_timeout), so a dead head blocks the queue
-- for at most its waiter_timeout. Only that waiter's client is told, with
-- the token, the claim lease and the entry's secret: the waiter holds the
-- lock from that message on and extends the claim to its own lease in the
-- background (or, if the message came too late to trust, picks it up with
-- fair_acquire). Nobody else is told: the next waiter in line sleeps on,
-- and the hand-off that ends this hold reaches it. Should the head die
-- with its claim, the claim runs out and the next heartbeat of any client
-- with a waiter in the queue (every third of its waiter_timeout;
-- fair_heartbeat.lua) hands the free lock on: the queue is blocked for at
-- most the claim plus that period. (Telling the next waiter when the claim
-- ends would save that period after a crash, at one more message on every
-- hand-off; measured, that message cost about a tenth of the contended
-- throughput.)
-- `last` is the fencing counter, already read and checked (and K.hold
-- checked for its type).
local function fair_handoff(K, head, e, last, now_us, wt_ms)
  -- A write that changes nothing, before the message: under maxmemory a
  -- script's first write is the only one refused, so with this one made,
  -- the writes after the message are not refused, and a waiter is never
  -- told it holds a lock whose hold was then not recorded (the release's
  -- first touch of the queue is a read since its type checks went, so
  -- nothing else has written by now; tests/oom.rs caught it).
  redis.call('HDEL', K.hold, '-')
  local owner, ttl, secret = e[1], e[2] or wt_ms, e[3]
  local _, stoken = hold_token(last, now_us)
  -- Published before the writes (the script is atomic, so nobody sees the
  -- order): a user whose ACL forbids the channel gets NOPERM with nothing
  -- changed.
  msg_publish(K.hold .. ':ch:' .. queue_client(owner), msg_grant_line(head, stoken, ttl, secret))
  redis.call('SET', K.fence, stoken)
  redis.call('ZREM', K.q, head)
  redis.call('HDEL', K.qo, head)
  redis.call('DEL', K.hold)
  hold_create(K.hold, owner, stoken, head, 'c', head)
  redis.call('PEXPIRE', K.hold, ttl)
end

-- Hand off to the live head if the lock is free and someone waits. When
-- the fencing counter is unusable (BADVALUE) nobody can be granted the
-- lock: the head is told to try again, and its acquire reports the error.
-- Returns true when it handed the lock on (the old hold hash is replaced),
-- false when it did not, or nil and the error reply naming a key of
-- another type (the counter, q, qo or alive): the counter is read first
-- and the queue's keys before any dead head is dropped, so nothing is
-- written then. `first`: the caller's ZRANGE q 0 0 reply, or nil
-- (queue_live_head).
local function fair_pass_on(K, now_ms, now_us, wt_ms, first)
  local last, ferr = hold_read_fence(K.fence)
  if ferr and string.find(ferr.err, '^WRONGTYPE') then
    return nil, ferr
  end
  local head, e, err = fair_live_head(K, now_ms, first)
  if err then
    return nil, err
  end
  if not head or e == true then
    return false
  end
  if ferr then
    msg_publish(K.hold .. ':ch:' .. queue_client(e[1]), msg_turn(head))
    return false
  end
  fair_handoff(K, head, e, last, now_us, wt_ms)
  return true
end

-- Keep the queue's four keys alive for ttl_ms (queue_touch_due: the
-- enqueue counter, never deleted, is at least as old as q too).
local function fair_touch(K, ttl_ms)
  if queue_touch_due(K.q, ttl_ms) then
    hold_touch({K.q, K.qo, K.alive, K.seq}, ttl_ms)
  end
end
