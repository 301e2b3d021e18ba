-- msg_lib.lua — every message deadbolt's scripts publish, built in one
-- place, and the one PUBLISH that sends them.
--
-- Not a script of its own: the script loader joins it before the scripts
-- that publish (MSG_LIB in deadbolt_core::scripts), ahead of the other
-- libraries, which use it. One function per message kind; the wire forms
-- are those deadbolt-core's message module reads (Message::parse), byte for
-- byte:
--   g:<attempt> <token> <ttl> <secret> [<claim>]   msg_grant_line, one line
--                          per waiter; several joined by msg_granted
--   t:<attempt> [<ms>]     msg_turn
--   l:<term>               msg_term
--   f:<hold key> <token>   msg_forced (on '<hold key>:watch', and on the
--                          holder's client channel, msg_publish_client)
--   1                      msg_one: one waiter per client tries
--   * / *:<class>          msg_everyone: every waiter (of that class) tries
--
-- msg_publish holds the only redis.call('PUBLISH', ...) of the scripts that
-- use this library: on a Redis Cluster the loader rewrites that call to
-- SPUBLISH in the script's text (crates/core/src/scripts/mod.rs), so every
-- message of such a script goes out sharded. msg_publish_client alone
-- publishes unsharded, on a client's own channel, which names no key.
-- Nothing here reads or writes a key.

-- Publish `payload` on `channel`; returns how many connections heard it.
-- An error (NOPERM under an ACL) fails the script there: callers publish
-- before they write, so nothing is changed then.
local function msg_publish(channel, payload)
  return redis.call('PUBLISH', channel, payload)
end

-- Publish `payload` on the own channel of the client `client_id` in
-- namespace `ns`: '<ns>:client:<client id>' (client_channel in
-- deadbolt_core::keys), which every client listens on from its start. It
-- names no key (no hash tag), so it is a classic channel everywhere, left
-- alone by the sharded rewrite (the command's name is in a variable): on a
-- Cluster the message reaches every node, and so the node the client
-- listens at. For rare messages only (a force-unlock).
local function msg_publish_client(ns, client_id, payload)
  local classic = 'PUBLISH'
  return redis.call(classic, ns .. ':client:' .. client_id, payload)
end

-- One grant line: the primitive is `attempt`'s with fencing token `stoken`
-- (a string; '0' for holds without one), valid for `ttl` ms counted from the
-- request that registered it, for the entry whose secret is `secret`, under
-- a claim of `claim` ms (left out by the fair lock, whose claim is the ttl).
local function msg_grant_line(attempt, stoken, ttl, secret, claim)
  local line = 'g:' .. attempt .. ' ' .. stoken .. ' ' .. string.format('%.0f', ttl) .. ' '
    .. secret
  if claim then
    line = line .. ' ' .. string.format('%.0f', claim)
  end
  return line
end

-- Several grant lines (msg_grant_line) in one message.
local function msg_granted(lines)
  return table.concat(lines, '\n')
end

-- `attempt` is at the head of its queue: try now, or (with `ms`) not
-- before the holder's lease ends, `ms` from now.
local function msg_turn(attempt, ms)
  if ms then
    return 't:' .. attempt .. ' ' .. string.format('%.0f', ms)
  end
  return 't:' .. attempt
end

-- A holder that changes by terms changed; `sterm` (a string) is the new term.
local function msg_term(sterm)
  return 'l:' .. sterm
end

-- A force-unlock removed the hold of `key` whose fencing token was `token`.
local function msg_forced(key, token)
  return 'f:' .. key .. ' ' .. token
end

-- Released, to whoever waits: one waiter per client tries ('1'), one of
-- them wins.
local function msg_one()
  return '1'
end

-- Every waiter tries ('*'), or every waiter of `class` ('*:<class>', a
-- class of deadbolt_core's waiters: 'read', 'write').
local function msg_everyone(class)
  if class then
    return '*:' .. class
  end
  return '*'
end
