//! The Lua script loader, and the Lua libraries core exports.
//!
//! Each crate declares its own scripts with
//! [`lua_scripts!`](crate::lua_scripts), compiled in from its own `lua/`
//! folder. Shared Lua lives once, in core's `lua/`, and is exported here as
//! the library constants ([`HOLD_LIB`], ...): a script names the libraries
//! it needs and [`LuaScript`] joins their text and its own on first use, so
//! a primitive crate outside this repository builds its scripts from the
//! same libraries as the shipped ones (each crate's package carries only
//! its own files).
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

mod join;

use std::fmt;
use std::sync::OnceLock;

use join::{definitions, join};

/// Functions shared by every script that grants or checks holds: key-type
/// errors named by key, the fencing counter's range check and next token,
/// server time, the hold hash's create, re-entry and release by attempt
/// (`lua/core/hold_lib.lua`).
pub const HOLD_LIB: &str = include_str!("../../lua/hold_lib.lua");

/// Every message the scripts publish, one function per kind
/// (`msg_grant_line`, `msg_turn`, `msg_one`, ...), and `msg_publish`, the
/// one `redis.call('PUBLISH', ...)` of the scripts that use it
/// (`lua/core/msg_lib.lua`). Joined first: [`HOLD_LIB`] uses it.
pub const MSG_LIB: &str = include_str!("../../lua/msg_lib.lua");

/// The rules of a queue of waiters: a waiter's client, the first live
/// waiter, the heartbeat of a client's waiters (`lua/core/queue_lib.lua`;
/// after [`HOLD_LIB`]).
pub const QUEUE_LIB: &str = include_str!("../../lua/queue_lib.lua");

/// Holds that each keep their own lease in a ZSET and a companion hash:
/// replay, renewal (one hold, or the renew contract's batch), purge
/// (`lua/core/lease_lib.lua`; after [`HOLD_LIB`]).
pub const LEASE_LIB: &str = include_str!("../../lua/lease_lib.lua");

/// The check in front of every guarded write (`lua/core/guard_lib.lua`;
/// see [`guarded`](crate::guarded)).
pub const GUARD_LIB: &str = include_str!("../../lua/guard_lib.lua");

/// Every library core exports, by file name without `.lua`, for tests and
/// tools that look a library up by name.
pub const LIBRARIES: &[(&str, &str)] = &[
    ("msg_lib", MSG_LIB),
    ("hold_lib", HOLD_LIB),
    ("queue_lib", QUEUE_LIB),
    ("lease_lib", LEASE_LIB),
    ("guard_lib", GUARD_LIB),
];

/// One Lua script: its own text after the libraries it uses, joined on first
/// use and loaded lazily into a [`redis::Script`].
pub struct LuaScript {
    name: &'static str,
    libs: &'static [&'static str],
    body: &'static str,
    source: OnceLock<String>,
    script: OnceLock<redis::Script>,
    sharded: OnceLock<(String, redis::Script)>,
}

/// How scripts publish; the sharded variant replaces it with [`SHARDED`].
const PUBLISH: &str = "redis.call('PUBLISH',";
/// Sharded Pub/Sub (Redis 7): delivered by the node owning the channel's slot.
const SHARDED: &str = "redis.call('SPUBLISH',";

impl LuaScript {
    /// Declare a script of one text, `source` (use `include_str!`).
    pub const fn new(name: &'static str, source: &'static str) -> LuaScript {
        LuaScript::with_libs(name, &[], source)
    }

    /// Declare a script whose source is `body` after what it uses of
    /// `libs` (library sources such as [`HOLD_LIB`], in that order): each
    /// library's definitions that `body` names, directly or through another
    /// kept definition, each ended by a newline; joined on first
    /// use.
    pub const fn with_libs(
        name: &'static str,
        libs: &'static [&'static str],
        body: &'static str,
    ) -> LuaScript {
        LuaScript {
            name,
            libs,
            body,
            source: OnceLock::new(),
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

    /// The Lua source the server runs: of its libraries, the definitions
    /// the script's own text uses, then that text.
    pub fn source(&self) -> &str {
        if self.libs.is_empty() {
            return self.body;
        }
        self.source.get_or_init(|| join(self.libs, self.body))
    }

    /// The script's own text, without the libraries (its file).
    pub fn body(&self) -> &'static str {
        self.body
    }

    pub(crate) fn script(&self) -> &redis::Script {
        self.script
            .get_or_init(|| redis::Script::new(self.source()))
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
            self.source()
        }
    }

    fn sharded_variant(&self) -> &(String, redis::Script) {
        self.sharded.get_or_init(|| {
            let text = self.source().replace(PUBLISH, SHARDED);
            let script = redis::Script::new(&text);
            (text, script)
        })
    }
}

/// Check that a script's own file starts with its contract (a `KEYS` and a
/// `Reply` section, as every script file must; the libraries before it do
/// not count) and publishes only in the form the sharded variant rewrites.
/// For primitive crates' tests.
///
/// # Panics
/// When a section is missing, or a PUBLISH is written in another form.
pub fn check_header(s: &LuaScript) {
    assert!(s.body.contains("KEYS"), "{} lacks a KEYS contract", s.name);
    assert!(s.body.contains("Reply"), "{} lacks a Reply section", s.name);
    assert_eq!(s.sha().len(), 40);
    for lib in s.libs {
        if let Err(line) = definitions(lib) {
            panic!(
                "{}: a library is not laid out as top-level definitions (line {line}); \
                 it would be joined whole",
                s.name
            );
        }
    }
    let source = s.source();
    assert!(
        !source.contains("redis.call(\"PUBLISH\"")
            && !source.contains("redis.call('PUBLISH' ")
            && !source.contains("redis.pcall('PUBLISH'")
            && !source.contains("redis.pcall(\"PUBLISH\""),
        "{} publishes in a form the sharded variant does not rewrite; write redis.call('PUBLISH', ...)",
        s.name
    );
    // The call itself (a comment may name PUBLISH: a script that uses no
    // msg_lib function carries no call once its libraries are pruned).
    if source.contains(PUBLISH) {
        assert!(
            s.source_for(true).contains(SHARDED) && !s.source_for(true).contains(PUBLISH),
            "{}: the sharded variant still publishes with PUBLISH",
            s.name
        );
    }
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
/// Each script's file lives in its own crate's `lua/` (`<file>.lua`), so
/// that `cargo package` puts it in that crate. `with` names the libraries
/// joined before the script, in that order: an identifier is a library core
/// exports (a constant of [`deadbolt_core::scripts`](crate::scripts), such as
/// `HOLD_LIB`), a string literal a library file of the calling crate's own
/// `lua/` (`"fair_lib"` for `lua/fair_lib.lua`).
///
/// A leading `list pub NAME;` also declares `NAME: &[&LuaScript]` with every
/// script of the block, for [`ClientBuilder::preload`](crate::ClientBuilder::preload),
/// and a unit test, `every_script_has_a_header_contract`, that runs
/// [`check_headers`] over it. A leading `dir "path";` (after the list, if
/// any) reads the crate's files from `path`, relative to its manifest,
/// instead of `lua` (an example primitive inside another package). A
/// leading `libs [...];` (after those) names the libraries of every script
/// of the block once, instead of a `with` on each: each script still carries
/// only the definitions it uses.
///
/// ```ignore
/// deadbolt_core::lua_scripts! {
///     list pub SCRIPTS;
///     libs [MSG_LIB, HOLD_LIB, QUEUE_LIB, "my_lib"];
///     /// Take the primitive.
///     pub MY_ACQUIRE = "my_acquire";
///     /// Release it.
///     pub MY_RELEASE = "my_release";
/// }
/// ```
#[macro_export]
macro_rules! lua_scripts {
    (list $lvis:vis $list:ident; dir $dir:literal; libs $libs:tt; $($(#[$doc:meta])* $vis:vis $ident:ident = $file:literal;)*) => {
        $crate::lua_scripts! { dir $dir; libs $libs; $($(#[$doc])* $vis $ident = $file;)* }
        $crate::lua_scripts! { @list $lvis $list; $($ident),* }
    };
    (list $lvis:vis $list:ident; dir $dir:literal; $($(#[$doc:meta])* $vis:vis $ident:ident = $file:literal $(with $($lib:tt),+)?;)*) => {
        $crate::lua_scripts! { dir $dir; $($(#[$doc])* $vis $ident = $file $(with $($lib),+)?;)* }
        $crate::lua_scripts! { @list $lvis $list; $($ident),* }
    };
    (list $lvis:vis $list:ident; libs $libs:tt; $($(#[$doc:meta])* $vis:vis $ident:ident = $file:literal;)*) => {
        $crate::lua_scripts! { list $lvis $list; dir "lua"; libs $libs; $($(#[$doc])* $vis $ident = $file;)* }
    };
    (list $lvis:vis $list:ident; $($(#[$doc:meta])* $vis:vis $ident:ident = $file:literal $(with $($lib:tt),+)?;)*) => {
        $crate::lua_scripts! { list $lvis $list; dir "lua"; $($(#[$doc])* $vis $ident = $file $(with $($lib),+)?;)* }
    };
    (@list $lvis:vis $list:ident; $($ident:ident),*) => {
        /// Every script of this block, for `ClientBuilder::preload`.
        $lvis static $list: &[&$crate::scripts::LuaScript] = &[$(&$ident),*];
        #[cfg(test)]
        #[test]
        fn every_script_has_a_header_contract() {
            $crate::scripts::check_headers($list);
        }
    };
    (dir $dir:literal; libs $libs:tt; $($(#[$doc:meta])* $vis:vis $ident:ident = $file:literal;)*) => {
        $(
            $(#[$doc])*
            $vis static $ident: $crate::scripts::LuaScript = $crate::scripts::LuaScript::with_libs(
                $file,
                $crate::__lua_libraries!($dir, $libs),
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/", $dir, "/", $file, ".lua")),
            );
        )*
    };
    (dir $dir:literal; $($(#[$doc:meta])* $vis:vis $ident:ident = $file:literal $(with $($lib:tt),+)?;)*) => {
        $(
            $(#[$doc])*
            $vis static $ident: $crate::scripts::LuaScript = $crate::scripts::LuaScript::with_libs(
                $file,
                &[$($($crate::__lua_library!($dir, $lib)),+)?],
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/", $dir, "/", $file, ".lua")),
            );
        )*
    };
    (libs $libs:tt; $($(#[$doc:meta])* $vis:vis $ident:ident = $file:literal;)*) => {
        $crate::lua_scripts! { dir "lua"; libs $libs; $($(#[$doc])* $vis $ident = $file;)* }
    };
    ($($(#[$doc:meta])* $vis:vis $ident:ident = $file:literal $(with $($lib:tt),+)?;)*) => {
        $crate::lua_scripts! { dir "lua"; $($(#[$doc])* $vis $ident = $file $(with $($lib),+)?;)* }
    };
}

/// The libraries of a [`lua_scripts!`](crate::lua_scripts) `libs [...]`
/// list, as a slice.
#[doc(hidden)]
#[macro_export]
macro_rules! __lua_libraries {
    ($dir:literal, [$($lib:tt),* $(,)?]) => {
        &[$($crate::__lua_library!($dir, $lib)),*]
    };
}

/// One library of a [`lua_scripts!`](crate::lua_scripts) `with` list: core's
/// exported constant, or a file of the calling crate's own folder.
#[doc(hidden)]
#[macro_export]
macro_rules! __lua_library {
    ($dir:literal, $lib:ident) => {
        $crate::scripts::$lib
    };
    ($dir:literal, $lib:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/",
            $dir,
            "/",
            $lib,
            ".lua"
        ))
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
    pub GUARD_WRITE = "guard_write" with GUARD_LIB;
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

    /// Every file of core's `lua/` is one of its scripts or an exported
    /// library (a library left out of `LIBRARIES` would be one no crate
    /// outside core can use), and every library is that file's text.
    #[test]
    fn every_file_of_lua_is_a_script_or_an_exported_library() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/lua");
        let mut seen = 0;
        for e in std::fs::read_dir(dir).expect("core's lua/") {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_string();
            let Some(stem) = name.strip_suffix(".lua") else {
                continue;
            };
            assert!(!path.is_symlink(), "{name} is a symlink");
            let text = std::fs::read_to_string(&path).unwrap();
            if let Some((_, lib)) = LIBRARIES.iter().find(|(n, _)| *n == stem) {
                assert_eq!(*lib, text, "{stem}");
            } else {
                let s = ALL.iter().find(|s| s.name() == stem);
                let s = s.unwrap_or_else(|| panic!("{name} is neither a script nor a library"));
                assert_eq!(s.body(), text, "{stem}");
            }
            seen += 1;
        }
        assert_eq!(seen, LIBRARIES.len() + ALL.len());
    }

    /// A script's source is what it uses of its libraries, then its own
    /// text, joined once.
    #[test]
    fn a_script_is_what_it_uses_of_its_libraries_then_its_body() {
        static S: LuaScript = LuaScript::with_libs(
            "s",
            &[
                "-- a\nlocal function a()\nend\n",
                "-- b\nlocal function b()\n  a()\nend\n",
            ],
            "-- KEYS Reply\nb()",
        );
        assert_eq!(
            S.source(),
            "-- a\nlocal function a()\nend\n-- b\nlocal function b()\n  a()\nend\n-- KEYS Reply\nb()"
        );
        assert!(std::ptr::eq(S.source(), S.source()));
        assert_eq!(S.body(), "-- KEYS Reply\nb()");
        assert_eq!(HOLD_RENEW.source(), HOLD_RENEW.body());
        static T: LuaScript = LuaScript::with_libs("t", &["-- a", "-- b"], "-- KEYS Reply");
        assert_eq!(T.source(), "-- KEYS Reply");
    }

    const LIB: &str = "-- lib.lua: a header, dropped.

-- The answer.
local ANSWER = 42

-- Uses ANSWER.
local function one()
  return ANSWER
end
local function two(x)
  -- three() in a comment is no use, nor 'three()' in a string.
  local s = 'three()'
  return one() + x
end

-- Never named by those below.
local function three()
  return two(1)
end
local alias = two
";

    #[test]
    fn a_library_is_read_as_its_definitions_with_their_comments() {
        let defs = definitions(LIB).unwrap();
        let names: Vec<&str> = defs.iter().map(|d| d.name).collect();
        assert_eq!(names, ["ANSWER", "one", "two", "three", "alias"]);
        assert_eq!(defs[0].text, "-- The answer.\nlocal ANSWER = 42");
        assert_eq!(
            defs[1].text,
            "-- Uses ANSWER.\nlocal function one()\n  return ANSWER\nend"
        );
        assert!(defs[2].text.starts_with("local function two(x)\n"));
        assert!(defs[2].text.ends_with("return one() + x\nend"));
        assert_eq!(defs[4].text, "local alias = two");
    }

    #[test]
    fn only_the_definitions_a_body_uses_are_joined_transitively_in_order() {
        let d = definitions(LIB).unwrap();
        let text = |i: usize| d[i].text.to_string() + "\n";
        // two() needs one(), which needs ANSWER; three is named only in a
        // comment and a string of two, alias by nobody.
        assert_eq!(
            join(&[LIB], "return two(2)"),
            text(0) + &text(1) + &text(2) + "return two(2)"
        );
        // Through an alias, across libraries, and a library left unused.
        assert_eq!(
            join(&[LIB, "local function other()\nend\n"], "alias(1)"),
            text(0) + &text(1) + &text(2) + &text(4) + "alias(1)"
        );
        // Names inside the body's comments and strings do not count, nor a
        // longer name that starts with one.
        assert_eq!(
            join(&[LIB], "-- one()\nlocal x = 'two' .. one_more"),
            "-- one()\nlocal x = 'two' .. one_more"
        );
        // Deterministic: the same texts, the same source (a stable SHA).
        assert_eq!(join(&[LIB], "three()"), join(&[LIB], "three()"));
    }

    /// A library outside the layout (a statement at column 0, an open
    /// function) is refused by `definitions` and joined whole, so nothing
    /// it holds is ever lost; `check_header` reports it.
    #[test]
    fn a_library_outside_the_layout_is_joined_whole() {
        let odd = "local function f()\nend\nredis.call('PING')\n";
        assert_eq!(definitions(odd), Err(3));
        assert_eq!(definitions("local function f()\n  x()\n"), Err(2));
        assert_eq!(definitions("local a, b = 1, 2\n"), Err(1));
        assert_eq!(join(&[odd], "return 1"), format!("{odd}\nreturn 1"));
        static S: LuaScript = LuaScript::with_libs("s", &["x = 1\n"], "-- KEYS Reply");
        assert!(std::panic::catch_unwind(|| check_header(&S)).is_err());
    }

    /// Every library core exports keeps the layout, and the joined source of
    /// a script that publishes through msg_lib still gets its SPUBLISH.
    #[test]
    fn every_library_is_laid_out_as_definitions() {
        for (name, lib) in LIBRARIES {
            let defs = definitions(lib).unwrap_or_else(|l| panic!("{name}: line {l}"));
            assert!(!defs.is_empty(), "{name}");
        }
        static P: LuaScript = LuaScript::with_libs(
            "p",
            &[MSG_LIB, HOLD_LIB],
            "-- KEYS Reply\nreturn msg_publish(KEYS[1], msg_one())",
        );
        check_header(&P);
        assert!(P.source().contains("local function msg_publish"));
        assert!(!P.source().contains("local function hold_first"));
        assert!(P.source_for(true).contains(SHARDED));
    }
}
