-- elect_changed.lua — has the leadership changed since the term an
-- observer saw last? (The check of an observer's wait, in the acquire
-- loop's contract; it records nothing.)
--
-- KEYS[1]  leadership  <ns>:{name}:elect  (layout in elect_campaign.lua)
-- ARGV[1..6]  the acquire prefix core always sends (owner, attempt, lease,
--          mode, secret, stale-hold bound; unused: a wait holds nothing)
-- ARGV[7]  the term the observer saw last, '0' for nobody leading
--
-- Reply:
--   {1, 0, 0}  changed: another term leads now, or nobody does
--   {0, pttl}  unchanged, and the leader's lease ends within pttl ms (the
--              observer looks again then: a leader that died publishes
--              nothing)
--   {0, -1}    unchanged and nobody leads: the observer waits for a message
--              (`l:<term>` when someone is elected), within its catch-up bound
--   error WRONGTYPE <key>
--
-- O(1). Read-only.
-- The term as elect_leader.lua reads it (a hash without an owner leads
-- nobody: term 0), so that this check and the observer's read never
-- disagree about a change.
local v = redis.pcall('HMGET', KEYS[1], 'o', 't')
if v.err then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1])
end
local term = v[1] and string.format('%.0f', tonumber(v[2]) or 0) or '0'
if term ~= ARGV[7] then
  return {1, 0, 0}
end
if not v[1] then
  return {0, -1}
end
return {0, redis.call('PTTL', KEYS[1])}
