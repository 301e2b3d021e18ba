-- lock_release.lua — release one hold of a reentrant lock, named by its attempt id.
-- (msg_lib.lua and hold_lib.lua come first: messages, holds.)
--
-- Used by unlock, by the background releaser for dropped guards, and for acquire
-- attempts that were cancelled or ended Indeterminate. Idempotent: the attempt's
-- field is removed on the first run, so a replay finds nothing to release.
--
-- KEYS[1]  hold hash  <ns>:{name}:lock  (layout in lock_acquire.lua)
-- KEYS[2]  optional: waiting clients  <ns>:{name}:lock:waiters (ZSET, layout
--          in lock_acquire.lua); composites that release plain locks in
--          their own scripts leave it out and wake one waiter per client
-- KEYS[3]  optional (with KEYS[2]): fencing counter of the name's slot
--          <ns>:{<slot tag>}:fence, for a grant to a registered waiter
-- ARGV[1]  attempt id of the hold
-- ARGV[2]  unlock channel  <ns>:{name}:lock:ch, the one channel every
--          waiter of the lock listens on
-- ARGV[3]  optional (with KEYS[3]): the id of the attempt's client, whose
--          registration (d:<client>, lock_acquire.lua) and place in the
--          waiting clients go when the attempt leaves without the lock
--
-- Reply:
--   0  nothing released: the hold expired, was taken over, or was already released
--   1  an inner hold released; the lock is still held (its TTL is left alone)
--   2  the last hold released: key deleted, and '1' published (one waiter
--      per client tries) when a waiter marked the hold (x, w or m, see
--      lock_acquire.lua) and no other client's registered waiter could
--      take it; an unmarked hold had nobody waiting for it, and its
--      release sends nothing
--   4  the last hold released, and the lock went to the waiter
--      registered by the client that has waited longest (other than the
--      releasing one), inside this call: the hash now records that
--      waiter's hold (owner, attempt, a fresh token, count 1) with the TTL
--      of its claim, 'g:<attempt> <token> <ttl> <secret> <claim>' is
--      published on ARGV[2] (ttl = claim + how long the registration
--      waited: the waiter counts it from the request that registered it),
--      and 't:<attempt> <claim>' there for the registered waiter of the
--      client queued next (it tries when the claim ends at the latest: the
--      taker may be gone). Both name their waiter: other clients hear and
--      ignore them. The releasing client is told nothing: its unlock wakes
--      one of its own waiters (if any) to try, which registers it
-- A published grant stands: the release never takes it back, whoever did
-- or did not hear it. PUBLISH's receiver count cannot tell: it counts the
-- subscribers of this server alone (SPUBLISH: of this node), while one at
-- a replica, or at a former master after a failover, hears the grant
-- through replication and takes it. A client that died while registered
-- holds the lock for the claim its registration carries, no longer; the
-- client queued next hears when the claim ends (t:) and tries then.
--
-- O(log n) in the waiting clients.

local r, marked, holder, waited, multi = hold_release(KEYS[1], ARGV[1], 'x', 'o', 'w', 'm')
if r ~= 2 then
  -- 0: not our hold (expired, taken over, never granted, released already);
  -- 1: an inner unlock of a re-entered lock (the outer holds keep their TTL).
  if r == 0 and ARGV[3] then
    -- An attempt that leaves without the lock takes its client's
    -- registration with it, or the next release would grant to nobody,
    -- and its client's place in the queue: a release's hint (t:) names
    -- the registered attempt, which the client's other waiters ignore;
    -- the next of them queues and registers anew on its try.
    if reg_drop(KEYS[1], 'd:' .. ARGV[3], ARGV[1]) and KEYS[2] then
      redis.pcall('ZREM', KEYS[2], ARGV[3])
    end
  end
  return r
end
-- The last hold.
-- Only a hold that a waiter of another client found busy (x) looks at the
-- queue of clients: an uncontended release does not. The releasing client
-- is skipped (its waiters were served by local hand-offs; they queue
-- again if they still wait): at most two clients are looked at, O(log n)
-- each.
if KEYS[2] and marked then
  -- (Defined here: an unmarked release, the common one, makes no closure.)
  -- The registration (d:<client>, reg_read) of a waiting client; nil
  -- without one.
  local function registration(c)
    local e = redis.pcall('HGET', KEYS[1], 'd:' .. c)
    if type(e) == 'string' then
      return reg_read(e)
    end
  end
  -- Grant the lock to the registered waiter (owner o, attempt a) of client
  -- `named`, whose grant message was just published: the registered waiter
  -- of the client that waits next hears when the claim ends at the latest,
  -- in case the taker is gone (a client queued without one has its waiters
  -- sleep to their own bounds); the hash records the new hold with the
  -- claim's TTL.
  local function grant_to(named, o, a, stoken, claim)
    local after = redis.pcall('ZRANGE', KEYS[2], 0, 0)
    local next_client = type(after) == 'table' and after[1]
    local next_reg = next_client and registration(next_client)
    if next_reg then
      msg_publish(ARGV[2], msg_turn(next_reg.attempt, claim))
    end
    -- A waiting MultiLock listens on the unlock channel alone: it tries
    -- (and marks the new hold again if it is still busy for it).
    if multi then
      msg_publish(ARGV[2], msg_one())
    end
    -- x stays while other clients wait (one is queued next, or the
    -- releasing client's own waiters, w: they are another client's now).
    local more = waited or next_client
    redis.call('HDEL', KEYS[1], 'a:' .. ARGV[1], 'd:' .. named, 'w', 'm', more and 'w' or 'x')
    redis.call('HSET', KEYS[1], 'o', o, 't', stoken, 'n', '1', 'a:' .. a, '1', 's', hold_seq(a))
    redis.call('PEXPIRE', KEYS[1], claim)
  end
  local me = string.match(holder, '^(.*):')
  for _ = 1, 2 do
    local head = redis.pcall('ZPOPMIN', KEYS[2])
    if type(head) ~= 'table' or head.err or not head[1] then
      break
    end
    if head[1] ~= me then
      local named = head[1]
      -- The named client registered a waiter: the lock is its now, in
      -- place of a message and that waiter's try (one hop, not two). The
      -- fencing counter is advanced first, once, the first write: when it
      -- cannot be (a key of another type, a value out of range, OOM), or
      -- the client registered nobody (its registration was refused, or
      -- went with its attempt), the release goes on as without a queue:
      -- one waiter per client tries. The other clients' registrations
      -- stay in the hash. Published before the writes, as below.
      local e = KEYS[3] and registration(named)
      if not e then
        break
      end
      local now_ms, now_us = hold_now()
      local _, stoken, err = hold_advance_fence(KEYS[3], now_us)
      if err then
        break
      end
      local gmsg, c = reg_grant(e, stoken, now_ms)
      -- On the one channel: the message names its waiter. The entry
      -- keeps the owner's handle; its client is the field's.
      msg_publish(ARGV[2], gmsg)
      grant_to(named, named .. ':' .. e.owner, e.attempt, stoken, c)
      return 4
    end
  end
end
-- Published before the delete (the script is atomic, so no waiter can look
-- in between): a user whose ACL forbids the channel gets NOPERM with the
-- hold untouched, instead of a hold deleted with nobody woken. Only for a
-- marked hold: every waiter marks the hold it fails a try on (a waiter
-- that finds the lock free takes it), so an unmarked one has nobody to
-- wake, and a PUBLISH costs the server (and each replica, and the AOF).
if marked or waited or multi then
  msg_publish(ARGV[2], msg_one())
end
redis.call('DEL', KEYS[1])
return 2
