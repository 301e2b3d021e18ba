-- rw_write_acquire.lua — take, re-enter or replay the write hold, or mark a
-- waiting writer.
-- (msg_lib.lua, hold_lib.lua, queue_lib.lua, lease_lib.lua and rw_lib.lua
-- come first: key layout in rw_lib.lua.)
--
-- KEYS[1..6]  w, fence, r, ro, ww, alive  (see rw_lib.lua)
-- ARGV[1]  owner id <client id>:<handle id>
-- ARGV[2]  attempt id
-- ARGV[3]  lease in ms
-- ARGV[4]  mode: 'try' (one attempt, no mark) | 'wait' (mark as waiting)
-- ARGV[5]  the entry secret: '0' (a writer waits for unnamed wake-ups)
-- ARGV[6]  the handle's stale-hold bound (hold_is_stale in hold_lib.lua):
--          '0' when it may hold the write side (a re-entry is expected) or
--          has no bound, else this attempt's sequence number
--          (ARGV[1..6] are the acquire prefix core always sends, in this
--          order, whatever the spec: deadbolt-core's acquire module)
-- ARGV[7]  waiter timeout in ms (how long the mark outlives its client's
--          last heartbeat)
--
-- Reply:
--   {1, token, pttl}    granted: fresh, a re-entry by the writer, or a replay
--   {0, pttl}           busy ('try'): another writer (pttl = its lease left)
--                       or live readers (pttl = the longest read lease left)
--   {2, pttl, fresh, 0} busy ('wait'): marked as a waiting writer (fresh = 1
--                       when this call added the mark); new readers now wait
--                       (write preference); the mark is removed by the
--                       release script when the writer gives up, and expires
--                       with its client's liveness if the client dies
--   error UPGRADE <key>    this owner holds read holds and no write hold:
--                       an upgrade could deadlock against another reader
--                       doing the same, so it is refused at once
--   error WRONGTYPE <key>  a key of another type that this call touches:
--                       each is read with pcall on its first touch
--                       (hold_first) before the first write, so nothing is
--                       written; no TYPE is sent. A key the call never
--                       touches is not looked at: with a writer, r, ro and
--                       the fence (and ww, alive for a try refused); a
--                       grant never touches alive. The write before the
--                       reads of ww, alive and the fence: the repairs (a
--                       stale write hold dropped, ended read leases purged)
--   error BADVALUE <key> ...  unusable fencing counter; nothing written
--
-- O(log n) in the readers and waiting writers (plus expired ones removed).
local K = rw_keys(0)
local owner, attempt, lease, mode = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local wt = tonumber(ARGV[7])
-- The first touch of the writer's hash: a key of another type is named.
local writer, err = hold_first(K.w, 'HGET', K.w, 'o')
if err then
  return err
end
local now_ms, now_us = hold_now()
local client = queue_client(owner)
local mark = client .. ':' .. attempt

-- Mark a waiting writer: ww is read (its mark) before alive's ZADD, the
-- first write and alive's first touch, so either key of another type is
-- refused with nothing written.
local function busy(pttl)
  if mode == 'try' then
    return {0, pttl}
  end
  local had, e = hold_first(K.ww, 'ZSCORE', K.ww, mark)
  if e then
    return e
  end
  local _; _, e = hold_first(K.alive, 'ZADD', K.alive, now_ms + wt, client)
  if e then
    return e
  end
  local fresh = 0
  if not had then
    fresh = redis.call('ZADD', K.ww, 'NX', now_ms, mark)
  end
  hold_touch({K.ww, K.alive}, wt * 3)
  return {2, pttl, fresh, 0}
end

-- A stale write hold of this owner (hold_is_stale) is dropped, not
-- re-entered, and the write side is free.
if hold_is_stale(K.w, writer, owner, attempt, ARGV[6]) then
  redis.call('DEL', K.w)
  writer = false
end
if writer then
  if writer == owner then
    -- The first touch of ww, and the first write.
    local _; _, err = hold_first(K.ww, 'ZREM', K.ww, mark)
    if err then
      return err
    end
    return hold_reenter(K.w, attempt, lease)
  end
  return busy(redis.call('PTTL', K.w))
end
-- The owner's read holds: the first touch of ro, before the purge writes
-- it (and r's, by the purge's own read).
local mine
mine, err = hold_first(K.ro, 'HGET', K.ro, '#' .. owner)
if err then
  return err
end
local purged
purged, err = rw_purge_readers(K, now_ms)
if err then
  return err
end
if purged > 0 then
  -- Ended holds of this owner may have gone: count again.
  mine = redis.call('HGET', K.ro, '#' .. owner)
end
if (tonumber(mine) or 0) > 0 then
  return redis.error_reply('UPGRADE ' .. K.w)
end
local readers, left = rw_readers(K, now_ms)
if readers > 0 then
  return busy(left)
end
local last
last, err = hold_read_fence(K.fence)
if err then
  return err
end
-- ww's first touch is a read, so that the counter's SET stays the first
-- write (the one maxmemory may refuse).
local marked
marked, err = hold_first(K.ww, 'ZSCORE', K.ww, mark)
if err then
  return err
end
local token, stoken = hold_next_token(K.fence, last, now_us)
hold_create(K.w, owner, stoken, attempt)
redis.call('PEXPIRE', K.w, lease)
if marked then
  redis.call('ZREM', K.ww, mark)
end
return {1, token, tonumber(lease)}
