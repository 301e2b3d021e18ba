//! What a primitive tells core about an acquire ([`AcquireSpec`], built by
//! [`AcquireBuilder`]) or a wait for a condition ([`ConditionSpec`]), and how
//! long it may wait ([`WaitMode`]).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::heartbeat::HeartbeatSpec;
use crate::hold::HoldSet;
use crate::keys::Keys;
use crate::scripts::LuaScript;
use crate::wake::WakePolicy;

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
///
/// Acquire scripts share one contract:
/// `ARGV = [owner, attempt, lease_ms, mode, secret, bound, extra...]`, the
/// first six always sent, in this order, whatever the spec (so no script's
/// argument moves with a builder flag), where mode is `'try'`
/// (one attempt), `'wait'` (the first try of an acquire that waits when
/// busy) or `'again'` (a later try of that acquire; scripts that need not
/// tell the two apart treat every mode but `'try'` alike), `secret` is the
/// call's entry secret (below; `'0'` when grants do not come by name),
/// `bound` the stale-hold bound of [`HoldSet::acquire_arg`](crate::HoldSet::acquire_arg)
/// (`'0'` without a set of live holds), and `extra` the spec's own; reply
/// `{1, token, pttl}` granted, `{0, pttl}` busy (nothing recorded),
/// `{2, pttl, fresh, secret}` queued (the attempt is recorded and must be
/// released when the caller gives up; `secret` identifies the queue entry).
/// Specs with hand-off by name ([`AcquireBuilder::grants_by_name_only`]) send as `secret`
/// a fresh random one per call, stored with the
/// queue entry the call creates and echoed by a hand-off message for that
/// entry. A hand-off is accepted only when it carries the secret of the
/// waiter's current entry: a late grant for an entry the waiter already lost
/// (purged, re-enqueued) or a forged one is ignored, and the waiter asks the
/// server instead. Release scripts take `ARGV = [attempt, extra...]` and
/// reply 0 when the attempt held nothing; a reply of 4 (specs with
/// [`AcquireBuilder::pass`]) means released and
/// granted to another client's waiter, and one waiter of this client is
/// woken to ask the server (the grant's message went to that client alone).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AcquireSpec {
    /// Primitive kind, for tracing.
    pub(crate) kind: &'static str,
    /// Acquire script (contract in the module docs).
    pub(crate) acquire: &'static LuaScript,
    /// KEYS of the acquire script.
    pub(crate) keys: Vec<String>,
    /// ARGV after the six of the prefix (owner, attempt, lease, mode, secret, bound).
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
    /// is on [`AcquireBuilder::renew`].
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
    /// How grants reach a waiter: by unnamed wake-ups and a try, or by
    /// name too (and then on which channel).
    pub(crate) grants: Grants,
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
    /// primitives whose holds are counted per owner in one hash. When given, every acquire call sends as its stale-hold bound (`ARGV[6]`)
    /// [`HoldSet::acquire_arg`]: `0` when one of them is still active or
    /// another acquire of the handle (a clone in another task) is in
    /// progress, else the attempt's sequence number (`attempt_seq`), and
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

/// How the grants of an acquire reach its waiter: the three ways the
/// builder offers ([`AcquireBuilder::grants_by_name_only`],
/// [`AcquireBuilder::grants_by_name`], or neither), and no other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Grants {
    /// Unnamed wake-ups only: a woken waiter tries again.
    Unnamed,
    /// By name only (a server-side queue): `t:<attempt>` / `g:<attempt> ...`
    /// messages wake this waiter and only it.
    Named,
    /// By name on the shared channel, beside the unnamed wake-ups.
    NamedShared,
}

impl Grants {
    /// Grants come by name: each acquire call carries a fresh entry secret
    /// (`ARGV[5]`), and the waiter is registered under its attempt.
    pub(crate) fn by_name(&self) -> bool {
        *self != Grants::Unnamed
    }

    /// A waiter registered by name is woken by unnamed messages too.
    pub(crate) fn also_unnamed(&self) -> bool {
        *self == Grants::NamedShared
    }
}

impl AcquireSpec {
    /// Describe the acquire of a primitive of `kind` (for tracing) whose
    /// keys are `keys`: `acquire` and `release` scripts (contracts in the
    /// module docs), and the policy that decodes the messages on its
    /// channel. Defaults, each changed by a method below: both scripts take
    /// the main key alone and no extra ARGV; holds are renewed by core's
    /// `hold_renew.lua` on the main key; waiters wait on `keys.channel()`;
    /// one class of waiter; no queue (no heartbeat, no hand-off by name); no
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
            grants: Grants::Unnamed,
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
    /// per-call argument, such as how many units a call asks for).
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

    /// ARGV of the acquire script after the six of the prefix.
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
    /// keys of one hold for it, all in one hash slot. Contract
    /// (`hold_renew.lua` is one): `KEYS` = the renew keys of each hold in
    /// turn, `ARGV[1]` = lease in ms to guarantee from now, `ARGV[1+i]` =
    /// attempt id of the i-th hold; reply one integer per hold: `>= 0`
    /// renewed (the TTL after the call), `-1` gone, `-2` taken over,
    /// `-2 - j` (`j` ≥ 1) the hold's `j`-th renew key has another type and
    /// nothing was written for it. The watchdog batches the holds that
    /// share a script and a hash slot into one call.
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
    /// entry secret as `ARGV[5]` (see the module docs).
    pub fn grants_by_name_only(mut self) -> Self {
        self.0.grants = Grants::Named;
        self
    }

    /// Hand-off by name beside the unnamed wake-ups, for primitives
    /// without a server-side queue whose release grants to waiters that
    /// registered on their failed tries: each acquire call carries a fresh
    /// entry secret as `ARGV[5]` (as [`grants_by_name_only`]); a reply `{2, pttl, fresh,
    /// secret}` says the attempt is a registered waiter (the attempt is
    /// armed then: its release must clear the registration when it gives
    /// up), `{0, pttl}` that it is not. The grants, one line per waiter
    /// (`g:<attempt> <token> <ttl> <secret> [<claim>]`,
    /// [`Message::Granted`](crate::message::Message::Granted)), and the
    /// named sleep bounds (`t:<attempt> <ms>`) come on the channel every
    /// waiter listens on, so a waiter has one subscription; every client
    /// hears them, and only the named waiters act on them. Unnamed
    /// messages (`1`, `*`) wake these waiters as any others.
    ///
    /// [`grants_by_name_only`]: AcquireBuilder::grants_by_name_only
    pub fn grants_by_name(mut self) -> Self {
        self.0.grants = Grants::NamedShared;
        self
    }

    /// A liveness heartbeat kept while the attempt is queued (primitives
    /// with a server-side queue): `script` refreshes the liveness records
    /// of many names at once. Its contract: `KEYS` = the keys of many
    /// names, one group of `keys.len()` after another (this name's group
    /// is `keys`); `ARGV = [client id, waiter_timeout_ms]`.
    pub fn heartbeat(mut self, script: &'static LuaScript, keys: Vec<String>) -> Self {
        self.0.heartbeat = Some(HeartbeatSpec { script, keys });
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
    /// acquire call then sends as its stale-hold bound (`ARGV[6]`) [`HoldSet::acquire_arg`]: `0`
    /// when one of them is still active or another acquire of the handle
    /// (a clone in another task) is in progress, else the attempt's
    /// sequence number (`attempt_seq`), and the holds it grants are
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

/// What a primitive tells core about a wait for a condition (a count
/// reaching zero, say): a script that checks it and records nothing, its
/// keys, and the channel and policy that announce a change. Built with
/// [`ConditionSpec::builder`]; run by [`Client::wait_until`](crate::Client::wait_until).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ConditionSpec(pub(crate) AcquireSpec);

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

    /// ARGV of the check after the acquire contract's (a value the
    /// condition compares with, say).
    pub fn extra_args(mut self, args: Vec<String>) -> Self {
        self.0.extra_args = args;
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
