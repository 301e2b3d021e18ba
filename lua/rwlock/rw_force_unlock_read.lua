-- rw_force_unlock_read.lua — remove every read hold of a read-write lock,
-- whoever holds them, and wake the waiting writers exactly as the last
-- reader's release would (`*:write`). The write hold stays; so do the
-- registrations of waiting readers (in K.w: the next writer's release
-- admits them) and the waiting writers' marks.
-- (The libraries come first, as for every rw script: see rw_lib.lua.)
--
-- KEYS[1..6]  w, fence, r, ro, ww, alive  (see rw_lib.lua)
-- ARGV[1]  the lock's channel
--
-- Reply: the live read holds removed (re-entries count); 0 when there were
--   none (read holds whose lease had ended held nothing: their records are
--   deleted, nobody is woken). The former readers' renewals find their
--   holds gone (Lost), their unlocks release nothing (NotHeld).
--   error WRONGTYPE <key>  a key of another type; nothing written
--
-- O(log n) plus the DEL of the reader ZSET and its companion hash.
local K, now_ms, bad = rw_open(0)
if bad then
  return bad
end
local live = redis.call('ZCOUNT', K.r, '(' .. now_ms, '+inf')
if live == 0 then
  redis.call('DEL', K.r, K.ro)
  return 0
end
-- A write that changes nothing (no member '-') before the PUBLISH, as in
-- rw_force_unlock_write.lua: the DEL after the message cannot be refused,
-- and a refused PUBLISH (ACL) fails the call with nothing changed.
redis.call('ZREM', K.r, '-')
msg_publish(ARGV[1], msg_everyone('write'))
redis.call('DEL', K.r, K.ro)
return live
