//! The Lua script loader. Each crate declares its own scripts with
//! [`lua_scripts!`](crate::lua_scripts), compiled in from its `lua/` folder
//! (symlinks into the workspace's one `lua/`).
//!
//! Scripts run with EVALSHA; on NOSCRIPT (after a restart or a SCRIPT FLUSH)
//! the script is loaded once with SCRIPT LOAD and the call is retried, so a
//! flush is transparent. Core's scripts and those passed to
//! [`ClientBuilder::preload`](crate::ClientBuilder::preload) are loaded when
//! a client connects.
//!
//! Scripts publish with `redis.call('PUBLISH', ...)`. On a Redis Cluster a
//! client runs each script's sharded variant instead, the same text with
//! every such call made `SPUBLISH`: the message then goes to the subscribers
//! on the node that owns the channel's slot only, not to every node.

use std::fmt;
use std::sync::OnceLock;

/// One Lua script from `lua/`, loaded lazily into a [`redis::Script`].
pub struct LuaScript {
    name: &'static str,
    source: &'static str,
    script: OnceLock<redis::Script>,
    sharded: OnceLock<(String, redis::Script)>,
}

/// How scripts publish; the sharded variant replaces it with [`SHARDED`].
const PUBLISH: &str = "redis.call('PUBLISH',";
/// Sharded Pub/Sub (Redis 7): delivered by the node owning the channel's slot.
const SHARDED: &str = "redis.call('SPUBLISH',";

impl LuaScript {
    /// Declare a script; `source` is its text (use `include_str!`).
    pub const fn new(name: &'static str, source: &'static str) -> LuaScript {
        LuaScript {
            name,
            source,
            script: OnceLock::new(),
            sharded: OnceLock::new(),
        }
    }

    /// The file name without `.lua`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The SHA1 that EVALSHA uses.
    pub fn sha(&self) -> &str {
        self.script().get_hash()
    }

    /// The Lua source.
    pub fn source(&self) -> &'static str {
        self.source
    }

    pub(crate) fn script(&self) -> &redis::Script {
        self.script.get_or_init(|| redis::Script::new(self.source))
    }

    /// The script a client runs: this one, or on a sharded server (Redis
    /// Cluster) the variant that publishes with SPUBLISH.
    pub(crate) fn script_for(&self, sharded: bool) -> &redis::Script {
        if sharded {
            &self.sharded_variant().1
        } else {
            self.script()
        }
    }

    /// The source a client loads (see [`script_for`](Self::script_for)).
    pub(crate) fn source_for(&self, sharded: bool) -> &str {
        if sharded {
            &self.sharded_variant().0
        } else {
            self.source
        }
    }

    fn sharded_variant(&self) -> &(String, redis::Script) {
        self.sharded.get_or_init(|| {
            let text = self.source.replace(PUBLISH, SHARDED);
            let script = redis::Script::new(&text);
            (text, script)
        })
    }
}

/// Check that a script's file starts with its contract (a `KEYS` and a
/// `Reply` section, as every file in `lua/` must). For primitive crates'
/// tests.
///
/// # Panics
/// When a section is missing.
pub fn check_header(s: &LuaScript) {
    assert!(
        s.source.contains("KEYS"),
        "{} lacks a KEYS contract",
        s.name
    );
    assert!(
        s.source.contains("Reply"),
        "{} lacks a Reply section",
        s.name
    );
    assert_eq!(s.sha().len(), 40);
    assert!(
        !s.source.contains("redis.call(\"PUBLISH\"") && !s.source.contains("redis.call('PUBLISH' "),
        "{} publishes in a form the sharded variant does not rewrite; write redis.call('PUBLISH', ...)",
        s.name
    );
}

/// [`check_header`] of every script of `list` (a primitive crate's
/// `SCRIPTS`), for its tests.
///
/// # Panics
/// When a script lacks a section.
pub fn check_headers(list: &[&LuaScript]) {
    list.iter().for_each(|s| check_header(s));
}

impl fmt::Debug for LuaScript {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LuaScript")
            .field("name", &self.name)
            .finish()
    }
}

/// Declare `static` [`LuaScript`]s from the calling crate's `lua/` folder.
///
/// Every script lives once, in the workspace's top-level `lua/`; each crate
/// has a `lua/` folder of symlinks to the files it uses, so that `cargo
/// package` puts them in the crate (it copies the files a symlink points
/// to). `with "a", "b"` prepends library files (shared Lua functions) to the
/// script, in that order.
///
/// A leading `list pub NAME;` also declares `NAME: &[&LuaScript]` with every
/// script of the block, for [`ClientBuilder::preload`](crate::ClientBuilder::preload).
///
/// ```ignore
/// deadbolt_core::lua_scripts! {
///     list pub SCRIPTS;
///     /// Take a lock.
///     pub LOCK_ACQUIRE = "lock_acquire" with "hold_lib";
/// }
/// ```
#[macro_export]
macro_rules! lua_scripts {
    (list $lvis:vis $list:ident; $($(#[$doc:meta])* $vis:vis $ident:ident = $file:literal $(with $($lib:literal),+)?;)*) => {
        $crate::lua_scripts! { $($(#[$doc])* $vis $ident = $file $(with $($lib),+)?;)* }
        /// Every script of this block, for `ClientBuilder::preload`.
        $lvis static $list: &[&$crate::scripts::LuaScript] = &[$(&$ident),*];
    };
    ($($(#[$doc:meta])* $vis:vis $ident:ident = $file:literal $(with $($lib:literal),+)?;)*) => {
        $(
            $(#[$doc])*
            $vis static $ident: $crate::scripts::LuaScript = $crate::scripts::LuaScript::new(
                $file,
                concat!(
                    $($(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $lib, ".lua")), "\n",)+)?
                    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $file, ".lua"))
                ),
            );
        )*
    };
}

crate::lua_scripts! {
    list pub ALL;
    /// Renew many holds of the hold-hash layout in one call (the watchdog's
    /// batch call; `extend`).
    pub HOLD_RENEW = "hold_renew";
    /// Read a hold hash, its fencing counter and an optional queue atomically.
    pub HOLD_INSPECT = "hold_inspect";
    /// What a watch reads of a hold-hash primitive (`deadbolt_core::watch`).
    pub HOLD_WATCH = "hold_watch";
    /// Writes under a guard's check (`deadbolt_core::guarded`).
    pub GUARD_WRITE = "guard_write" with "guard_lib";
    /// A fenced value's writes and read (`deadbolt_core::fence`).
    pub FENCE_WRITE = "fence_write";
}

/// A script with its keys and arguments, owned so it can be handed to the
/// background releaser or retried.
#[derive(Debug, Clone)]
pub struct ScriptCall {
    /// The script to run.
    pub script: &'static LuaScript,
    /// KEYS, all in one hash slot.
    pub keys: Vec<String>,
    /// ARGV.
    pub args: Vec<String>,
}

impl ScriptCall {
    /// A call of `script` with `keys` and `args`.
    pub fn new(script: &'static LuaScript, keys: Vec<String>, args: Vec<String>) -> ScriptCall {
        ScriptCall { script, keys, args }
    }

    /// The first key, named in errors.
    pub fn main_key(&self) -> &str {
        self.keys.first().map(String::as_str).unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_script_has_a_header_contract() {
        for s in ALL {
            check_header(s);
        }
    }
}
