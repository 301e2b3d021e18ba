-- queue_lib.lua — the rules every queue of waiters shares: whose a waiter
-- is, the first live waiter, and the heartbeat that keeps a client's
-- waiters alive.
--
-- Not a script of its own: the script loader joins it after hold_lib.lua
-- (QUEUE_LIB in deadbolt_core::scripts) for the scripts of queued
-- primitives (the fair lock, the read-write lock's waiting writers, the
-- semaphore).
--
-- A queue is a ZSET of waiters in order (member -> score), an optional
-- hash of their entries (member -> entry text), and a liveness ZSET
-- (client id -> deadline, server ms) that each client's heartbeat keeps
-- fresh for all of its waiters at once (one record per client and queue).
--
-- Every function is O(log n) per waiter it looks at; queue_live_head looks
-- at up to 64.

-- The client id of an owner id '<client id>:<handle id>' (or of a queue
-- member '<client id>:<attempt>').
local function queue_client(owner)
  return string.match(owner, '^([^:]+)')
end

-- Whether a queue's keys want their TTL refreshed to ttl_ms: when queue
-- `q` has less than half of it left, no TTL (-1) or is missing (-2). Queue
-- keys live while waiters keep them alive, then expire, and are only ever
-- lengthened (hold_touch: a client with a short waiter_timeout must not
-- cut the life of a queue that a client with a long one waits in). Every
-- try of a waiter and every heartbeat touches them, so most touches find
-- them with plenty of life left, and a touch that is not due costs one
-- PTTL instead of a PEXPIRE (and perhaps a PTTL) per key. One read of q
-- speaks for every key of the queue as long as its primitive keeps two
-- rules: its keys are always touched together, and none of them can lack
-- a TTL (or have a shorter one) while q has one: the entries' hash is
-- filled and emptied with q, and the liveness ZSET only loses records
-- beside the caller's own (queue_heartbeat), so it is at least as old as q
-- and got every TTL q got. A queue created afresh has no TTL and is
-- touched in full.
local function queue_touch_due(q, ttl_ms)
  return redis.call('PTTL', q) < ttl_ms / 2
end

-- The first live waiter of queue `q` (entries in hash `qo`, or nil for a
-- queue without entries), whose client's record in `alive` is at or past
-- `now_ms`: waiters of silent clients (and entries gone missing) are
-- dropped on the way, up to 64. `client_of(member, entry)` names a waiter's
-- client (nil: drop it). Returns the member, its entry and its client's
-- liveness deadline; nil when the queue is empty; nil and true when more
-- dead waiters remain than one call may remove; or nil, nil, nil and the
-- error reply naming a key of another type. Each key is read (hold_first)
-- before the first waiter is dropped, so that error comes with nothing
-- written. `first`: the caller's own ZRANGE q 0 0 reply, made just before
-- (so the first look costs no read of q), or nil.
local function queue_live_head(q, qo, alive, now_ms, client_of, first)
  for _ = 1, 64 do
    local top, err = first, nil
    first = nil
    if not top then
      top, err = hold_first(q, 'ZRANGE', q, 0, 0)
    end
    if err then
      return nil, nil, nil, err
    end
    local head = top[1]
    if not head then
      return nil
    end
    local v = nil
    if qo then
      v, err = hold_first(qo, 'HGET', qo, head)
      if err then
        return nil, nil, nil, err
      end
    end
    local c = (v or not qo) and client_of(head, v)
    local dl = nil
    if c then
      dl, err = hold_first(alive, 'ZSCORE', alive, c)
    else
      -- No client to look up: the liveness key is still read once, so
      -- that its type is known before the drop below writes.
      local _; _, err = hold_first(alive, 'ZCARD', alive)
    end
    if err then
      return nil, nil, nil, err
    end
    if dl and tonumber(dl) >= now_ms then
      return head, v, tonumber(dl)
    end
    redis.call('ZREM', q, head)
    if qo then
      redis.call('HDEL', qo, head)
    end
  end
  return nil, true
end

-- The heartbeat of client ARGV[1] with waiter timeout ARGV[2] (ms) over
-- every group of `width` keys in KEYS (one queued primitive each). For each
-- group K = keys(base), the queue K[queue] is read first (ZCARD, with
-- pcall): a key of another type, or an empty queue, skips the group with
-- nothing written (nobody waits there to keep alive: a round sent before
-- the client's last waiter there was served, or before the primitive was
-- deleted, would only make the liveness key anew; a key of another type
-- is reported by its waiters' own tries). Then `refused(K, now_ms, n)`
-- (optional; n the queue's length) reads with pcall every other key of
-- the group that `touch` or `after` will touch, but the liveness key, and
-- lets the group through with nil or false, or skips it with an error
-- reply (nothing written). For a group let through, the client's liveness
-- record in K[alive] is set to now + waiter timeout (the first touch of
-- K[alive], and the group's first write: a key of another type there skips
-- the group the same way), records of clients silent for a whole window
-- go, `touch(K, ttl)` keeps the queue's keys alive for three windows, and
-- `after(K, now_ms, now_us, wt)` does the primitive's own work (a hand-off
-- nobody else would notice). A key the heartbeat never touches is not
-- read. No TYPE is sent. Returns how many groups were refreshed.
local function queue_heartbeat(width, keys, queue, alive, refused, touch, after)
  local wt = tonumber(ARGV[2])
  local now_ms, now_us = hold_now()
  local done = 0
  for i = 0, #KEYS / width - 1 do
    local K = keys(i * width)
    local n, skip = hold_first(K[queue], 'ZCARD', K[queue])
    if not skip then
      skip = n == 0 or (refused and refused(K, now_ms, n))
    end
    if not skip then
      local _, err = hold_first(K[alive], 'ZADD', K[alive], now_ms + wt, ARGV[1])
      -- Another error (OOM) fails the call, as a plain call would.
      if err and not string.find(err.err, '^WRONGTYPE') then
        return err
      end
      skip = err
    end
    if not skip then
      redis.call('ZREMRANGEBYSCORE', K[alive], '-inf', now_ms - wt)
      touch(K, wt * 3)
      if after then
        after(K, now_ms, now_us, wt)
      end
      done = done + 1
    end
  end
  return done
end
