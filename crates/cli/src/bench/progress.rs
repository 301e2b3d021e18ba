//! Progress bars and notes on stderr, hidden when stdout is not a terminal or
//! with `--quiet`.

use std::io::{IsTerminal as _, Write as _};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Where progress goes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Progress {
    bars: bool,
    notes: bool,
}

impl Progress {
    pub(crate) fn new(quiet: bool) -> Progress {
        Progress {
            bars: !quiet && std::io::stdout().is_terminal(),
            notes: !quiet,
        }
    }

    /// Print a note on stderr (unless quiet).
    pub(crate) fn note(&self, msg: &str) {
        if self.notes {
            // A closed stderr must not stop the bench (eprintln! would panic).
            let _ = writeln!(std::io::stderr(), "deadbolt bench: {msg}");
        }
    }

    /// A bar for one run expected to take about `planned`, advanced by time.
    pub(crate) fn start(&self, label: &str, planned: Duration) -> Bar {
        let planned_ms = u64::try_from(planned.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let pb = if self.bars {
            let pb = ProgressBar::with_draw_target(Some(planned_ms), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template("{prefix:>24} [{bar:30}] {elapsed:>3} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> ");
            pb.set_style(style);
            pb
        } else {
            ProgressBar::hidden()
        };
        pb.set_prefix(label.to_string());
        let ticker = {
            let pb = pb.clone();
            let started = Instant::now();
            tokio::spawn(async move {
                loop {
                    let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                    pb.set_position(ms.min(planned_ms));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        };
        Bar { pb, ticker }
    }
}

/// One running bar; its ticker stops when it is finished or dropped.
#[derive(Debug)]
pub(crate) struct Bar {
    pb: ProgressBar,
    ticker: JoinHandle<()>,
}

impl Bar {
    /// Leave the bar with a one-line summary.
    pub(crate) fn finish(self, summary: String) {
        self.ticker.abort();
        if let Some(len) = self.pb.length() {
            self.pb.set_position(len);
        }
        self.pb.finish_with_message(summary);
        if !self.pb.is_hidden() {
            // indicatif leaves the cursor on the finished line; the next bar
            // would clear it.
            let _ = writeln!(std::io::stderr());
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
