-- rw_inspect.lua — read a read-write lock's state in one atomic step.
-- (The libraries come first, as for every rw script: see rw_lib.lua.) Read-only.
--
-- KEYS[1..6]  w, fence, r, ro, ww, alive  (see rw_lib.lua)
-- ARGV[1]  how many readers to list at most
--
-- Reply: {writer owner or '', write hold count, write token, write pttl
--   (-2 when no writer), live readers, ms until the longest read lease ends
--   (0 without readers), waiting writers, fencing counter (-1 when
--   unusable), {{attempt, owner, ms left}, ...} longest lease first}
--   error WRONGTYPE <key>
--
-- O(log n + listed).
local K, now_ms, bad = rw_open(0)
if bad then
  return bad
end
local w = redis.call('HMGET', K.w, 'o', 'n', 't')
local wpttl = redis.call('PTTL', K.w)
local readers, left = rw_readers(K, now_ms)
local fence = tonumber(redis.call('GET', K.fence) or '0') or -1
if fence ~= fence or fence < 0 or fence >= 9007199254740991 then
  fence = -1
end
local list = {}
local top = redis.call('ZREVRANGEBYSCORE', K.r, '+inf', '(' .. now_ms, 'WITHSCORES',
  'LIMIT', 0, tonumber(ARGV[1]))
for i = 1, #top, 2 do
  list[#list + 1] = {top[i], redis.call('HGET', K.ro, top[i]) or '',
    tonumber(top[i + 1]) - now_ms}
end
return {w[1] or '', tonumber(w[2] or '0'), tonumber(w[3] or '0'), wpttl,
  readers, left, redis.call('ZCARD', K.ww), fence, list}
