//! The table cells the scenarios' sections share.
//!
//! Latencies, rates, command counts, and the columns of the scenarios where
//! many waiters take one name.

use crate::model::{ContenderKind, Latency, Report, RunResult, Work};
use crate::scenarios::Scenario;
use crate::table::{fmt_lat, fmt_rate, fmt_us, Table};

/// Which figure of a [`Latency`] a cell shows, with its multiple of PING.
pub(crate) type Pick = fn(&Latency) -> (f64, Option<f64>);

/// The median.
pub(crate) fn p50(l: &Latency) -> (f64, Option<f64>) {
    (l.p50_us, l.p50_x_ping)
}

/// The 99th percentile.
pub(crate) fn p99(l: &Latency) -> (f64, Option<f64>) {
    (l.p99_us, l.p99_x_ping)
}

/// The largest.
pub(crate) fn max(l: &Latency) -> (f64, Option<f64>) {
    (l.max_us, l.max_x_ping)
}

/// One figure of `l` ("178 µs 1.6×"), or "-" without one.
pub(crate) fn lat(l: Option<Latency>, pick: Pick) -> String {
    l.map_or_else(
        || "-".to_string(),
        |l| {
            let (v, x) = pick(&l);
            fmt_lat(v, x)
        },
    )
}

/// The median, 99th percentile and largest of `l`, each as [`lat`] shows it
/// (under the headings "... p50", "p99", "max").
pub(crate) fn p50_p99_max(l: Option<Latency>) -> [String; 3] {
    [lat(l, p50), lat(l, p99), lat(l, max)]
}

/// The acquisition rate ("21,345"), or "-".
pub(crate) fn rate(r: &RunResult) -> String {
    r.acquisitions_per_s.map_or_else(|| "-".into(), fmt_rate)
}

/// Commands per acquisition ("2.00"), or "-".
pub(crate) fn cmds(r: &RunResult) -> String {
    r.commands
        .per_acquisition
        .map_or_else(|| "-".into(), |c| format!("{c:.2}"))
}

/// Redis CPU µs per acquisition ("41.2"), or "-".
pub(crate) fn redis_cpu(r: &RunResult) -> String {
    micros(r.commands.redis_cpu_us_per_acquisition)
}

/// Client CPU µs per acquisition ("63.0"), or "-".
pub(crate) fn client_cpu(r: &RunResult) -> String {
    micros(r.commands.client_cpu_us_per_acquisition)
}

fn micros(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.1}"))
}

/// The cells most throughput tables end with: commands, Redis and client
/// CPU per acquisition, the run's PING and its errors (under the headings
/// `cmds/acq` or `cmds/op`, [`COST_HEADER`], `PING p50`, `errors`).
pub(crate) fn tail(r: &RunResult) -> [String; 5] {
    [
        cmds(r),
        redis_cpu(r),
        client_cpu(r),
        ping(r),
        r.errors.to_string(),
    ]
}

/// The headings of [`redis_cpu`] and [`client_cpu`].
pub(crate) const COST_HEADER: [&str; 2] = ["Redis µs/acq", "client µs/acq"];

/// `rows` as a table: a row each, its first column (headed `first`) the
/// row's `name`, then the columns of `header`, the row's `cells`.
pub(crate) fn named_table(
    (first, name): (&str, fn(&RunResult) -> String),
    header: &[&str],
    rows: &[&RunResult],
    cells: impl Fn(&RunResult) -> Vec<String>,
) -> String {
    let mut table = Table::new(&[&[first], header].concat());
    for r in rows {
        let mut row = vec![name(r)];
        row.extend(cells(r));
        table.row(row);
    }
    table.render()
}

/// `rows` as a table, a row per contender: its name, then the columns of
/// `header`, the row's `cells`.
pub(crate) fn table(
    header: &[&str],
    rows: &[&RunResult],
    cells: impl Fn(&RunResult) -> Vec<String>,
) -> String {
    let name = |r: &RunResult| r.contender.name().to_string();
    named_table(("contender", name), header, rows, cells)
}

/// A throughput table: the columns of `head`, then those of [`tail`] (the
/// first headed `cmds`: `cmds/acq` or `cmds/op`); each row `cells`, then
/// [`tail`]'s.
pub(crate) fn tail_table(
    head: &[&str],
    cmds: &str,
    rows: &[&RunResult],
    cells: impl Fn(&RunResult) -> Vec<String>,
) -> String {
    let tail_header = [cmds, COST_HEADER[0], COST_HEADER[1], "PING p50", "errors"];
    table(&[head, &tail_header].concat(), rows, |r| {
        cells(r).into_iter().chain(tail(r)).collect()
    })
}

/// Add `line` and a newline to `out`, when there is a line (a section's
/// summary under its table).
pub(crate) fn push_line(out: &mut String, line: Option<String>) {
    if let Some(line) = line {
        out.push_str(&line);
        out.push('\n');
    }
}

/// The run's PING p50, or "-".
pub(crate) fn ping(r: &RunResult) -> String {
    r.ping_p50_us.map_or_else(|| "-".into(), fmt_us)
}

/// `a` over `b` as "2.41×", or "-" when either is missing or `b` is 0.
pub(crate) fn times(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
        _ => "-".to_string(),
    }
}

/// Two rows of one table, for a summary line under it: the first one's
/// figures over the second one's, each as [`times`] shows it.
pub(crate) struct Versus<'a>(&'a RunResult, &'a RunResult);

impl<'a> Versus<'a> {
    /// The rows of `a` and of `b` among `rows`, when both ran.
    pub(crate) fn find(
        rows: &[&'a RunResult],
        a: ContenderKind,
        b: ContenderKind,
    ) -> Option<Versus<'a>> {
        let find = |kind| rows.iter().copied().find(|r| r.contender == kind);
        Some(Versus(find(a)?, find(b)?))
    }

    /// The acquisition (operation) rate.
    pub(crate) fn rate(&self) -> String {
        times(self.0.acquisitions_per_s, self.1.acquisitions_per_s)
    }

    /// Commands per acquisition.
    pub(crate) fn cmds(&self) -> String {
        times(
            self.0.commands.per_acquisition,
            self.1.commands.per_acquisition,
        )
    }

    /// The `pick` figure (its µs) of the latency `of` each row.
    pub(crate) fn lat(&self, of: fn(&RunResult) -> Option<Latency>, pick: Pick) -> String {
        let us = |r: &RunResult| of(r).map(|l| pick(&l).0);
        times(us(self.0), us(self.1))
    }
}

/// The columns of the scenarios where many waiters take one name (a lock,
/// or a semaphore's permits), after the contender's.
pub(crate) const WAITERS_HEADER: &[&str] = &[
    "acq/s",
    "acquire p50",
    "p99",
    "longest wait",
    "Jain",
    "least/most",
    "cmds/acq",
    COST_HEADER[0],
    COST_HEADER[1],
    "ceiling",
    "of ceiling",
    "PING p50",
    "errors",
];

/// A row's cells under [`WAITERS_HEADER`].
pub(crate) fn waiters_row(r: &RunResult) -> Vec<String> {
    let (jain, ratio, longest) = r.fairness.as_ref().map_or_else(
        || ("-".into(), "-".into(), "-".into()),
        |f| {
            (
                format!("{:.3}", f.jain_index),
                format!("{:.2}", f.min_max_ratio),
                fmt_us(f.longest_wait_us),
            )
        },
    );
    vec![
        rate(r),
        lat(r.acquire, p50),
        lat(r.acquire, p99),
        longest,
        jain,
        ratio,
        cmds(r),
        redis_cpu(r),
        client_cpu(r),
        r.ceiling_per_s.map_or_else(|| "-".into(), fmt_rate),
        r.of_ceiling
            .map_or_else(|| "-".into(), |x| format!("{:.0}%", x * 100.0)),
        ping(r),
        r.errors.to_string(),
    ]
}

/// A section made of one part per workload: `rows` split by their
/// [`Work`] in run order (rows of reports without one count as the flags'
/// rows), each part made by `part` from the workload's description ("hold 1
/// ms, think 2 ms") and its rows, the parts one after another.
pub(crate) fn per_work(
    report: &Report,
    rows: &[&RunResult],
    part: impl Fn(&str, &[&RunResult]) -> String,
) -> String {
    let s = &report.settings;
    let flags = Work {
        hold_ms: s.hold_ms,
        think_ms: s.think_ms,
        service: false,
        held_us: None,
    };
    let mut groups: Vec<(Work, Vec<&RunResult>)> = Vec::new();
    for r in rows {
        let work = Work {
            held_us: None,
            ..r.work.unwrap_or(flags)
        };
        match groups.iter_mut().find(|(w, _)| *w == work) {
            Some((_, g)) => g.push(r),
            None => groups.push((work, vec![r])),
        }
    }
    groups
        .iter()
        .map(|(work, rows)| part(&work.describe(), rows))
        .collect::<Vec<_>>()
        .join("\n")
}

/// One line per reason for the contenders of `scenario` that were left out
/// ("redlock, rslock-3 skipped: needs 3 servers: ...").
pub(crate) fn skipped_in(report: &Report, scenario: &dyn Scenario) -> String {
    let mut reasons: Vec<(&str, Vec<&str>)> = Vec::new();
    for s in report
        .skipped
        .iter()
        .filter(|s| scenario.measures(s.contender))
    {
        match reasons.iter_mut().find(|(r, _)| *r == s.reason) {
            Some((_, names)) => names.push(s.contender.name()),
            None => reasons.push((&s.reason, vec![s.contender.name()])),
        }
    }
    reasons
        .into_iter()
        .map(|(reason, names)| {
            format!(
                "{} skipped: {reason}
",
                names.join(", ")
            )
        })
        .collect()
}
