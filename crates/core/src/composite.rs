//! What a composite (a lock over several locks) holds: any exclusive lock
//! as one [`Hold`] of its own client ([`Lockable`]), and plain locks of one
//! client taken together in one script of the composite's own
//! ([`PlainLocks`]), all or none, one [`Hold`] per lock, renewed and
//! released as that lock's own holds are.
//!
//! Invariants: a take whose outcome is not known (cancelled in flight,
//! `Indeterminate`, not replicated under `sync_replicas`) is undone by the
//! composite's undo script on the client's background releaser; each
//! handle counts the take as an acquire in progress until its hold is added
//! to the handle's live set ([`HoldSet`]), so a concurrent acquire of a
//! clone never takes that hold for a stale one.

use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::time::Instant;

use crate::acquire::new_attempt_id;
use crate::config::lease_ms;
use crate::handle::Acquire;
use crate::hold::{HoldSet, HoldSpec};
use crate::scripts::{LuaScript, ScriptCall};
use crate::{Client, Error, Exclusive, ExclusiveKind, Hold, LeaseMode, Result, WaitMode};

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
    /// [`Error::InvalidArgument`] for an
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

/// A lock as a composite takes it in a script of its own
/// ([`Lockable::plain`]): a hold hash and a fencing counter in the layout
/// `hold_lib.lua` describes, no queue. Read through [`PlainLocks`].
#[derive(Debug, Clone)]
pub struct PlainLock {
    /// The client the lock was made from.
    pub(crate) client: Client,
    /// The primitive's kind, for tracing.
    pub(crate) kind: &'static str,
    /// The handle's owner id.
    pub(crate) owner: String,
    /// The hold hash.
    pub(crate) key: String,
    /// The fencing counter.
    pub(crate) fence: String,
    /// The channel a release publishes on.
    pub(crate) channel: String,
    /// The lock's release script: `KEYS = [hold hash]`, `ARGV = [attempt,
    /// channel]` releases one hold by attempt id.
    pub(crate) release: &'static LuaScript,
    /// The lock's renew script, on `KEYS = [hold hash]`.
    pub(crate) renew: &'static LuaScript,
    /// The handle's holds, when it keeps them.
    pub(crate) live: Option<Arc<HoldSet>>,
}

/// Plain locks of one client whose keys one script may touch together (on
/// a cluster: one hash slot), at least two: what a composite takes in one
/// script ([`PlainLocks::try_take`]).
#[derive(Debug, Clone)]
pub struct PlainLocks(Arc<Vec<PlainLock>>);

/// Hands the undo to the background releaser if dropped armed (the take
/// may have run: cancelled in flight, or `Indeterminate`).
struct Undo<'a> {
    client: &'a Client,
    call: Option<ScriptCall>,
}

impl Drop for Undo<'_> {
    fn drop(&mut self) {
        if let Some(call) = self.call.take() {
            self.client.release_in_background(call);
        }
    }
}

impl PlainLocks {
    /// `locks`, in their order, when every one is a plain lock of one
    /// client and one script may touch all their keys; `None` otherwise
    /// (fewer than two, another kind, several clients, several slots).
    pub fn of(locks: &[Arc<dyn Lockable>]) -> Option<PlainLocks> {
        let plain: Vec<PlainLock> = locks.iter().map(|l| l.plain()).collect::<Option<_>>()?;
        let first = plain.first()?;
        let keys: Vec<&str> = plain
            .iter()
            .flat_map(|p| [p.key.as_str(), p.fence.as_str()])
            .collect();
        let one_call = plain.len() > 1
            && plain.iter().all(|p| p.client.id() == first.client.id())
            && first.client.one_call_for(&keys);
        one_call.then(|| PlainLocks(Arc::new(plain)))
    }

    /// One try at every lock in one run of `take`: `Ok(Ok(holds))`, one
    /// per lock in order, or `Ok(Err(i))` when lock `i` (from 0) is held
    /// by another owner and nothing was written.
    ///
    /// `take`'s contract: `KEYS` = each lock's hold hash and fencing
    /// counter in turn; `ARGV` = `[attempt, lease ms, owner of each lock...,
    /// stale-hold bound of each lock...]` (the bound as an acquire's
    /// `ARGV[6]`); reply `{1, token, pttl, token, pttl, ...}` granted (also
    /// a re-entry or a replay of the attempt), `{0, pttl, i}` lock `i`
    /// (from 1) busy, nothing written. `undo` releases the attempt's holds:
    /// `KEYS` = the hold hashes, `ARGV` = `[attempt, channel of each
    /// lock...]`; idempotent.
    ///
    /// # Errors
    /// `InvalidArgument` for a lease out of range or a reply of another
    /// shape; the server's errors as any acquire's (`WrongType`,
    /// `Unavailable`, `Indeterminate`, ...), after which whatever may have
    /// been granted is released.
    ///
    /// # Cancel safety
    /// If dropped in flight, the undo runs on the background releaser:
    /// nothing stays held.
    pub async fn try_take(
        &self,
        lease: LeaseMode,
        take: &'static LuaScript,
        undo: &'static LuaScript,
    ) -> Result<std::result::Result<Vec<Hold>, usize>> {
        let plain = &self.0[..];
        let client = &plain[0].client;
        let ms = match lease {
            LeaseMode::Fixed(d) => lease_ms(d)?,
            _ => lease_ms(client.config().watchdog_timeout)?,
        };
        // Counted as in progress before the attempt id is drawn (see
        // `HoldSet::acquire_arg`) and until the holds are added.
        let _entered: Vec<_> = plain
            .iter()
            .filter_map(|p| p.live.as_ref().map(|s| s.enter()))
            .collect();
        let attempt = new_attempt_id();
        let mut armed = Undo {
            client,
            call: Some(self.undo_call(undo, &attempt)),
        };
        let sent = Instant::now();
        let reply = match client
            .run::<Vec<i64>>(&self.take_call(take, &attempt, ms))
            .await
        {
            Ok(v) => v,
            Err(e) => {
                if !e.is_indeterminate() {
                    armed.call = None;
                }
                return Err(e);
            }
        };
        if reply.first() == Some(&1) {
            // Granted: with `sync_replicas`, not kept unless replicated
            // (on an error the armed undo gives the set back).
            client.await_replicas(&plain[0].key).await?;
        }
        armed.call = None;
        match reply.as_slice() {
            [1, rest @ ..] if rest.len() == 2 * plain.len() => Ok(Ok(plain
                .iter()
                .zip(rest.chunks(2))
                .map(|(p, tp)| p.granted(&attempt, lease, sent, tp[0], tp[1]))
                .collect())),
            [0, _, i] => Ok(Err(usize::try_from(*i - 1).unwrap_or(0))),
            other => Err(Error::InvalidArgument(format!(
                "unexpected reply {other:?} to a take of plain locks"
            ))),
        }
    }

    fn take_call(&self, take: &'static LuaScript, attempt: &str, ms: u64) -> ScriptCall {
        let plain = &self.0;
        ScriptCall::new(
            take,
            plain
                .iter()
                .flat_map(|p| [p.key.clone(), p.fence.clone()])
                .collect(),
            [attempt.to_string(), ms.to_string()]
                .into_iter()
                .chain(plain.iter().map(|p| p.owner.clone()))
                // `0` when the handle may still hold the lock (a re-entry
                // is expected) or keeps no holds, else the attempt's
                // number.
                .chain(plain.iter().map(|p| {
                    p.live
                        .as_ref()
                        .map_or_else(|| "0".to_string(), |s| s.acquire_arg(attempt))
                }))
                .collect(),
        )
    }

    fn undo_call(&self, undo: &'static LuaScript, attempt: &str) -> ScriptCall {
        ScriptCall::new(
            undo,
            self.0.iter().map(|p| p.key.clone()).collect(),
            std::iter::once(attempt.to_string())
                .chain(self.0.iter().map(|p| p.channel.clone()))
                .collect(),
        )
    }
}

impl PlainLock {
    /// The hold a take granted this lock under `attempt` (its token and
    /// TTL as replied), added to the handle's live set.
    fn granted(
        &self,
        attempt: &str,
        lease: LeaseMode,
        sent: Instant,
        token: i64,
        pttl: i64,
    ) -> Hold {
        let spec = HoldSpec {
            kind: self.kind,
            key: self.key.clone(),
            renew: self.renew,
            renew_keys: vec![self.key.clone()],
            release: ScriptCall::new(
                self.release,
                vec![self.key.clone()],
                vec![attempt.to_string(), self.channel.clone()],
            ),
            pass: None,
        };
        let hold = Hold::new(
            &self.client,
            spec,
            attempt.to_string(),
            token.unsigned_abs(),
            lease,
            sent,
            pttl.unsigned_abs(),
        );
        if let Some(set) = &self.live {
            set.add(&hold);
        }
        hold
    }
}
