//! Test support for deadbolt: real `redis-server` processes and a TCP fault-injection proxy.
//!
//! * [`RedisServer`] starts a throw-away `redis-server` child process on a free loopback port
//!   and can stop, restart, pause (SIGSTOP) and resume it.
//! * [`RedisCluster`] starts a local Redis Cluster (three masters, three replicas) and can
//!   migrate slots, fail masters over, and pause or kill nodes.
//! * [`RedisSentinelSet`] starts a master, a replica and three Sentinels watching them, and can
//!   fail the master over and pause or kill nodes.
//! * [`FaultProxy`] sits between a client and a server and can delay replies, withhold the
//!   reply to a chosen request, blackhole traffic, reset connections and refuse new ones.
//!
//! `redis-server` must be installed (`apt-get install -y redis-server`); [`RedisCluster`] also
//! needs `redis-cli` (`redis-tools`, which `redis-server` depends on).
//!
//! The `tls` feature adds `RedisServerBuilder::tls`: a TLS listener with a CA
//! and certificates generated at start (`TlsCerts`; needs a redis-server
//! built with TLS, as Debian's is).
//!
//! The `client` feature adds `client` and `client_with`: the one way a
//! deadbolt test makes a connected `deadbolt_core::Client` (deadbolt's
//! crates enable it for their tests; the published crates drop that
//! dev-dependency, so the cycle through deadbolt-core never reaches a
//! registry).

#[cfg(feature = "client")]
mod client;
mod cluster;
pub mod floor;
mod proxy;
mod resp;
mod sentinel;
mod server;
pub mod support;
#[cfg(feature = "tls")]
mod tls;
mod topology;

#[cfg(feature = "client")]
pub use client::{client, client_with};
pub use cluster::{RedisCluster, SlotMigration};
pub use proxy::FaultProxy;
pub use sentinel::RedisSentinelSet;
pub use server::{
    commandstats_field, free_port, parse_commandstats, redis_server_path, server_name, RedisServer,
    RedisServerBuilder, SERVER_ENV,
};
#[cfg(feature = "tls")]
pub use tls::TlsCerts;
