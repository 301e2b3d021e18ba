//! deadbolt-election: leader election kept in Redis.
//!
//! An [`Election`] is a name that candidates campaign for. One of them
//! leads at a time, under a lease the client's watchdog renews; its
//! [`Leadership`] carries a [`term`](Leadership::term), a fencing token
//! strictly larger than every earlier term of that election, so a resource
//! can refuse a deposed leader's late writes. Candidates wait on a channel,
//! not by polling; observers get a stream of leader changes, driven by
//! messages and caught up within a bound when one is missed. See
//! `docs/election.md`.
//!
//! ```no_run
//! # async fn f() -> deadbolt_core::Result<()> {
//! use deadbolt_core::HoldGuard as _; // run, lost, state, valid_for
//! let client = deadbolt_core::Client::connect("redis://127.0.0.1/").await?;
//! let election = deadbolt_election::Election::new(&client, "scheduler");
//! let leadership = election.campaign("worker-1").await?;
//! println!("leading in term {}", leadership.term());
//! // Runs until the work ends or the leadership is lost, whichever first.
//! let outcome = leadership.run(async { /* the job */ }).await;
//! leadership.resign().await?;
//! # let _ = outcome; Ok(()) }
//! ```
//!
//! Built on core's primitive surface alone (`deadbolt_core::primitive`): a
//! campaign is an acquire, a resignation a release, and an observer's wait
//! a condition wait.

use std::time::Duration;

use deadbolt_core::primitive::{
    AcquireSpec, Client, ConditionSpec, Error, Handle, Hold, HoldGuard, LeaseMode, LeaseState,
    Result, ScriptCall, WaitMode, WakeAsTold,
};
use futures::Stream;

/// The election's Lua scripts (files in this crate's `lua/`).
pub mod scripts {
    deadbolt_core::primitive::lua_scripts! {
        list pub SCRIPTS;
        libs [MSG_LIB, HOLD_LIB];
        /// One try of a candidate to lead.
        pub ELECT_CAMPAIGN = "elect_campaign";
        /// End a leadership by attempt id.
        pub ELECT_RESIGN = "elect_resign";
        /// Who leads now.
        pub ELECT_LEADER = "elect_leader";
        /// Has the leadership changed since a term (an observer's check).
        pub ELECT_CHANGED = "elect_changed";
    }
}
pub use scripts::SCRIPTS;
use scripts::{ELECT_CAMPAIGN, ELECT_CHANGED, ELECT_LEADER, ELECT_RESIGN};

/// The kind segment of an election's keys: `<ns>:{<name>}:elect`.
pub const KIND: &str = "elect";

/// How long an observer waits for a message before it reads the leader
/// anyway: the bound on catching up with a missed message.
pub const CATCH_UP: Duration = deadbolt_core::primitive::CATCH_UP;

/// The keys and channels of one election.
#[derive(Debug)]
struct Parts {
    key: String,
    fence: String,
    channel: String,
    observers: String,
    keys: deadbolt_core::primitive::Keys,
}

/// An election: a name candidates campaign for. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Election {
    inner: std::sync::Arc<Handle<Parts>>,
}

/// Who leads an election, as [`Election::leader`] read it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Leader {
    /// The leadership's term: its fencing token.
    pub term: u64,
    /// The info the leader gave to [`Election::campaign`].
    pub info: String,
    /// The leader's owner id (one per campaign).
    pub owner: String,
    /// The leader's client name (`ClientBuilder::client_name`), from its
    /// owner id.
    pub client_name: Option<String>,
    /// What was left of its lease when read.
    pub ttl: Duration,
}

/// The leadership won by [`Election::campaign`]: held until
/// [`resign`](Leadership::resign), a drop (resigned in the background), or
/// the loss of its lease.
#[derive(Debug)]
pub struct Leadership {
    hold: Hold,
    info: String,
}

impl Election {
    /// A handle on the election `name`.
    ///
    /// An invalid name (empty) is reported as [`Error::InvalidArgument`] by
    /// every method, before anything is sent.
    pub fn new(client: &Client, name: &str) -> Election {
        let inner = Handle::new(client, KIND, name, |k| Parts {
            key: k.main().to_string(),
            fence: k.fence().to_string(),
            channel: k.channel(),
            observers: k.sub("obs"),
            keys: k,
        });
        Election {
            inner: std::sync::Arc::new(inner),
        }
    }

    /// The election's name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    fn campaign_spec(&self, info: &str) -> Result<AcquireSpec> {
        let p = self.inner.parts()?;
        Ok(
            AcquireSpec::builder(KIND, &p.keys, &ELECT_CAMPAIGN, &ELECT_RESIGN, &WakeAsTold)
                .keys(vec![p.key.clone(), p.fence.clone()])
                .extra_args(vec![info.to_string(), p.observers.clone()])
                .release_with(
                    vec![p.key.clone()],
                    vec![p.channel.clone(), p.observers.clone()],
                )
                .build(),
        )
    }

    /// Campaign to lead, with `info` for observers to read (an address, a
    /// host name): waits until this candidate leads. Candidates are not
    /// served in order: when a leadership ends, one candidate per client
    /// tries, and one of them wins. The leadership's lease is renewed by
    /// the client's watchdog (`watchdog_timeout`); a leader whose process
    /// dies is replaced once its lease has run out.
    ///
    /// # Errors
    /// `InvalidArgument`, `WrongType` (a key of another type in the way),
    /// `BadValue` (an unusable fencing counter), `SubscribeRefused`,
    /// `Shutdown`; `Unavailable` / `Indeterminate` while Redis cannot
    /// answer are ridden out.
    ///
    /// # Cancel safety
    /// Cancel safe: a campaign dropped while it waits, or while its winning
    /// try is in flight, gives up what it may have won in the background.
    pub async fn campaign(&self, info: impl Into<String>) -> Result<Leadership> {
        let info = info.into();
        let hold = self.acquire(&info, WaitMode::Forever).await?;
        hold.map(|hold| Leadership { hold, info })
            .ok_or_else(|| Error::InvalidArgument("a campaign without a bound ended".into()))
    }

    /// [`campaign`](Election::campaign) for at most `wait`: `None` when
    /// another candidate still led then.
    ///
    /// # Errors
    /// As [`campaign`](Election::campaign), plus `Unavailable` /
    /// `Indeterminate` when the time ran out while Redis could not answer.
    ///
    /// # Cancel safety
    /// As [`campaign`](Election::campaign).
    pub async fn campaign_for(
        &self,
        info: impl Into<String>,
        wait: Duration,
    ) -> Result<Option<Leadership>> {
        let info = info.into();
        let hold = self.acquire(&info, WaitMode::up_to(wait)).await?;
        Ok(hold.map(|hold| Leadership { hold, info }))
    }

    async fn acquire(&self, info: &str, wait: WaitMode) -> Result<Option<Hold>> {
        let spec = self.campaign_spec(info)?;
        let client = self.inner.client();
        // Each campaign is an owner of its own: a leader that campaigns
        // again waits for its own leadership to end.
        let owner = client.new_owner();
        client
            .acquire(&spec, &owner, LeaseMode::Watchdog, wait)
            .await
    }

    /// Who leads now: `None` when nobody does. Read in one step.
    ///
    /// # Errors
    /// `Unavailable`, `Indeterminate` (nothing was changed), `WrongType`.
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn leader(&self) -> Result<Option<Leader>> {
        let p = self.inner.parts()?;
        let call = ScriptCall::new(&ELECT_LEADER, vec![p.key.clone()], vec![]);
        let v: Vec<String> = self.inner.client().run(&call).await?;
        Ok(leader_of(&v))
    }

    /// A stream of who leads: the current leader first (`None`: nobody),
    /// then every change as it happens, `None` when a leadership ended with
    /// nobody elected yet. Driven by messages on the election's observers'
    /// channel (an election or a resignation publishes one); a leader that
    /// dies publishes nothing, and the observer looks again when its lease
    /// ends; a message that was missed is caught up within [`CATCH_UP`].
    /// Terms only rise: changes that happen faster than the observer looks
    /// may be seen as one. When Redis cannot be reached the stream yields
    /// the error (once per [`CATCH_UP`] while it lasts) and goes on.
    ///
    /// # Cancel safety
    /// Dropping the stream (or a pending `next()`) stops it; it records
    /// nothing on the server.
    pub fn observe(&self) -> impl Stream<Item = Result<Option<Leader>>> + Send + 'static {
        let (reader, waiter) = (self.clone(), self.clone());
        deadbolt_core::primitive::observe(
            move || {
                let e = reader.clone();
                async move { e.leader().await }
            },
            |l: &Option<Leader>| term_of(l.as_ref()),
            move |seen| {
                let e = waiter.clone();
                async move { e.wait_change(seen).await }
            },
        )
    }

    /// Wait until the term differs from `seen` (0: nobody led), for at most
    /// [`CATCH_UP`]. Returns whether it saw a change.
    async fn wait_change(&self, seen: u64) -> Result<bool> {
        let p = self.inner.parts()?;
        let spec = ConditionSpec::builder(KIND, &p.keys, &ELECT_CHANGED, &WakeAsTold)
            .keys(vec![p.key.clone()])
            .channel(p.observers.clone())
            .extra_args(vec![seen.to_string()])
            .build();
        self.inner
            .client()
            .wait_until(&spec, self.inner.owner(), WaitMode::up_to(CATCH_UP))
            .await
    }
}

fn term_of(l: Option<&Leader>) -> u64 {
    l.map_or(0, |l| l.term)
}

/// A leadership's lease is its hold's.
impl HoldGuard for Leadership {
    /// The state of the leadership's lease.
    fn state(&self) -> LeaseState {
        self.hold.state()
    }

    /// How much longer the leadership is known to last (from the last
    /// renewal the server confirmed, less a drift margin); zero once it is
    /// not `Active`.
    fn valid_for(&self) -> Duration {
        self.hold.valid_for()
    }

    /// Resolves when the leadership can no longer be counted on (its lease
    /// was lost, or its state became Unknown), or it ended.
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches.
    fn lost(&self) -> impl std::future::Future<Output = LeaseState> + Send + 'static {
        self.hold.lost()
    }
}

impl Leadership {
    /// Writes to Redis that commit only while this leadership is live
    /// (the check and the writes in one script): a leader paused past its
    /// lease writes nothing once its term ended. See
    /// [`deadbolt_core::guarded`].
    pub fn guarded(&self) -> deadbolt_core::primitive::Guarded<'_> {
        deadbolt_core::primitive::Guarded::over(vec![&self.hold])
    }

    /// The term: a fencing token strictly larger than every earlier term of
    /// this election (and than every token of the names of its hash slot).
    pub fn term(&self) -> u64 {
        self.hold.fencing_token()
    }

    /// The info this leader campaigned with.
    pub fn info(&self) -> &str {
        &self.info
    }

    /// Step down: the leadership ends at once, candidates are woken and
    /// observers told.
    ///
    /// # Errors
    /// [`Error::NotHeld`] when the lease had run out (another may lead);
    /// `Unavailable` / `Indeterminate` when the resignation could not be
    /// confirmed (it was handed to the background releaser).
    ///
    /// # Cancel safety
    /// If dropped before the reply, the resignation may or may not have
    /// run; the background releaser runs it (again: it is idempotent).
    pub async fn resign(self) -> Result<()> {
        self.hold.unlock().await
    }
}

/// `elect_leader.lua`'s reply `{owner, term, info, pttl}` (or `{}`) as a
/// [`Leader`].
fn leader_of(v: &[String]) -> Option<Leader> {
    let owner = v.first()?.clone();
    let term = v.get(1)?.parse().ok()?;
    let info = v.get(2).cloned().unwrap_or_default();
    let ttl = v.get(3).and_then(|t| t.parse().ok()).unwrap_or(0);
    Some(Leader {
        term,
        info,
        client_name: deadbolt_core::primitive::holder_name(&owner),
        owner,
        ttl: Duration::from_millis(ttl),
    })
}
