//! The handoff scenario: release-to-next-holder latency.
//!
//! One holder releases while one waiter on another client waits.

use futures::future::BoxFuture;
use tokio::time::Instant;

use super::cells::{cmds, lat, max, p50, p99, ping};
use super::legend::{Entry, CMDS_ACQ, HAND_OFF, PING_P50, X_PING};
use super::Scenario;
use crate::args::ScenarioKind;
use crate::contender::Contender;
use crate::report::{Report, RunResult, Table};
use crate::scenario::{handoff_rounds, shutdown, Env, Exclusion, EVENT_JITTER};
use crate::stats::Pinger;

/// One holder releases while one waiter (on another client) waits, up to
/// `--rounds` rounds or `--duration`.
#[derive(Debug)]
pub(crate) struct Handoff;

impl Scenario for Handoff {
    fn kind(&self) -> ScenarioKind {
        ScenarioKind::Handoff
    }

    fn name(&self) -> &'static str {
        "handoff"
    }

    fn run_one<'a>(
        &'a self,
        env: &'a mut Env<'_>,
        c: &'a dyn Contender,
    ) -> BoxFuture<'a, anyhow::Result<RunResult>> {
        Box::pin(handoff(env, c))
    }

    fn section(&self, report: &Report, rows: &[&RunResult]) -> String {
        let s = &report.settings;
        let mut table = Table::new(&[
            "contender",
            "rounds",
            "hand-off p50",
            "p99",
            "max",
            "cmds/acq",
            "PING p50",
            "errors",
        ]);
        for r in rows {
            table.row(vec![
                r.contender.name().to_string(),
                r.rounds.unwrap_or(0).to_string(),
                lat(r.handoff, p50),
                lat(r.handoff, p99),
                lat(r.handoff, max),
                cmds(r),
                ping(r),
                r.errors.to_string(),
            ]);
        }
        format!(
            "handoff: release → next holder on another client, up to {} rounds or {:.1} s\n{}",
            s.rounds,
            s.duration_s,
            table.render()
        )
    }

    fn legend(&self) -> &'static [&'static Entry] {
        &[&X_PING, &CMDS_ACQ, &HAND_OFF, &PING_P50]
    }
}

/// One holder on client A releases while one waiter on client B waits.
///
/// The holder holds for [`HANDOFF_HOLD`](crate::scenario::HANDOFF_HOLD) plus a random extra of one poll
/// period (or [`EVENT_JITTER`](crate::scenario::EVENT_JITTER) for contenders that wait for events), so the
/// release falls at a random phase of a poller's sleep.
async fn handoff(env: &mut Env<'_>, c: &dyn Contender) -> anyhow::Result<RunResult> {
    let args = env.args;
    let clients = env.connect(c, 2).await?;
    let name = env.name(Handoff.kind(), c, 0);
    let holder = clients[0].handle(&name);
    let waiter = clients[1].handle(&name);
    let jitter = c.poll_period().unwrap_or(EVENT_JITTER);
    let exclusion = Exclusion::default();
    let pinger = Pinger::start(env.url()).await?;
    let before = env.snapshot().await?;
    let bar = env.progress.start(
        &format!("handoff · {}", c.kind().name()),
        Handoff.planned(args),
    );
    let start = Instant::now();
    let deadline = start + args.duration;
    let outcome = handoff_rounds(&holder, &waiter, jitter, args.rounds, deadline, &exclusion).await;
    let elapsed = start.elapsed();
    let after = env.snapshot().await;
    let pings = env.finish_pinger(pinger).await;
    shutdown(&clients).await;
    let (after, (ping_p50, sent)) = (after?, pings?);
    let (result, line) = outcome?.result(
        Handoff.kind(),
        c.kind(),
        elapsed,
        ping_p50,
        exclusion.violations(),
        env.commands(c, &before, &after, sent),
    );
    bar.finish(line);
    Ok(result)
}
