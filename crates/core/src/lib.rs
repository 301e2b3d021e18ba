//! deadbolt-core: the engine under every deadbolt primitive.
//!
//! One [`Client`] holds a command connection, a subscriber connection with the
//! Pub/Sub waiting engine, a watchdog that renews leases in batches, and a
//! background releaser for holds nobody waits to release. Primitive crates
//! (`deadbolt-lock`, `deadbolt-fair`, ...) describe their Lua scripts and keys
//! and let core run acquires ([`Client::acquire`]), holds ([`Hold`]) and
//! releases.
//!
//! Requires Redis 7.0 or newer, or Valkey 8.0 or newer: Pub/Sub runs as
//! RESP3 push messages on a multiplexed connection, and the scripts use
//! `PEXPIRE … GT`.
//!
//! # Features
//! * `tls` (off by default): `rediss://` URLs and TLS clients given to
//!   [`Client::from_redis`], through redis-rs's rustls support with ring as
//!   the crypto provider (see `ensure_crypto_provider` and docs/tls.md).
//!   Without it a TLS target is refused with [`Error::InvalidArgument`].

mod acquire;
mod client;
mod composite;
mod config;
mod conn;
pub mod deployment;
mod error;
mod exclusive;
pub mod fence;
mod guard;
pub mod guarded;
mod handle;
mod handoff;
mod heartbeat;
mod hold;
mod keys;
pub mod message;
mod metrics;
mod observe;
pub mod primitive;
pub mod scripts;
mod tls;
mod wait;
pub mod wake;
pub mod watch;

pub use acquire::{AcquireBuilder, AcquireSpec, ConditionBuilder, ConditionSpec, WaitMode};
pub use client::{Client, ClientBuilder};
pub use composite::{Lockable, PlainLock, PlainLocks};
pub use config::{
    default_client_name, encode_client_name, holder_name, lease_ms, Config, MAX_CLIENT_NAME,
    MAX_LEASE_MS,
};
pub use conn::sentinel_master;
pub use error::{Cause, Error, Result};
pub use exclusive::{Exclusive, ExclusiveKind, LockInfo, QueuedWaiter};
pub use guard::{ExclusiveGuard, HoldGuard};
pub use handle::Acquire;
pub use hold::{drift, Hold, HoldSet, LeaseMode, LeaseState};
pub use keys::{encode_tag, hash_slot, is_fence_key, slot_tag, Keys};
pub use message::Message;
pub use observe::{observe, CATCH_UP};
#[cfg(feature = "tls")]
pub use tls::ensure_crypto_provider;
pub use wake::{Grant, Signal, Wake, WakeAll, WakeAsTold, WakePolicy};
