-- hold_lib.lua — functions shared by every script that grants or checks holds.
--
-- Not a script of its own: the script loader joins it, after msg_lib.lua
-- (whose msg_grant_line it uses), before the scripts that name HOLD_LIB
-- (deadbolt_core::scripts), so the rules for key types and fencing tokens
-- are written once.
--
-- Errors these functions produce (the client maps them to typed errors):
--   WRONGTYPE <key>          a key of another type is in the way
--   BADVALUE <key> <what>    a key holds a value deadbolt cannot use
-- Both are raised before the calling script writes anything.

-- Largest integer a Lua number (a double) carries exactly: 2^53 - 1.
local HOLD_MAX_INT = 9007199254740991

-- The keys of one primitive as a table: names[i] -> KEYS[base + i]. Scripts
-- that take several primitives' keys (a heartbeat batch) pass each group's
-- base. `types` (optional: a string of the keys' Redis types in order,
-- 'hash zset ...', a constant, so the hot paths that never check pay for
-- no table) is kept for hold_check_keys.
local function hold_keys(base, names, types)
  local K = {_names = names, _types = types}
  for i, name in ipairs(names) do
    K[name] = KEYS[base + i]
  end
  return K
end

-- Check that every key of K (hold_keys, with types) is missing or of its
-- type, with one TYPE each. Returns nil, or an error reply naming the first
-- bad key. For scripts off the hot paths, before their first write: a
-- script that fails half-way would leave its earlier writes behind (Redis
-- has no rollback); the hot paths read each key with pcall on its first
-- touch instead (hold_first).
local function hold_check_keys(K)
  local i = 0
  for want in string.gmatch(K._types, '%S+') do
    i = i + 1
    local key = K[K._names[i]]
    local t = redis.call('TYPE', key).ok
    if t ~= 'none' and t ~= want then
      return redis.error_reply('WRONGTYPE ' .. key)
    end
  end
  return nil
end

-- The error of a pcall on `key`: a key of another type as WRONGTYPE named
-- by the key (Redis's own message names none), anything else (OOM) as
-- Redis gave it.
local function hold_named_error(key, e)
  if e.err and string.find(e.err, '^WRONGTYPE') then
    return redis.error_reply('WRONGTYPE ' .. key)
  end
  return e
end

-- A read of `key` as its first touch in a script (redis.pcall of the
-- command and its arguments): returns the reply, or nil and the error reply
-- naming the key (hold_named_error) when it is of another type. A script
-- that reads each key it will write this way before its first write (or
-- makes its first write the first touch of its key) refuses a key of
-- another type with nothing written, without a TYPE call. O(1) beyond the
-- command itself.
local function hold_first(key, ...)
  local v = redis.pcall(...)
  if type(v) == 'table' and v.err then
    return nil, hold_named_error(key, v)
  end
  return v
end

-- hold_first of each of `reads` in order (each {key, command, args...}:
-- redis.pcall(command, key, args...)), for scripts that must know the type
-- of several keys before their first write and read them anyway (or, off
-- the common path, read them for that alone: one O(1) read each, no TYPE).
-- Returns the replies in order; or nil, the error reply naming the first
-- key of another type, and that key's position in `reads`.
local function hold_first_each(reads)
  local out = {}
  for i, r in ipairs(reads) do
    local v, err = hold_first(r[1], r[2], r[1], unpack(r, 3))
    if err then
      return nil, err, i
    end
    out[i] = v
  end
  return out
end

-- The fencing counter's value `v` (a string) at `fence` as a number, or nil
-- and BADVALUE when it is not an integer in 0 .. 2^53-2 (with such a value
-- the next token could repeat or go backwards in double arithmetic).
local function hold_fence_value(fence, v)
  local n = nil
  if string.match(v, '^%d+$') and #v <= 16 then
    n = tonumber(v)
  end
  if n == nil or n >= HOLD_MAX_INT then
    return nil, redis.error_reply('BADVALUE ' .. fence .. ' fencing counter '
      .. string.sub(v, 1, 24) .. ' is not an integer below 2^53-1')
  end
  return n
end

-- The count kept as a string at `key`, read with GET as the key's first
-- touch: `check(key, v)` of its value `v` (the count, or nil and an error
-- reply for a value that is no usable count), 0 when the key is missing,
-- or nil and the error reply naming a key of another type.
local function hold_read_count(key, check)
  local v, err = hold_first(key, 'GET', key)
  if err then
    return nil, err
  end
  if not v then
    return 0
  end
  return check(key, v)
end

-- Read the fencing counter at `fence`. Returns the counter (0 when
-- missing), or nil and an error reply: WRONGTYPE for a key of another type,
-- BADVALUE for a value hold_fence_value refuses, or the server's own error.
local function hold_read_fence(fence)
  return hold_read_count(fence, hold_fence_value)
end

-- The next fencing token after counter `last`: max(last + 1, server time in
-- µs). The clock floor keeps tokens rising when the counter is lost
-- (restart without persistence, failover, expiry). Returns the token as a
-- number and as a string (%.0f: tostring would round to 14 digits).
local function hold_token(last, now_us)
  local token = now_us
  if last >= token then
    token = last + 1
  end
  return token, string.format('%.0f', token)
end

-- hold_token, stored back as the counter. The counter is the slot's
-- (<ns>:{<slot tag>}:fence, shared by every name in the hash slot: see
-- keys.rs in deadbolt-core) and has no TTL: at most 16,384 of them per
-- namespace, however many names were ever used.
local function hold_next_token(fence, last, now_us)
  local token, s = hold_token(last, now_us)
  redis.call('SET', fence, s)
  return token, s
end

-- Push the expiry of `key` out to at least `t` (`cmd` 'PEXPIRE': t ms from
-- now; 'PEXPIREAT': server ms), never shortening it. GT leaves a key
-- without a TTL alone, so such a key gets its first TTL plainly. `fresh`:
-- the caller just created the key (it has no TTL yet): NX first sets it in
-- one command, where GT would be refused and take two more. Either order
-- is right for a key in any state (NX refused: the key has a TTL, and GT
-- pushes it out; GT refused: PTTL tells no TTL from a longer one); `fresh`
-- only picks the one that is a single command in the caller's common case.
local function hold_expire_at_least(cmd, key, t, fresh)
  if fresh then
    if redis.call(cmd, key, t, 'NX') == 0 then
      redis.call(cmd, key, t, 'GT')
    end
  elseif redis.call(cmd, key, t, 'GT') == 0 and redis.call('PTTL', key) == -1 then
    redis.call(cmd, key, t)
  end
end

-- Give each key in `keys` a TTL of at least ttl_ms, never shortening one
-- (a client with a short waiter_timeout must not cut the life of keys that
-- a client with a long one still relies on); `fresh` as for
-- hold_expire_at_least.
local function hold_touch(keys, ttl_ms, fresh)
  for _, k in ipairs(keys) do
    hold_expire_at_least('PEXPIRE', k, ttl_ms, fresh)
  end
end

-- Server time in µs as a decimal string: TIME's seconds, then its µs
-- padded to six digits. The clock floor of a fencing token without the
-- number conversions (tonumber, string.format) that hold_now and a
-- formatted token cost: about an eighth of a fresh grant's work in Redis.
local function hold_clock()
  local t = redis.call('TIME')
  return t[1] .. string.sub('00000' .. t[2], -6)
end

-- Server time as milliseconds and microseconds, and the µs as
-- hold_clock's string (for hold_advance_fence, without a formatted
-- number).
local function hold_now()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]), tonumber(t[2])
  return s * 1000 + math.floor(us / 1000), s * 1000000 + us, t[1] .. string.sub('00000' .. t[2], -6)
end

-- The opening of a script on a primitive's keys: keys(base) as a table,
-- checked with hold_check_keys, and the server time in ms. Returns K,
-- now_ms; or nil, nil and the error reply naming a key of another type
-- (nothing is written before it).
local function hold_open(keys, base)
  local K = keys(base)
  local bad = hold_check_keys(K)
  if bad then
    return nil, nil, bad
  end
  local now_ms = hold_now()
  return K, now_ms
end

-- Advance the fencing counter at `fence` to the next token
-- (hold_token) in one call in the common case: SET ... GET stores the
-- server time and returns the old counter, which is checked afterwards.
-- A counter at or ahead of the clock takes a second SET (last + 1); a
-- value deadbolt cannot use is put back (the script is atomic: nobody sees
-- the time in between) and reported as BADVALUE. A key of
-- another type or a refused write (OOM) fails the SET itself, with nothing
-- written. `now` is the server time in µs, a number (hold_now) or its
-- decimal string (hold_clock). Returns the token as a decimal string
-- (twice, for callers written against a number and its string), or nil
-- and an error reply. The common case converts no number: a counter of
-- decimal digits as long as the clock's and below it (equal-length digit
-- strings compare as their numbers do) is simply overtaken by the clock.
-- For scripts whose first write this is (a later refusal would leave the
-- counter advanced, which is harmless but wasteful).
local function hold_advance_fence(fence, now)
  local stoken = type(now) == 'string' and now or string.format('%.0f', now)
  local old = redis.pcall('SET', fence, stoken, 'GET')
  if type(old) == 'table' then
    return nil, nil, hold_named_error(fence, old)
  end
  if not old or (#old == #stoken and old < stoken and not string.find(old, '%D')) then
    return stoken, stoken
  end
  local now_us = tonumber(stoken)
  local last, err = hold_fence_value(fence, old)
  if err then
    redis.call('SET', fence, old, 'KEEPTTL')
    return nil, nil, err
  end
  if last < now_us then
    return stoken, stoken
  end
  local _, s = hold_next_token(fence, last, now_us)
  return s, s
end

-- Registrations: a waiter that a release may grant to inside the
-- release is recorded as one entry text, the same for every primitive
-- (the hash and field it lives in are the primitive's: a field per client,
-- per attempt, or a queue's entry hash):
--   '<owner> <attempt> <claim> <secret> <at>[ <extra>]'
-- owner (the owner id, or the part of it the field does not already say:
-- the Lock's field names the client, so its entry keeps the handle), the
-- attempt id, its claim (ms: how long a grant made to it holds before its
-- taker extends it to the lease; at most the lease), the secret of the
-- call that registered it (echoed by the grant, so the waiter accepts only
-- a grant for its current entry), the server ms it registered at, and one
-- word of the primitive's own (a permit count, say). Kept short: a hash
-- keeps its compact listpack encoding only while every value is at most
-- 64 bytes (hash-max-listpack-value), and the Lock's entry with default
-- ids is about 50. docs/architecture.md follows a claim through its life.

-- The entry text of a registration (layout above) for a waiter that asked
-- for `lease` ms and a claim of `claim` ms; `at` a number, the rest
-- strings or integers.
local function reg_entry(owner, attempt, lease, claim, secret, at, extra)
  local t = {owner, attempt, string.format('%.0f', math.min(tonumber(lease), tonumber(claim))),
    secret, string.format('%.0f', at)}
  t[6] = extra
  return table.concat(t, ' ')
end

-- A registration read back (reg_entry's layout) as a table {owner, attempt,
-- claim, secret, at, extra} (claim and at numbers; secret and extra
-- strings, extra nil without one), or nil for anything else (false, or an
-- entry of another layout).
local function reg_read(v)
  local o, a, c, s, at, x = string.match(v or '',
    '^(%S+) (%S+) (%d+) (%d+) (%d+) ?(%S*)$')
  if o then
    return {owner = o, attempt = a, claim = tonumber(c), secret = s,
      at = tonumber(at), extra = x ~= '' and x or nil}
  end
end

-- Register `entry` (reg_entry) for `attempt` under `field` of hash `key`,
-- once: a field already there keeps its entry. Best effort (pcall): a
-- refused write (OOM, a key of another type) registers nothing. Returns 1
-- and `secret` when this call registered, 0 and the stored secret when
-- the field holds this attempt's earlier registration, nil otherwise (not
-- registered, or the field is another attempt's).
local function reg_register(key, field, entry, attempt, secret)
  local made = redis.pcall('HSETNX', key, field, entry)
  if made == 1 then
    return 1, secret
  end
  if made == 0 then
    local e = reg_read(redis.call('HGET', key, field))
    if e and e.attempt == attempt then
      return 0, e.secret
    end
  end
end

-- Remove the registration under `field` of hash `key` if it is
-- `attempt`'s (the attempt leaves without a grant; another attempt's
-- entry stays). Read with pcall: a key of another type removes nothing.
-- Returns true when one went.
local function reg_drop(key, field, attempt)
  local e = redis.pcall('HGET', key, field)
  if type(e) == 'string' and string.match(e, '^%S+ (%S+) ') == attempt then
    redis.call('HDEL', key, field)
    return true
  end
  return false
end

-- The grant line for registration `e` (reg_read) with fencing token
-- `stoken` (a string; '0' for holds without one), made at server ms
-- `now_ms` (msg_grant_line, msg_lib.lua: 'g:<attempt> <token> <ttl>
-- <secret> <claim>'): the hold's TTL from the grant on is the claim, until
-- its taker extends it to its lease; ttl = the claim plus how long the
-- registration waited, because the waiter counts the hold's validity from
-- the request that registered it. Returns the line and the claim.
local function reg_grant(e, stoken, now_ms)
  local ttl = e.claim + math.max(0, now_ms - e.at)
  return msg_grant_line(e.attempt, stoken, ttl, e.secret, e.claim), e.claim
end

-- The sequence number of an attempt id ('<hex>s<number>', drawn by
-- new_attempt_id in deadbolt-core: a later attempt of a process has a
-- larger one), 0 for an id without one.
local function hold_seq(attempt)
  return tonumber(string.match(attempt, 's(%d+)$')) or 0
end

-- Write a fresh hold into the (empty) hold hash `key`: owner, token (a
-- string), a count of 1, the attempt's field, s = the attempt's sequence
-- number (its digits as hold_seq reads them, kept as text; hold_reenter
-- keeps it the largest of the hash's attempts, for hold_is_stale), and any
-- further field-value pairs. One HSET.
local function hold_create(key, owner, stoken, attempt, ...)
  redis.call('HSET', key, 'o', owner, 't', stoken, 'n', '1', 'a:' .. attempt, '1',
    's', string.match(attempt, 's(%d+)$') or '0', ...)
end

-- A fresh grant on the hold hash `key` (layout in lock_acquire.lua): the
-- next fencing token from `fence` (hold_advance_fence: checked, and put
-- back when unusable), the owner, a count of 1, the attempt's field and a
-- TTL of `lease` ms. Returns the token (a decimal string), or nil and an
-- error reply (nothing written).
local function hold_grant(key, fence, owner, attempt, lease)
  local token, _, err = hold_advance_fence(fence, hold_clock())
  if err then
    return nil, err
  end
  hold_create(key, owner, token, attempt)
  redis.call('PEXPIRE', key, lease)
  return token
end

-- Whether the hold hash `key`, held by `holder`, is a stale hold of `owner`.
-- `bound` is the acquire's last ARGV (HoldSet::acquire_arg in deadbolt-core;
-- nil from callers that do not say): '0' when the owner's handle may still
-- hold the lock or has another acquire in progress, else the sequence
-- number of this attempt, every older attempt of the handle being over
-- then. The hold is stale when the hash records neither this attempt (so it
-- is no replay of this acquire, nor a hand-off to it) nor any attempt newer
-- than it (s, the largest sequence number of its attempts, is at most the
-- bound: an acquire of a clone that began after this one may have overtaken
-- it on the way, and its hold is spared). Such a hold is a grant whose
-- reply was lost and whose compensating release ran before it (the request
-- sat in a paused server's buffer on a connection the client gave up), or
-- one reported lost. Re-entering it would count the acquire on top of a
-- hold nobody will release, and every later re-entry would keep it alive:
-- the lock would never be free for anyone else. Callers delete it instead
-- (a repair) and treat the lock as free. One HMGET, only when holder ==
-- owner and the bound is a number.
local function hold_is_stale(key, holder, owner, attempt, bound)
  local upto = tonumber(bound) or 0
  if holder ~= owner or upto == 0 then
    return false
  end
  local v = redis.call('HMGET', key, 'a:' .. attempt, 's')
  return not v[1] and (tonumber(v[2]) or 0) <= upto
end

-- Re-entry (or replay) by the owner that holds the hold hash `key`
-- (fields o, t, n, s, a:<attempt>; layout in lock_acquire.lua). A new
-- attempt is counted once (HSETNX: a retry of the same attempt after an
-- Indeterminate reply finds its field and is not counted twice) and raises
-- s to its sequence number when larger (hold_is_stale). Either way the TTL
-- is stretched to max(current, lease): a longer hold is never shortened,
-- and a replay of a grant made under a short claim (a hand-off inside a
-- release) gets the lease its acquire asked for. Returns the acquire
-- reply {1, token, pttl}.
local function hold_reenter(key, attempt, lease)
  local pttl = redis.call('PTTL', key)
  local v = redis.call('HMGET', key, 't', 's')
  local token = tonumber(v[1])
  if redis.call('HSETNX', key, 'a:' .. attempt, 1) == 1 then
    local seq = hold_seq(attempt)
    if seq > (tonumber(v[2]) or 0) then
      redis.call('HSET', key, 's', seq)
    end
    redis.call('HINCRBY', key, 'n', 1)
  end
  if pttl >= 0 and pttl < tonumber(lease) then
    redis.call('PEXPIRE', key, lease)
    pttl = tonumber(lease)
  end
  return {1, token, pttl}
end

-- Release one hold of the hold hash `key` by attempt id, idempotently
-- (hold_release_checked: a key of another type is nil and the error reply
-- naming it, for scripts whose first touch of the hash this is; hold_release:
-- it is 0, as a hold that is not there). Returns 0 when the attempt holds
-- nothing (expired, taken over, released already), 1 when an inner hold was
-- released (the outer ones keep their TTL), 2 when it is the last hold: the
-- caller then deletes the hash or hands it on, after it has published what
-- it must (publishing first means a refused PUBLISH changes nothing). With
-- 2 come the values of the `...` fields (false where missing), read in the
-- same HMGET: one call for the common case.
local function hold_release_checked(key, attempt, ...)
  local v = redis.pcall('HMGET', key, 'a:' .. attempt, 'n', ...)
  if v.err then
    return nil, hold_named_error(key, v)
  end
  if not v[1] then
    return 0
  end
  if tonumber(v[2]) > 1 then
    redis.call('HDEL', key, 'a:' .. attempt)
    redis.call('HINCRBY', key, 'n', -1)
    return 1
  end
  return 2, unpack(v, 3)
end

local function hold_release(key, attempt, ...)
  -- At most four fields come back (the callers ask for no more): no table
  -- is built on the way, as packing the varargs would.
  local r, a, b, c, d = hold_release_checked(key, attempt, ...)
  if r == nil then
    return 0
  end
  return r, a, b, c, d
end

-- Record that the hold of hold hash `key` is force-unlocked, not released,
-- for the watches (deadbolt_core::watch): its token at `forced` (the hold's
-- '<key>:forced', for 10 s: ten catch-up bounds of a sampling watch), which
-- a watch reads beside the hold, and
-- 'f:<key> <token>' (msg_forced) on '<key>:watch', a channel no waiter
-- hears, that wakes them. The record, not the message, tells a watch what
-- happened: a watch's read and its subscriber are two connections, and a
-- read can see the hold gone before the message is heard. The holder's
-- client hears the message on its own channel (msg_publish_client), so that
-- its guard turns Lost within a round trip instead of at its next renewal.
-- Nothing is written or sent for a hash that records no hold. One HMGET.
local function hold_forced(key, forced)
  local f = redis.call('HMGET', key, 't', 'o')
  local token, owner = f[1], f[2]
  if token then
    redis.call('SET', forced, token, 'PX', 10000)
    local msg = msg_forced(key, token)
    msg_publish(key .. ':watch', msg)
    local ns, client = string.match(key, '^(.-):{'), owner and string.match(owner, '^(.*):')
    if ns and client then
      msg_publish_client(ns, client, msg)
    end
  end
end
