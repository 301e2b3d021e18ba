-- elect_resign.lua — end a leadership, named by its attempt id.
-- (msg_lib.lua and hold_lib.lua come first.)
--
-- Used by resign, by the background releaser for a dropped Leadership, and
-- for campaigns that were cancelled or ended Indeterminate. Idempotent: the
-- attempt's field goes on the first run, so a replay finds nothing.
--
-- KEYS[1]  leadership  <ns>:{name}:elect  (layout in elect_campaign.lua)
-- ARGV[1]  attempt id of the leadership
-- ARGV[2]  the candidates' channel  <ns>:{name}:elect:ch
-- ARGV[3]  the observers' channel  <ns>:{name}:elect:obs
--
-- Reply:
--   0  nothing ended: the lease had run out, another leads, or it was
--      ended already
--   2  ended: the leadership is deleted; `1` is published to the
--      candidates (one per client tries) and `*` to the observers
--
-- O(1).
local r = hold_release(KEYS[1], ARGV[1])
if r ~= 2 then
  -- 0: not this attempt's leadership. (1, an inner hold, cannot happen:
  -- a campaign never re-enters.)
  return r
end
-- Published before the delete (the script is atomic): a user whose ACL
-- forbids the channel gets NOPERM with the leadership untouched.
msg_publish(ARGV[2], msg_one())
msg_publish(ARGV[3], msg_everyone())
redis.call('DEL', KEYS[1])
return 2
