//! The idle scenario: what blocked waiters cost Redis.
//!
//! `--idle-waiters` waiters blocked on a held lock, and the Redis commands
//! they send per second.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _};
use tokio::sync::watch;
use tokio::time::{timeout, Instant};

use super::cells::table;
use super::legend::{entries, Legend};
use crate::contender::{Contender, LockHandle};
use crate::model::{float, BenchArgs, Report, RunResult, Tally};
use crate::scenarios::{
    join_all, kind_and_run, shutdown, spawn_each, spread, Env, Exclusion, Scenario, HANG,
};
use crate::stats;

/// Time for the waiters to make their first tries (and subscribe) before
/// their commands are counted.
const IDLE_SETTLE: Duration = Duration::from_millis(250);

/// `--idle-waiters` waiters blocked on a held lock for `--idle-time`.
#[derive(Debug)]
pub(crate) struct Idle;

entries! {
    /// Commands per blocked waiter per second.
    CMDS_PER_WAITER = 100, "cmds/waiter/s", "commands per blocked waiter per second (0: it waits \
        for a message); lower is better";
}

impl Scenario for Idle {
    kind_and_run!(Idle => idle);

    fn validate(&self, args: &BenchArgs) -> anyhow::Result<()> {
        if args.lease < args.idle_time + Duration::from_secs(1) {
            bail!(
                "--lease ({:?}) must outlast --idle-time ({:?}) by a second: the idle scenario's \
                 holder keeps the lock that long",
                args.lease,
                args.idle_time
            );
        }
        Ok(())
    }

    fn planned(&self, args: &BenchArgs) -> Duration {
        IDLE_SETTLE + args.idle_time
    }

    fn section(&self, report: &Report, rows: &[&RunResult]) -> String {
        let s = &report.settings;
        let header = ["cmds/waiter/s", "commands sent", "errors"];
        let table = table(&header, rows, |r| {
            let per = r
                .commands
                .per_waiter_per_s
                .map_or_else(|| "-".into(), |c| format!("{c:.1}"));
            let sent: Vec<String> = r
                .commands
                .counted_names
                .iter()
                .filter_map(|n| r.commands.by_command.get(n).map(|c| format!("{n} {c}")))
                .collect();
            let sent = if sent.is_empty() {
                "none".to_string()
            } else {
                sent.join(", ")
            };
            vec![per, sent, r.errors.to_string()]
        });
        format!(
            "idle: {} waiters blocked on a held lock for {:.1} s\n{table}",
            s.idle_waiters, s.idle_s,
        )
    }

    fn legend(&self) -> Legend {
        &[&[&CMDS_PER_WAITER]]
    }
}

/// W waiters, spread over C clients, blocked on a held lock: what waiting costs Redis.
async fn idle(env: &mut Env<'_>, c: &dyn Contender) -> anyhow::Result<RunResult> {
    let args = env.args;
    let waiters = args.idle_waiters;
    let clients_n = args.clients.min(waiters);
    let holder_client = env.connect(c, 1).await?;
    let clients = env.connect(c, clients_n).await?;
    let name = env.name(Idle.kind(), c, 0);
    let holder = holder_client[0].handle(&name);
    let held = match timeout(HANG, holder.acquire()).await {
        Err(_) => bail!("the holder did not get a free lock in {HANG:?}"),
        Ok(r) => r.context("the idle scenario's holder")?,
    };
    let exclusion = Exclusion::default();
    exclusion.enter();
    let (stop, stopped) = watch::channel(false);
    let set = spawn_each(spread(&clients, waiters, &name), |_, h| {
        idle_waiter(h, exclusion.clone(), stopped.clone())
    });
    let bar = env
        .progress
        .start(&format!("idle · {}", c.kind().name()), Idle.planned(args));
    tokio::time::sleep(IDLE_SETTLE).await;
    let measured = async {
        let before = env.snapshot().await?;
        let t0 = Instant::now();
        tokio::time::sleep(args.idle_time).await;
        let after = env.snapshot().await?;
        anyhow::Ok((before, after, t0.elapsed()))
    }
    .await;
    let _ = stop.send(true);
    let workers = join_all(set).await;
    exclusion.leave();
    let released = held.release().await;
    shutdown(&clients).await;
    shutdown(&holder_client).await;
    let (before, after, elapsed) = measured?;
    let workers = workers?;

    let mut tally = Tally::default();
    for t in &workers {
        tally.merge(t);
    }
    if let Err(e) = released {
        tally.error(e.context("the idle scenario's holder"))?;
    }
    let mut cmds = env.commands(c, &before, &after, 0);
    let waiter_seconds = f64::from(waiters) * elapsed.as_secs_f64();
    cmds.per_waiter_per_s = Some(float(cmds.counted) / waiter_seconds);
    bar.finish(format!(
        "{:.1} commands per waiter per second",
        cmds.per_waiter_per_s.unwrap_or(0.0)
    ));
    Ok(RunResult {
        exclusion_violations: exclusion.violations(),
        ..RunResult::of(
            Idle.kind(),
            c.kind(),
            (waiters, clients_n),
            elapsed,
            tally,
            cmds,
        )
    })
}

/// One waiter on the held lock until `stopped`: it waits in `acquire`; a
/// grant (the holder never lets go while the waiters run) is counted and
/// given back.
async fn idle_waiter(
    h: Arc<dyn LockHandle>,
    exclusion: Exclusion,
    mut stopped: watch::Receiver<bool>,
) -> anyhow::Result<Tally> {
    let mut tally = Tally::default();
    loop {
        tokio::select! {
            r = h.acquire() => match r {
                Ok(held) => {
                    exclusion.enter();
                    exclusion.leave();
                    tally.ok();
                    if let Err(e) = held.release().await {
                        tally.error(e)?;
                    }
                }
                Err(e) => tally.error(e)?,
            },
            () = stats::until_stopped(&mut stopped) => break,
        }
    }
    Ok(tally)
}
