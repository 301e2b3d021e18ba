-- latch_op.lua — set, count down, read or delete a count-down latch.
-- (msg_lib.lua, hold_lib.lua and latch_lib.lua come first: latch_count.)
--
-- KEYS[1]  the latch  <ns>:{name}:latch  (string: the count; absent = 0)
-- ARGV[1]  op: 'set' | 'count_down' | 'count' | 'delete'
-- ARGV[2]  set: the count (1 .. 2^53-1, checked by the client);
--          count_down, delete: the latch's channel
--
-- Reply (an integer):
--   set         1 when set, 0 when the latch is armed already (count > 0)
--   count_down  the count after counting down (0 when it was 0 already)
--   count       the count
--   delete      1 when the latch's key was deleted, 0 when there was none
--   error WRONGTYPE <key>     a key of another type
--   error BADVALUE <key> ...  a value that is no count; nothing written
--
-- Reaching zero publishes `*` (every waiter of every client wakes) and
-- deletes the key: a latch at zero leaves nothing behind, and `set` arms it
-- again. Published before the delete, so a refused PUBLISH (ACL) leaves
-- the count at one. 'delete' opens an armed latch the same way (absent
-- means 0, which every later wait takes for open): its waiters are told
-- `*` and go, rather than sleep on for a count nobody can count down.
-- O(1).
local count, err = latch_count(KEYS[1])
if err then
  return err
end
if ARGV[1] == 'count' then
  return count
elseif ARGV[1] == 'set' then
  if count > 0 then
    return 0
  end
  redis.call('SET', KEYS[1], ARGV[2])
  return 1
elseif ARGV[1] == 'count_down' then
  if count <= 1 then
    if count == 1 then
      msg_publish(ARGV[2], msg_everyone())
    end
    redis.call('DEL', KEYS[1])
    return 0
  end
  return redis.call('DECR', KEYS[1])
elseif ARGV[1] == 'delete' then
  if count > 0 then
    msg_publish(ARGV[2], msg_everyone())
  end
  return redis.call('DEL', KEYS[1])
end
return redis.error_reply('INVALID unknown op ' .. tostring(ARGV[1]))
