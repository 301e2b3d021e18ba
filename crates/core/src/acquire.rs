//! The acquire loop shared by every exclusive primitive.
//!
//! A primitive describes its scripts and keys in an [`AcquireSpec`]; this
//! module runs the first attempt alone, subscribes only when it failed, tries
//! once more, then waits on the waiting engine for a release message or the
//! holder's remaining TTL, whichever is sooner, and tries again.
//!
//! Acquire scripts share one contract:
//! `ARGV = [owner, attempt, lease_ms, mode, extra...]`, where mode is `'try'`
//! (one attempt), `'wait'` (the first try of an acquire that waits when
//! busy) or `'again'` (a later try of that acquire; scripts that need not
//! tell the two apart treat every mode but `'try'` alike), reply
//! `{1, token, pttl}` granted, `{0, pttl}` busy (nothing recorded),
//! `{2, pttl, fresh, secret}` queued (the attempt is recorded and must be
//! released when the caller gives up; `secret` identifies the queue entry).
//! Specs with hand-off by name ([`AcquireBuilder::tagged`]) get one more ARGV
//! after the extra ones: a fresh random secret per call, stored with the
//! queue entry the call creates and echoed by a hand-off message for that
//! entry. A hand-off is accepted only when it carries the secret of the
//! waiter's current entry: a late grant for an entry the waiter already lost
//! (purged, re-enqueued) or a forged one is ignored, and the waiter asks the
//! server instead. Release scripts take `ARGV = [attempt, extra...]` and
//! reply 0 when the attempt held nothing; a reply of 3 (specs with
//! [`AcquireBuilder::pass`]) means released with a message that names another
//! client's waiter, and this client's next acquires hold back a moment so
//! that waiter tries first.
//!
//! Every acquire carries an attempt id. While a request of the attempt may
//! have been recorded by the server (in flight, `Indeterminate`, or queued),
//! the attempt is *armed*: if the future is dropped, or the call ends, the
//! release-by-attempt is handed to the background releaser, exactly once.
//! A retry of the attempt is idempotent on the server.

use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use crate::client::Client;
use crate::config::lease_ms;
use crate::error::{Error, Result};
use crate::heartbeat::{HeartbeatReg, HeartbeatSpec};
use crate::keys::Keys;
use crate::lease::{valid_until, Hold, HoldSet, HoldSpec, LeaseMode, PassSpec};
use crate::scripts::{LuaScript, ScriptCall};
use crate::wait::{LocalGrant, LocalNow, LocalWaiter, Waiter, Woke};
use crate::wake::WakePolicy;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How long an acquire may wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitMode {
    /// One attempt; never joins a queue.
    Try,
    /// Up to this long.
    For(Duration),
    /// Until acquired (rides out reconnects).
    Forever,
}

/// What a primitive tells core about one acquire: its scripts, keys,
/// channel and wake-up policy. Built with [`AcquireSpec::builder`]; the
/// fields are core's (the contract of each is on its builder method).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AcquireSpec {
    /// Primitive kind, for tracing.
    pub(crate) kind: &'static str,
    /// Acquire script (contract in the module docs).
    pub(crate) acquire: &'static LuaScript,
    /// KEYS of the acquire script.
    pub(crate) keys: Vec<String>,
    /// ARGV after the four common ones.
    pub(crate) extra_args: Vec<String>,
    /// Release script (by attempt id).
    pub(crate) release: &'static LuaScript,
    /// KEYS of the release script.
    pub(crate) release_keys: Vec<String>,
    /// ARGV of the release script after the attempt id.
    pub(crate) release_extra: Vec<String>,
    /// The primitive's main key (named in tracing and errors).
    pub(crate) key: String,
    /// Script that renews a hold (watchdog rounds, `extend`); its contract
    /// is in [`HoldSpec::renew`].
    pub(crate) renew: &'static LuaScript,
    /// The keys of one hold for the renew script, all in one hash slot.
    pub(crate) renew_keys: Vec<String>,
    /// Channel the waiter subscribes to.
    pub(crate) channel: String,
    /// Decodes the channel's messages into wake-ups (see [`crate::wake`]).
    pub(crate) wake: &'static dyn WakePolicy,
    /// The waiter's class, for policies that wake one kind of waiter
    /// (`"read"`, `"write"`); primitives with one kind use `""`.
    pub(crate) class: &'static str,
    /// When true, `t:<attempt>` / `g:<attempt> ...` messages wake this waiter
    /// (and only it), and each acquire call carries a fresh entry secret as
    /// its last ARGV (see the module docs).
    pub(crate) tagged: bool,
    /// Liveness heartbeat kept while the attempt is queued (primitives with a
    /// server-side queue).
    pub(crate) heartbeat: Option<HeartbeatSpec>,
    /// Local hand-off script, for primitives whose waiters may be served in
    /// any order (no server-side queue): an unlock that finds a sleeping waiter of
    /// this client on the channel hands its hold to that waiter in one
    /// call, instead of a release, a message and the waiter's acquire.
    /// `KEYS` = [`AcquireSpec::keys`]; `ARGV` = `[attempt of the releasing
    /// hold, new owner, new attempt, lease_ms]`; reply `{0}` the releasing
    /// attempt holds nothing (nothing changed), `{1}` an inner hold of a
    /// re-entered lock was released (nothing handed over), `{2, token,
    /// pttl, others}` handed over, where `others` is 1 when waiters of
    /// other clients were seen since the lock was last free. See
    /// `docs/architecture.md` for the budget that keeps them from starving.
    pub(crate) pass: Option<&'static LuaScript>,
    /// The holds of the handle this spec belongs to, for reentrant
    /// primitives whose holds are counted per owner in one hash (`Lock`,
    /// `FairLock`). When given, every acquire call ends its ARGV with
    /// [`HoldSet::acquire_arg`]: `0` when one of them is still active or
    /// another acquire of the handle (a clone in another task) is in
    /// progress, else the attempt's sequence number ([`attempt_seq`]), and
    /// the holds it grants are added. With a sequence number, the script
    /// treats a hold recorded for this owner, but neither for this attempt
    /// nor for any attempt drawn after it, as stale (a grant whose reply
    /// was lost and whose release ran before it, kept alive by later
    /// re-entries) and replaces it instead of re-entering it. Every
    /// attempt of the handle drawn before this one has ended by then, so
    /// such a hold is nobody's; one of a clone's acquire that started
    /// later, and overtook this call on its way, is left alone.
    pub(crate) live: Option<Arc<HoldSet>>,
}

impl AcquireSpec {
    /// Describe the acquire of a primitive of `kind` (for tracing) whose
    /// keys are `keys`: `acquire` and `release` scripts (contracts in the
    /// module docs), and the policy that decodes the messages on its
    /// channel. Defaults, each changed by a method below: both scripts take
    /// the main key alone and no extra ARGV; holds are renewed by core's
    /// `hold_renew.lua` on the main key; waiters wait on `keys.channel()`;
    /// one class of waiter; no queue (no heartbeat, no tagged hand-off); no
    /// local hand-off; no per-handle hold set.
    pub fn builder(
        kind: &'static str,
        keys: &Keys,
        acquire: &'static LuaScript,
        release: &'static LuaScript,
        wake: &'static dyn WakePolicy,
    ) -> AcquireBuilder {
        let main = keys.main().to_string();
        AcquireBuilder(AcquireSpec {
            kind,
            acquire,
            keys: vec![main.clone()],
            extra_args: Vec::new(),
            release,
            release_keys: vec![main.clone()],
            release_extra: Vec::new(),
            key: main.clone(),
            renew: &crate::scripts::HOLD_RENEW,
            renew_keys: vec![main],
            channel: keys.channel(),
            wake,
            class: "",
            tagged: false,
            heartbeat: None,
            pass: None,
            live: None,
        })
    }

    /// The primitive's main key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The channel its waiters wait on.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// The same acquire with one more ARGV after the extra ones (a
    /// per-call argument, such as a semaphore's permit count).
    #[must_use]
    pub fn with_arg(&self, arg: impl Into<String>) -> AcquireSpec {
        let mut spec = self.clone();
        spec.extra_args.push(arg.into());
        spec
    }

    /// This acquire with `live` as the handle's hold set (see
    /// [`AcquireBuilder::live`]).
    pub(crate) fn with_live(mut self, live: Arc<HoldSet>) -> AcquireSpec {
        self.live = Some(live);
        self
    }
}

/// Builds an [`AcquireSpec`] ([`AcquireSpec::builder`]).
#[derive(Debug, Clone)]
#[must_use]
pub struct AcquireBuilder(AcquireSpec);

impl AcquireBuilder {
    /// KEYS of the acquire script (default: the main key).
    pub fn keys(mut self, keys: Vec<String>) -> Self {
        self.0.keys = keys;
        self
    }

    /// ARGV of the acquire script after the four common ones.
    pub fn extra_args(mut self, args: Vec<String>) -> Self {
        self.0.extra_args = args;
        self
    }

    /// KEYS of the release script, and its ARGV after the attempt id.
    pub fn release_with(mut self, keys: Vec<String>, extra: Vec<String>) -> Self {
        self.0.release_keys = keys;
        self.0.release_extra = extra;
        self
    }

    /// The script that renews a hold (watchdog rounds, `extend`), and the
    /// keys of one hold for it, all in one hash slot; its contract is on
    /// [`HoldSpec::renew`].
    pub fn renew(mut self, script: &'static LuaScript, keys: Vec<String>) -> Self {
        self.0.renew = script;
        self.0.renew_keys = keys;
        self
    }

    /// The channel the waiters subscribe to (default `keys.channel()`).
    pub fn channel(mut self, channel: String) -> Self {
        self.0.channel = channel;
        self
    }

    /// The waiter's class, for policies that wake one kind of waiter
    /// (`"read"`, `"write"`).
    pub fn class(mut self, class: &'static str) -> Self {
        self.0.class = class;
        self
    }

    /// Hand-off by name: `t:<attempt>` / `g:<attempt> ...` messages wake
    /// this waiter (and only it), and each acquire call carries a fresh
    /// entry secret as its last ARGV (see the module docs).
    pub fn tagged(mut self) -> Self {
        self.0.tagged = true;
        self
    }

    /// A liveness heartbeat kept while the attempt is queued (primitives
    /// with a server-side queue).
    pub fn heartbeat(mut self, heartbeat: HeartbeatSpec) -> Self {
        self.0.heartbeat = Some(heartbeat);
        self
    }

    /// Local hand-off script, for primitives whose waiters may be served in
    /// any order (no server-side queue): an unlock that finds a sleeping
    /// waiter of this client on the channel hands its hold to that waiter
    /// in one call, instead of a release, a message and the waiter's
    /// acquire. `KEYS` = the acquire keys; `ARGV` = `[attempt of the
    /// releasing hold, new owner, new attempt, lease_ms]`; reply `{0}` the
    /// releasing attempt holds nothing (nothing changed), `{1}` an inner
    /// hold of a re-entered lock was released (nothing handed over), `{2,
    /// token, pttl, others}` handed over, where `others` is 1 when waiters
    /// of other clients were seen since the lock was last free. See
    /// `docs/architecture.md` for the budget that keeps them from starving.
    pub fn pass(mut self, script: &'static LuaScript) -> Self {
        self.0.pass = Some(script);
        self
    }

    /// The holds of the handle this acquire belongs to, for reentrant
    /// primitives whose holds are counted per owner in one hash. Every
    /// acquire call then ends its ARGV with [`HoldSet::acquire_arg`]: `0`
    /// when one of them is still active or another acquire of the handle
    /// (a clone in another task) is in progress, else the attempt's
    /// sequence number ([`attempt_seq`]), and the holds it grants are
    /// added. With a sequence number, the script treats a hold recorded
    /// for this owner, but neither for this attempt nor for any attempt
    /// drawn after it, as stale (a grant whose reply was lost and whose
    /// release ran before it, kept alive by later re-entries) and replaces
    /// it instead of re-entering it. Every attempt of the handle drawn
    /// before this one has ended by then, so such a hold is nobody's; one
    /// of a clone's acquire that started later, and overtook this call on
    /// its way, is left alone. One set per handle.
    pub fn live(mut self, live: Arc<HoldSet>) -> Self {
        self.0.live = Some(live);
        self
    }

    /// The description.
    pub fn build(self) -> AcquireSpec {
        self.0
    }
}

/// What a primitive tells core about a wait for a condition (a latch's
/// count reaching zero): a script that checks it and records nothing, its
/// keys, and the channel and policy that announce a change. Built with
/// [`ConditionSpec::builder`]; run by [`Client::wait_until`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ConditionSpec(AcquireSpec);

impl ConditionSpec {
    /// A wait of `kind` on `keys`: `check` replies `{1, ...}` when the
    /// condition holds and `{0, pttl}` when not (it takes the acquire
    /// contract's ARGV and writes nothing); waiters wait on
    /// `keys.channel()` for a message `wake` decodes. KEYS of `check`
    /// default to the main key.
    pub fn builder(
        kind: &'static str,
        keys: &Keys,
        check: &'static LuaScript,
        wake: &'static dyn WakePolicy,
    ) -> ConditionBuilder {
        // A check records nothing: the release is never run, the renewal
        // never needed; the acquire description carries them only because
        // the acquire loop is shared.
        ConditionBuilder(AcquireSpec::builder(kind, keys, check, check, wake).build())
    }

    /// The main key.
    pub fn key(&self) -> &str {
        &self.0.key
    }
}

/// Builds a [`ConditionSpec`] ([`ConditionSpec::builder`]).
#[derive(Debug, Clone)]
#[must_use]
pub struct ConditionBuilder(AcquireSpec);

impl ConditionBuilder {
    /// KEYS of the check script (default: the main key).
    pub fn keys(mut self, keys: Vec<String>) -> Self {
        self.0.keys = keys.clone();
        self.0.release_keys = keys;
        self
    }

    /// The channel (default `keys.channel()`).
    pub fn channel(mut self, channel: String) -> Self {
        self.0.channel = channel;
        self
    }

    /// The description.
    pub fn build(self) -> ConditionSpec {
        ConditionSpec(self.0)
    }
}

impl WaitMode {
    /// A wait of up to `wait`; zero is one attempt ([`WaitMode::Try`]).
    pub fn up_to(wait: Duration) -> WaitMode {
        if wait.is_zero() {
            WaitMode::Try
        } else {
            WaitMode::For(wait)
        }
    }

    /// When a wait that starts now ends: now for `Try`, `None` for
    /// `Forever` and for a wait too long for an `Instant` (a wait without
    /// end).
    pub fn deadline(self) -> Option<Instant> {
        match self {
            WaitMode::Try => Some(Instant::now()),
            WaitMode::For(d) => Instant::now().checked_add(d),
            WaitMode::Forever => None,
        }
    }
}

/// A decoded acquire reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reply {
    Granted { token: u64, pttl: u64 },
    Busy { pttl: i64 },
    Queued { pttl: i64, fresh: bool, secret: u64 },
}

fn decode(v: &[i64]) -> Result<Reply> {
    match v {
        [1, token, pttl, ..] => Ok(Reply::Granted {
            token: token.unsigned_abs(),
            pttl: pttl.unsigned_abs(),
        }),
        [0, pttl, ..] => Ok(Reply::Busy { pttl: *pttl }),
        [2, pttl, rest @ ..] => Ok(Reply::Queued {
            pttl: *pttl,
            fresh: rest.first() == Some(&1),
            secret: rest.get(1).map_or(0, |s| s.unsigned_abs()),
        }),
        _ => Err(Error::InvalidArgument(format!(
            "unexpected acquire reply {v:?}"
        ))),
    }
}

/// A fresh attempt id: 96 random bits in hex, then `s` and the attempt's
/// sequence number, which rises with every id this process draws (see
/// [`attempt_seq`]).
pub fn new_attempt_id() -> String {
    static SEQ: AtomicU64 = AtomicU64::new(1);
    let a: u64 = rand::random();
    let b: u32 = rand::random();
    let seq = SEQ.fetch_add(1, Ordering::SeqCst);
    format!("{a:016x}{b:08x}s{seq}")
}

/// The sequence number of an attempt id drawn by [`new_attempt_id`] (0 for
/// an id without one). An attempt drawn after another has a larger one;
/// the scripts read it the same way (`hold_seq` in `lua/hold_lib.lua`).
pub fn attempt_seq(attempt: &str) -> u64 {
    attempt
        .rsplit_once('s')
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or(0)
}

/// Until when a waiter told "busy" with `pttl` sleeps at most (a release
/// message or a hint may wake it sooner): the holder's TTL, at least 1 ms
/// (`0`: the hold ends within this millisecond, so the next try finds it
/// gone; sleeping for want of a bound would wait a whole `no_bound`); at
/// once when the key vanished between the script's checks (`-2`); else
/// (`-1`, no TTL known) `no_bound`, as a message or a reconnect wakes it.
fn sleep_bound(now: Instant, pttl: i64, no_bound: Duration) -> Instant {
    match pttl {
        -2 => now,
        p if p >= 0 => crate::config::later(now, Duration::from_millis(p.unsigned_abs().max(1))),
        _ => crate::config::later(now, no_bound),
    }
}

/// What the loop got: a grant, with the instant its validity counts from.
struct Granted {
    token: u64,
    pttl: u64,
    sent_at: Instant,
    /// A hand-off under a claim lease shorter than the lease asked for:
    /// extend to this many ms in the background.
    extend_to: Option<u64>,
    /// Local hand-offs in a row while other clients waited (0 for a grant
    /// from the server).
    chain: u32,
    /// A local hand-off's hold id, already listed.
    hold_id: Option<u64>,
}

/// The release-by-attempt call of `spec` for `attempt`.
fn release_call(spec: &AcquireSpec, attempt: &str) -> ScriptCall {
    ScriptCall::new(
        spec.release,
        spec.release_keys.clone(),
        std::iter::once(attempt.to_string())
            .chain(spec.release_extra.iter().cloned())
            .collect(),
    )
}

/// A queue entry's secret: random, in 1 .. 2^53 (Lua carries it exactly).
fn new_secret() -> u64 {
    rand::random_range(1..(1u64 << 53))
}

/// Hands the release of an attempt to the releaser if dropped while armed.
struct Attempt<'a> {
    client: &'a Client,
    release: ScriptCall,
    /// The acquire records something on the server (false for condition
    /// waits, which only read).
    records: bool,
    /// The server may hold a record of this attempt (in flight, Indeterminate).
    in_doubt: bool,
    /// The server holds a queue entry for this attempt.
    queued: bool,
    /// Nothing of the attempt is left to release: it ended with the hold,
    /// or its release ran.
    done: bool,
    /// Set when an unlock in this client may hand its hold to the attempt.
    local: Option<Arc<LocalWaiter>>,
    /// The channel the attempt waits on (with `local`).
    channel: Option<&'a str>,
}

impl Attempt<'_> {
    /// Whether the attempt must be released if it ends now without the
    /// hold: a request of it may have been recorded, it is queued, or a
    /// local hand-off to it may have landed unseen (its unlock gave up on
    /// the answer: [`LocalWaiter::doubted`]).
    fn armed(&self) -> bool {
        self.records
            && !self.done
            && (self.in_doubt || self.queued || self.local.as_ref().is_some_and(|l| l.doubted()))
    }

    fn disarm(&mut self) {
        self.in_doubt = false;
        self.queued = false;
    }

    /// The attempt holds the lock: nothing of it is ever released here.
    fn win(&mut self) {
        self.disarm();
        self.done = true;
    }

    /// Leave the queue now (awaited), falling back to the releaser.
    async fn give_up(&mut self) {
        if !self.armed() {
            return;
        }
        if self.client.run::<i64>(&self.release).await.is_ok() {
            self.disarm();
            self.done = true;
        }
    }
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        // A hold handed over locally that the waiter did not take (it was
        // cancelled in between) is released like an armed attempt.
        let passed = self.local.as_ref().and_then(|l| l.leave());
        if let (Some(g), Some(channel)) = (passed, self.channel) {
            self.client.inner.engine.unlist_hold(channel, g.hold_id);
        }
        let passed = passed.is_some();
        // Also during shutdown: the releaser runs until shutdown closes it,
        // so a waiter woken by shutdown leaves its queue.
        if self.armed() || passed {
            let bound = self
                .client
                .config()
                .release_timeout
                .unwrap_or(self.client.config().watchdog_timeout);
            self.client
                .inner
                .releaser
                .submit(self.release.clone(), crate::config::after(bound));
        }
    }
}

impl Client {
    /// Acquire an exclusive hold as described by `spec` for `owner`.
    ///
    /// Returns `Ok(None)` when the wait ended without the hold.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad lease (nothing sent);
    /// [`Error::Unavailable`] / [`Error::Indeterminate`] when the time ran out
    /// while Redis could not answer (any possible grant is already with the
    /// releaser); [`Error::WrongType`], [`Error::Redis`], [`Error::Shutdown`].
    ///
    /// # Cancel safety
    /// Cancel safe in effect: if dropped after a request may have reached
    /// Redis, the possible grant or queue entry is released exactly once by
    /// the background releaser (or expires with its lease).
    pub async fn acquire(
        &self,
        spec: &AcquireSpec,
        owner: &str,
        lease: LeaseMode,
        wait: WaitMode,
    ) -> Result<Option<Hold>> {
        let ms = match lease {
            LeaseMode::Watchdog => lease_ms(self.config().watchdog_timeout)?,
            LeaseMode::Fixed(d) => lease_ms(d)?,
        };
        // Counted until the hold is registered: shutdown waits for running
        // acquires and then retires every registered hold, so a grant that
        // lands during shutdown is retired too. (A hold registered after the
        // retiring step stayed in Redis until its lease ended: the likely
        // cause of one torture failure: a hold left after shutdown.)
        let _running = self.inner.acquiring.token();
        // Entered before the attempt id is drawn (see `HoldSet::acquire_arg`).
        let _this_handle = spec.live.as_ref().map(|s| s.enter());
        let attempt_id = new_attempt_id();
        let got = self
            .run_acquire(spec, owner, ms, wait, &attempt_id, true)
            .await?;
        let hold = got.map(|g| {
            let hold = Hold::with_id(
                g.hold_id,
                self,
                HoldSpec {
                    kind: spec.kind,
                    key: spec.key.clone(),
                    renew: spec.renew,
                    renew_keys: spec.renew_keys.clone(),
                    release: release_call(spec, &attempt_id),
                    pass: spec.pass.map(|script| PassSpec {
                        script,
                        keys: spec.keys.clone(),
                        channel: spec.channel.clone(),
                        class: spec.class,
                        owner: owner.to_string(),
                    }),
                },
                attempt_id.clone(),
                g.token,
                lease,
                g.sent_at,
                g.pttl,
            );
            if let Some(ms) = g.extend_to {
                hold.extend_in_background(ms, g.pttl);
            }
            hold.inner.chain.store(g.chain, Ordering::Relaxed);
            if let Some(set) = &spec.live {
                set.add(&hold);
            }
            hold
        });
        if let Some(hold) = &hold {
            // The hold exists first, so an acquire cancelled while waiting
            // for the replicas drops it, which releases it in the background.
            if let Err(e) = self.await_replicas(&spec.key).await {
                // Granted, but not known to survive a failover: give it
                // back (the drop releases it in the background).
                hold.inner.finish(crate::lease::LeaseState::Released);
                return Err(e);
            }
        }
        Ok(hold)
    }

    /// Wait until a condition holds (for example a count reaching zero), with the acquire
    /// loop: the first try alone, then a subscription, a catch-up try and
    /// waits on the channel. The check replies `{1, ...}` when the
    /// condition holds and `{0, pttl}` when not (nothing is recorded, so
    /// nothing is released). Returns whether the condition held before the
    /// wait ended.
    ///
    /// # Errors
    /// As [`Client::acquire`].
    ///
    /// # Cancel safety
    /// Cancel safe: the tries record nothing.
    pub async fn wait_until(
        &self,
        spec: &ConditionSpec,
        owner: &str,
        wait: WaitMode,
    ) -> Result<bool> {
        let attempt_id = new_attempt_id();
        let got = self
            .run_acquire(&spec.0, owner, 1, wait, &attempt_id, false)
            .await?;
        Ok(got.is_some())
    }

    async fn run_acquire(
        &self,
        spec: &AcquireSpec,
        owner: &str,
        ms: u64,
        wait: WaitMode,
        attempt_id: &str,
        records: bool,
    ) -> Result<Option<Granted>> {
        self.check_open()?;
        // Counted while running, so shutdown can wait for woken waiters to
        // leave (dropped after the attempt, which hands over its release).
        let _running = self.inner.acquiring.token();
        let span = tracing::debug_span!("acquire", kind = spec.kind, key = %spec.key,
            owner, attempt = %attempt_id);
        let started = Instant::now();
        let r = self
            .acquire_inner(spec, owner, ms, wait, attempt_id, records)
            .instrument(span.clone())
            .await;
        span.in_scope(|| {
            tracing::debug!(outcome = match &r { Ok(Some(_)) => "acquired", Ok(None) => "timed out", Err(_) => "error" },
                waited = ?started.elapsed(), "acquire done");
        });
        r
    }

    async fn acquire_inner(
        &self,
        spec: &AcquireSpec,
        owner: &str,
        ms: u64,
        wait: WaitMode,
        attempt_id: &str,
        records: bool,
    ) -> Result<Option<Granted>> {
        let deadline = wait.deadline();
        let release = release_call(spec, attempt_id);
        let local = (records && spec.pass.is_some() && wait != WaitMode::Try)
            .then(|| Arc::new(LocalWaiter::new(owner, attempt_id, ms, release.clone())));
        let mut attempt = Attempt {
            client: self,
            release,
            records,
            in_doubt: false,
            queued: false,
            done: false,
            local: local.clone(),
            channel: Some(&spec.channel),
        };
        let call = |mode: &str| {
            ScriptCall::new(
                spec.acquire,
                spec.keys.clone(),
                [
                    owner.to_string(),
                    attempt_id.to_string(),
                    ms.to_string(),
                    mode.to_string(),
                ]
                .into_iter()
                .chain(spec.extra_args.iter().cloned())
                .chain(spec.tagged.then(|| new_secret().to_string()))
                .chain(spec.live.as_ref().map(|s| s.acquire_arg(attempt_id)))
                .collect(),
            )
        };
        let grant = |token: u64, pttl: u64, sent_at: Instant| Granted {
            token,
            pttl,
            sent_at,
            extend_to: None,
            chain: 0,
            hold_id: None,
        };
        let try_call = call(if wait == WaitMode::Try { "try" } else { "wait" });

        // One attempt: returns the decoded reply or the error, keeping the
        // attempt's armed state right.
        async fn once(
            client: &Client,
            attempt: &mut Attempt<'_>,
            call: &ScriptCall,
        ) -> (Instant, Result<Reply>) {
            let prior_doubt = attempt.in_doubt;
            attempt.in_doubt = true;
            let sent_at = Instant::now();
            let r = match client.run::<Vec<i64>>(call).await {
                Ok(v) => decode(&v),
                Err(e) => Err(e),
            };
            match &r {
                Ok(Reply::Granted { .. }) => attempt.win(),
                Ok(Reply::Busy { .. }) => {
                    // A definite "not granted" settles earlier doubts too; a
                    // queue entry is dropped by the script when it answers busy.
                    attempt.disarm();
                }
                Ok(Reply::Queued { .. }) => {
                    attempt.in_doubt = false;
                    attempt.queued = true;
                }
                Err(Error::Indeterminate(_)) => {}
                // This request did not grant anything, but an earlier one of
                // the same attempt may have: keep that doubt.
                Err(_) => attempt.in_doubt = prior_doubt,
            }
            (sent_at, r)
        }

        let mut last_err: Option<Error> = None;
        // A channel this client already listens on (another local waiter,
        // or one lingering after a recent wait) costs nothing to join: join
        // it before the first try, and the try after subscribing is not
        // needed, since no release can fall between the two.
        let waiter = Waiter {
            policy: spec.wake,
            class: spec.class,
            tag: spec.tagged.then(|| attempt_id.to_string()),
            local,
        };
        let early = match wait {
            WaitMode::Try => None,
            _ => self
                .inner
                .engine
                .subscribe_if_confirmed(&spec.channel, waiter.clone()),
        };
        // Another owner of this client holds the lock and will hand it to
        // a local waiter or release it (waking this one): sleep at once,
        // without a try that could only find it busy.
        let local_bound = match (&early, &attempt.local) {
            (Some(_), Some(_)) => self.inner.engine.held_elsewhere(&spec.channel, owner),
            _ => None,
        };
        if let Some(sub) = &early {
            sub.begin_try();
        }
        let (sent_at, first) = match local_bound {
            Some(until) => {
                let left = until.saturating_duration_since(Instant::now());
                let pttl = i64::try_from(left.as_millis()).unwrap_or(i64::MAX).max(1);
                (Instant::now(), Ok(Reply::Busy { pttl }))
            }
            None => once(self, &mut attempt, &try_call).await,
        };
        let mut queue = QueueState::new(sent_at);
        let mut next_wait = match first {
            Ok(Reply::Granted { token, pttl }) => {
                if let Some(sub) = &early {
                    sub.mark_acquired();
                }
                return Ok(Some(grant(token, pttl, sent_at)));
            }
            Ok(Reply::Busy { .. }) | Ok(Reply::Queued { .. }) if wait == WaitMode::Try => {
                attempt.give_up().await;
                return Ok(None);
            }
            Ok(reply) => {
                queue.observe(self, spec, reply, sent_at);
                match (&early, reply) {
                    (Some(_), Reply::Busy { pttl } | Reply::Queued { pttl, .. }) => Some(pttl),
                    _ => None,
                }
            }
            Err(e) if e.is_retryable() && wait != WaitMode::Try => {
                last_err = Some(e);
                None
            }
            Err(e) => return Err(e),
        };

        let sub = match early {
            Some(sub) => sub,
            None => {
                // Failed: subscribe, then try again at once (a release may
                // have landed between the first try and the subscription).
                let sub = self.inner.engine.subscribe(&spec.channel, waiter);
                let confirm_by = crate::config::after(self.config().command_timeout);
                let confirm_by = deadline.map_or(confirm_by, |d| d.min(confirm_by));
                sub.confirmed(confirm_by).await;
                sub
            }
        };
        let mut refused: i64 = 0;
        loop {
            if let Some(reason) = sub.refused() {
                // Without the channel no release would ever wake this waiter.
                return Err(Error::SubscribeRefused {
                    channel: spec.channel.clone(),
                    reason,
                });
            }
            if let Some(pttl) = next_wait.take() {
                // Sleep until a release message, the holder's TTL, or the
                // deadline. Woken or not, the next try tells: a lease that ran
                // out is free. A hint moves the bound without a try.
                let by_ttl = sleep_bound(Instant::now(), pttl, self.config().watchdog_timeout);
                let mut until = deadline.map_or(by_ttl, |d| d.min(by_ttl));
                let passed: Option<LocalGrant> = loop {
                    while let Woke::Hint(h) = sub.wait(until).await {
                        until = deadline.map_or(h, |d| d.min(h));
                    }
                    match sub.local_wake() {
                        LocalNow::Go => break None,
                        LocalNow::Passed(g) => break Some(g),
                        // An unlock in this client is handing its hold over:
                        // it settles within its command's timeout (an unlock
                        // dropped mid-call wakes this waiter).
                        LocalNow::Claimed => {
                            until = crate::config::after(self.config().command_timeout);
                        }
                    }
                };
                if let Some(g) = passed {
                    // Handed over by an unlock in this client, under this
                    // attempt's own id and lease.
                    attempt.win();
                    sub.mark_acquired();
                    return Ok(Some(Granted {
                        token: g.token,
                        pttl: g.pttl,
                        sent_at: g.sent_at,
                        extend_to: None,
                        chain: g.chain,
                        hold_id: Some(g.hold_id),
                    }));
                }
                // A hand-off message that names this attempt carries the
                // token, the claim lease and the entry's secret: take the
                // lock without a round trip when the grant is for the
                // current queue entry and its claim is still good counted
                // from the instant the request that created the entry was
                // sent (the grant came later). Anything else (a late grant
                // for a lost entry, a forgery) is left to the next try.
                // A claim whose validity (counted from t0) is mostly gone is
                // not worth a guard that turns `Lost` at once: the pick-up
                // call below extends it to the real lease instead.
                if let (Some(g), Some((current, t0))) = (sub.take_grant(), queue.entry) {
                    let (token, ttl) = (g.token, g.ttl_ms);
                    let useful = Duration::from_millis(ttl / 3).max(Duration::from_millis(1));
                    if g.secret == current && valid_until(t0, ttl) > Instant::now() + useful {
                        attempt.win();
                        sub.mark_acquired();
                        return Ok(Some(Granted {
                            token,
                            pttl: ttl,
                            sent_at: t0,
                            extend_to: (ms > ttl).then_some(ms),
                            chain: 0,
                            hold_id: None,
                        }));
                    }
                }
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            sub.begin_try();
            let (sent_at, r) = once(self, &mut attempt, &call("again")).await;
            match r {
                Ok(Reply::Granted { token, pttl }) => {
                    sub.mark_acquired();
                    return Ok(Some(grant(token, pttl, sent_at)));
                }
                Ok(reply @ (Reply::Busy { pttl } | Reply::Queued { pttl, .. })) => {
                    sub.tried();
                    queue.observe(self, spec, reply, sent_at);
                    last_err = None;
                    refused = 0;
                    next_wait = Some(pttl);
                }
                Err(e) if e.is_retryable() => {
                    if e.is_unavailable() {
                        if self.inner.conn.is_up() {
                            // The server refused without running it (LOADING,
                            // BUSY, READONLY...): wait on the channel with a
                            // growing bound rather than ask again at once.
                            refused = (refused * 2).clamp(10, 500);
                            next_wait = Some(refused);
                        } else {
                            self.inner.conn.wait_up(deadline).await;
                        }
                    }
                    last_err = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        // Out of time.
        drop(sub);
        drop(queue);
        match last_err {
            Some(e) => Err(e), // the armed attempt's drop hands it to the releaser
            None => {
                attempt.give_up().await;
                Ok(None)
            }
        }
    }
}

/// What a waiter knows about its place in a queue: whether it was queued
/// (to notice a purge), its current entry and its liveness registration.
struct QueueState {
    /// When the attempt's first request was sent.
    started: Instant,
    queued: bool,
    /// The current queue entry: its secret, and an instant no later than
    /// when the request that created it was sent (any hand-off to this entry
    /// happened after it).
    entry: Option<(u64, Instant)>,
    heartbeat: Option<HeartbeatReg>,
}

impl QueueState {
    fn new(started: Instant) -> QueueState {
        QueueState {
            started,
            queued: false,
            entry: None,
            heartbeat: None,
        }
    }

    fn observe(&mut self, client: &Client, spec: &AcquireSpec, reply: Reply, sent_at: Instant) {
        let Reply::Queued { fresh, secret, .. } = reply else {
            return;
        };
        if fresh {
            self.entry = Some((secret, sent_at));
        } else if self.entry.map(|e| e.0) != Some(secret) {
            // The entry was created by an earlier request of this attempt
            // whose reply never came: it was sent after `started`.
            self.entry = Some((secret, self.started));
        }
        if fresh && self.queued {
            tracing::warn!(kind = spec.kind, key = %spec.key,
                "waiter was purged from the queue while alive; re-enqueued at the tail");
        }
        self.queued = true;
        if self.heartbeat.is_none() {
            self.heartbeat = spec
                .heartbeat
                .as_ref()
                .map(|h| client.inner.heartbeat.register(h));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_replies() {
        assert_eq!(
            decode(&[1, 7, 100]).unwrap(),
            Reply::Granted {
                token: 7,
                pttl: 100
            }
        );
        assert_eq!(decode(&[0, 50]).unwrap(), Reply::Busy { pttl: 50 });
        assert_eq!(
            decode(&[2, 50, 1, 9]).unwrap(),
            Reply::Queued {
                pttl: 50,
                fresh: true,
                secret: 9
            }
        );
        let s = new_secret();
        assert!(s > 0 && s < (1 << 53));
        assert!(decode(&[]).is_err());
    }

    #[test]
    fn a_hold_ending_now_is_tried_again_at_once() {
        let now = Instant::now();
        let long = Duration::from_secs(30);
        assert_eq!(sleep_bound(now, 0, long), now + Duration::from_millis(1));
        assert_eq!(
            sleep_bound(now, 250, long),
            now + Duration::from_millis(250)
        );
        assert_eq!(sleep_bound(now, -2, long), now);
        assert_eq!(sleep_bound(now, -1, long), now + long);
    }

    #[test]
    fn attempt_ids_are_unique_and_numbered_in_order() {
        let a = new_attempt_id();
        let b = new_attempt_id();
        assert_ne!(a, b);
        assert!(a.starts_with(|c: char| c.is_ascii_hexdigit()));
        assert!(attempt_seq(&a) > 0);
        assert!(attempt_seq(&b) > attempt_seq(&a));
        assert_eq!(attempt_seq("00ff"), 0);
    }
}
