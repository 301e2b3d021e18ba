-- elect_leader.lua — who leads an election now, read in one step.
--
-- KEYS[1]  leadership  <ns>:{name}:elect  (layout in elect_campaign.lua)
--
-- Reply:
--   {owner, term, info, pttl}  the leader's owner id, term, info and the ms
--                              left of its lease
--   {}                         nobody leads
--   error WRONGTYPE <key>      a key of another type is in the way
--
-- O(1). Read-only.
local v = redis.pcall('HMGET', KEYS[1], 'o', 't', 'i')
if v.err then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1])
end
if not v[1] then
  return {}
end
return {v[1], tonumber(v[2]) or 0, v[3] or '', redis.call('PTTL', KEYS[1])}
