//! The handle side of a primitive: [`Acquire`], the five acquire calls
//! every deadbolt primitive has from the one method it implements, and
//! [`Handle`], what a primitive handle keeps (its client, owner and keys).

use std::future::Future;
use std::time::Duration;

use crate::acquire::WaitMode;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::hold::LeaseMode;
use crate::keys::Keys;

/// The five acquire calls of a deadbolt primitive, from the one method it
/// implements ([`Acquire::acquire_with`]).
///
/// Every acquire has a lease ([`LeaseMode`]: renewed by the client's
/// watchdog until unlock, or fixed) and a wait ([`WaitMode`]: one try, up
/// to a bound, or until granted). While it waits it sleeps on the
/// primitive's unlock channel, not polling; a lease that runs out wakes it
/// too.
///
/// # Cancel safety
/// Every method is cancel safe in effect: if its future is dropped after a
/// request may have reached Redis, a possible grant or queue entry is
/// released exactly once by the client's background releaser (or ends
/// with its lease); nothing stays held, and a hold count is never raised
/// twice. A future dropped before sending anything changes nothing.
///
/// # Errors
/// Common to every method: [`Error::InvalidArgument`] for an invalid name
/// or lease (nothing sent), [`Error::WrongType`] when a key of another
/// type is in the way (nothing written), [`Error::Shutdown`] after the
/// client shut down, [`Error::Redis`] for any other error reply (OOM
/// under `maxmemory`). A wait that ran out while Redis could not answer
/// ends with [`Error::Unavailable`] or [`Error::Indeterminate`] (any
/// possible grant is already with the releaser); a waiting call without a
/// bound rides such outages out.
pub trait Acquire: Send + Sync {
    /// What a granted acquire returns.
    type Guard: Send;

    /// Acquire with an explicit lease and wait; `Ok(None)` when the wait
    /// ended without the hold (never for [`WaitMode::Forever`]).
    ///
    /// # Errors
    /// See the trait.
    ///
    /// # Cancel safety
    /// See the trait.
    fn acquire_with(
        &self,
        lease: LeaseMode,
        wait: WaitMode,
    ) -> impl Future<Output = Result<Option<Self::Guard>>> + Send;

    /// Wait until acquired; the watchdog renews the lease until unlock.
    ///
    /// # Errors
    /// See the trait.
    ///
    /// # Cancel safety
    /// See the trait.
    fn lock(&self) -> impl Future<Output = Result<Self::Guard>> + Send {
        async move {
            self.acquire_with(LeaseMode::Watchdog, WaitMode::Forever)
                .await?
                .ok_or_else(unbounded_wait_ended)
        }
    }

    /// One attempt, no waiting; watchdog lease. `Ok(None)` when busy.
    ///
    /// # Errors
    /// See the trait; `Unavailable` / `Indeterminate` when Redis could not
    /// answer.
    ///
    /// # Cancel safety
    /// See the trait.
    fn try_lock(&self) -> impl Future<Output = Result<Option<Self::Guard>>> + Send {
        self.acquire_with(LeaseMode::Watchdog, WaitMode::Try)
    }

    /// Wait up to `wait`; watchdog lease. `Ok(None)` when the wait ends
    /// without the hold; a zero wait is one attempt, like
    /// [`try_lock`](Acquire::try_lock).
    ///
    /// # Errors
    /// See the trait.
    ///
    /// # Cancel safety
    /// See the trait.
    fn try_lock_for(
        &self,
        wait: Duration,
    ) -> impl Future<Output = Result<Option<Self::Guard>>> + Send {
        self.acquire_with(LeaseMode::Watchdog, WaitMode::up_to(wait))
    }

    /// Wait until acquired, with a fixed `lease` that is not renewed.
    ///
    /// # Errors
    /// See the trait; [`Error::InvalidArgument`] for a lease under 1 ms or
    /// over [`MAX_LEASE_MS`](crate::MAX_LEASE_MS).
    ///
    /// # Cancel safety
    /// See the trait; an unreleased grant also ends with its lease.
    fn lock_with_lease(&self, lease: Duration) -> impl Future<Output = Result<Self::Guard>> + Send {
        async move {
            self.acquire_with(LeaseMode::Fixed(lease), WaitMode::Forever)
                .await?
                .ok_or_else(unbounded_wait_ended)
        }
    }

    /// Wait up to `wait`, with a fixed `lease`.
    ///
    /// # Errors
    /// As [`lock_with_lease`](Acquire::lock_with_lease) and
    /// [`try_lock_for`](Acquire::try_lock_for).
    ///
    /// # Cancel safety
    /// See the trait.
    fn try_lock_with(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> impl Future<Output = Result<Option<Self::Guard>>> + Send {
        self.acquire_with(LeaseMode::Fixed(lease), WaitMode::up_to(wait))
    }
}

/// What every handle on a named primitive keeps: its client, its name,
/// its owner id (a new one per handle: handles are owners), and what it
/// built from the name's keys, or why the name cannot be one (an empty
/// name), which every call then reports as [`Error::InvalidArgument`]
/// before anything is sent. Handles are made without a `Result` (like
/// `client.lock(name)`), so the error waits for the first call.
#[derive(Debug)]
pub struct Handle<T> {
    client: Client,
    name: String,
    owner: String,
    parts: std::result::Result<T, String>,
}

impl<T> Handle<T> {
    /// A new handle (a new owner) on `name`, a primitive of `kind` on
    /// `client`: `build` makes what it needs from the name's keys
    /// (`<ns>:{<name>}:<kind>` and companions).
    pub fn new(client: &Client, kind: &str, name: &str, build: impl FnOnce(Keys) -> T) -> Self {
        Handle {
            client: client.clone(),
            name: name.to_string(),
            owner: client.new_owner(),
            parts: client.keys(kind, name).map(build).map_err(|e| match e {
                Error::InvalidArgument(m) => m,
                other => other.to_string(),
            }),
        }
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The primitive's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// This handle's owner id, `<client id>:<handle id>` (the client id is
    /// `<encoded client name>@<random id>`: see [`holder_name`](crate::holder_name)).
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// What was built from the name's keys, or
    /// [`Error::InvalidArgument`] saying why the name is not usable.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a name that cannot be one.
    pub fn parts(&self) -> Result<&T> {
        self.parts
            .as_ref()
            .map_err(|e| Error::InvalidArgument(e.clone()))
    }
}

/// An unbounded wait that ended without the hold: a primitive's
/// `acquire_with` broke its contract. Reported, not a panic.
fn unbounded_wait_ended() -> Error {
    Error::InvalidArgument("an unbounded wait ended without the hold".to_string())
}
