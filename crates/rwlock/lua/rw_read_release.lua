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
--   2  released; it was the last live reader: `r` was published so that a
--      waiting writer tries now (published before the writes, so a refused
--      PUBLISH changes nothing)
--   error WRONGTYPE <key>
--
-- O(log n).
local K, now_ms, bad = rw_open(0)
if bad then
  return bad
end
local dl = redis.call('ZSCORE', K.r, ARGV[1])
if not dl then
  rw_unregister_reader(K, ARGV[1])
  return 0
end
if tonumber(dl) <= now_ms then
  -- Its lease ended: it held nothing any more (the purge would drop it).
  rw_drop_reader(K, ARGV[1])
  lease_removed(K.r, K.ro)
  return 0
end
local live = redis.call('ZCOUNT', K.r, '(' .. now_ms, '+inf')
if live == 1 then
  msg_publish(ARGV[2], msg_notice('r'))
end
rw_drop_reader(K, ARGV[1])
lease_removed(K.r, K.ro)
if live == 1 then
  return 2
end
return 1
