-- floor_sem_release.lua — give a permit of floor_sem_acquire.lua's
-- semaphore back, granting it to the queue's head inside the release.
--
-- KEYS[1]  the holds (floor_sem_acquire.lua)
-- KEYS[2]  the queue (floor_sem_acquire.lua)
-- ARGV[1]  attempt id of the hold
-- ARGV[2]  lease in ms of the grant it makes (the bench uses one lease)
--
-- Reply: 0 the attempt held nothing; 1 given back, nobody waiting; 2 given
-- back and granted to the queue's head, told on its client's channel.
--
-- Branches: a hold that is not there (its lease ended) changes nothing;
-- without waiters the permit is simply free; with them the head takes it
-- at once, in one hop (no try of its own), and hears of it by message.

if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local head = redis.call('LPOP', KEYS[2])
if not head then
  return 1
end
local a, c = string.match(head, '^(%S+) (%S+)$')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), a)
redis.call('PUBLISH', KEYS[1] .. ':ch:' .. c, a)
return 2
