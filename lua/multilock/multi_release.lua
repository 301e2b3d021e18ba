-- multi_release.lua — release one attempt's holds on several plain locks
-- (undoing a one-script multi-lock acquire that may have run: cancelled or
-- Indeterminate). Idempotent. (msg_lib.lua and hold_lib.lua come first.)
--
-- KEYS[i]    hold hash of the i-th lock
-- ARGV[1]    attempt id
-- ARGV[1+i]  channel of the i-th lock
--
-- Reply: how many holds were released (0 when the attempt held none).
-- A lock whose last hold goes publishes `1` (wake one waiter per client)
-- before it is deleted when a waiter marked it (x, w or m), as
-- lock_release.lua does.
--
-- O(N) in the number of locks.
local released = 0
for i, key in ipairs(KEYS) do
  local r, x, w, m = hold_release(key, ARGV[1], 'x', 'w', 'm')
  if r == 2 then
    if x or w or m then
      msg_publish(ARGV[1 + i], msg_one())
    end
    redis.call('DEL', key)
  end
  if r > 0 then
    released = released + 1
  end
end
return released
