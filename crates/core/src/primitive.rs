//! The one surface a primitive crate builds on: what a new primitive needs
//! of core, and nothing of core's insides.
//!
//! A primitive is a crate with its Lua scripts (`lua_scripts!`) and a
//! handle type. The handle describes its acquire once, with
//! [`AcquireSpec::builder`] (or a wait for a condition with
//! [`ConditionSpec::builder`]), and runs it with [`Client::acquire`] (or
//! [`Client::wait_until`]); core does the rest: the first try, the
//! subscription to the unlock channel, the waits, the hand-offs, the
//! release of a cancelled or uncertain attempt, the lease and its renewal,
//! the fencing token. The guard wraps the [`Hold`] core returns (an
//! exclusive hold can be an [`ExclusiveGuard`]). Implementing [`Acquire`]
//! for the handle (one method) gives it the five acquire calls every
//! deadbolt primitive has: `lock`, `try_lock`, `try_lock_for`,
//! `lock_with_lease` and `try_lock_with`.
//!
//! A composite holds other primitives' locks as [`Lockable`]s, and takes
//! plain locks of one client in one script of its own with [`PlainLocks`].
//!
//! `examples/simple_lock.rs` builds a non-reentrant lock on this module
//! alone, in about forty lines; docs/architecture.md walks through it.

pub use crate::acquire::{AcquireBuilder, AcquireSpec, ConditionSpec, WaitMode};
pub use crate::client::Client;
pub use crate::composite::{Lockable, PlainLocks};
pub use crate::config::holder_name;
pub use crate::error::{Error, Result};
pub use crate::exclusive::{Exclusive, ExclusiveKind};
pub use crate::guard::{ExclusiveGuard, HoldGuard};
pub use crate::guarded::Guarded;
pub use crate::handle::{Acquire, Handle};
pub use crate::hold::{drift, lease_lost, Hold, LeaseMode, LeaseState, Validity};
pub use crate::keys::Keys;
pub use crate::lua_scripts;
pub use crate::observe::{observe, CATCH_UP};
pub use crate::scripts::ScriptCall;
pub use crate::wake::WakeAsTold;
pub use crate::watch::{hold_watch_call, watch, HoldEvent};
