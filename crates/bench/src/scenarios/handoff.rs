//! The handoff scenario: release-to-next-holder latency.
//!
//! One holder releases while one waiter on another client waits.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _};
use hdrhistogram::Histogram;
use tokio::time::{timeout, Instant};

use super::cells::{cmds, p50_p99_max, ping, table};
use super::legend::{Legend, CMDS_ACQ, HAND_OFF, PING_P50, X_PING};
use crate::contender::{Contender, LockHandle};
use crate::model::{Commands, ContenderKind, Report, RunResult, ScenarioKind, Tally};
use crate::scenarios::{kind_and_run, Scenario};
use crate::scenarios::{lat_summary, Env, Exclusion, EVENT_JITTER, HANG};
use crate::stats::{histogram, record, summarize};

/// The holder holds at least this long after the waiter started, so the
/// waiter is waiting when the release comes.
const HANDOFF_HOLD: Duration = Duration::from_millis(3);

/// One holder releases while one waiter (on another client) waits, up to
/// `--rounds` rounds or `--duration`.
#[derive(Debug)]
pub(crate) struct Handoff;

impl Scenario for Handoff {
    kind_and_run!(Handoff => handoff);

    fn section(&self, report: &Report, rows: &[&RunResult]) -> String {
        let s = &report.settings;
        let header = [
            "rounds",
            "hand-off p50",
            "p99",
            "max",
            "cmds/acq",
            "PING p50",
            "errors",
        ];
        let table = table(&header, rows, |r| {
            let rounds = r.rounds.unwrap_or(0).to_string();
            std::iter::once(rounds)
                .chain(p50_p99_max(r.handoff))
                .chain([cmds(r), ping(r), r.errors.to_string()])
                .collect()
        });
        format!(
            "handoff: release → next holder on another client, up to {} rounds or {:.1} s\n{}",
            s.rounds, s.duration_s, table
        )
    }

    fn legend(&self) -> Legend {
        &[&[&X_PING, &CMDS_ACQ, &HAND_OFF, &PING_P50]]
    }
}

/// One holder on client A releases while one waiter on client B waits.
///
/// The holder holds for [`HANDOFF_HOLD`] plus a random extra of one poll
/// period (or [`EVENT_JITTER`] for contenders that wait for events), so the
/// release falls at a random phase of a poller's sleep.
async fn handoff(env: &mut Env<'_>, c: &dyn Contender) -> anyhow::Result<RunResult> {
    let args = env.args;
    let clients = env.connect(c, 2).await?;
    let name = env.name(Handoff.kind(), c, 0);
    let holder = clients[0].handle(&name);
    let waiter = clients[1].handle(&name);
    let jitter = c.poll_period().unwrap_or(EVENT_JITTER);
    let exclusion = Exclusion::default();
    let label = format!("handoff · {}", c.kind().name());
    let run = env.start_run(&Handoff, &label).await?;
    let deadline = run.timing.deadline;
    let outcome = handoff_rounds(&holder, &waiter, jitter, args.rounds, deadline, &exclusion).await;
    let (elapsed, after, pings) = env.end_run(run.timing, &clients).await;
    let (after, (ping_p50, sent)) = (after?, pings?);
    let (result, line) = outcome?.result(
        Handoff.kind(),
        c.kind(),
        elapsed,
        ping_p50,
        exclusion.violations(),
        env.commands(c, &run.before, &after, sent),
    );
    run.bar.finish(line);
    Ok(result)
}

/// What the rounds of a hand-off run measured.
#[derive(Debug)]
pub(crate) struct Handoffs {
    pub(crate) tally: Tally,
    /// From the start of the holder's release to the waiter holding it.
    pub(crate) handoffs: Histogram<u64>,
    /// Rounds that ended with the waiter holding the lock.
    pub(crate) rounds: u64,
}

impl Handoffs {
    /// The hand-off row (two workers on two clients), and the line that
    /// closes its progress bar.
    pub(crate) fn result(
        self,
        scenario: ScenarioKind,
        contender: ContenderKind,
        elapsed: std::time::Duration,
        ping_p50: Option<f64>,
        exclusion_violations: u64,
        mut cmds: Commands,
    ) -> (RunResult, String) {
        cmds.per_acquisitions(self.tally.acquisitions);
        let result = RunResult {
            rounds: Some(self.rounds),
            exclusion_violations,
            ping_p50_us: ping_p50,
            handoff: summarize(&self.handoffs, ping_p50),
            ..RunResult::of(scenario, contender, (2, 2), elapsed, self.tally, cmds)
        };
        let line = format!(
            "{} rounds, hand-off {}",
            self.rounds,
            lat_summary(result.handoff.as_ref())
        );
        (result, line)
    }
}

/// The hand-off rounds: `holder` takes the lock, `waiter` (another client's
/// owner of the same name) starts waiting for it, the holder holds it
/// [`HANDOFF_HOLD`] plus a random part of `jitter` and releases it; the time
/// from the release call to the waiter's grant is one sample. Up to
/// `max_rounds` rounds, and no new round after `deadline` once one is done.
pub(crate) async fn handoff_rounds(
    holder: &Arc<dyn LockHandle>,
    waiter: &Arc<dyn LockHandle>,
    jitter: Duration,
    max_rounds: u32,
    deadline: Instant,
    exclusion: &Exclusion,
) -> anyhow::Result<Handoffs> {
    let mut tally = Tally::default();
    let mut handoffs = histogram();
    let mut rounds = 0u64;
    while rounds < u64::from(max_rounds) && (rounds == 0 || Instant::now() < deadline) {
        let held = match timeout(HANG, holder.acquire()).await {
            Err(_) => bail!("the holder did not get a free lock in {HANG:?}"),
            Ok(Err(e)) => {
                tally.error(e)?;
                continue;
            }
            Ok(Ok(held)) => held,
        };
        exclusion.enter();
        tally.ok();
        let waiting = {
            let waiter = waiter.clone();
            let exclusion = exclusion.clone();
            tokio::spawn(async move {
                let r = waiter.acquire().await;
                let at = Instant::now();
                if r.is_ok() {
                    exclusion.enter();
                }
                (at, r)
            })
        };
        let extra = rand::random_range(Duration::ZERO..jitter);
        tokio::time::sleep(HANDOFF_HOLD + extra).await;
        let released_at = Instant::now();
        exclusion.leave();
        if let Err(e) = held.release().await {
            waiting.abort();
            tally.error(e)?;
            break;
        }
        let (acquired_at, r) = match timeout(HANG, waiting).await {
            Err(_) => bail!("the waiter did not get the lock within {HANG:?} of its release"),
            Ok(joined) => joined.context("the waiter panicked")?,
        };
        match r {
            Err(e) => tally.error(e)?,
            Ok(held) => {
                record(
                    &mut handoffs,
                    acquired_at.saturating_duration_since(released_at),
                );
                rounds += 1;
                tally.ok();
                exclusion.leave();
                if let Err(e) = held.release().await {
                    tally.error(e)?;
                    break;
                }
            }
        }
    }
    Ok(Handoffs {
        tally,
        handoffs,
        rounds,
    })
}
