-- hold_renew.lua — renew many exclusive holds in one round trip (watchdog round,
-- or an explicit extend of one fixed lease).
--
-- Works on every hold hash laid out as in lock_acquire.lua (Lock, FairLock,
-- the write side of RwLock): the hold is alive while its a:<attempt> field is.
--
-- KEYS[i]    hold hash of the i-th hold (one key per hold; the watchdog batches
--            holds of one hash slot)
-- ARGV[1]    lease in milliseconds to guarantee from now
-- ARGV[1+i]  attempt id of the i-th hold
--
-- Reply: an array, one integer per key:
--   >= 0  renewed; the key's TTL after the call (never shortened: a longer
--         TTL set by a re-entry with a longer lease is kept)
--   -1    gone: the key no longer exists (expired, deleted)
--   -2    taken over: the key is a hash that no longer records this hold
--   -3    the key has another type (its first key, in the contract of
--         HoldSpec::renew): nothing written; the caller reports WrongType
--         naming it, and the hold counts as not renewed (it stays while its
--         validity lasts), as for every renew script
--
-- O(k) for k holds in the batch, O(1) each. Each key is read first with a
-- pcall'd HEXISTS of the hold's field (the way every hot path checks a key's
-- type: no TYPE call); only a key that does not record the hold takes one
-- more command, EXISTS, to tell gone (-1) from taken over (-2).

local lease = tonumber(ARGV[1])
local out = {}
for i, key in ipairs(KEYS) do
  local mine = redis.pcall('HEXISTS', key, 'a:' .. ARGV[i + 1])
  if type(mine) == 'table' then
    -- Not a hash: refused by name by the caller, nothing written.
    out[i] = -3
  elseif mine == 0 then
    out[i] = redis.call('EXISTS', key) == 0 and -1 or -2
  else
    local pttl = redis.call('PTTL', key)
    if pttl >= 0 and pttl < lease then
      redis.call('PEXPIRE', key, ARGV[1])
      pttl = lease
    end
    out[i] = pttl
  end
end
return out
