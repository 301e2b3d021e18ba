//! An object-safe view of an exclusive lock, so that locks of several kinds,
//! from one client or several, can be held together by a composite.

use std::fmt;

use futures::future::BoxFuture;

use crate::exclusive::PlainLock;
use crate::handle::Acquire;
use crate::{Exclusive, ExclusiveKind, Hold, LeaseMode, Result, WaitMode};

/// An exclusive lock of any kind, as a composite lock holds it.
///
/// Implemented by every [`Exclusive`]; primitive crates implement it for
/// other exclusive holds of theirs. A part is acquired and released as one
/// [`Hold`] of the lock's own client; its watchdog renews it.
pub trait Lockable: Send + Sync + fmt::Debug {
    /// The lock's main key: composites take their parts in the order of
    /// these keys, so two composites over overlapping sets agree on it.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an
    /// invalid name.
    fn lock_key(&self) -> Result<String>;

    /// Acquire one hold, as the lock's own acquire methods do.
    ///
    /// # Cancel safety
    /// As the lock's acquire methods: a dropped future leaves nothing held.
    fn acquire_hold(&self, lease: LeaseMode, wait: WaitMode)
        -> BoxFuture<'_, Result<Option<Hold>>>;

    /// This lock as a plain lock (a hold hash and a fencing counter, no
    /// queue), when it is one: a composite can then take several of one
    /// client in a single script. `None` by default.
    fn plain(&self) -> Option<PlainLock> {
        None
    }
}

impl<K: ExclusiveKind> Lockable for Exclusive<K> {
    fn lock_key(&self) -> Result<String> {
        self.key().map(str::to_string)
    }

    fn acquire_hold(
        &self,
        lease: LeaseMode,
        wait: WaitMode,
    ) -> BoxFuture<'_, Result<Option<Hold>>> {
        Box::pin(async move { Ok(self.acquire_with(lease, wait).await?.map(|g| g.into_hold())) })
    }

    fn plain(&self) -> Option<PlainLock> {
        Exclusive::plain(self)
    }
}
