-- elect_campaign.lua — one try of a candidate to become an election's leader.
-- (msg_lib.lua and hold_lib.lua come first: messages, key checks, fencing
-- tokens, the hold layout.)
--
-- KEYS[1]  leadership  <ns>:{name}:elect  (hash in hold_lib's hold layout:
--          o = the leader's owner id (one per campaign), t = its term (a
--          fencing token: strictly larger than every earlier term), n = 1,
--          a:<attempt> = 1, s = the attempt's sequence number; and
--          i = the candidate's info); TTL the leader's lease
-- KEYS[2]  fencing counter of the name's hash slot  <ns>:{<slot tag>}:fence
-- ARGV[1]  owner id of the campaign
-- ARGV[2]  attempt id (a retry of the same call reuses it)
-- ARGV[3]  lease in milliseconds
-- ARGV[4]  'try', 'wait' or 'again' (the acquire contract; every candidate
--          waits alike, so it is not read)
-- ARGV[5..6]  the entry secret and the stale-hold bound of the acquire
--          prefix core always sends (deadbolt-core's acquire module): unused
-- ARGV[7]  the candidate's info (any string, shown to observers)
-- ARGV[8]  the observers' channel  <ns>:{name}:elect:obs
--
-- Reply:
--   {1, term, pttl}  elected: the leadership is this campaign's until its
--                    lease ends; or a replay of this attempt's election
--                    (its reply was lost): the same term
--   {0, pttl}        another candidate leads; its lease ends within pttl ms
--                    (the candidate sleeps at most that long: a leader that
--                    died publishes nothing)
--   error WRONGTYPE <key>  a key of another type is in the way; nothing written
--   error BADVALUE <key> ...  the fencing counter is unusable; nothing written
--
-- O(1): on election, GET and SET of the fencing counter, TIME, a PUBLISH,
-- one HSET of the hold with the info, PEXPIRE.

-- pcall: a key of another type comes back as an error table, named.
local leader = redis.pcall('HGET', KEYS[1], 'o')
if type(leader) == 'table' then
  return hold_named_error(KEYS[1], leader)
end
if leader then
  if leader == ARGV[1] and redis.call('HEXISTS', KEYS[1], 'a:' .. ARGV[2]) == 1 then
    -- A replay of this very attempt: it leads already, with its term.
    return {1, tonumber(redis.call('HGET', KEYS[1], 't')), redis.call('PTTL', KEYS[1])}
  end
  return {0, redis.call('PTTL', KEYS[1])}
end
-- Nobody leads: this candidate does, with the next fencing token as its
-- term. The counter is read and checked first (an unusable one is refused
-- with nothing written).
local last, err = hold_read_fence(KEYS[2])
if err then
  return err
end
local _, now_us = hold_now()
local term, sterm = hold_token(last, now_us)
-- Observers hear of the new leader at once. Published before the writes
-- (the script is atomic, so nobody sees the order): a user whose ACL
-- forbids the channel gets NOPERM with nothing written. An observer that
-- misses the message catches up within its bound.
msg_publish(ARGV[8], msg_term(sterm))
hold_next_token(KEYS[2], last, now_us)
hold_create(KEYS[1], ARGV[1], sterm, ARGV[2], 'i', ARGV[7])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, term, tonumber(ARGV[3])}
