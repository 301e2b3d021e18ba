//! The Lua script loader: every script of deadbolt, compiled in from `lua/`.
//!
//! Scripts run with EVALSHA; on NOSCRIPT (after a restart or a SCRIPT FLUSH)
//! the script is loaded once with SCRIPT LOAD and the call is retried, so a
//! flush is transparent. All scripts are preloaded when a client connects.

use std::fmt;
use std::sync::OnceLock;

/// One Lua script from `lua/`, loaded lazily into a [`redis::Script`].
pub struct LuaScript {
    name: &'static str,
    source: &'static str,
    script: OnceLock<redis::Script>,
}

impl LuaScript {
    /// Declare a script; `source` is its text (use `include_str!`).
    pub const fn new(name: &'static str, source: &'static str) -> LuaScript {
        LuaScript {
            name,
            source,
            script: OnceLock::new(),
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
}

impl fmt::Debug for LuaScript {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LuaScript")
            .field("name", &self.name)
            .finish()
    }
}

macro_rules! scripts {
    ($($(#[$doc:meta])* $ident:ident = $file:literal $(with $($lib:literal),+)?;)*) => {
        $(
            $(#[$doc])*
            pub static $ident: LuaScript = LuaScript::new(
                $file,
                concat!(
                    $($(include_str!(concat!("../../../lua/", $lib, ".lua")), "\n",)+)?
                    include_str!(concat!("../../../lua/", $file, ".lua"))
                ),
            );
        )*
        /// Every script, for preloading at connect.
        pub static ALL: &[&LuaScript] = &[$(&$ident),*];
    };
}

scripts! {
    /// Take, re-enter or replay an attempt on a reentrant lock.
    LOCK_ACQUIRE = "lock_acquire" with "hold_lib";
    /// Release one hold of a reentrant lock by attempt id.
    LOCK_RELEASE = "lock_release";
    /// Read a hold hash atomically.
    LOCK_INSPECT = "lock_inspect";
    /// Delete a lock whoever holds it.
    LOCK_FORCE_UNLOCK = "lock_force_unlock";
    /// Renew many exclusive holds in one call.
    HOLD_RENEW = "hold_renew";
    /// Take, re-enter, pick up or queue for a fair lock.
    FAIR_ACQUIRE = "fair_acquire" with "hold_lib", "fair_lib";
    /// Leave a fair lock's queue or release a hold, passing the lock on.
    FAIR_RELEASE = "fair_release" with "hold_lib", "fair_lib";
    /// Delete a fair lock whoever holds it, passing it on.
    FAIR_FORCE_UNLOCK = "fair_force_unlock" with "hold_lib", "fair_lib";
    /// Keep one client's fair-lock waiters alive; hand off expired holds.
    FAIR_HEARTBEAT = "fair_heartbeat" with "hold_lib", "fair_lib";
    /// List the head of a fair lock's queue (read-only).
    FAIR_QUEUE = "fair_queue" with "hold_lib", "fair_lib";
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
        }
    }
}
