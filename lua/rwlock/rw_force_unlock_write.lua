-- rw_force_unlock_write.lua — remove the write hold of a read-write lock,
-- whoever holds it and however often it re-entered, and hand the write side
-- on exactly as the writer's last release would (rw_write_freed). Read
-- holds stay, the writer's own included (a downgraded writer keeps
-- reading); waiting writers keep their marks.
-- (The libraries come first, as for every rw script: see rw_lib.lua.)
--
-- KEYS[1..6]  w, fence, r, ro, ww, alive  (see rw_lib.lua)
-- KEYS[7]  the force-unlock record, '<w>:forced' (hold_forced)
-- ARGV[1]  the lock's channel
--
-- Reply:
--   1  the write hold was removed, then handed on: with registered readers
--      and no live waiting writer they are admitted (one g: message);
--      with a live waiting writer `*:write` (writers try; registered readers
--      stay for the next writer's release); otherwise `*` (every waiter
--      tries). The former writer's renewal finds its a:<attempt> field
--      gone (Lost), its unlock releases nothing (NotHeld)
--   0  nobody writes (K.w missing, or holding only registrations of
--      waiting readers, which stay); nothing written
--   error WRONGTYPE <key>  a key of another type; nothing written
--
-- O(1) without registered readers; with some, O(n) in the hash's fields
-- (the writer's re-entries and the registrations, as a release's
-- admission is).
local K, _, bad = rw_open(0)
if bad then
  return bad
end
local f = redis.call('HMGET', K.w, 'o', 'q')
if not f[1] then
  return 0
end
-- A write that changes nothing (the hash has no field '-') before any
-- PUBLISH: Redis refuses only a script's first write under maxmemory, so no
-- write of the hand-on can be refused after its message went out, whatever
-- rw_write_freed writes (see fair_force_unlock.lua); and a refused PUBLISH
-- (ACL) fails the call with nothing changed.
redis.call('HDEL', K.w, '-')
hold_forced(K.w, KEYS[7])
rw_write_freed(K, ARGV[1], f[2], function()
  local held = {}
  for _, k in ipairs(redis.call('HKEYS', K.w)) do
    if k == 'o' or k == 't' or k == 'n' or k == 's' or string.sub(k, 1, 2) == 'a:' then
      held[#held + 1] = k
    end
  end
  return held
end)
return 1
