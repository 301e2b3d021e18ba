-- fair_queue.lua — list the head of a fair lock's queue (`deadbolt inspect`).
-- (msg_lib.lua, hold_lib.lua, queue_lib.lua and fair_lib.lua come first.)
--
-- Read-only.
-- KEYS[1..6]  hold, fence, q, qo, alive, seq  (see fair_lib.lua)
-- ARGV[1]  how many entries to list at most
--
-- Reply: error WRONGTYPE <key> for a key of another type; otherwise an array of {attempt, owner id, lease ms (or -1), liveness ms}, in
-- queue order; liveness is how long the owner's client stays alive without a
-- heartbeat (negative: it is past its deadline and will be skipped).
--
-- O(log n + limit).
local K = fair_keys(0)
local bad = hold_check_keys(K)
if bad then
  return bad
end
local now_ms = hold_now()
local out = {}
for i, attempt in ipairs(redis.call('ZRANGE', K.q, 0, tonumber(ARGV[1]) - 1)) do
  local v = redis.call('HGET', K.qo, attempt)
  local owner, lease = '', nil
  if v then
    local _
    owner, _, _, lease = fair_entry(v)
  end
  -- (The entry's secret is not listed: it is what makes a grant genuine.)
  local alive = owner ~= '' and redis.call('ZSCORE', K.alive, queue_client(owner))
  out[i] = {attempt, owner, lease or -1, alive and (tonumber(alive) - now_ms) or -1}
end
return out
