-- rw_read_release.lua — release one read hold by attempt id (unlock, the
-- background releaser). Idempotent.
-- (The libraries come first, as for every rw script: see rw_lib.lua.)
--
-- KEYS[1..6]  w, fence, r, ro, ww, alive  (see rw_lib.lua)
-- ARGV[1]  attempt id
-- ARGV[2]  the lock's channel
--
-- Reply:
--   0  nothing released: the hold's lease had ended, or it was released,
--      or the attempt never held (a waiting reader that gives up: its
--      registration, q:<attempt> in K.w, is removed, or the next
--      writer's release would admit a reader that left)
--   1  released; other readers remain
--   2  released; it was the last live reader: `*:write` was published so
--      that a waiting writer tries now (published before the writes, so a refused
--      PUBLISH changes nothing)
--   error WRONGTYPE <key>  a key of another type that this call touches:
--      r first, then w (no read hold: the registration's removal, whose
--      HDEL is the call's first write) or ro (a read hold), each with
--      pcall (hold_first) before the first write, so nothing is written; no
--      TYPE is sent, and the keys the call never touches (the fence, ww,
--      alive; w when it releases a hold, ro when it does not) are not looked
--      at
--
-- Why each branch: an attempt without a read hold may be a waiting reader
-- that gives up (its registration goes); a hold whose lease ended counts
-- for nothing (dropped, 0); the only read hold deletes both keys at once
-- (the commonest release, five commands fewer than updating them); with
-- other read holds, the count of live ones says whether this was the last
-- (a writer may take the lock now: published).
--
-- O(log n).
local K = rw_keys(0)
local dl, err = hold_first(K.r, 'ZSCORE', K.r, ARGV[1])
if err then
  return err
end
if not dl then
  -- The first touch of w is the removal's HDEL (rw_unregister_reader).
  err = rw_unregister_reader(K, ARGV[1])
  if err then
    return err
  end
  return 0
end
local owner
owner, err = hold_first(K.ro, 'HGET', K.ro, ARGV[1])
if err then
  return err
end
local now_ms = hold_now()
if tonumber(dl) <= now_ms then
  -- Its lease ended: it held nothing any more (the purge would drop it).
  rw_drop_reader(K, ARGV[1], owner)
  lease_removed(K.r, K.ro)
  return 0
end
-- The only read hold (the common case of a short read): the last live
-- reader, and both keys go at once, with no count to update first.
if redis.call('ZCARD', K.r) == 1 then
  msg_publish(ARGV[2], msg_everyone('write'))
  redis.call('DEL', K.r, K.ro)
  return 2
end
local live = redis.call('ZCOUNT', K.r, '(' .. now_ms, '+inf')
if live == 1 then
  msg_publish(ARGV[2], msg_everyone('write'))
end
-- Other holds stay in r (it had more than this one), so the keys stay
-- too: no lease_removed.
rw_drop_reader(K, ARGV[1], owner)
if live == 1 then
  return 2
end
return 1
