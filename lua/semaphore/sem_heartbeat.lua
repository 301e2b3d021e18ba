-- sem_heartbeat.lua — keep one client's waiters alive on many semaphores.
-- (The libraries come first, as for every sem script: see sem_lib.lua.)
--
-- Sent by each client every waiter_timeout/3 while it has queued waiters:
-- one liveness record per (client, semaphore), on the server clock.
--
-- KEYS  six keys per semaphore (s, h, hn, q, qo, alive), repeated
-- ARGV[1]  client id
-- ARGV[2]  waiter timeout in ms
--
-- Reply: the number of semaphores refreshed. One with a key of another type
-- is skipped with nothing written there; its waiters' own tries report it.
-- One whose queue is empty is skipped too, with nothing written
-- (queue_heartbeat). The heartbeat touches every key of a semaphore (the
-- purge and the wake-up below): q, then s, h, hn and qo are each read
-- once with pcall (hold_first) before alive's ZADD, the first write and
-- alive's first touch. No TYPE is sent.
--
-- Besides refreshing, it purges ended leases and wakes the waiters that
-- the permits they gave back serve (nobody else would notice), dropping
-- dead waiters on the way: a dead head keeps its reservation for at most
-- waiter_timeout.
--
-- O(log n) per semaphore, plus purged and woken entries.
-- The loop is queue_heartbeat (queue_lib.lua): the liveness record, the
-- records of clients silent for a whole window dropped, the queue's TTLs;
-- then ended leases purged and the waiters they serve woken.
return queue_heartbeat(6, sem_keys, 'q', 'alive', function(K)
  return select(2, hold_first_each({{K.s, 'HLEN'}, {K.h, 'ZCARD'}, {K.hn, 'HLEN'},
    {K.qo, 'HLEN'}}))
end, function(K, ttl)
  hold_touch({K.q, K.qo, K.alive}, ttl)
end, function(K, now_ms)
  sem_purge(K, now_ms)
  sem_wake(K, now_ms, sem_available(K))
end)
