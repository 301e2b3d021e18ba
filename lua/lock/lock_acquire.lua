-- lock_acquire.lua — take, re-enter or replay one attempt on a reentrant lock.
-- (msg_lib.lua and hold_lib.lua come first: type checks and fencing
-- tokens are in hold_lib.lua.)
--
-- KEYS[1]  hold hash  <ns>:{name}:lock
--          fields: o = owner id, t = fencing token, n = hold count,
--                  a:<attempt> = 1 for every hold currently counted in n,
--                  s = the largest sequence number of those attempts
--                      (hold_seq, hold_is_stale in hold_lib.lua),
--                  x = 1 once a waiter of another client failed a try while
--                      the lock was held (read by lock_pass.lua and
--                      lock_release.lua)
--                  w = 1 once a waiter of the holder's own client failed
--                      a try, m = 1 once a MultiLock did (multi_acquire.lua):
--                      the release then publishes (lock_release.lua), which
--                      it skips when no mark is set
--                  d:<client id> = the registration (hold_lib.lua's
--                      reg_entry: the owner's handle id, attempt, claim,
--                      secret, server ms) of the waiter a client
--                      registered on its failed try (one per client): the
--                      release grants the lock to it inside the release
--                      (lock_release.lua); gone with the hash. Every value
--                      stays within 64 bytes, so the hash keeps Redis's
--                      compact listpack encoding
-- KEYS[2]  fencing counter of the name's hash slot  <ns>:{<slot tag>}:fence
--          (string, no TTL; shared by the slot's names: hold_next_token)
-- KEYS[3]  waiting clients  <ns>:{name}:lock:waiters  (ZSET: client id ->
--          server µs of its first failed try not yet answered by a release
--          that named it, so two clients queued within one ms keep their
--          order; TTL the longest lease its waiters asked for)
-- ARGV[1]  owner id  <client id>:<handle id>
-- ARGV[2]  attempt id (unique per acquire call; retries of the call reuse it)
-- ARGV[3]  lease in milliseconds (integer, 1 .. 2^53-1)
-- ARGV[4]  'try' (one attempt), 'wait' (the first try of an acquire that
--          waits if busy) or 'again' (a later try of that acquire)
-- ARGV[5]  the call's entry secret (random, 1 .. 2^53-1): stored with the
--          registration this call makes, echoed by a grant to it
-- ARGV[6]  the handle's stale-hold bound (hold_is_stale in hold_lib.lua):
--          '0' when it may hold this lock (a re-entry is expected) or has
--          no bound, else this attempt's sequence number
--          (ARGV[1..6] are the acquire prefix core always sends, in this
--          order, whatever the spec: deadbolt-core's acquire module)
-- ARGV[7]  claim lease in ms of a grant made to this waiter by a release
--
-- Reply:
--   {1, token, pttl}  granted: a fresh hold, a re-entry, or a replay of an attempt
--                     that was already granted (pttl is the key's TTL after the call)
--   {0, pttl}         held by another owner; pttl tells the waiter how long
--                     to sleep at most
--   {2, pttl, fresh, secret}  held by another client, and this attempt is
--                     its client's registered waiter (fresh = 1: registered
--                     by this call, with this call's secret; 0: by an
--                     earlier call of the attempt, whose secret it is); a
--                     release grants to it (g: message, lock_release.lua),
--                     and the attempt's release clears the registration
--   error WRONGTYPE <key>  a key of another type is in the way; nothing written
--   error BADVALUE <key> ...  the fencing counter is not a usable integer;
--                     nothing written
--   any other error (OOM under maxmemory) is passed through as Redis gave it;
--   it comes from the first write, so nothing is written then either.
--
-- O(1) for the hash, O(log n) for the waiting clients. The fresh grant, the
-- hot path, runs five commands (HGET, TIME, SET ... GET of the fencing
-- counter, HSET, PEXPIRE). A failed waiting try of another client
-- registers its client's waiter: HSETNX, and an HGET when one is
-- registered already.

-- pcall: a key of another type comes back as an error table, reported with
-- its name before anything is written (cheaper than a TYPE call first).
local owner = redis.pcall('HGET', KEYS[1], 'o')
if type(owner) == 'table' then
  return hold_named_error(KEYS[1], owner)
end
-- A stale hold of this owner (hold_is_stale) is dropped, not re-entered:
-- a repair, the only write before the checks below; the lock is free.
if hold_is_stale(KEYS[1], owner, ARGV[1], ARGV[2], ARGV[6]) then
  redis.call('DEL', KEYS[1])
  owner = false
end

if not owner then
  -- Free: a fresh grant advances the fencing counter (hold_advance_fence):
  -- a key of another type or a value out of range is refused with nothing
  -- written (an unusable value is put back).
  local token, err = hold_grant(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])
  if err then
    return err
  end
  if ARGV[4] == 'again' then
    -- A client that takes the lock after waiting leaves the queue of
    -- waiting clients: a later release must not name it while it no
    -- longer waits (best effort, as the queueing). A first try has not
    -- queued (unless another waiter of its client did, which still waits).
    redis.pcall('ZREM', KEYS[3], string.match(ARGV[1], '^(.*):'))
  end
  return {1, token, ARGV[3]}
end

if owner ~= ARGV[1] then
  -- Another owner holds it: tell the caller how long the hold can last at
  -- most. A waiter of another client (owner ids are <client>:<handle>)
  -- marks the hold (x), so the holder's client stops handing the lock from
  -- one of its own waiters to the next after its budget, and queues its
  -- client. A waiter of the holder's own client marks it too (w): its
  -- client hands the lock to waiters it knows of locally, but one that
  -- came after the unlock looked hears of the release by its message,
  -- which the release sends only for a marked hold. Best effort (pcall):
  -- a mark refused under maxmemory leaves the waiter to its timer.
  local pttl = redis.call('PTTL', KEYS[1])
  if ARGV[4] ~= 'try' then
    local client = string.match(ARGV[1], '^(.*):')
    if string.match(owner, '^(.*):') ~= client then
      redis.pcall('HSET', KEYS[1], 'x', 1)
      -- Queue this caller's client (once: NX keeps its place) so that a
      -- release grants to the client that has waited longest. Best effort
      -- (pcall): a queue refused under maxmemory or of another type must
      -- not fail the wait; the release then wakes one waiter per client.
      local now_ms, now_us = hold_now()
      if redis.pcall('ZADD', KEYS[3], 'NX', now_us, client) == 1 then
        hold_touch({KEYS[3]}, ARGV[3])
      end
      -- One waiter per client is registered for a grant inside the
      -- release: the first to fail a try, until it leaves or is served.
      -- Best effort as the marks (a refused write: no registration; the
      -- release then wakes one waiter per client, as without one).
      -- (The field names the client: the entry keeps the handle id.)
      local handle = string.sub(ARGV[1], #client + 2)
      local fresh, secret = reg_register(KEYS[1], 'd:' .. client,
        reg_entry(handle, ARGV[2], ARGV[3], ARGV[7], ARGV[5], now_ms), ARGV[2], ARGV[5])
      if fresh then
        return {2, pttl, fresh, tonumber(secret)}
      end
    else
      redis.pcall('HSET', KEYS[1], 'w', 1)
    end
  end
  return {0, pttl}
end
-- Re-entry by the same owner, or a replay of an attempt already granted
-- (also of a grant a release made to this attempt under its claim, whose
-- message was not usable: too late, or lost with a connection; the replay
-- stretches the claim to the lease).
return hold_reenter(KEYS[1], ARGV[2], ARGV[3])
