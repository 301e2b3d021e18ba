-- The functions the redisson contenders' scripts share, written for
-- deadbolt-bench from the description of Redisson's algorithm, not from its
-- source: the RLock's hold hash (a further hold, a re-entry, giving one back),
-- its unlock latch, and the RFairLock's upkeep of its queue. Joined before a
-- script's own text (`with "redisson_lib"`), each script carrying only the
-- functions it calls. No function reads KEYS or ARGV: the scripts pass them.

-- Drop the stale heads of an RFairLock's queue: while the head waiter of the
-- list `queue` has no timeout in the ZSET `timeouts` after `now` (it gave up
-- or died), take it off both, so it cannot block the waiters behind it.
local function drop_stale_heads(queue, timeouts, now)
  while true do
    local head = redis.call('LINDEX', queue, 0)
    if not head then
      break
    end
    local due = tonumber(redis.call('ZSCORE', timeouts, head))
    if due and due > now then
      break
    end
    redis.call('ZREM', timeouts, head)
    redis.call('LPOP', queue)
  end
end

-- One more hold of the thread `field` on the lock hash `lock` (HINCRBY
-- creates the hash with a count of 1), with a fresh lease of `lease` ms.
local function add_hold(lock, field, lease)
  redis.call('HINCRBY', lock, field, 1)
  redis.call('PEXPIRE', lock, lease)
end

-- A re-entry: true when the thread `field` held `lock` already, and now has
-- one more on its count and a fresh lease; false (and no change) otherwise.
local function reentered(lock, field, lease)
  if redis.call('HEXISTS', lock, field) == 1 then
    add_hold(lock, field, lease)
    return true
  end
  return false
end

-- Whether the unlock request of the latch key `latch` ran before: true and
-- the reply it kept there, or false for a new request.
local function latched(latch)
  local replied = redis.call('GET', latch)
  if replied then
    return true, tonumber(replied)
  end
  return false
end

-- Give back one hold of the thread `field` on `lock`: nil when the thread
-- holds no part of it (no change); 0 when a re-entered hold is still held
-- (its lease renewed to `lease` ms, the reply 0 kept in `latch` for
-- `latch_ms`); 1 when that was the last hold and the lock is deleted (the
-- caller keeps the reply and wakes the waiters).
local function give_back(lock, field, lease, latch, latch_ms)
  if redis.call('HEXISTS', lock, field) == 0 then
    return nil
  end
  if redis.call('HINCRBY', lock, field, -1) > 0 then
    redis.call('PEXPIRE', lock, lease)
    redis.call('SET', latch, 0, 'PX', latch_ms)
    return 0
  end
  redis.call('DEL', lock)
  return 1
end
