//! The notifier: a waiter's [`Slot`], the channel table of [`Shared`], the
//! delivery of a decoded [`Wake`] to the slots, and a waiter's [`Seat`] on a
//! channel (its tries, its waits, and its leaving, which passes an unused
//! wake-up on). Nothing here knows the connections: the engine
//! (`wait/mod.rs`) feeds it messages and subscriptions, and the loom tests
//! (`wait/loom.rs`) drive this same code with loom's threads, through the
//! sync shim ([`super::sync`]).
//!
//! No lost wake-up: each slot has a `pending` flag and a `Notify`. A
//! message sets the flag, then calls `notify_one`, which stores a permit
//! if nobody sleeps yet. A waiter clears the flag before each try
//! ([`Seat::begin_try`]); when the try fails it sleeps only while the flag
//! is still clear, so a release that lands between the try and the sleep
//! wakes it at once; a stale permit costs one extra look at the flag. The
//! loom tests run this code through every interleaving up to three
//! preemptions: a release racing a subscription, a waiter cancelled asleep,
//! after its wake-up or with its try in flight, and a local hand-off racing
//! a cancel.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::local::{Claim, LocalNow, LocalWaiter, Wakeup};
use super::sync::{notified_or_until, AtomicBool, Mutex, Notify, Ordering};
use crate::wake::{Grant, Signal, Wake, WakePolicy};

#[derive(Debug)]
pub(crate) struct Slot {
    tag: Option<String>,
    /// A named waiter that unnamed wake-ups reach too (see
    /// [`Waiter::wakeable`]).
    wakeable: bool,
    /// The waiter's last try left a registration on the server that a
    /// release grants to ([`Seat::set_registered`]).
    registered: AtomicBool,
    class: &'static str,
    pending: AtomicBool,
    /// A wake-up was taken by [`Seat::wait`] and no try has been
    /// answered since ([`Seat::tried`]): a waiter that leaves now (out of
    /// time, cancelled before its try reached the server) passes it on,
    /// like one that leaves with `pending` set. Without it, the next
    /// waiter slept until its own bound (issue 23, found by the
    /// hand-written model that the loom test
    /// `a_cancelled_waiter_passes_its_wake_up_on` replaced).
    woken: AtomicBool,
    acquired: AtomicBool,
    /// When the current holder's lease ends, as told by a `t:<tag> <pttl>`
    /// message: the waiter moves its sleep bound without a round trip.
    hint: Mutex<Option<Instant>>,
    /// Until when the waiter sleeps at most, as of its current
    /// [`Seat::wait`]: a hint later than that is not worth waking
    /// it for.
    sleeps_until: Mutex<Option<Instant>>,
    /// Try again by this instant at the latest (a release that named
    /// another client: this waiter tries once that client's head start is
    /// over). Only ever moved earlier until the next try clears it, so a
    /// stream of such releases cannot push the try back for ever.
    try_by: Mutex<Option<Instant>>,
    /// A hand-off named this waiter. The acquire loop checks the secret
    /// against its queue entry before it trusts it.
    grant: Mutex<Option<Grant>>,
    /// Set for waiters an unlock in this client may hand its hold to.
    pub(crate) local: Option<Arc<LocalWaiter>>,
    notify: Notify,
}

impl Slot {
    pub(crate) fn new(waiter: Waiter) -> Arc<Slot> {
        Arc::new(Slot {
            tag: waiter.tag,
            wakeable: waiter.wakeable,
            registered: AtomicBool::new(false),
            class: waiter.class,
            local: waiter.local,
            pending: AtomicBool::new(false),
            woken: AtomicBool::new(false),
            acquired: AtomicBool::new(false),
            hint: Mutex::new(None),
            sleeps_until: Mutex::new(None),
            try_by: Mutex::new(None),
            grant: Mutex::new(None),
            notify: Notify::new(),
        })
    }

    pub(crate) fn wake(&self) {
        self.pending.store(true, Ordering::SeqCst);
        self.notify.notify_one();
    }

    /// Whether unnamed wake-ups (one, `n`, client first) reach this waiter.
    fn unnamed(&self) -> bool {
        self.tag.is_none() || self.wakeable
    }
}

impl Wakeup for Slot {
    fn wake(&self) {
        Slot::wake(self);
    }
}

#[derive(Debug, Default)]
pub(crate) struct Channel {
    pub(crate) slots: Vec<Arc<Slot>>,
    /// Decodes the channel's messages (set by its first waiter; every
    /// waiter of one channel belongs to one primitive).
    policy: Option<&'static dyn WakePolicy>,
    /// Epoch of the subscriber connection on which SUBSCRIBE was confirmed.
    pub(crate) confirmed: Option<u64>,
    /// Since when the channel has had no waiter; it is unsubscribed
    /// `LINGER` (in `wait/mod.rs`) later unless a waiter comes back.
    pub(crate) idle_since: Option<Instant>,
    /// The server refused to subscribe (its error text); not retried while
    /// waiters remain.
    pub(crate) refused: Option<String>,
}

impl Channel {
    /// Put `slot` on this channel, decoded by `policy`; returns whether the
    /// engine's task must subscribe it (never confirmed yet).
    pub(crate) fn join(&mut self, slot: &Arc<Slot>, policy: &'static dyn WakePolicy) -> bool {
        self.policy = Some(policy);
        self.slots.push(slot.clone());
        self.idle_since = None;
        self.confirmed.is_none()
    }

    /// Take `slot` off this channel; returns whether that left it idle
    /// (it lingers, then the engine's task unsubscribes it).
    pub(crate) fn leave(&mut self, slot: &Arc<Slot>) -> bool {
        self.slots.retain(|s| !Arc::ptr_eq(s, slot));
        if self.slots.is_empty() {
            self.idle_since = Some(Instant::now());
            return true;
        }
        false
    }
}

/// The channel table, and what the engine's task is told through.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Changed by waiters joining and leaving, by deliveries, and by the
    /// engine's task (confirmations, lingering channels dropped).
    pub(crate) table: Mutex<HashMap<String, Channel>>,
    /// Bumped after every round of (re)subscriptions.
    pub(crate) confirmations: watch::Sender<u64>,
    /// Wakes the engine's task with the name of a channel whose entry
    /// changed (new, idle, or dropped by the server): the task looks at
    /// those alone, so a round costs what changed, not the whole table.
    pub(crate) ops: mpsc::UnboundedSender<String>,
    /// The client's own channel and what its messages go to ([`Shared::pin`]).
    hook: std::sync::OnceLock<Hook>,
}

/// What the pinned channel's messages go to (its payload).
pub(crate) type OnMessage = Box<dyn Fn(&[u8]) + Send + Sync>;

/// A channel that no waiter listens on, whose messages go to a function of
/// the client's: its own channel (a force-unlock of one of its holds).
pub(crate) struct Hook {
    channel: String,
    on_message: OnMessage,
}

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hook")
            .field("channel", &self.channel)
            .finish()
    }
}

impl Shared {
    /// An empty table, and the receiving end of [`Shared::ops`] for the
    /// engine's task.
    pub(crate) fn new() -> (Arc<Shared>, mpsc::UnboundedReceiver<String>) {
        let (ops, ops_rx) = mpsc::unbounded_channel();
        let (confirmations, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            table: Mutex::new(HashMap::new()),
            confirmations,
            ops,
            hook: std::sync::OnceLock::new(),
        });
        (shared, ops_rx)
    }

    /// Keep `channel` subscribed for the client's life (re-subscribed
    /// after every reconnect like any channel; never lingers out, having
    /// no waiter to leave) and hand its messages to `on_message`. Once per
    /// client: a second call is ignored.
    pub(crate) fn pin(&self, channel: String, on_message: OnMessage) {
        if self
            .hook
            .set(Hook {
                channel: channel.clone(),
                on_message,
            })
            .is_err()
        {
            return;
        }
        self.table.lock().entry(channel.clone()).or_default();
        let _ = self.ops.send(channel);
    }

    /// The pinned channel ([`Shared::pin`]), if any.
    pub(crate) fn pinned(&self) -> Option<&str> {
        self.hook.get().map(|h| h.channel.as_str())
    }

    /// Put a new slot for `waiter` on `channel`, asking the engine's task
    /// to subscribe when the channel is new.
    pub(crate) fn subscribe(self: &Arc<Self>, channel: &str, waiter: Waiter) -> Seat {
        let policy = waiter.policy;
        let slot = Slot::new(waiter);
        let mut table = self.table.lock();
        // (A lookup only metrics need: compiled in with the feature alone.)
        #[cfg(feature = "metrics")]
        if !table.contains_key(channel) {
            crate::metrics::subscriptions(1.0);
        }
        let needs_subscribe = table
            .entry(channel.to_string())
            .or_default()
            .join(&slot, policy);
        crate::metrics::waiters(1.0);
        drop(table);
        if needs_subscribe {
            let _ = self.ops.send(channel.to_string());
        }
        Seat {
            shared: self.clone(),
            channel: channel.to_string(),
            slot,
        }
    }

    /// Claim the longest-waiting local waiter of `class` on `channel` for
    /// a local hand-off (when `want`). When none is claimed, `none` runs
    /// under the same table lock (the engine takes the hold off its list
    /// in that step).
    pub(crate) fn claim(
        &self,
        channel: &str,
        class: &str,
        want: bool,
        none: impl FnOnce(),
    ) -> Option<Claim> {
        let table = self.table.lock();
        let found = want.then(|| table.get(channel)).flatten().and_then(|ch| {
            ch.slots.iter().find_map(|s| {
                let local = s.local.as_ref().filter(|_| s.class == class)?;
                local.claim().then(|| (s.clone(), local.clone()))
            })
        });
        let Some((slot, local)) = found else {
            none();
            return None;
        };
        Some(Claim::new(local, slot))
    }

    /// The server ended the subscription of `channel` on its own (a
    /// cluster node whose slot moved away does so). Subscribe again, to
    /// the slot's new owner, and let every waiter try at once: a message
    /// may have been missed in between.
    pub(crate) fn dropped(&self, channel: &[u8]) {
        let Ok(channel) = std::str::from_utf8(channel) else {
            return;
        };
        let mut table = self.table.lock();
        let Some(ch) = table.get_mut(channel) else {
            return;
        };
        if ch.confirmed.take().is_none() {
            return;
        }
        tracing::info!(
            channel,
            "subscription ended by the server; subscribing again"
        );
        ch.slots.iter().for_each(|s| s.wake());
        drop(table);
        let _ = self.ops.send(channel.to_string());
    }

    pub(crate) fn deliver(&self, channel: &[u8], payload: &[u8]) {
        let Ok(channel) = std::str::from_utf8(channel) else {
            return;
        };
        if let Some(h) = self.hook.get().filter(|h| h.channel == channel) {
            (h.on_message)(payload);
            return;
        }
        let mut table = self.table.lock();
        let Some(ch) = table.get_mut(channel) else {
            return;
        };
        let Some(policy) = ch.policy else { return };
        self.apply(ch, policy.decode(payload));
    }

    /// Carry out one decoded wake-up on the waiters of `ch`.
    fn apply(&self, ch: &mut Channel, wake: Wake) {
        match wake {
            Wake::Nothing => {}
            Wake::One => wake_any(ch, 1, None),
            Wake::All { class } => ch
                .slots
                .iter()
                .filter(|s| class.as_deref().is_none_or(|c| c == s.class))
                .for_each(|s| s.wake()),
            Wake::Named(named) => {
                for (name, signal) in named {
                    tell(ch, &name, signal);
                }
            }
        }
    }
}

/// Tell the waiter registered under `name` on `ch` what `signal` says.
fn tell(ch: &Channel, name: &str, signal: Signal) {
    for s in ch.slots.iter() {
        if s.tag.as_deref() != Some(name) {
            continue;
        }
        match signal {
            Signal::SleepFor(d) => {
                *s.hint.lock() = Some(crate::config::after(d));
                s.notify.notify_one();
            }
            Signal::Grant(g) => {
                *s.grant.lock() = Some(g);
                s.wake();
            }
            Signal::Retry => s.wake(),
        }
    }
}

/// Wake up to `n` unnamed waiters of `class` not already woken, longest
/// waiting first.
pub(crate) fn wake_any(ch: &Channel, n: usize, class: Option<&str>) {
    unnamed(ch, class).take(n).for_each(|s| s.wake());
}

/// The unnamed waiters of `class` not already woken, longest waiting first.
fn unnamed<'a>(ch: &'a Channel, class: Option<&'a str>) -> impl Iterator<Item = &'a Arc<Slot>> {
    ch.slots.iter().filter(move |s| {
        !s.pending.load(Ordering::SeqCst) && s.unnamed() && class.is_none_or(|c| c == s.class)
    })
}

/// Who waits: the channel's policy, the waiter's class, its name for
/// hand-offs by name, and what a local hand-off to it needs.
#[derive(Debug, Clone)]
pub(crate) struct Waiter {
    pub(crate) policy: &'static dyn WakePolicy,
    pub(crate) class: &'static str,
    pub(crate) tag: Option<String>,
    /// With a tag: unnamed wake-ups reach the waiter too (a primitive
    /// whose releases grant to a registered waiter by name when there is
    /// one, and else wake one waiter per client).
    pub(crate) wakeable: bool,
    pub(crate) local: Option<Arc<LocalWaiter>>,
}

/// How a [`Seat::wait`] (a subscription's wait) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Woke {
    /// A message (or a reconnect) asked this waiter to try again.
    Notified,
    /// The deadline passed first.
    Deadline,
    /// The lock changed hands; the new holder's lease ends at this instant.
    /// Sleep on without a try.
    Hint(Instant),
}

/// One waiter's seat on a channel: its slot in the table. Dropping it
/// leaves the channel (the engine's task unsubscribes with the last
/// waiter, after a while) and passes on an unused wake-up.
#[derive(Debug)]
pub(crate) struct Seat {
    pub(crate) shared: Arc<Shared>,
    pub(crate) channel: String,
    pub(crate) slot: Arc<Slot>,
}

impl Seat {
    /// Call before each try: forget wake-ups that the try will observe anyway.
    pub(crate) fn begin_try(&self) {
        self.slot.pending.store(false, Ordering::SeqCst);
        *self.slot.try_by.lock() = None;
    }

    /// Sleep until a wake-up that arrived since the last [`begin_try`], or `deadline`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a wake-up that came and was not returned stays in
    /// `pending`, and one returned stays in `woken` until a try is
    /// answered; the seat's drop passes either on to the next waiter.
    ///
    /// [`begin_try`]: Seat::begin_try
    pub(crate) async fn wait(&self, deadline: Instant) -> Woke {
        *self.slot.sleeps_until.lock() = Some(deadline);
        loop {
            if self.slot.pending.swap(false, Ordering::SeqCst) {
                self.slot.woken.store(true, Ordering::SeqCst);
                return Woke::Notified;
            }
            if let Some(h) = self.slot.hint.lock().take() {
                return Woke::Hint(h);
            }
            let by = (*self.slot.try_by.lock()).map_or(deadline, |t| t.min(deadline));
            if notified_or_until(&self.slot.notify, by).await {
                continue;
            }
            if by < deadline {
                // The turn a named release gave another client is
                // over: this waiter's wake-up from that release.
                *self.slot.try_by.lock() = None;
                self.slot.woken.store(true, Ordering::SeqCst);
                return Woke::Notified;
            }
            return if self.slot.pending.swap(false, Ordering::SeqCst) {
                self.slot.woken.store(true, Ordering::SeqCst);
                Woke::Notified
            } else {
                Woke::Deadline
            };
        }
    }

    /// A try of this waiter was answered (busy or queued): a wake-up it
    /// took has been used, and its leaving passes nothing on.
    pub(crate) fn tried(&self) {
        self.slot.woken.store(false, Ordering::SeqCst);
    }

    /// Whether this waiter's last try left a registration that a release
    /// grants to by name ([`AcquireBuilder::grants_by_name`](crate::AcquireBuilder::grants_by_name)).
    pub(crate) fn set_registered(&self, registered: bool) {
        self.slot.registered.store(registered, Ordering::SeqCst);
    }

    /// Whether this waiter holds a registration ([`set_registered`]).
    ///
    /// [`set_registered`]: Seat::set_registered
    pub(crate) fn registered(&self) -> bool {
        self.slot.registered.load(Ordering::SeqCst)
    }

    /// The hand-off that named this waiter, if one arrived.
    pub(crate) fn take_grant(&self) -> Option<Grant> {
        self.slot.grant.lock().take()
    }

    /// After a wake-up: whether a local hand-off claimed this waiter (a
    /// waiter that goes on to try may still be claimed: see
    /// [`Local`](super::local::Local)).
    pub(crate) fn local_wake(&self) -> LocalNow {
        match &self.slot.local {
            Some(l) => l.after_wake(),
            None => LocalNow::Go,
        }
    }

    /// The waiter got what it waited for: its leaving passes nothing on,
    /// and a hand-off to it still under way is that same hold. Returns a
    /// hand-off that landed before ([`LocalWaiter::took`]): the caller
    /// takes its listing off.
    pub(crate) fn mark_acquired(&self) -> Option<super::local::LocalGrant> {
        let landed = self.slot.local.as_ref().and_then(|l| l.took());
        self.slot.acquired.store(true, Ordering::SeqCst);
        landed
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        let shared = &self.shared;
        let mut table = shared.table.lock();
        let Some(ch) = table.get_mut(&self.channel) else {
            return;
        };
        crate::metrics::waiters(-1.0);
        if ch.leave(&self.slot) {
            // Kept subscribed for a while (see LINGER); the engine's task
            // unsubscribes it if no waiter comes back.
            drop(table);
            let _ = shared.ops.send(self.channel.clone());
            return;
        }
        let registered = self.slot.registered.load(Ordering::SeqCst);
        // A waiter that holds a registration for a grant by name (and is
        // wakeable unnamed too: `grants_by_name`) and leaves without
        // the lock: its attempt's release clears the registration and then
        // wakes the next local waiter, which registers anew (woken now, its
        // try would find the registration still there).
        let deferred = registered && self.slot.tag.is_some() && self.slot.wakeable;
        let woken = self.slot.pending.load(Ordering::SeqCst)
            || self.slot.woken.load(Ordering::SeqCst)
            || registered;
        if woken && !deferred && !self.slot.acquired.load(Ordering::SeqCst) && self.slot.unnamed() {
            // This waiter was woken (and did not get an answer to a try
            // since), or was queued, but leaves without the lock: hand the
            // wake-up to the next local waiter of its class. At worst that
            // waiter tries once for nothing.
            wake_any(ch, 1, Some(self.slot.class));
        }
    }
}
