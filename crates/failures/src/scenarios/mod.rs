//! The four scenarios; each `run` returns both sides' counts and
//! `rows()` turns them into table rows.

pub mod clocks;
pub mod failover;
pub mod flash;
pub mod paused;
