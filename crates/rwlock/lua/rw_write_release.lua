-- rw_write_release.lua — release one write hold by attempt id, admitting
-- the registered readers, or remove the mark of a writer that gives up
-- waiting. Idempotent.
-- (The libraries come first, as for every rw script: see rw_lib.lua.)
--
-- KEYS[1..6]  w, fence, r, ro, ww, alive  (see rw_lib.lua)
-- ARGV[1]  attempt id
-- ARGV[2]  the lock's channel
-- ARGV[3]  client uuid (the mark is '<client uuid>:<attempt>')
--
-- Reply:
--   0  nothing to release (expired, taken over, released already)
--   1  the waiting mark was removed (when no live waiting writer remains
--      and no writer holds, the registered readers are admitted, one
--      message for them all; when none was, `m` is published: readers it
--      held back try), or an inner write hold was released
--   2  the last write hold released, then the hold's fields deleted (the
--      hash with them, unless readers are registered in it). Published
--      first: with registered readers and no live waiting writer, they
--      are admitted (one g: message for them all, rw_lib.lua); with a
--      live waiting writer, `r` (the writers try; the registered readers
--      wait for the next writer's release, write preference); without
--      registrations, `w` (every waiter tries; all readers get in). The
--      hand-on is rw_write_freed (rw_lib.lua), shared with
--      rw_force_unlock_write.lua
--   error WRONGTYPE <key>
--
-- O(log n), plus O(n) in the registered readers when there are any (the
-- mark q, read in the release's HMGET, says so: an unmarked release runs
-- no command for them).
local K = rw_keys(0)
local bad = rw_check_types(K)
if bad then
  return bad
end
if redis.call('ZREM', K.ww, ARGV[3] .. ':' .. ARGV[1]) == 1 then
  local now_ms = hold_now()
  if not rw_live_waiting_writer(K, now_ms) then
    local n, more = 0, false
    if not redis.call('HGET', K.w, 'o') then
      n, more = rw_admit_readers(K, ARGV[2], now_ms)
    end
    if n == 0 or more then
      msg_publish(ARGV[2], msg_notice('m'))
    end
  end
  return 1
end
-- The mark q (readers registered) comes in the same HMGET as the hold.
local r, queued = hold_release(K.w, ARGV[1], 'q')
if r ~= 2 then
  return r
end
rw_write_freed(K, ARGV[2], queued, function()
  return {'o', 't', 'n', 's', 'a:' .. ARGV[1]}
end)
return 2
