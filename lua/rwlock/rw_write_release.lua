-- rw_write_release.lua — release one write hold by attempt id, admitting
-- the registered readers, or remove the mark of a writer that gives up
-- waiting. Idempotent.
-- (The libraries come first, as for every rw script: see rw_lib.lua.)
--
-- KEYS[1..6]  w, fence, r, ro, ww, alive  (see rw_lib.lua)
-- ARGV[1]  attempt id
-- ARGV[2]  the lock's channel
-- ARGV[3]  client id (the mark is '<client id>:<attempt>')
--
-- Reply:
--   0  nothing to release (expired, taken over, released already)
--   1  the waiting mark was removed (when no live waiting writer remains
--      and no writer holds, the registered readers are admitted, one
--      message for them all; when none was, `*:read` is published: readers it
--      held back try), or an inner write hold was released
--   2  the last write hold released, then the hold's fields deleted (the
--      hash with them, unless readers are registered in it). Published
--      first: with registered readers and no live waiting writer, they
--      are admitted (one g: message for them all, rw_lib.lua); with a
--      live waiting writer, `*:write` (the writers try; the registered readers
--      wait for the next writer's release, write preference); without
--      registrations, `*` (every waiter tries; all readers get in). The
--      hand-on is rw_write_freed (rw_lib.lua), shared with
--      rw_force_unlock_write.lua
--   error WRONGTYPE <key>  a key of another type that this call touches:
--      ww first (the mark, a read), then w; alive, r and ro only when the
--      call looks for another waiting writer or admits readers. Each is
--      read with pcall (hold_first) before the first write, so nothing is
--      written; no TYPE is sent, and the keys a call never touches (the
--      fence always; alive, r and ro on a release nobody waits for) are not
--      looked at. Dead waiting writers dropped on the way (queue_live_head)
--      are a repair made before r and ro are read.
--
-- O(log n), plus O(n) in the registered readers when there are any (the
-- mark q, read in the release's HMGET, says so: an unmarked release runs
-- no command for them).
local K = rw_keys(0)
local mark = ARGV[3] .. ':' .. ARGV[1]
local marked, err = hold_first(K.ww, 'ZSCORE', K.ww, mark)
if err then
  return err
end
if marked then
  -- A waiting writer gives up. Read before its mark goes: w (is there a
  -- writer?), alive (the walk below), and r, ro when readers may be
  -- admitted.
  local f
  f, err = hold_first_each({{K.w, 'HGET', 'o'}, {K.alive, 'ZCARD'}})
  if err then
    return err
  end
  if not f[1] then
    local _; _, err = hold_first_each({{K.r, 'ZCARD'}, {K.ro, 'HLEN'}})
    if err then
      return err
    end
  end
  redis.call('ZREM', K.ww, mark)
  local now_ms = hold_now()
  local live, _
  live, _, err = rw_live_waiting_writer(K, now_ms)
  if err then
    return err
  end
  if not live then
    local n, more = 0, false
    if not f[1] then
      n, more, err = rw_admit_readers(K, ARGV[2], now_ms)
      if err then
        return err
      end
    end
    if n == 0 or more then
      msg_publish(ARGV[2], msg_everyone('read'))
    end
  end
  return 1
end
-- The mark q (readers registered) comes in the same HMGET as the hold,
-- the first touch of w.
local r, queued = hold_release_checked(K.w, ARGV[1], 'q')
if r == nil then
  return queued
end
if r ~= 2 then
  return r
end
err = rw_write_freed(K, ARGV[2], queued, function()
  return {'o', 't', 'n', 's', 'a:' .. ARGV[1]}
end)
if err then
  return err
end
return 2
