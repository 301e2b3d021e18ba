//! Guarded writes: data in Redis that changes only while the hold that
//! protects it is live.
//!
//! A write made under a lock with a plain `SET` lands even when the
//! writer was paused past its lease (GC, SIGSTOP, a stalled network) and
//! another holder has taken the lock since: it overwrites the next
//! holder's work. A guarded write runs the writes in one script that first
//! checks, on the server and atomically with them, that each of the
//! guard's holds is still the one it was granted (its attempt recorded in
//! the hold hash, with its fencing token); otherwise it writes nothing and
//! the call fails with [`Error::NotHeld`] (the guard then reads `Lost`).
//! One EVALSHA, no extra round trip.
//!
//! The keys written must share the hold's hash slot (so that one script may
//! touch both on a Redis Cluster); [`Guarded::key`] makes such keys, and a
//! key of another slot is refused with [`Error::CrossSlot`] before anything
//! is sent, on a single server too, so code that works there works on a
//! cluster.

use redis::Value;

use crate::error::{Error, Result};
use crate::hold::{Hold, LeaseState};
use crate::keys::hash_slot;
use crate::scripts::{LuaScript, ScriptCall, GUARD_WRITE};

/// Writes (and reads) that run together under a guard's check
/// ([`Guarded::write`]): all of them or none.
///
/// # Examples
/// ```
/// let w = deadbolt_core::guarded::Writes::new()
///     .set("k", "v")
///     .incr_by("n", 2)
///     .hset("h", "f", "1");
/// assert_eq!(w.len(), 3);
/// ```
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct Writes {
    keys: Vec<String>,
    ops: Vec<String>,
    n: usize,
}

impl Writes {
    /// No operations yet.
    pub fn new() -> Writes {
        Writes::default()
    }

    /// How many operations.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    fn key_index(&mut self, key: String) -> String {
        let i = match self.keys.iter().position(|k| *k == key) {
            Some(i) => i,
            None => {
                self.keys.push(key);
                self.keys.len() - 1
            }
        };
        // 1-based, after the guard's hold keys (offset added when run).
        (i + 1).to_string()
    }

    fn op(mut self, name: &str, key: impl Into<String>, args: &[String]) -> Writes {
        let k = self.key_index(key.into());
        self.ops.push(name.to_string());
        self.ops.push(k);
        self.ops.extend(args.iter().cloned());
        self.n += 1;
        self
    }

    /// `SET key value` (no expiry; an expiry the key had goes). Replies `OK`.
    pub fn set(self, key: impl Into<String>, value: impl Into<String>) -> Writes {
        self.op("set", key, &[value.into(), "0".into()])
    }

    /// `SET key value PX ttl`. Replies `OK`.
    pub fn set_with_ttl(
        self,
        key: impl Into<String>,
        value: impl Into<String>,
        ttl: std::time::Duration,
    ) -> Writes {
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        self.op("set", key, &[value.into(), ms.to_string()])
    }

    /// `DEL key`. Replies 1 when it existed, else 0.
    pub fn del(self, key: impl Into<String>) -> Writes {
        self.op("del", key, &[])
    }

    /// `INCRBY key by`. Replies the new value.
    pub fn incr_by(self, key: impl Into<String>, by: i64) -> Writes {
        self.op("incrby", key, &[by.to_string()])
    }

    /// `HSET key field value`. Replies 1 when the field is new, else 0.
    pub fn hset(
        self,
        key: impl Into<String>,
        field: impl Into<String>,
        value: impl Into<String>,
    ) -> Writes {
        self.op("hset", key, &[field.into(), value.into()])
    }

    /// `GET key`, read under the same check. Replies the value or nil.
    pub fn get(self, key: impl Into<String>) -> Writes {
        self.op("get", key, &[])
    }
}

/// A caller's own Lua, run under a guard's check ([`Guarded::eval`]). Its
/// `KEYS` and `ARGV` are the ones passed to `eval` (the check's own are
/// taken off first), and its reply is `eval`'s.
///
/// Make one per script and keep it (a `static` with `LazyLock`, say): each
/// lives for the rest of the program, as the scripts of `lua_scripts!` do.
///
/// # Examples
/// ```
/// // Append to a list and trim it, only while the lock is held.
/// let s = deadbolt_core::guarded::GuardedScript::new(
///     "redis.call('RPUSH', KEYS[1], ARGV[1]) return redis.call('LTRIM', KEYS[1], -100, -1)",
/// );
/// ```
#[derive(Debug, Clone, Copy)]
pub struct GuardedScript(&'static LuaScript);

/// The check in front of a caller's script: guard_lib.lua's (the one
/// guard_write.lua runs), then `KEYS` and `ARGV` without the check's
/// entries, then the caller's body as a function.
const CHECK_PRELUDE: &str = "
local __live, __h = guard_live()
if not __live then
  return {0}
end
local KEYS = {unpack(KEYS, __h + 1)}
local ARGV = {unpack(ARGV, 2 * __h + 2)}
local function __body()
";

/// The check's library (`lua/guard_lib.lua`), prepended to a caller's script.
const GUARD_LIB: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/guard_lib.lua"));

impl GuardedScript {
    /// The script `lua` (a script body, as for EVAL) under the check.
    pub fn new(lua: &str) -> GuardedScript {
        let text = format!("{GUARD_LIB}{CHECK_PRELUDE}{lua}\nend\nreturn {{1, __body()}}\n");
        let source: &'static str = Box::leak(text.into_boxed_str());
        GuardedScript(Box::leak(Box::new(LuaScript::new("guarded", source))))
    }
}

/// The guarded-write surface of a guard (`guard.guarded()`): writes that
/// commit only while its holds are live. See the [module](self).
#[derive(Debug)]
pub struct Guarded<'a> {
    holds: Vec<&'a Hold>,
}

impl<'a> Guarded<'a> {
    /// Over every hold of a guard (one for a lock; each part of a
    /// composite, which must then all share one hash slot).
    pub fn over(holds: Vec<&'a Hold>) -> Guarded<'a> {
        Guarded { holds }
    }

    /// A key in the hold's hash slot, named after it:
    /// `<hold key>:data:<suffix>`.
    pub fn key(&self, suffix: &str) -> String {
        match self.holds.first() {
            Some(h) => format!("{}:data:{suffix}", h.key()),
            None => suffix.to_string(),
        }
    }

    /// Run `writes` under the check: all of them (replies in order) while
    /// every hold of the guard is live, else none.
    ///
    /// # Errors
    /// [`Error::NotHeld`] when a hold is gone or another holder has it
    /// (nothing written; the guard reads `Lost` from then on), or the guard
    /// was already released or lost (nothing sent); [`Error::CrossSlot`]
    /// for a key outside the hold's slot (nothing sent);
    /// [`Error::WrongType`] or [`Error::BadValue`] (an `INCRBY` of a value
    /// that is not an integer) with nothing written; `Unavailable`,
    /// `Indeterminate`, [`Error::Redis`] as for any call (`OOM`: nothing
    /// written).
    ///
    /// # Cancel safety
    /// If dropped, the writes may or may not have run (all or none).
    pub async fn write(&self, writes: Writes) -> Result<Vec<Value>> {
        let Writes { keys, ops, n } = writes;
        let mut args = vec![n.to_string()];
        // Key indexes in the ops count from the data keys: shift them past
        // the hold keys.
        let h = self.holds.len();
        let mut i = 0;
        while i < ops.len() {
            let (name, k) = (&ops[i], &ops[i + 1]);
            args.push(name.clone());
            args.push((k.parse::<usize>().unwrap_or(1) + h).to_string());
            let argc = match name.as_str() {
                "set" | "hset" => 2,
                "incrby" => 1,
                _ => 0,
            };
            args.extend(ops[i + 2..i + 2 + argc].iter().cloned());
            i += 2 + argc;
        }
        self.run(&GUARD_WRITE, keys, args).await
    }

    /// Run a caller's script under the check, with its own `keys` (in the
    /// hold's slot) and `args`; its reply.
    ///
    /// # Errors
    /// As [`write`](Self::write), and whatever the script raises (passed
    /// through as [`Error::Redis`]; what it wrote before stays written).
    ///
    /// # Cancel safety
    /// If dropped, the script may or may not have run.
    pub async fn eval(
        &self,
        script: &GuardedScript,
        keys: Vec<String>,
        args: Vec<String>,
    ) -> Result<Value> {
        let mut v = self.run(script.0, keys, args).await?;
        Ok(if v.is_empty() {
            Value::Nil
        } else {
            v.remove(0)
        })
    }

    /// `SET key value` under the check.
    ///
    /// # Errors
    /// As [`write`](Self::write).
    ///
    /// # Cancel safety
    /// If dropped, the write may or may not have run.
    pub async fn set(&self, key: impl Into<String>, value: impl Into<String>) -> Result<()> {
        self.write(Writes::new().set(key, value)).await.map(drop)
    }

    /// `DEL key` under the check; whether it existed.
    ///
    /// # Errors
    /// As [`write`](Self::write).
    ///
    /// # Cancel safety
    /// If dropped, the delete may or may not have run.
    pub async fn del(&self, key: impl Into<String>) -> Result<bool> {
        let v = self.write(Writes::new().del(key)).await?;
        Ok(matches!(v.first(), Some(Value::Int(1))))
    }

    /// `INCRBY key by` under the check; the new value.
    ///
    /// # Errors
    /// As [`write`](Self::write).
    ///
    /// # Cancel safety
    /// If dropped, the increment may or may not have run.
    pub async fn incr_by(&self, key: impl Into<String>, by: i64) -> Result<i64> {
        let v = self.write(Writes::new().incr_by(key, by)).await?;
        decode_first(&v)
    }

    /// `HSET key field value` under the check; whether the field is new.
    ///
    /// # Errors
    /// As [`write`](Self::write).
    ///
    /// # Cancel safety
    /// If dropped, the write may or may not have run.
    pub async fn hset(
        &self,
        key: impl Into<String>,
        field: impl Into<String>,
        value: impl Into<String>,
    ) -> Result<bool> {
        let v = self.write(Writes::new().hset(key, field, value)).await?;
        Ok(matches!(v.first(), Some(Value::Int(1))))
    }

    /// `GET key` under the check (a read that succeeds only while the hold
    /// is live).
    ///
    /// # Errors
    /// As [`write`](Self::write).
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn get(&self, key: impl Into<String>) -> Result<Option<String>> {
        let v = self.write(Writes::new().get(key)).await?;
        match v.first() {
            None | Some(Value::Nil) => Ok(None),
            Some(x) => decode_first(std::slice::from_ref(x)).map(Some),
        }
    }

    async fn run(
        &self,
        script: &'static LuaScript,
        data_keys: Vec<String>,
        data_args: Vec<String>,
    ) -> Result<Vec<Value>> {
        let Some(first) = self.holds.first() else {
            return Err(Error::InvalidArgument("a guard without holds".into()));
        };
        if self.holds.iter().any(|h| h.state().is_terminal()) {
            return Err(Error::NotHeld);
        }
        let slot = hash_slot(first.key());
        for k in self
            .holds
            .iter()
            .map(|h| h.key())
            .chain(data_keys.iter().map(String::as_str))
        {
            if hash_slot(k) != slot {
                return Err(Error::CrossSlot { key: k.to_string() });
            }
        }
        let mut keys: Vec<String> = self.holds.iter().map(|h| h.key().to_string()).collect();
        keys.extend(data_keys);
        let mut args = vec![self.holds.len().to_string()];
        for h in &self.holds {
            args.push(h.attempt().to_string());
            args.push(h.fencing_token().to_string());
        }
        args.extend(data_args);
        // Redis's own WRONGTYPE names no key, and the client then names the
        // call's first, a hold hash here (never the culprit: the check reads
        // it with pcall): the data key when there is one, else none.
        let culprit = match &keys[self.holds.len()..] {
            [only] => only.clone(),
            _ => String::new(),
        };
        let call = ScriptCall::new(script, keys, args);
        let client = first.client();
        let reply: Vec<Value> = client.run(&call).await.map_err(|e| match e {
            Error::WrongType { key } if key == first.key() => Error::WrongType { key: culprit },
            other => other,
        })?;
        match reply.first() {
            Some(Value::Int(1)) => Ok(reply.into_iter().skip(1).collect()),
            _ => {
                for h in &self.holds {
                    h.inner.finish(LeaseState::Lost);
                }
                Err(Error::NotHeld)
            }
        }
    }
}

fn decode_first<T: redis::FromRedisValue>(v: &[Value]) -> Result<T> {
    let x = v.first().unwrap_or(&Value::Nil);
    redis::from_redis_value_ref(x).map_err(|e| {
        Error::Redis(redis::RedisError::from((
            redis::ErrorKind::Parse,
            "a guarded write's reply",
            e.to_string(),
        )))
    })
}
