//! deadbolt's primitives as contenders: one generic implementation for
//! every exclusive kind, the `RwLock`, the `Semaphore`, the `MultiLock`
//! and the `Redlock`, each client over its own `deadbolt_core::Client`s.

use super::*;

/// Commands a deadbolt client sends itself: scripts and Pub/Sub
/// ([`PUBSUB_COMMANDS`]). PING is listed so that a health check, if one were
/// added, would show; the bench's own PINGs are subtracted. PUBLISH, DEL,
/// SET… run inside deadbolt's scripts only.
pub(super) const DEADBOLT_COMMANDS: &[&str] = &joined::<6>(&PUBSUB_COMMANDS, &["ping"]);

/// A handle of the lock `name` over a contender client's deadbolt clients
/// (one per server; every kind but the Redlock uses the first only).
pub(super) type MakeHandle = fn(&[deadbolt_core::Client], &str) -> Arc<dyn LockHandle>;

/// A deadbolt primitive: one `deadbolt_core::Client` per server per contender
/// client.
pub(super) struct Deadbolt {
    kind: ContenderKind,
    namespace: String,
    lease: Duration,
    make: MakeHandle,
    /// The permits a semaphore is set to before a run; `None` for the locks.
    permits: Option<u64>,
    /// Servers it spans: [`REDLOCK_SERVERS`] for the Redlock, else 1.
    servers: usize,
}

impl Deadbolt {
    pub(super) fn new(kind: ContenderKind, opts: &ContenderOptions, make: MakeHandle) -> Deadbolt {
        Deadbolt {
            kind,
            namespace: opts.namespace.clone(),
            lease: opts.lease,
            make,
            permits: (kind == ContenderKind::Sem).then_some(u64::from(opts.permits)),
            servers: if kind == ContenderKind::Redlock {
                REDLOCK_SERVERS
            } else {
                1
            },
        }
    }
}

impl Contender for Deadbolt {
    fn kind(&self) -> ContenderKind {
        self.kind
    }

    fn client_commands(&self) -> &'static [&'static str] {
        DEADBOLT_COMMANDS
    }

    fn shared_reads(&self) -> bool {
        self.kind == ContenderKind::Rw
    }

    fn servers(&self) -> usize {
        self.servers
    }

    fn connect<'a>(
        &'a self,
        urls: &'a [String],
    ) -> BoxFuture<'a, anyhow::Result<Box<dyn ContenderClient>>> {
        Box::pin(async move {
            let mut clients = Vec::with_capacity(self.servers);
            for url in &urls[..self.servers] {
                // Scripts loaded at connect, before any run counts commands,
                // so no SCRIPT LOAD shows in cmds/acq. The MultiLock and the
                // Redlock run the Lock's scripts.
                let scripts = [
                    deadbolt_lock::SCRIPTS,
                    deadbolt_fair::SCRIPTS,
                    deadbolt_rwlock::SCRIPTS,
                    deadbolt_semaphore::SCRIPTS,
                    deadbolt_multilock::SCRIPTS,
                ];
                let builder = deadbolt_core::Client::builder(url);
                clients
                    .push(deadbolt_client(builder, &scripts, &self.namespace, self.lease).await?);
            }
            Ok(Box::new(DeadboltClient {
                clients,
                make: self.make,
                permits: self.permits,
            }) as Box<dyn ContenderClient>)
        })
    }
}

pub(super) struct DeadboltClient {
    /// One per server the contender spans, server 1 first.
    clients: Vec<deadbolt_core::Client>,
    make: MakeHandle,
    permits: Option<u64>,
}

impl ContenderClient for DeadboltClient {
    fn handle(&self, name: &str) -> Arc<dyn LockHandle> {
        (self.make)(&self.clients, name)
    }

    fn prepare<'a>(&'a self, name: &'a str) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async move {
            let Some(permits) = self.permits else {
                return Ok(());
            };
            let sem = deadbolt_semaphore::Semaphore::new(&self.clients[0], name);
            // Names are new for every run: permits set before would be a
            // leftover with perhaps another count.
            if !sem.try_set_permits(permits).await? {
                bail!("the semaphore {name} had its permits set already");
            }
            Ok(())
        })
    }

    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {
            for c in &self.clients {
                c.shutdown().await;
            }
        })
    }
}

/// [`DEADBOLT_COMMANDS`] and, for a cluster's sharded Pub/Sub, SSUBSCRIBE
/// and SUNSUBSCRIBE: what a deadbolt client sends itself on any topology.
pub(crate) const DEADBOLT_TOPOLOGY_COMMANDS: &[&str] =
    &joined::<8>(&PUBSUB_COMMANDS, &["ssubscribe", "sunsubscribe", "ping"]);

/// A deadbolt client from `builder` in the bench's `namespace`, with `lease`
/// as its watchdog timeout and every list of `preload` loaded at connect.
pub(super) async fn deadbolt_client(
    builder: deadbolt_core::ClientBuilder,
    preload: &[&[&'static deadbolt_core::scripts::LuaScript]],
    namespace: &str,
    lease: Duration,
) -> anyhow::Result<deadbolt_core::Client> {
    preload
        .iter()
        .fold(builder, |b, scripts| b.preload(scripts))
        .namespace(namespace)
        .watchdog_timeout(lease)
        .build()
        .await
        .context("connecting a deadbolt client")
}

/// One client of deadbolt `Lock`s from `builder` (the `lock` contender's
/// handles, on any topology), with the Lock's scripts loaded at connect.
pub(crate) async fn connect_lock(
    builder: deadbolt_core::ClientBuilder,
    namespace: &str,
    lease: Duration,
) -> anyhow::Result<Box<dyn ContenderClient>> {
    let client = deadbolt_client(builder, &[deadbolt_lock::SCRIPTS], namespace, lease).await?;
    Ok(Box::new(DeadboltClient {
        clients: vec![client],
        make: |c, n| Arc::new(deadbolt_lock::Lock::new(&c[0], n)),
        permits: None,
    }))
}

/// [`LockHandle`] for deadbolt's handles: `acquire` waits on `self.$acquire`
/// with a watchdog lease (`acquire_read` on `self.$read`, where given), the
/// guard it gets boxed as the [`Held`].
macro_rules! deadbolt_handles {
    ($(
        $(#[$doc:meta])*
        $handle:ty $(where $g:ident: $bound:path)? => [$($acquire:tt)*] $(read [$($read:tt)*])?;
    )*) => {$(
        $(#[$doc])*
        impl$(<$g: $bound>)? LockHandle for $handle {
            fn acquire(&self) -> BoxFuture<'_, anyhow::Result<Box<dyn Held>>> {
                Box::pin(async move { Ok(Box::new(self.$($acquire)*.await?) as Box<dyn Held>) })
            }
            $(
                fn acquire_read(&self) -> BoxFuture<'_, anyhow::Result<Box<dyn Held>>> {
                    Box::pin(async move { Ok(Box::new(self.$($read)*.await?) as Box<dyn Held>) })
                }
            )?
        }
    )*};
}

deadbolt_handles! {
    /// Every deadbolt exclusive lock (`Lock`, `FairLock`): `lock()`.
    deadbolt_core::Exclusive<K> where K: deadbolt_core::ExclusiveKind => [lock()];
    /// deadbolt's `RwLock`: `read()` for a read, `write()` for anything else.
    deadbolt_rwlock::RwLock => [write_lock().lock()] read [read_lock().lock()];
    /// deadbolt's `Semaphore`: `acquire(1)`.
    deadbolt_semaphore::Semaphore => [acquire(1)];
    /// deadbolt's `MultiLock`: `lock()` takes every part.
    deadbolt_multilock::MultiLock => [lock()];
    /// deadbolt's `Redlock`: `lock()` waits for a majority, renewed while held.
    deadbolt_multilock::Redlock => [lock()];
}

/// [`Held`] for deadbolt's guards, each given back by its own `$release()`.
macro_rules! deadbolt_guards {
    ($($guard:ty => $release:ident;)*) => {$(
        impl Held for $guard {
            fn release(self: Box<Self>) -> BoxFuture<'static, anyhow::Result<()>> {
                Box::pin(async move { Ok((*self).$release().await?) })
            }
        }
    )*};
}

deadbolt_guards! {
    deadbolt_core::ExclusiveGuard => unlock;
    deadbolt_rwlock::ReadGuard => unlock;
    deadbolt_semaphore::Permits => release;
    deadbolt_multilock::MultiGuard => unlock;
    deadbolt_multilock::RedlockGuard => unlock;
}
