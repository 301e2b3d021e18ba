//! The table cells the scenarios' sections share.
//!
//! Latencies, rates, command counts, and the columns of the scenarios where
//! many waiters take one name.

use crate::report::{fmt_lat, fmt_rate, fmt_us, Latency, RunResult};

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
        ping(r),
        r.errors.to_string(),
    ]
}
