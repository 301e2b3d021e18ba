//! Progress on stderr: while a run goes, a bar for it and one overall line
//! with the runs done and an ETA; each finished run leaves one summary line.
//!
//! Bars are drawn only when stdout and stderr are both terminals. Otherwise
//! (output captured, CI logs) each finished run prints one note instead, with
//! the same count and ETA; `--quiet` prints nothing at all.

use std::io::{IsTerminal as _, Write as _};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Width of the label column, so bars and summary lines line up.
const LABEL_WIDTH: usize = 24;
/// Steps of the overall bar (it shows a fraction of the planned time).
const OVERALL_STEPS: u64 = 1000;

/// Where progress goes. Clones share one overall line.
#[derive(Debug, Clone)]
pub(crate) struct Progress {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    bars: bool,
    notes: bool,
    multi: MultiProgress,
    overall: ProgressBar,
    /// Changed by [`Progress::start`] (a run begins) and [`Bar::finish`] (it
    /// ends); read by the tickers.
    plan: Mutex<Plan>,
}

/// The planned runs, and how far the bench has got through them.
#[derive(Debug, Clone, Default)]
struct Plan {
    /// Planned length of every run, in run order.
    runs: Vec<Duration>,
    /// Runs finished.
    done: usize,
    /// When the first run started.
    first_start: Option<Instant>,
    /// The run going on now: when it started and its planned length.
    current: Option<(Instant, Duration)>,
    /// The bench is over (or stopped): no more bars.
    finished: bool,
}

impl Plan {
    fn total(&self) -> Duration {
        self.runs.iter().sum()
    }

    fn planned_done(&self) -> Duration {
        self.runs.iter().take(self.done).sum()
    }

    /// Planned time already covered: finished runs plus the part of the
    /// current one that has passed (at most its planned length).
    fn covered(&self, now: Instant) -> Duration {
        let current = self.current.map_or(Duration::ZERO, |(start, planned)| {
            now.saturating_duration_since(start).min(planned)
        });
        self.planned_done() + current
    }

    /// Time left: the planned time not yet covered, scaled by how the
    /// finished runs compared with their plan (connecting, stopping clients,
    /// and hand-offs that end early all show there). `None` before any run.
    fn eta(&self, now: Instant) -> Option<Duration> {
        let first = self.first_start?;
        let left = self.total().saturating_sub(self.covered(now));
        let planned_done = self.planned_done();
        let scale = if self.done > 0 && !planned_done.is_zero() {
            let taken = now.saturating_duration_since(first).as_secs_f64();
            let covered = self.covered(now).as_secs_f64();
            (taken / covered.max(1e-3)).clamp(0.5, 4.0)
        } else {
            1.0
        };
        Some(left.mul_f64(scale))
    }

    /// "5/16 runs, about 18 s left".
    fn status(&self, now: Instant) -> String {
        let runs = format!("{}/{} runs", self.done, self.runs.len());
        match self.eta(now) {
            Some(eta) if self.done < self.runs.len() => {
                format!("{runs}, about {} left", fmt_eta(eta))
            }
            _ => runs,
        }
    }
}

/// "18 s", "1 min 05 s".
fn fmt_eta(d: Duration) -> String {
    let s = d.as_secs() + u64::from(d.subsec_millis() >= 500);
    if s < 60 {
        format!("{s} s")
    } else {
        format!("{} min {:02} s", s / 60, s % 60)
    }
}

fn bar_style() -> ProgressStyle {
    ProgressStyle::with_template("{prefix:>24} [{bar:30}] {elapsed:>3} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

impl Progress {
    /// Progress for a bench whose runs are planned to take `runs`, in order.
    pub(crate) fn new(quiet: bool, runs: Vec<Duration>) -> Progress {
        let bars = !quiet && std::io::stdout().is_terminal() && std::io::stderr().is_terminal();
        let multi = if bars {
            MultiProgress::with_draw_target(ProgressDrawTarget::stderr())
        } else {
            MultiProgress::with_draw_target(ProgressDrawTarget::hidden())
        };
        // Hidden until the first run adds it to `multi`, which then draws it.
        let overall =
            ProgressBar::with_draw_target(Some(OVERALL_STEPS), ProgressDrawTarget::hidden());
        overall.set_style(bar_style());
        overall.set_prefix("overall");
        Progress {
            inner: Arc::new(Inner {
                bars,
                notes: !quiet,
                multi,
                overall,
                plan: Mutex::new(Plan {
                    runs,
                    ..Plan::default()
                }),
            }),
        }
    }

    fn plan(&self) -> std::sync::MutexGuard<'_, Plan> {
        self.inner
            .plan
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Print a note on stderr (unless quiet), above the bars when they show.
    pub(crate) fn note(&self, msg: &str) {
        let line = format!("deadbolt bench: {msg}");
        let drawing = {
            let plan = self.plan();
            plan.first_start.is_some() && !plan.finished
        };
        if self.inner.bars && drawing {
            let _ = self.inner.multi.println(line);
        } else if self.inner.notes {
            // A closed stderr must not stop the bench (eprintln! would panic).
            let _ = writeln!(std::io::stderr(), "{line}");
        }
    }

    /// Bring the overall line up to date.
    fn tick_overall(&self) {
        let plan = self.plan();
        let now = Instant::now();
        let total_ms = plan.total().as_millis().max(1);
        let steps = plan.covered(now).as_millis() * u128::from(OVERALL_STEPS) / total_ms;
        let steps = u64::try_from(steps).unwrap_or(OVERALL_STEPS);
        self.inner.overall.set_position(steps.min(OVERALL_STEPS));
        self.inner.overall.set_message(plan.status(now));
    }

    /// A bar for the next planned run, expected to take about `planned`,
    /// advanced by time.
    pub(crate) fn start(&self, label: &str, planned: Duration) -> Bar {
        let started = Instant::now();
        let first = {
            let mut plan = self.plan();
            let first = plan.first_start.is_none();
            plan.first_start.get_or_insert(started);
            plan.current = Some((started, planned));
            first
        };
        let planned_ms = u64::try_from(planned.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let pb = if self.inner.bars {
            if first {
                self.inner.multi.add(self.inner.overall.clone());
            }
            let pb = self.inner.multi.insert_before(
                &self.inner.overall,
                ProgressBar::with_draw_target(Some(planned_ms), ProgressDrawTarget::hidden()),
            );
            pb.set_style(bar_style());
            pb
        } else {
            ProgressBar::hidden()
        };
        pb.set_prefix(label.to_string());
        let ticker = {
            let pb = pb.clone();
            let progress = self.clone();
            tokio::spawn(async move {
                loop {
                    let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                    pb.set_position(ms.min(planned_ms));
                    progress.tick_overall();
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        };
        Bar {
            pb,
            ticker,
            label: label.to_string(),
            started,
            progress: self.clone(),
        }
    }

    /// Take the overall line away (the bench is over, or stopped); later
    /// notes go straight to stderr.
    pub(crate) fn finish(&self) {
        self.plan().finished = true;
        self.inner.overall.finish_and_clear();
    }
}

/// One running bar; its ticker stops when it is finished or dropped.
#[derive(Debug)]
pub(crate) struct Bar {
    pb: ProgressBar,
    ticker: JoinHandle<()>,
    label: String,
    started: Instant,
    progress: Progress,
}

impl Bar {
    /// End the run: leave one summary line, and count it in the overall line.
    pub(crate) fn finish(self, summary: String) {
        self.ticker.abort();
        let status = {
            let mut plan = self.progress.plan();
            plan.done += 1;
            plan.current = None;
            plan.status(Instant::now())
        };
        let inner = &self.progress.inner;
        if inner.bars {
            self.pb.finish_and_clear();
            inner.multi.remove(&self.pb);
            let _ = inner.multi.println(format!(
                "{:>LABEL_WIDTH$} {:>5.1} s  {summary}",
                self.label,
                self.started.elapsed().as_secs_f64()
            ));
            self.progress.tick_overall();
        } else {
            self.progress
                .note(&format!("{}: {summary}  [{status}]", self.label));
        }
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.ticker.abort();
        if !self.pb.is_finished() {
            self.pb.abandon();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(runs: &[u64]) -> Plan {
        Plan {
            runs: runs.iter().copied().map(Duration::from_secs).collect(),
            ..Plan::default()
        }
    }

    #[test]
    fn eta_follows_the_plan_then_the_pace() {
        let t0 = Instant::now();
        let mut p = plan(&[2, 2, 2, 2]);
        assert_eq!(p.eta(t0), None, "no ETA before the first run");
        assert_eq!(p.status(t0), "0/4 runs");

        p.first_start = Some(t0);
        p.current = Some((t0, Duration::from_secs(2)));
        assert_eq!(
            p.eta(t0 + Duration::from_secs(1)),
            Some(Duration::from_secs(7))
        );

        // The first run took 3 s for 2 planned: the rest is scaled by 1.5.
        p.done = 1;
        p.current = None;
        let now = t0 + Duration::from_secs(3);
        assert_eq!(p.eta(now), Some(Duration::from_secs(9)));
        assert_eq!(p.status(now), "1/4 runs, about 9 s left");

        p.done = 4;
        assert_eq!(p.status(now), "4/4 runs");
    }

    #[test]
    fn eta_formats() {
        assert_eq!(fmt_eta(Duration::from_millis(17_600)), "18 s");
        assert_eq!(fmt_eta(Duration::from_secs(65)), "1 min 05 s");
    }
}
