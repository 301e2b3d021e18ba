-- rw_lib.lua — functions shared by the read-write lock's scripts.
--
-- Not a script of its own: the script loader prepends hold_lib.lua and this
-- file to every rw_*.lua script.
--
-- Keys of one read-write lock (all under the hash tag {name}), as a table K:
--   K.w      <ns>:{name}:rw          the writer's hold hash, laid out as a
--                                    Lock's (o owner, t token, n count,
--                                    s, a:<attempt> per hold); TTL = its
--                                    lease
--   K.fence  <ns>:{<slot tag>}:fence   the slot's fencing counter (string,
--                                      no TTL; see hold_next_token)
--   K.r      <ns>:{name}:rw:r        ZSET reader attempt -> lease deadline
--                                    (server ms): each read hold its own lease
--   K.ro     <ns>:{name}:rw:ro       hash reader attempt -> owner id, and
--                                    '#<owner id>' -> that owner's read holds
--   K.ww     <ns>:{name}:rw:ww       ZSET '<client uuid>:<attempt>' of waiting
--                                    writers -> when they started waiting
--   K.alive  <ns>:{name}:rw:alive    ZSET client uuid -> liveness deadline of
--                                    its waiting writers (server ms)
-- K.r and K.ro live as long as the longest reader's lease; K.ww and K.alive
-- 3 × waiter_timeout past the last heartbeat.
-- Channel <ns>:{name}:rw:ch, messages:
--   w   the writer released: every waiter tries (readers all get in)
--   r   the last reader left: waiting writers try
--   m   the last waiting writer gave up: readers held back by it try
--
-- Each function is O(log n) in the number of readers or waiting writers,
-- plus O(log n) per expired entry it removes (at most 64 per call).

local function rw_keys(base)
  return hold_keys(base, {'w', 'fence', 'r', 'ro', 'ww', 'alive'})
end

-- Every key of one read-write lock is missing or of its type.
local function rw_check_types(K)
  return hold_check_types({
    {K.w, 'hash'}, {K.fence, 'string'}, {K.r, 'zset'},
    {K.ro, 'hash'}, {K.ww, 'zset'}, {K.alive, 'zset'},
  })
end

-- Forget one read hold (`attempt`, of `owner`).
local function rw_drop_reader(K, attempt)
  local owner = redis.call('HGET', K.ro, attempt)
  redis.call('ZREM', K.r, attempt)
  redis.call('HDEL', K.ro, attempt)
  if owner and redis.call('HINCRBY', K.ro, '#' .. owner, -1) <= 0 then
    redis.call('HDEL', K.ro, '#' .. owner)
  end
end

-- Remove read holds whose lease ended (their client died or stopped
-- renewing): up to 64 per call, oldest first.
local function rw_purge_readers(K, now_ms)
  hold_purge_leases(K.r, K.ro, now_ms, function(a) rw_drop_reader(K, a) end)
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
local function rw_live_waiting_writer(K, now_ms)
  for _ = 1, 64 do
    local head = redis.call('ZRANGE', K.ww, 0, 0)[1]
    if not head then
      return nil
    end
    local alive = redis.call('ZSCORE', K.alive, string.match(head, '^([^:]+)'))
    if alive and tonumber(alive) >= now_ms then
      return head, tonumber(alive) - now_ms
    end
    redis.call('ZREM', K.ww, head)
  end
  return nil
end

-- The opening of most scripts: hold_open with this lock's keys and checks.
local function rw_open(base)
  return hold_open(rw_keys, rw_check_types, base)
end
