-- rw_write_release.lua — release one write hold by attempt id, or remove
-- the mark of a writer that gives up waiting. Idempotent.
-- (hold_lib.lua and rw_lib.lua are prepended.)
--
-- KEYS[1..6]  w, fence, r, ro, ww, alive  (see rw_lib.lua)
-- ARGV[1]  attempt id
-- ARGV[2]  the lock's channel
-- ARGV[3]  client uuid (the mark is '<client uuid>:<attempt>')
--
-- Reply:
--   0  nothing to release (expired, taken over, released already)
--   1  the waiting mark was removed (when no live waiting writer remains,
--      `m` is published: readers it held back try now), or an inner write
--      hold was released
--   2  the last write hold released: `w` is published (every waiter tries;
--      all readers get in), then the hold hash is deleted
--   error WRONGTYPE <key>
--
-- O(log n).
local K = rw_keys(0)
local bad = rw_check_types(K)
if bad then
  return bad
end
if redis.call('ZREM', K.ww, ARGV[3] .. ':' .. ARGV[1]) == 1 then
  if not rw_live_waiting_writer(K, hold_now()) then
    redis.call('PUBLISH', ARGV[2], 'm')
  end
  return 1
end
local r = hold_release(K.w, ARGV[1])
if r ~= 2 then
  return r
end
redis.call('PUBLISH', ARGV[2], 'w')
redis.call('DEL', K.w)
return 2
