//! The table cells the scenarios' sections share.
//!
//! Latencies, rates, command counts, and the columns of the scenarios where
//! many waiters take one name.

use crate::model::{Latency, Report, RunResult, Work};
use crate::scenario::Scenario;
use crate::table::{fmt_lat, fmt_rate, fmt_us};

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

/// The columns of the scenarios where many waiters take one name (a lock,
/// or a semaphore's permits).
pub(crate) const WAITERS_HEADER: &[&str] = &[
    "contender",
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

/// A row under [`WAITERS_HEADER`].
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
        r.contender.name().to_string(),
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
