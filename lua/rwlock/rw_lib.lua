-- rw_lib.lua — functions shared by the read-write lock's scripts.
--
-- Not a script of its own: the script loader joins msg_lib.lua,
-- hold_lib.lua, queue_lib.lua, lease_lib.lua (deadbolt-core's) and this
-- file before every rw_*.lua script. Each read hold keeps its own lease
-- (lease_lib.lua); the waiting writers are a queue (queue_lib.lua).
--
-- Keys of one read-write lock (all under the hash tag {name}), as a table K:
--   K.w      <ns>:{name}:rw          the writer's hold hash, laid out as a
--                                    Lock's (o owner, t token, n count,
--                                    s, a:<attempt> per hold); TTL = its
--                                    lease. Also the registrations of the
--                                    readers waiting for it (or for a
--                                    waiting writer): q:<attempt> = its
--                                    registration (reg_entry in
--                                    hold_lib.lua), and the mark q = 1
--                                    while any may be there (read in the
--                                    release's one HMGET); without a
--                                    writer the hash holds only those,
--                                    with a TTL past the registered
--                                    readers' sleep bounds
--   K.fence  <ns>:{<slot tag>}:fence   the slot's fencing counter (string,
--                                      no TTL; see hold_next_token)
--   K.r      <ns>:{name}:rw:r        ZSET reader attempt -> lease deadline
--                                    (server ms): each read hold its own lease
--   K.ro     <ns>:{name}:rw:ro       hash reader attempt -> owner id, and
--                                    '#<owner id>' -> that owner's read holds
--   K.ww     <ns>:{name}:rw:ww       ZSET '<client id>:<attempt>' of waiting
--                                    writers -> when they started waiting
--   K.alive  <ns>:{name}:rw:alive    ZSET client id -> liveness deadline of
--                                    its waiting writers (server ms)
-- K.r and K.ro live as long as the longest reader's lease; K.ww and K.alive
-- 3 × waiter_timeout past the last heartbeat.
-- Channel <ns>:{name}:rw:ch, messages (msg_lib.lua builds each):
--   g:<attempt> 0 <ttl> <secret> <claim>, one line per reader
--       the registered readers were admitted, inside a writer's release
--       (or the give-up of the last waiting writer): each holds a read
--       hold under its claim from then on, which it extends to its lease
--       (reg_grant in hold_lib.lua); one message for them all
--   *        the writer released and admitted nobody: every waiter tries
--            (readers all get in)
--   *:write  the last reader left, or a writer released while another
--            writer waits (registered readers stay registered): waiting
--            writers try
--   *:read   the last waiting writer gave up and no registered reader
--            was admitted: readers held back by it try
--
-- Each function is O(log n) in the number of readers or waiting writers,
-- plus O(log n) per expired entry it removes (at most 64 per call).

-- The keys, with their types for hold_check_keys (TYPE, for the scripts
-- off the hot path: force-unlocks, inspection, the holds' listing). The
-- acquires, releases, the read renewal and the heartbeat read each key
-- they touch with pcall on its first touch instead (hold_first), before
-- their first write, and send no TYPE.
local function rw_keys(base)
  return hold_keys(base, {'w', 'fence', 'r', 'ro', 'ww', 'alive'},
    'hash string zset hash zset zset')
end

-- Forget one read hold (`attempt`; `owner` its owner as the caller read it
-- from K.ro, or nil to read it here).
local function rw_drop_reader(K, attempt, owner)
  if owner == nil then
    owner = redis.call('HGET', K.ro, attempt)
  end
  redis.call('ZREM', K.r, attempt)
  redis.call('HDEL', K.ro, attempt)
  if owner and redis.call('HINCRBY', K.ro, '#' .. owner, -1) <= 0 then
    redis.call('HDEL', K.ro, '#' .. owner)
  end
end

-- Remove read holds whose lease ended (their client died or stopped
-- renewing): up to 64 per call, oldest first. Returns how many went, or
-- nil and the error reply naming K.r (lease_purge). Callers read K.ro
-- first (the drops write it).
local function rw_purge_readers(K, now_ms)
  return lease_purge(K.r, K.ro, now_ms, function(a) rw_drop_reader(K, a) end)
end

-- Live read holds, and the ms until the longest one ends (0 when none).
local function rw_readers(K, now_ms)
  local n = redis.call('ZCOUNT', K.r, '(' .. now_ms, '+inf')
  if n == 0 then
    return 0, 0
  end
  local top = redis.call('ZRANGE', K.r, -1, -1, 'WITHSCORES')
  return n, tonumber(top[2]) - now_ms
end



-- The first waiting writer whose client is alive, and how long its client's
-- liveness lasts; drops waiting writers whose client went silent (up to 64).
-- Or nil, nil and the error reply naming K.ww or K.alive (read with pcall
-- before any drop: queue_live_head).
local function rw_live_waiting_writer(K, now_ms)
  local head, _, alive, err = queue_live_head(K.ww, nil, K.alive, now_ms, queue_client)
  if not head then
    return nil, nil, err
  end
  return head, alive - now_ms
end

-- Register waiting reader `attempt` of `owner` in K.w (q:<attempt>, see
-- above) so that the release it waits for admits it (rw_admit_readers):
-- once per attempt, keeping the first registration's secret and time.
-- `bound` is how long the reader sleeps at most (the refusal's pttl):
-- without a writer, K.w holds only registrations and lives at least that
-- long plus the claim, so none is lost while its reader sleeps; a
-- writer's hash keeps the writer's TTL. Best effort (pcall): a refused
-- write (OOM) leaves the reader unregistered, to its sleep bound. Returns
-- fresh (1 or 0) and the registration's secret, or nil.
local function rw_register_reader(K, owner, attempt, lease, claim, secret, now_ms, writer, bound)
  local fresh, s = reg_register(K.w, 'q:' .. attempt,
    reg_entry(owner, attempt, lease, claim, secret, now_ms), attempt, secret)
  if fresh == 1 then
    redis.call('HSET', K.w, 'q', 1)
  end
  if fresh and not writer then
    hold_touch({K.w}, math.max(bound, 0) + tonumber(claim))
  end
  return fresh, s
end

-- Drop the registration of reader `attempt` (it leaves, or got in by its
-- own try); a hash left with the mark q alone (no writer, no other
-- registration) goes with it. Its HDEL may be a script's first touch of
-- K.w (pcall): returns nil, or the error reply naming K.w, with nothing
-- written.
local function rw_unregister_reader(K, attempt)
  local gone, err = hold_first(K.w, 'HDEL', K.w, 'q:' .. attempt)
  if err then
    return err
  end
  if gone == 1 and redis.call('HLEN', K.w) == 1 then
    redis.call('HDEL', K.w, 'q')
  end
end

-- Admit the readers registered in K.w (up to 64): each gets a read hold
-- under its claim, and one message on `channel` tells them all, a line
-- per reader. In this order: the registrations are removed first (a
-- write that maxmemory never refuses: once a script has written, Redis
-- lets its later writes through, so no read hold can be refused after
-- the readers were told they hold it), then the message (a refused
-- PUBLISH, NOPERM, fails the call with only the registrations gone: those
-- readers try again at their sleep bound), then the holds. The mark q
-- goes too when no registration is left. Returns how many were admitted
-- and whether registrations remain (beyond the 64); or nil, nil and the
-- error reply naming K.r or K.ro, which are read (pcall) before the first
-- write when a reader is to be admitted (K.w is the caller's to have read).
-- O(n) in the registrations.
local function rw_admit_readers(K, channel, now_ms)
  local f = redis.call('HGETALL', K.w)
  local lines, holds, fields, more = {}, {}, {}, false
  for i = 1, #f, 2 do
    local a = string.match(f[i], '^q:(.+)$')
    if a then
      if #lines == 64 then
        more = true
        break
      end
      local e = reg_read(f[i + 1])
      fields[#fields + 1] = f[i]
      if e then
        local msg, c = reg_grant(e, '0', now_ms)
        lines[#lines + 1] = msg
        holds[#holds + 1] = {a, e.owner, now_ms + c}
      end
    end
  end
  if not more then
    fields[#fields + 1] = 'q'
  end
  if holds[1] then
    local _, err = hold_first_each({{K.r, 'ZCARD'}, {K.ro, 'HLEN'}})
    if err then
      return nil, nil, err
    end
  end
  redis.call('HDEL', K.w, unpack(fields))
  if #lines > 0 then
    msg_publish(channel, msg_granted(lines))
  end
  local top = 0
  for _, h in ipairs(holds) do
    -- NX: an attempt that holds already (it cannot, its grant removed its
    -- registration) is not counted twice.
    if redis.call('ZADD', K.r, 'NX', h[3], h[1]) == 1 then
      redis.call('HSET', K.ro, h[1], h[2])
      redis.call('HINCRBY', K.ro, '#' .. h[2], 1)
      top = math.max(top, h[3])
    end
  end
  if top > 0 then
    lease_added(K.r, K.ro, top)
  end
  return #lines, more
end

-- The write side went free: its last hold was released (rw_write_release)
-- or forced out (rw_force_unlock_write). Hand it on as a release does, and
-- remove the writer's fields, the list `held()` returns (o, t, n, s and its
-- a:<attempt> fields; called only when readers are registered), or the
-- whole hash.
-- `queued` is the mark q (readers may be registered). In this order:
--   registrations and a live waiting writer: `*:write` (the writers try; the
--     registered readers wait for the next writer's release: write
--     preference), then the writer's fields go (the hash too when only the
--     mark is left)
--   registrations, no live waiting writer: they are admitted
--     (rw_admit_readers: one g: message for them all); the hash goes when
--     all were, else `*` (the rest try) and only the writer's fields go
--   no registration (or none admitted): `*` (every waiter tries; all
--     readers get in), then the hash goes
-- Every write after a PUBLISH here is one maxmemory never refuses (HDEL,
-- DEL, ZREM) or follows the script's first write (the admission's HDEL).
-- Returns nil, or the error reply naming K.ww, K.alive, K.r or K.ro (each
-- read with pcall before the first write; K.w is the caller's to have read).
local function rw_write_freed(K, channel, queued, held)
  if queued then
    local now_ms = hold_now()
    local live, _, err = rw_live_waiting_writer(K, now_ms)
    if err then
      return err
    end
    if live then
      msg_publish(channel, msg_everyone('write'))
      redis.call('HDEL', K.w, unpack(held()))
      -- The mark alone (the readers it marked for have left) goes too.
      if redis.call('HLEN', K.w) == 1 then
        redis.call('DEL', K.w)
      end
      return
    end
    local n, more, aerr = rw_admit_readers(K, channel, now_ms)
    if aerr then
      return aerr
    end
    if n > 0 and not more then
      redis.call('DEL', K.w)
      return
    end
    if more then
      msg_publish(channel, msg_everyone())
      redis.call('HDEL', K.w, unpack(held()))
      return
    end
  end
  msg_publish(channel, msg_everyone())
  redis.call('DEL', K.w)
end

-- The opening of most scripts: hold_open with this lock's keys.
local function rw_open(base)
  return hold_open(rw_keys, base)
end
