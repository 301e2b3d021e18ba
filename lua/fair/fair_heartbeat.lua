-- fair_heartbeat.lua — keep one client's waiters alive on many fair locks.
-- (msg_lib.lua, hold_lib.lua, queue_lib.lua and fair_lib.lua come first.)
--
-- Sent by each client every waiter_timeout/3 while it has queued waiters:
-- one liveness record per (client, name), refreshed for all of that client's
-- waiters at once, on the server clock.
--
-- KEYS  six keys per fair lock (hold, fence, q, qo, alive, seq), repeated
-- ARGV[1]  client id
-- ARGV[2]  waiter timeout in ms
--
-- Reply: the number of locks refreshed. A lock with a key of another type
-- among those the heartbeat touches is skipped (nothing written there); its
-- waiters' own tries report it. Each is read once with pcall (hold_first)
-- before alive's ZADD, the first write and alive's first touch: q (does
-- anyone wait?), the hold (does it still exist?), qo and seq (their TTLs
-- are stretched), and the fencing counter only when the lock is to be
-- handed on. No TYPE is sent: with the lock held, the counter is never
-- touched, and not looked at. A lock nobody queues on is skipped too, with
-- nothing written (queue_heartbeat).
--
-- Besides refreshing, each lock whose hold ran out (a holder or a claimed
-- head that died) while waiters queue is handed to its live head: nobody
-- else would notice, so the queue moves on within waiter_timeout/3.
-- The loop is queue_heartbeat (queue_lib.lua): the liveness record, the
-- records of clients silent for a whole window dropped, the queue's TTLs
-- (fair_touch); then the hand-off of a lock whose hold ran out.
return queue_heartbeat(6, fair_keys, 'q', 'alive', function(K)
  local f, err = hold_first_each({{K.hold, 'HLEN'}, {K.qo, 'HLEN'}, {K.seq, 'STRLEN'}})
  if err then
    return err
  end
  -- A free lock (an empty hash does not exist) with waiters (queue_heartbeat
  -- skips a lock nobody queues on) is handed on.
  K.free = f[1] == 0
  if K.free then
    return select(2, hold_first(K.fence, 'STRLEN', K.fence))
  end
end, fair_touch,
  function(K, now_ms, now_us, wt)
    if K.free then
      fair_pass_on(K, now_ms, now_us, wt)
    end
  end)
