-- rw_heartbeat.lua — keep one client's waiting writers alive on many
-- read-write locks. (The libraries come first, as for every rw script: see rw_lib.lua.)
--
-- Sent by each client every waiter_timeout/3 while it has writers waiting:
-- one liveness record per (client, lock), on the server clock. Readers hold
-- back only behind a writer whose client is alive.
--
-- KEYS  six keys per lock (w, fence, r, ro, ww, alive), repeated
-- ARGV[1]  client id
-- ARGV[2]  waiter timeout in ms
--
-- Reply: the number of locks refreshed. A lock whose ww or alive (the keys
-- a heartbeat touches) is of another type is skipped with nothing written
-- there (ww is read with pcall before alive's ZADD, the first write and
-- alive's first touch); its waiters' own tries report it. The other keys
-- are not touched, and not looked at: no TYPE is sent. A lock without
-- waiting writers is skipped too, with nothing written (queue_heartbeat).
--
-- O(log n) per lock.
-- The loop is queue_heartbeat (queue_lib.lua): the liveness record, the
-- records of clients silent for a whole window dropped, the marks' TTLs.
return queue_heartbeat(6, rw_keys, 'ww', 'alive', nil, function(K, ttl)
  hold_touch({K.ww, K.alive}, ttl)
end)
