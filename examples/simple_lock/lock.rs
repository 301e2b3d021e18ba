//! A non-reentrant lock built on `deadbolt::primitive` alone: the example
//! of "How to add a primitive" in docs/architecture.md.

// This is a primitive crate's code, whose items are public there.
#![allow(unreachable_pub)]

use deadbolt::primitive::{
    Acquire, AcquireSpec, Client, ExclusiveGuard, LeaseMode, Named, OnePerClient, Result, WaitMode,
};

deadbolt::primitive::lua_scripts! {
    list pub SCRIPTS;
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
pub struct SimpleLock {
    client: Client,
    owner: String,
    /// The acquire description (or why the name cannot be one).
    spec: Named<AcquireSpec>,
}

impl SimpleLock {
    /// A handle (an owner) on the lock `name`.
    pub fn new(client: &impl AsRef<Client>, name: &str) -> SimpleLock {
        let client = client.as_ref().clone();
        let spec = Named::new(&client, "simple", name, |k| {
            AcquireSpec::builder(
                "simple",
                &k,
                &SIMPLE_ACQUIRE,
                &SIMPLE_RELEASE,
                &OnePerClient,
            )
            .keys(vec![k.main().to_string(), k.sub("fence")])
            .release_with(vec![k.main().to_string()], vec![k.channel()])
            .renew(&SIMPLE_RENEW, vec![k.main().to_string()])
            .build()
        });
        SimpleLock {
            owner: client.new_owner(),
            spec,
            client,
        }
    }
}

impl Acquire for SimpleLock {
    type Guard = ExclusiveGuard;

    async fn acquire_with(&self, lease: LeaseMode, wait: WaitMode) -> Result<Option<Self::Guard>> {
        let spec = self.spec.get()?;
        let hold = self.client.acquire(spec, &self.owner, lease, wait).await?;
        Ok(hold.map(ExclusiveGuard::new))
    }
}
