//! deadbolt-lock: a reentrant distributed lock kept in Redis.
//!
//! A [`Lock`] is a handle on one lock name, owned by the handle: clones of a
//! handle are the same owner and may re-enter; separate handles (from
//! separate `client.lock(name)` calls) exclude each other. See
//! `docs/lock.md` for the data layout.

mod guard;
mod lock;

pub use guard::LockGuard;
pub use lock::{Lock, KIND};
