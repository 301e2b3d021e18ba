//! A non-reentrant lock built on `deadbolt::primitive` alone: the example
//! of "How to add a primitive" in docs/architecture.md.

// This is a primitive crate's code, whose items are public there.
#![allow(unreachable_pub)]

use std::sync::Arc;

use deadbolt::primitive::{
    Acquire, AcquireSpec, Client, ExclusiveGuard, Handle, LeaseMode, Result, WaitMode, WakeAsTold,
};

deadbolt::primitive::lua_scripts! {
    list pub SCRIPTS;
    dir "lua/simple_lock";
    /// Take the lock, or replay this attempt's grant.
    pub SIMPLE_ACQUIRE = "simple_acquire";
    /// Release by attempt id; wake one waiter per client.
    pub SIMPLE_RELEASE = "simple_release";
    /// Renew holds (the watchdog's batches, `extend`).
    pub SIMPLE_RENEW = "simple_renew";
}

/// A lock with one holder at a time and a fencing token per hold. Not
/// reentrant: a handle that holds it and asks again waits like any other.
#[derive(Debug, Clone)]
pub struct SimpleLock(Arc<Handle<AcquireSpec>>);

impl SimpleLock {
    /// A handle (an owner) on the lock `name`.
    pub fn new(client: &impl AsRef<Client>, name: &str) -> SimpleLock {
        SimpleLock(Arc::new(Handle::new(
            client.as_ref(),
            "simple",
            name,
            |k| {
                AcquireSpec::builder("simple", &k, &SIMPLE_ACQUIRE, &SIMPLE_RELEASE, &WakeAsTold)
                    .keys(vec![k.main().to_string(), k.sub("fence")])
                    .release_with(vec![k.main().to_string()], vec![k.channel()])
                    .renew(&SIMPLE_RENEW, vec![k.main().to_string()])
                    .build()
            },
        )))
    }
}

impl Acquire for SimpleLock {
    type Guard = ExclusiveGuard;

    async fn acquire_with(&self, lease: LeaseMode, wait: WaitMode) -> Result<Option<Self::Guard>> {
        let h = &self.0;
        let hold = h
            .client()
            .acquire(h.parts()?, h.owner(), lease, wait)
            .await?;
        Ok(hold.map(ExclusiveGuard::new))
    }
}
