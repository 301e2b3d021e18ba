//! `rslock` and `rslock-3`: the rslock 0.10 crate (a Redlock), with its
//! default retries (built with the `peers` feature).

#[cfg(feature = "peers")]
use super::poll::SET_NX_COMMANDS;
use super::*;

/// rslock over the first `servers` servers of the run.
#[cfg(feature = "peers")]
pub(super) fn rslock_contender(
    opts: &ContenderOptions,
    servers: usize,
) -> Result<Box<dyn Contender>, String> {
    Ok(Box::new(peers::Rslock {
        namespace: opts.namespace.clone(),
        lease: opts.lease,
        servers,
    }))
}

#[cfg(not(feature = "peers"))]
pub(super) fn rslock_contender(
    _opts: &ContenderOptions,
    _servers: usize,
) -> Result<Box<dyn Contender>, String> {
    Err("built without the `peers` feature".into())
}

#[cfg(feature = "peers")]
mod peers {
    use std::sync::Arc;
    use std::time::Duration;

    use futures::future::BoxFuture;

    use super::{Contender, ContenderClient, ContenderKind, Held, LockHandle, SET_NX_COMMANDS};

    /// rslock with one server (`rslock`: one `SET NX PX` per try) or three
    /// (`rslock-3`: rslock is Redlock, one `SET NX PX` on every server at
    /// once per try); its default retry policy (3 tries 0–200 ms apart, then
    /// `Unavailable`), called again until it gets the lock, as its own
    /// `acquire` does.
    pub(super) struct Rslock {
        pub(super) namespace: String,
        pub(super) lease: Duration,
        /// 1, or [`REDLOCK_SERVERS`](super::REDLOCK_SERVERS).
        pub(super) servers: usize,
    }

    /// rslock's mean sleep between tries (uniform 0–200 ms).
    const RETRY_MEAN: Duration = Duration::from_millis(100);

    impl Contender for Rslock {
        fn kind(&self) -> ContenderKind {
            if self.servers == 1 {
                ContenderKind::Rslock
            } else {
                ContenderKind::Rslock3
            }
        }

        fn servers(&self) -> usize {
            self.servers
        }

        fn client_commands(&self) -> &'static [&'static str] {
            SET_NX_COMMANDS
        }

        fn poll_period(&self) -> Option<Duration> {
            Some(RETRY_MEAN)
        }

        fn connect<'a>(
            &'a self,
            urls: &'a [String],
        ) -> BoxFuture<'a, anyhow::Result<Box<dyn ContenderClient>>> {
            Box::pin(async move {
                // LockManager::new panics on a bad URL: check them first.
                let clients = urls[..self.servers]
                    .iter()
                    .map(|u| redis::Client::open(u.as_str()))
                    .collect::<Result<Vec<_>, _>>()?;
                let manager = rslock::LockManager::from_clients(clients);
                // rslock connects lazily; connect now (every server: it asks
                // them all at once) so the first acquire is not timed with
                // the connection set-up.
                manager
                    .query_redis_for_key_value(b"deadbolt-bench:warm-up")
                    .await
                    .map_err(|e| anyhow::anyhow!("connecting an rslock client: {e}"))?;
                Ok(Box::new(RslockClient {
                    manager,
                    namespace: self.namespace.clone(),
                    lease: self.lease,
                }) as Box<dyn ContenderClient>)
            })
        }
    }

    struct RslockClient {
        manager: rslock::LockManager,
        namespace: String,
        lease: Duration,
    }

    impl ContenderClient for RslockClient {
        fn handle(&self, name: &str) -> Arc<dyn LockHandle> {
            Arc::new(RslockHandle {
                manager: self.manager.clone(),
                resource: format!("{}:rslock:{name}", self.namespace).into_bytes(),
                lease: self.lease,
            })
        }

        fn shutdown(&self) -> BoxFuture<'_, ()> {
            Box::pin(async {})
        }
    }

    struct RslockHandle {
        manager: rslock::LockManager,
        resource: Vec<u8>,
        lease: Duration,
    }

    impl LockHandle for RslockHandle {
        fn acquire(&self) -> BoxFuture<'_, anyhow::Result<Box<dyn Held>>> {
            Box::pin(async move {
                loop {
                    match self
                        .manager
                        .lock(self.resource.as_slice(), self.lease)
                        .await
                    {
                        Ok(lock) => return Ok(Box::new(RslockHeld(lock)) as Box<dyn Held>),
                        // Its three tries all found the lock taken.
                        Err(rslock::LockError::Unavailable) => {}
                        Err(e) => return Err(anyhow::anyhow!("rslock: {e}")),
                    }
                }
            })
        }
    }

    struct RslockHeld(rslock::Lock);

    impl Held for RslockHeld {
        fn release(self: Box<Self>) -> BoxFuture<'static, anyhow::Result<()>> {
            // rslock's unlock is best effort and reports nothing.
            Box::pin(async move {
                self.0.release().await;
                Ok(())
            })
        }
    }
}
