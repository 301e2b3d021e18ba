-- latch_lib.lua — the count of a count-down latch, read one way.
--
-- Not a script of its own: the script loader joins msg_lib.lua, hold_lib.lua
-- and this file before latch_op.lua and latch_wait.lua, so that setting, counting down,
-- reading and waiting all agree on what a count is.

-- The count of the latch `key` (a string; absent = 0), or nil and an error
-- reply: WRONGTYPE naming the key, or BADVALUE for a value that is no whole
-- number (hold_read_count). A garbled count is refused by every call alike:
-- a wait must not take it for zero (and release every waiter) nor wait for
-- a count nobody can count down. O(1).
local function latch_count(key)
  return hold_read_count(key, function(k, v)
    local count = tonumber(string.match(v, '^%d+$') and v or nil)
    if count == nil then
      return nil, redis.error_reply('BADVALUE ' .. k .. ' latch count '
        .. string.sub(v, 1, 24) .. ' is not a whole number')
    end
    return count
  end)
end
