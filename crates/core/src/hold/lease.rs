//! A hold's lease: what the watchdog renews and a release ends, with no
//! reference to the client it came through (so the watchdog, the releaser
//! and the client's registry of holds sit below the hold itself).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::scripts::{LuaScript, ScriptCall};
use crate::wait::Engine;

/// Where a hold stands, as far as this process knows.
///
/// `Active` moves to one of the other three, which are terminal: a renewal
/// never revives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseState {
    /// Held, and the local validity has not run out.
    Active,
    /// Released by `unlock`.
    Released,
    /// The server said the hold is gone or belongs to another owner, or the
    /// lease ran out (renewals kept failing, or a fixed lease ended).
    Lost,
    /// The last renewal or release was `Indeterminate`: it may or may not be held.
    Unknown,
}

impl LeaseState {
    /// True for the three terminal states.
    pub fn is_terminal(self) -> bool {
        self != LeaseState::Active
    }
}

/// A lease as this process knows it: where it stands and until when it is
/// known valid. Every kind of hold (a [`Hold`](crate::Hold), a quorum of
/// holds on several servers) keeps these two and reads them through this trait, so that
/// `state`, `valid_for` and `lost` mean one thing everywhere: a lease
/// whose validity ran out reads `Lost`, and `lost` never resolves for a
/// release.
pub trait Validity: Send + Sync + 'static {
    /// The state, changed only through [`finish`](Validity::finish) (and
    /// the holder's own release).
    fn lease_state(&self) -> &watch::Sender<LeaseState>;

    /// Until when the lease is known valid.
    fn lease_until(&self) -> &Mutex<Instant>;

    /// Move to `to` unless already terminal; returns whether it moved. A
    /// holder that reports a loss (metrics, waiters) does it here.
    fn finish(&self, to: LeaseState) -> bool {
        settle(self.lease_state(), to)
    }

    /// The current state; an `Active` lease whose validity ran out becomes
    /// (and reads) `Lost`.
    fn current(&self) -> LeaseState {
        let s = *self.lease_state().borrow();
        if s == LeaseState::Active && Instant::now() >= *self.lease_until().lock() {
            self.finish(LeaseState::Lost);
            return LeaseState::Lost;
        }
        s
    }

    /// How much longer the lease is known valid (zero unless `Active`).
    fn valid_for(&self) -> Duration {
        if self.current() != LeaseState::Active {
            return Duration::ZERO;
        }
        self.lease_until()
            .lock()
            .saturating_duration_since(Instant::now())
    }
}

/// Move `state` to `to` unless it is terminal already; whether it moved.
fn settle(state: &watch::Sender<LeaseState>, to: LeaseState) -> bool {
    state.send_if_modified(|s| {
        if s.is_terminal() {
            false
        } else {
            *s = to;
            true
        }
    })
}

/// Resolves once the lease can no longer be counted on: `Lost` or `Unknown`
/// (also when its validity runs out, which [`Validity::finish`]es it as
/// `Lost`). A lease that was released was not lost: then it never
/// resolves.
pub fn lease_lost<V: Validity>(v: Arc<V>) -> impl std::future::Future<Output = LeaseState> + Send {
    let mut rx = v.lease_state().subscribe();
    async move {
        loop {
            let s = *rx.borrow_and_update();
            if matches!(s, LeaseState::Lost | LeaseState::Unknown) {
                return s;
            }
            if s == LeaseState::Released {
                // Terminal, and not a loss: never resolves. (Waiting on
                // for the lease's end instead went round at once for
                // ever once that end had passed.)
                return std::future::pending().await;
            }
            let until = *v.lease_until().lock();
            tokio::select! {
                r = rx.changed() => if r.is_err() { return *v.lease_state().borrow() },
                () = tokio::time::sleep_until(until) => {
                    if Instant::now() >= *v.lease_until().lock() {
                        v.finish(LeaseState::Lost);
                    }
                }
            }
        }
    }
}

/// How long a hold lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseMode {
    /// The watchdog renews it every third of the watchdog timeout until unlock.
    Watchdog,
    /// A fixed lease, not renewed.
    Fixed(Duration),
}

/// Drift subtracted from every lease: `ttl·0.01 + 2 ms`.
pub fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

/// The instant until which a hold is known valid, given the instant its
/// request was sent and the PTTL in the reply.
pub(crate) fn valid_until(sent_at: Instant, pttl_ms: u64) -> Instant {
    let ttl = Duration::from_millis(pttl_ms);
    crate::config::later(sent_at, ttl.saturating_sub(drift(ttl)))
}

/// One hold's reply from a renew script (contract on [`HoldSpec::renew`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Renewal {
    /// Renewed: the ms left of its lease after the call.
    Renewed(u64),
    /// Gone or taken over: the hold is no longer recorded.
    Gone,
    /// The hold's renew key at this index has another type; nothing was
    /// written, and whether the hold is still recorded is not known.
    WrongType(usize),
}

impl Renewal {
    pub(crate) fn of(reply: i64) -> Renewal {
        match reply {
            r if r >= 0 => Renewal::Renewed(r.unsigned_abs()),
            -1 | -2 => Renewal::Gone,
            r => Renewal::WrongType(usize::try_from(-(r + 3)).unwrap_or(usize::MAX)),
        }
    }
}

/// What a primitive tells core about a hold it was granted.
#[derive(Debug, Clone)]
pub(crate) struct HoldSpec {
    /// Primitive kind, for tracing (the kind segment of its keys).
    pub kind: &'static str,
    /// The primitive's main key (named in tracing).
    pub key: String,
    /// Script that renews holds of this kind (contract on
    /// [`AcquireBuilder::renew`](crate::AcquireBuilder::renew)).
    pub renew: &'static LuaScript,
    /// This hold's keys for the renew script.
    pub renew_keys: Vec<String>,
    /// Release-by-attempt call (reply 0 = not held, > 0 = released; 3 =
    /// released, and its message named another client, whose waiter this
    /// client's next acquires let try first: see [`PassSpec`]).
    pub release: ScriptCall,
    /// Local hand-off on unlock, for primitives that support it.
    pub pass: Option<PassSpec>,
}

/// How an unlock hands its hold straight to a waiter of the same client
/// (see [`AcquireBuilder::pass`](crate::AcquireBuilder::pass) for the script's
/// contract).
#[derive(Debug, Clone)]
pub(crate) struct PassSpec {
    /// The hand-off script.
    pub script: &'static LuaScript,
    /// Its keys (the acquire script's).
    pub keys: Vec<String>,
    /// The channel the waiters sleep on.
    pub channel: String,
    /// The waiters' class.
    pub class: &'static str,
    /// The owner of the hold (its waiters of the same owner re-enter
    /// instead of waiting for it).
    pub owner: String,
}

pub(crate) struct HoldInner {
    pub(crate) id: u64,
    /// The waiting engine, told when the hold ends badly (its local
    /// waiters then ask the server).
    pub(crate) engine: Arc<Engine>,
    pub(crate) spec: HoldSpec,
    pub(crate) attempt: String,
    pub(crate) token: u64,
    pub(crate) mode: LeaseMode,
    /// Who changes it: the watchdog (Active → Lost), unlock (→ Released,
    /// Lost, Unknown), extend (→ Lost, Unknown). Never leaves a terminal state.
    pub(crate) state: watch::Sender<LeaseState>,
    pub(crate) valid_until: Mutex<Instant>,
    pub(crate) in_watchdog: AtomicBool,
    /// Local hand-offs in a row, while other clients waited, that led to
    /// this hold (the budget of [`Config::local_handoffs`](crate::Config::local_handoffs)).
    pub(crate) chain: AtomicU32,
    /// When the hold was recorded here (for the hold-time metric).
    pub(crate) granted: Instant,
}

impl std::fmt::Debug for HoldInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hold")
            .field("kind", &self.spec.kind)
            .field("key", &self.spec.key)
            .field("attempt", &self.attempt)
            .field("token", &self.token)
            .field("mode", &self.mode)
            .field("state", &*self.state.borrow())
            .finish_non_exhaustive()
    }
}

pub(crate) static NEXT_HOLD: AtomicU64 = AtomicU64::new(1);

impl Validity for HoldInner {
    fn lease_state(&self) -> &watch::Sender<LeaseState> {
        &self.state
    }

    fn lease_until(&self) -> &Mutex<Instant> {
        &self.valid_until
    }

    /// Move to `to` unless already terminal; a loss is counted, logged,
    /// and told to the local waiters sleeping on this hold.
    fn finish(&self, to: LeaseState) -> bool {
        let moved = settle(&self.state, to);
        if moved && matches!(to, LeaseState::Lost | LeaseState::Unknown) {
            crate::metrics::lost(self.spec.kind);
            tracing::warn!(kind = self.spec.kind, key = %self.spec.key, state = ?to, "hold can no longer be counted on");
            if let Some(p) = &self.spec.pass {
                // Local waiters sleeping on this hold ask the server now.
                self.engine.unlist_hold(&p.channel, self.id);
                self.engine.nudge(&p.channel);
            }
        }
        moved
    }
}

impl HoldInner {
    /// [`Validity::finish`], callable without the trait in scope.
    pub(crate) fn finish(&self, to: LeaseState) -> bool {
        Validity::finish(self, to)
    }

    pub(crate) fn renewed(&self, sent_at: Instant, pttl_ms: u64) {
        let mut v = self.valid_until.lock();
        let new = valid_until(sent_at, pttl_ms);
        if new > *v {
            *v = new;
        }
    }

    pub(crate) fn expired(&self, now: Instant) -> bool {
        now >= *self.valid_until.lock()
    }

    /// The hold's renew key at `j` (the main key if there is none there).
    pub(crate) fn renew_key(&self, j: usize) -> String {
        self.spec
            .renew_keys
            .get(j)
            .unwrap_or(&self.spec.key)
            .clone()
    }
}

#[cfg(test)]
mod renewal_tests {
    use crate::hold::lease::Renewal;

    #[test]
    fn renew_replies_decode_per_hold() {
        assert_eq!(Renewal::of(0), Renewal::Renewed(0));
        assert_eq!(Renewal::of(1500), Renewal::Renewed(1500));
        assert_eq!(Renewal::of(-1), Renewal::Gone);
        assert_eq!(Renewal::of(-2), Renewal::Gone);
        assert_eq!(Renewal::of(-3), Renewal::WrongType(0));
        assert_eq!(Renewal::of(-5), Renewal::WrongType(2));
        assert!(matches!(Renewal::of(i64::MIN), Renewal::WrongType(_)));
    }
}
