-- simple_release.lua — release a non-reentrant lock by attempt id
-- (examples/simple_lock). Idempotent: a replay finds nothing to release.
--
-- KEYS[1]  the lock  (layout in simple_acquire.lua)
-- ARGV[1]  attempt id of the hold
-- ARGV[2]  unlock channel
--
-- Reply: 1 released ('1' published: one waiter per client tries), 0 the
-- attempt held nothing (expired, or never granted: a cancelled acquire's
-- release).
--
-- O(1).

if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], '1')
return 1
