-- multi_acquire.lua — take several plain locks of one client at once, all
-- or none (MultiLock's one-script path). (msg_lib.lua and hold_lib.lua come first.)
--
-- KEYS[2i-1], KEYS[2i]  hold hash and fencing counter of the i-th lock,
--                       laid out as in lock_acquire.lua
-- ARGV[1]    attempt id (one for the whole set; each lock records it)
-- ARGV[2]    lease in ms
-- ARGV[2+i]  owner id of the i-th lock's handle
-- ARGV[2+N+i]  optional: the stale-hold bound of the i-th lock's handle
--            (hold_is_stale in hold_lib.lua): '0' when it may hold the
--            lock (a re-entry is expected), else this attempt's sequence
--            number: a hold of that owner recorded for no attempt as new
--            as this one is stale and is replaced
--
-- Reply:
--   {1, token_1, pttl_1, token_2, pttl_2, ...}  every lock granted: fresh,
--                  re-entered by its owner, or a replay of this attempt
--   {0, pttl, i}   the i-th lock is held by another owner (pttl: its TTL);
--                  nothing written
--   error WRONGTYPE <key> / BADVALUE <key> ...  nothing written
--   any other error (OOM) from the first write, so nothing written either
--
-- Why in this order: every lock is checked (holder, key types, fencing
-- counter) before the first write, so a refusal leaves nothing behind; the
-- grants then follow lock_acquire.lua's rules for each lock.
--
-- O(N) in the number of locks, O(1) each.
local attempt, lease = ARGV[1], ARGV[2]
local n = #KEYS / 2
local free = {}
local stale = {}
local lasts = {}
for i = 1, n do
  local key, fence, owner = KEYS[2 * i - 1], KEYS[2 * i], ARGV[2 + i]
  local holder = redis.pcall('HGET', key, 'o')
  if type(holder) == 'table' then
    return hold_named_error(key, holder)
  end
  if holder and holder ~= owner then
    -- Mark the hold (m, lock_acquire.lua): its release publishes on the
    -- lock's channel, which a waiting multi-lock hears (also when the
    -- release grants the lock to a waiter registered by another client).
    -- Best effort, as a waiter's mark there.
    redis.pcall('HSET', key, 'm', 1)
    return {0, redis.call('PTTL', key), i}
  end
  -- A stale hold of the part's owner (hold_is_stale) is replaced below.
  stale[i] = hold_is_stale(key, holder, owner, attempt, ARGV[2 + n + i])
  free[i] = not holder or stale[i]
  if free[i] then
    local last, err = hold_read_fence(fence)
    if err then
      return err
    end
    lasts[i] = last
  end
end
local _, now_us = hold_now()
local out = {1}
for i = 1, n do
  local key, fence, owner = KEYS[2 * i - 1], KEYS[2 * i], ARGV[2 + i]
  if free[i] then
    local token, stoken = hold_next_token(fence, lasts[i], now_us)
    if stale[i] then
      redis.call('DEL', key)
    end
    hold_create(key, owner, stoken, attempt)
    redis.call('PEXPIRE', key, lease)
    out[#out + 1] = token
    out[#out + 1] = tonumber(lease)
  else
    local r = hold_reenter(key, attempt, lease)
    out[#out + 1] = r[2]
    out[#out + 1] = r[3]
  end
end
return out
