//! The Pub/Sub waiting engine: one subscriber connection per client,
//! channels shared by that client's waiters, and a notifier per waiter.
//!
//! Invariants:
//! - A waiter registers its slot before it subscribes and before each try
//!   clears its wake-up flag, so a release that lands between a failed try
//!   and the sleep wakes it (`slot.rs`; checked under loom in `loom.rs`).
//! - Only the engine's task sends SUBSCRIBE/UNSUBSCRIBE, and it decides
//!   from the channel table, so a waiter never counts on a channel the
//!   server no longer has ([`run`]).
//! - After the subscriber connection comes back, every channel is
//!   subscribed again and every waiter woken: nothing published meanwhile
//!   is waited out.
//! - Every wait ends at a deadline; a waiter woken that leaves without
//!   acquiring passes its wake-up on to the next of its class.
//!
//! `slot.rs`: the notifier and the channel table; `local.rs`: the local
//! hand-off's states; `sync.rs`: the primitives both are built of (loom's
//! in the loom build); this file: the engine's connection and task.
//! Nothing here imports the client, holds, acquires or `handoff.rs`.

pub(crate) mod local;
#[cfg(all(test, deadbolt_loom))]
mod loom;
mod slot;
mod sync;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;

use parking_lot::Mutex;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;

use self::local::{Claim, LocalNow};
use self::slot::{wake_any, Seat, Shared};
pub(crate) use self::slot::{Slot, Waiter, Woke};
use crate::conn::{Conn, Health};
use crate::wake::{Grant, WakePolicy};

/// How long a channel stays subscribed after its last waiter left, so a
/// client that waits on the same lock again and again does not pay a
/// SUBSCRIBE and an UNSUBSCRIBE each time.
const LINGER: std::time::Duration = std::time::Duration::from_secs(2);

/// How often the engine's task looks at every channel, beside the ones
/// the ops name (see `run`).
const FULL_SCAN: std::time::Duration = std::time::Duration::from_secs(1);

/// A listed hold: its id, its owner, and how long its lease was known to
/// last at grant.
type Listed = (u64, String, Instant);

/// The waiting engine of one client.
#[derive(Debug)]
pub(crate) struct Engine {
    shared: Arc<Shared>,
    conn: Arc<Conn>,
    /// This client's holds that may hand off locally, per channel: hold
    /// id, owner, and the instant its lease was known to last until at
    /// grant. A waiter of another owner that finds one here sleeps without
    /// asking the server: the hold's unlock hands it over or releases
    /// (and the release's message wakes it). Locked after `table`.
    held: Mutex<HashMap<String, Vec<Listed>>>,
}

impl Engine {
    /// Open the subscriber connection and start the engine's task.
    pub(crate) async fn start(
        target: crate::conn::Target,
        command_timeout: std::time::Duration,
        client_name: &str,
    ) -> crate::Result<Arc<Engine>> {
        let (shared, ops_rx) = Shared::new();
        let weak = Arc::downgrade(&shared);
        let handler = Arc::new(move |info: PushInfo| {
            let Some(shared) = weak.upgrade() else { return };
            match (info.kind, info.data.first(), info.data.get(1)) {
                (
                    PushKind::Message | PushKind::SMessage,
                    Some(Value::BulkString(ch)),
                    Some(Value::BulkString(payload)),
                ) => shared.deliver(ch, payload),
                // On a cluster the server ends shard-channel subscriptions
                // itself when their slot moves to another node.
                (PushKind::SUnsubscribe, Some(Value::BulkString(ch)), _) => shared.dropped(ch),
                _ => {}
            }
        });
        let conn = Conn::connect(
            "subscriber",
            target,
            command_timeout,
            Some(handler),
            client_name,
        )
        .await?;
        tokio::spawn(run(Arc::downgrade(&shared), conn.clone(), ops_rx));
        Ok(Arc::new(Engine {
            shared,
            conn,
            held: Mutex::new(HashMap::new()),
        }))
    }

    /// The subscriber connection.
    pub(crate) fn conn(&self) -> &Arc<Conn> {
        &self.conn
    }

    /// Register a waiter on `channel` and ask for the subscription.
    ///
    /// Returns at once; [`Subscription::confirmed`] waits for the server.
    pub(crate) fn subscribe(self: &Arc<Self>, channel: &str, waiter: Waiter) -> Subscription {
        Subscription {
            engine: self.clone(),
            seat: self.shared.subscribe(channel, waiter),
        }
    }

    /// Register a waiter only if `channel` is already subscribed and
    /// confirmed on the live connection (joining costs no round trip).
    pub(crate) fn subscribe_if_confirmed(
        self: &Arc<Self>,
        channel: &str,
        waiter: Waiter,
    ) -> Option<Subscription> {
        let policy = waiter.policy;
        let slot = Slot::new(waiter);
        if !self.join_if_confirmed(channel, &slot, policy) {
            return None;
        }
        crate::metrics::waiters(1.0);
        Some(Subscription {
            engine: self.clone(),
            seat: Seat {
                shared: self.shared.clone(),
                channel: channel.to_string(),
                slot,
            },
        })
    }

    /// Put `slot` on `channel` only if the channel is already subscribed
    /// and confirmed on the live connection (joining costs no round trip).
    /// Checked and joined under one lock: the engine's task only drops
    /// channels without waiters, so a joined channel stays subscribed.
    fn join_if_confirmed(
        &self,
        channel: &str,
        slot: &Arc<Slot>,
        policy: &'static dyn WakePolicy,
    ) -> bool {
        let epoch = self.conn.epoch();
        let mut table = self.shared.table.lock();
        match table.get_mut(channel) {
            Some(entry) if entry.confirmed == Some(epoch) => {
                entry.join(slot, policy);
                true
            }
            _ => false,
        }
    }

    /// The waiter of `sub` also on `channel` (decoded by `policy`): a
    /// watch that listens on several channels.
    /// Returns at once; [`Also::confirmed`] waits for the server.
    pub(crate) fn also(
        self: &Arc<Self>,
        sub: &Subscription,
        channel: &str,
        policy: &'static dyn WakePolicy,
    ) -> Also {
        let mut table = self.shared.table.lock();
        let needs_subscribe = table
            .entry(channel.to_string())
            .or_default()
            .join(&sub.seat.slot, policy);
        drop(table);
        if needs_subscribe {
            let _ = self.shared.ops.send(channel.to_string());
        }
        Also {
            engine: self.clone(),
            channel: channel.to_string(),
            slot: sub.seat.slot.clone(),
        }
    }

    /// List a hold that may hand off locally (see [`Engine::held`]).
    pub(crate) fn list_hold(&self, channel: &str, hold: u64, owner: &str, until: Instant) {
        self.held
            .lock()
            .entry(channel.to_string())
            .or_default()
            .push((hold, owner.to_string(), until));
    }

    /// Take a hold off the list (before its release is sent, so that a
    /// waiter that comes later asks the server). Idempotent.
    pub(crate) fn unlist_hold(&self, channel: &str, hold: u64) {
        let _table = self.shared.table.lock();
        self.unlist_locked(channel, hold);
    }

    fn unlist_locked(&self, channel: &str, hold: u64) {
        let mut held = self.held.lock();
        if let Some(v) = held.get_mut(channel) {
            v.retain(|h| h.0 != hold);
            if v.is_empty() {
                held.remove(channel);
            }
        }
    }

    /// Whether a waiter of `owner`, already registered on `channel`, may
    /// sleep without a first try: a listed hold of another owner of this
    /// client will hand the lock over or release it. Returns the instant
    /// to try by anyway (the longest lease known at grant).
    pub(crate) fn held_elsewhere(&self, channel: &str, owner: &str) -> Option<Instant> {
        let _table = self.shared.table.lock();
        let held = self.held.lock();
        let v = held.get(channel)?;
        if v.iter().any(|h| h.1 == owner) {
            // Its own hold: the try re-enters at once.
            return None;
        }
        v.iter().map(|h| h.2).max()
    }

    /// Wake one unnamed waiter on `channel` to ask the server (a listed
    /// hold ended without a release that would wake it).
    pub(crate) fn nudge(&self, channel: &str) {
        if let Some(ch) = self.shared.table.lock().get(channel) {
            wake_any(ch, 1, None);
        }
    }

    /// Claim the longest-waiting local waiter of `class` on `channel` for a
    /// local hand-off from `hold` (when `want`). When none is claimed, the
    /// hold is taken off the list in the same step: its unlock now
    /// releases, and a waiter registered from then on asks the server.
    pub(crate) fn claim(&self, channel: &str, class: &str, hold: u64, want: bool) -> Option<Claim> {
        self.shared
            .claim(channel, class, want, || self.unlist_locked(channel, hold))
    }

    /// Close the subscriber connection and wake every waiter, so each finds
    /// out at its next step that the client is gone.
    pub(crate) fn close(&self) {
        self.conn.close();
        self.wake_all();
    }

    /// Wake every waiter on every channel (shutdown: each then finds out
    /// that the client is closing and leaves).
    pub(crate) fn wake_all(&self) {
        for ch in self.shared.table.lock().values() {
            ch.slots.iter().for_each(|s| s.wake());
        }
    }

    /// Channels in the table, lingering ones included, the client's own
    /// ([`Engine::pin`]) left out (for tests and inspection).
    pub(crate) fn channel_count(&self) -> usize {
        let n = self.shared.table.lock().len();
        n.saturating_sub(usize::from(self.shared.pinned().is_some()))
    }

    /// Keep the client's own `channel` subscribed for the client's life and
    /// hand each of its messages to `on_message` (called on the subscriber
    /// connection's push handler: it must not block).
    pub(crate) fn pin(&self, channel: String, on_message: self::slot::OnMessage) {
        self.shared.pin(channel, on_message);
    }

    /// Local waiters registered on any channel.
    pub(crate) fn waiter_count(&self) -> usize {
        // A waiter on two channels (Engine::also) counts once.
        self.shared
            .table
            .lock()
            .values()
            .flat_map(|c| c.slots.iter().map(Arc::as_ptr))
            .collect::<std::collections::HashSet<_>>()
            .len()
    }
}

/// Channels the engine's task looks at in its next round: those whose
/// entry changed (named by the ops), those whose linger may have ended, or
/// all of them after a reconnect.
#[derive(Debug, Default)]
struct Due {
    changed: HashSet<String>,
    /// Idle channels by when their linger ends (an entry may be stale: the
    /// channel was joined again, or went idle later; the round checks).
    lingering: BinaryHeap<Reverse<(Instant, String)>>,
    /// Every channel of the table (a new connection subscribes them all).
    all: bool,
}

impl Due {
    /// When the next round is due without an op: the first linger's end.
    fn next_linger(&self) -> Option<Instant> {
        self.lingering.peek().map(|Reverse((t, _))| *t)
    }

    /// Take the lingers that ended by `now` into `changed`.
    fn lingers_ended(&mut self, now: Instant) {
        while self
            .lingering
            .peek()
            .is_some_and(|Reverse((t, _))| *t <= now)
        {
            if let Some(Reverse((_, k))) = self.lingering.pop() {
                self.changed.insert(k);
            }
        }
    }

    /// Look at `names` again next round (a round that failed part-way).
    fn again(&mut self, names: &[String]) {
        self.changed.extend(names.iter().cloned());
    }
}

/// The engine's task: keeps the server's subscriptions equal to the table.
///
/// A waiter registers a [`Slot`] on a channel before it
/// subscribes. The first slot of a channel asks the engine's task to
/// SUBSCRIBE; when the last one leaves, the channel lingers for two seconds
/// (a client that waits on one lock again and again keeps its subscription)
/// and is then unsubscribed. That task alone
/// sends SUBSCRIBE/UNSUBSCRIBE, batching every request queued since its last
/// round, and decides from the table (not from the requests) what the server
/// must hear, so a quick unsubscribe/subscribe of one channel can never leave
/// the server unsubscribed while a waiter counts on it. Commands on one
/// connection run in order, so a SUBSCRIBE sent after an UNSUBSCRIBE wins.
///
/// When the server refuses a SUBSCRIBE with an error reply
/// (an ACL user without permission for the channel: `NOPERM`), retrying
/// cannot help: the channel is marked refused, its waiters are woken and
/// fail with [`Error::SubscribeRefused`](crate::Error::SubscribeRefused).
/// The mark goes with the channel's last waiter, so a later wait asks the
/// server again.
///
/// When the subscriber connection drops, every channel becomes
/// unconfirmed. Once the connection is back, the engine re-subscribes every
/// channel in its table and, when the server has confirmed, wakes every
/// waiter to try again: a release published while the connection was down is
/// never waited out.
async fn run(
    weak: std::sync::Weak<Shared>,
    conn: Arc<Conn>,
    mut ops: mpsc::UnboundedReceiver<String>,
) {
    let mut health = conn.health();
    // Channels the server may still be subscribed to on the current epoch.
    let mut on_server: HashSet<String> = HashSet::new();
    let mut last_epoch = health.borrow().epoch;
    let mut retry_at: Option<Instant> = None;
    let mut due = Due::default();
    let mut last_full = Instant::now();
    loop {
        // At least every FULL_SCAN the whole table is looked at again, as
        // every round once did: a backstop for a change no op named.
        let full_at = last_full + FULL_SCAN;
        let wake_at = [retry_at, due.next_linger(), Some(full_at)]
            .into_iter()
            .flatten()
            .min();
        let timer = async {
            match wake_at {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            op = ops.recv() => match op {
                None => return,
                Some(k) => { due.changed.insert(k); }
            },
            r = health.changed() => if r.is_err() { return },
            () = timer => {}
        }
        retry_at = None;
        while let Ok(k) = ops.try_recv() {
            due.changed.insert(k);
        }
        let now = Instant::now();
        due.lingers_ended(now);
        if now >= full_at {
            due.all = true;
            last_full = now;
        }
        let Some(shared) = weak.upgrade() else { return };
        let h: Health = *health.borrow_and_update();
        if !h.up {
            if conn.is_closed() {
                return;
            }
            continue;
        }
        let reconnected = h.epoch != last_epoch;
        if reconnected {
            on_server.clear();
            last_epoch = h.epoch;
            due.all = true;
        }
        let Ok((mut c, epoch)) = conn.get() else {
            continue;
        };
        if epoch != h.epoch {
            continue;
        }
        let (to_sub, to_unsub) = round_plan(&shared, &on_server, h.epoch, &mut due);
        if !to_unsub.is_empty() {
            match c.unsubscribe(&to_unsub).await {
                Ok(()) => to_unsub.iter().for_each(|k| {
                    on_server.remove(k);
                }),
                Err(e) => {
                    let _ = conn.sent_error(epoch, e);
                    due.again(&to_unsub);
                    due.again(&to_sub);
                    retry_at = Some(Instant::now() + std::time::Duration::from_millis(50));
                    continue;
                }
            }
        }
        if !to_sub.is_empty() {
            match c.subscribe(&to_sub).await {
                Ok(()) => subscribed(&shared, &to_sub, &mut on_server, epoch, reconnected),
                Err(e) if e.code().is_some() => {
                    // An error reply: the server refused (NOPERM). Find out
                    // which channels, one by one, and fail their waiters.
                    refuse(&shared, &mut c, &to_sub, e, epoch, &mut on_server).await;
                }
                Err(e) => {
                    let _ = conn.sent_error(epoch, e);
                    due.again(&to_sub);
                    retry_at = Some(Instant::now() + std::time::Duration::from_millis(50));
                }
            }
        }
    }
}

/// One round's changes among the channels `due` names (taken from it):
/// the channels to subscribe (not confirmed on `epoch`, not refused) and
/// to unsubscribe (on the server, gone from the table), after dropping the
/// channels idle for [`LINGER`] (and idle ones never confirmed); an idle
/// channel kept goes back into `due` for when its linger ends. O(what
/// changed), or O(table) after a reconnect.
fn round_plan(
    shared: &Shared,
    on_server: &HashSet<String>,
    epoch: u64,
    due: &mut Due,
) -> (Vec<String>, Vec<String>) {
    let now = Instant::now();
    let mut table = shared.table.lock();
    if std::mem::take(&mut due.all) {
        due.changed.extend(table.keys().cloned());
    }
    let (mut to_sub, mut to_unsub) = (Vec::new(), Vec::new());
    let mut dropped = 0_u32;
    for k in due.changed.drain() {
        let Some(c) = table.get(&k) else {
            if on_server.contains(&k) {
                to_unsub.push(k);
            }
            continue;
        };
        if let Some(t) = c.idle_since {
            if t + LINGER <= now || c.confirmed != Some(epoch) {
                table.remove(&k);
                dropped += 1;
                if on_server.contains(&k) {
                    to_unsub.push(k);
                }
                continue;
            }
            due.lingering.push(Reverse((t + LINGER, k.clone())));
        }
        if c.confirmed != Some(epoch) && c.refused.is_none() {
            to_sub.push(k);
        }
    }
    crate::metrics::subscriptions(-f64::from(dropped));
    (to_sub, to_unsub)
}

/// `channels` were subscribed on `epoch`: confirm them, and after a
/// reconnect wake every waiter (anything published while the connection
/// was away is lost: every waiter tries again now that the channels are
/// back).
fn subscribed(
    shared: &Shared,
    channels: &[String],
    on_server: &mut std::collections::HashSet<String>,
    epoch: u64,
    reconnected: bool,
) {
    let mut table = shared.table.lock();
    for k in channels {
        on_server.insert(k.clone());
        if let Some(ch) = table.get_mut(k) {
            ch.confirmed = Some(epoch);
        }
    }
    if reconnected {
        tracing::info!(
            channels = table.len(),
            "re-subscribed after reconnect; waking waiters"
        );
        for ch in table.values() {
            ch.slots.iter().for_each(|s| s.wake());
        }
    }
    drop(table);
    shared.confirmations.send_modify(|n| *n += 1);
}

/// After a refused SUBSCRIBE of `channels`: subscribe each alone, mark the
/// ones the server refuses, and wake their waiters (they fail with
/// `SubscribeRefused`); the others are confirmed as usual.
async fn refuse(
    shared: &Shared,
    c: &mut crate::conn::Connection,
    channels: &[String],
    first: redis::RedisError,
    epoch: u64,
    on_server: &mut std::collections::HashSet<String>,
) {
    let mut first = Some(first);
    for k in channels {
        let r = match (channels.len(), first.take()) {
            (1, Some(e)) => Err(e),
            _ => c.subscribe(std::slice::from_ref(k)).await,
        };
        let mut table = shared.table.lock();
        let Some(ch) = table.get_mut(k) else { continue };
        match r {
            Ok(()) => {
                on_server.insert(k.clone());
                ch.confirmed = Some(epoch);
            }
            Err(e) => {
                let reason = e.to_string();
                tracing::warn!(channel = %k, %reason, "subscription refused; its waiters fail");
                ch.refused = Some(reason);
                ch.slots.iter().for_each(|s| s.wake());
            }
        }
    }
    shared.confirmations.send_modify(|n| *n += 1);
}

/// One waiter's registration on a channel. Dropping it leaves the channel
/// (unsubscribing with the last waiter) and passes on an unused wake-up.
#[derive(Debug)]
pub(crate) struct Subscription {
    engine: Arc<Engine>,
    seat: Seat,
}

/// Wait until the server confirmed `channel`, or `deadline`. Returns
/// whether it is confirmed.
async fn confirmed_on(engine: &Engine, channel: &str, deadline: Instant) -> bool {
    let mut rx = engine.shared.confirmations.subscribe();
    loop {
        let epoch = engine.conn.epoch();
        let ok = engine
            .shared
            .table
            .lock()
            .get(channel)
            .is_some_and(|c| c.confirmed == Some(epoch));
        if ok {
            return true;
        }
        if refused_on(engine, channel).is_some() {
            return false;
        }
        match tokio::time::timeout_at(deadline, rx.changed()).await {
            Ok(Ok(())) => {}
            _ => return false,
        }
    }
}

/// The server's refusal of `channel`, if it refused.
fn refused_on(engine: &Engine, channel: &str) -> Option<String> {
    engine
        .shared
        .table
        .lock()
        .get(channel)
        .and_then(|c| c.refused.clone())
}

/// A waiter's slot on a second channel (see [`Engine::also`]); dropped, it
/// leaves that channel.
#[derive(Debug)]
pub(crate) struct Also {
    engine: Arc<Engine>,
    channel: String,
    slot: Arc<Slot>,
}

impl Also {
    /// Wait until the server confirmed the channel, or `deadline`.
    pub(crate) async fn confirmed(&self, deadline: Instant) -> bool {
        confirmed_on(&self.engine, &self.channel, deadline).await
    }
}

impl Drop for Also {
    fn drop(&mut self) {
        let shared = &self.engine.shared;
        let mut table = shared.table.lock();
        let Some(ch) = table.get_mut(&self.channel) else {
            return;
        };
        if ch.leave(&self.slot) {
            drop(table);
            let _ = shared.ops.send(self.channel.clone());
        }
    }
}

impl Subscription {
    /// Wait until the server confirmed the subscription, or `deadline`.
    /// Returns whether it is confirmed.
    pub(crate) async fn confirmed(&self, deadline: Instant) -> bool {
        confirmed_on(&self.engine, &self.seat.channel, deadline).await
    }

    /// The server's refusal of this channel, if it refused.
    pub(crate) fn refused(&self) -> Option<String> {
        refused_on(&self.engine, &self.seat.channel)
    }

    /// Call before each try: forget wake-ups that the try will observe anyway.
    pub(crate) fn begin_try(&self) {
        self.seat.begin_try();
    }

    /// Sleep until a wake-up that arrived since the last [`begin_try`], or
    /// `deadline`: the caller picks the holder's remaining TTL from the last
    /// reply or its own time left, whichever is sooner, so a lock whose
    /// holder died without unlocking (no message ever comes) is tried again
    /// when its key has expired.
    ///
    /// [`begin_try`]: Subscription::begin_try
    pub(crate) async fn wait(&self, deadline: Instant) -> Woke {
        self.seat.wait(deadline).await
    }

    /// A try of this waiter was answered (busy or queued): a wake-up it
    /// took has been used, and its leaving passes nothing on.
    pub(crate) fn tried(&self) {
        self.seat.tried();
    }

    /// Whether this waiter's last try left a registration that a release
    /// grants to by name.
    pub(crate) fn set_registered(&self, registered: bool) {
        self.seat.set_registered(registered);
    }

    /// Whether this waiter holds a registration ([`set_registered`]).
    ///
    /// [`set_registered`]: Subscription::set_registered
    pub(crate) fn registered(&self) -> bool {
        self.seat.registered()
    }

    /// The hand-off that named this waiter, if one arrived.
    pub(crate) fn take_grant(&self) -> Option<Grant> {
        self.seat.take_grant()
    }

    /// After a wake-up: whether a local hand-off claimed this waiter (a
    /// waiter that goes on to try may still be claimed: see
    /// [`Local`](local::Local)).
    pub(crate) fn local_wake(&self) -> LocalNow {
        self.seat.local_wake()
    }

    /// The waiter got what it waited for: its leaving passes nothing on,
    /// and a hand-off to it still under way is that same hold.
    pub(crate) fn mark_acquired(&self) {
        if let Some(g) = self.seat.mark_acquired() {
            // The hand-off landed, and this waiter's own try then found
            // the same hold (a replay of its attempt) and keeps it under
            // a record of its own: the hand-off's listing must go.
            self.engine.unlist_hold(&self.seat.channel, g.hold_id);
        }
    }
}

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod races;
