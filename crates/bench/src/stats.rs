//! Measuring: latency histograms, PING floor, INFO commandstats deltas, fairness.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context as _;
use deadbolt_core::deployment::redact;
use hdrhistogram::Histogram;
use redis::aio::MultiplexedConnection;
use redis::IntoConnectionInfo;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub(crate) use crate::model::float;
use crate::model::Latency;

/// Gap between two PINGs of the side task: often enough for a few thousand
/// samples per run, rare enough not to load two cores.
const PING_GAP: Duration = Duration::from_millis(1);

/// A latency histogram in nanoseconds, 1 ns to one hour, 3 significant digits.
pub(crate) fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("static bounds are valid")
}

/// Record one latency.
pub(crate) fn record(h: &mut Histogram<u64>, d: Duration) {
    let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1);
    h.saturating_record(ns);
}

/// Nanoseconds as microseconds.
fn us(ns: u64) -> f64 {
    float(ns) / 1e3
}

/// The summary of a histogram, with ratios to `ping_p50_us` when known.
/// `None` for an empty histogram.
pub(crate) fn summarize(h: &Histogram<u64>, ping_p50_us: Option<f64>) -> Option<Latency> {
    if h.is_empty() {
        return None;
    }
    let p50 = us(h.value_at_quantile(0.5));
    let p99 = us(h.value_at_quantile(0.99));
    let max = us(h.max());
    let ratio = |v: f64| ping_p50_us.filter(|p| *p > 0.0).map(|p| v / p);
    Some(Latency {
        samples: h.len(),
        p50_us: p50,
        p99_us: p99,
        max_us: max,
        mean_us: h.mean() / 1e3,
        p50_x_ping: ratio(p50),
        p99_x_ping: ratio(p99),
        max_x_ping: ratio(max),
    })
}

/// The p50 of a histogram in microseconds, `None` when empty.
pub(crate) fn p50_us(h: &Histogram<u64>) -> Option<f64> {
    (!h.is_empty()).then(|| us(h.value_at_quantile(0.5)))
}

/// Jain's fairness index over per-worker counts: `(Σx)² / (n·Σx²)`, 1 when
/// every worker got the same, `1/n` when one got everything.
pub(crate) fn jain(counts: &[u64]) -> f64 {
    let sum: f64 = counts.iter().map(|&c| float(c)).sum();
    let squares: f64 = counts.iter().map(|&c| float(c) * float(c)).sum();
    let n = float(u64::try_from(counts.len()).unwrap_or(u64::MAX));
    if squares == 0.0 {
        return 1.0;
    }
    sum * sum / (n * squares)
}

/// Least-served over most-served worker (1 when equal, 0 when one starved).
pub(crate) fn min_max_ratio(counts: &[u64]) -> f64 {
    let max = counts.iter().copied().max().unwrap_or(0);
    let min = counts.iter().copied().min().unwrap_or(0);
    if max == 0 {
        return 1.0;
    }
    float(min) / float(max)
}

/// What a server (or several, added up) and this process had spent at one
/// moment: the counters a run's cost is the difference of.
#[derive(Debug, Clone, Default)]
pub(crate) struct Snapshot {
    /// `INFO commandstats` calls per lowercased command name (`evalsha`,
    /// `script|load`) since the server started.
    pub(crate) calls: BTreeMap<String, u64>,
    /// `INFO commandstats` µs per command name (a script's entry includes
    /// the commands it runs, which also have entries of their own).
    pub(crate) usec: BTreeMap<String, u64>,
    /// The server process's CPU time, µs (`used_cpu_sys` + `used_cpu_user`
    /// of `INFO cpu`).
    pub(crate) server_cpu_us: f64,
    /// This process's CPU time, µs (its rusage: user + system).
    pub(crate) client_cpu_us: f64,
}

impl Snapshot {
    /// Add `other`'s server counters to these (a run over several servers).
    pub(crate) fn add_server(&mut self, other: &Snapshot) {
        for (name, n) in &other.calls {
            *self.calls.entry(name.clone()).or_default() += n;
        }
        for (name, n) in &other.usec {
            *self.usec.entry(name.clone()).or_default() += n;
        }
        self.server_cpu_us += other.server_cpu_us;
    }
}

/// `INFO section` of the server behind `conn`.
///
/// # Cancel safety
/// Cancel safe: read-only.
pub(crate) async fn info(
    conn: &mut MultiplexedConnection,
    section: &str,
) -> anyhow::Result<String> {
    redis::cmd("INFO")
        .arg(section)
        .query_async(conn)
        .await
        .with_context(|| format!("INFO {section}"))
}

/// A [`Snapshot`] of the server behind `conn` and of this process:
/// `INFO commandstats` and `INFO cpu`, then this process's rusage.
///
/// # Cancel safety
/// Cancel safe: read-only.
pub(crate) async fn snapshot(conn: &mut MultiplexedConnection) -> anyhow::Result<Snapshot> {
    let stats = info(conn, "commandstats").await?;
    let cpu = info(conn, "cpu").await?;
    Ok(Snapshot {
        calls: parse_commandstats(&stats),
        usec: parse_commandstats_usec(&stats),
        server_cpu_us: parse_server_cpu_us(&cpu),
        client_cpu_us: process_cpu_us(),
    })
}

pub(crate) fn parse_commandstats(info: &str) -> BTreeMap<String, u64> {
    parse_field(info, "calls")
}

/// The `usec=` of every `cmdstat_<name>:` line, by lowercased name.
pub(crate) fn parse_commandstats_usec(info: &str) -> BTreeMap<String, u64> {
    parse_field(info, "usec")
}

fn parse_field(info: &str, field: &str) -> BTreeMap<String, u64> {
    deadbolt_testkit::commandstats_field(info, field)
        .into_iter()
        .collect()
}

/// `used_cpu_sys` + `used_cpu_user` of `INFO cpu`, in µs (0 when absent).
pub(crate) fn parse_server_cpu_us(info: &str) -> f64 {
    info.lines()
        .filter_map(|l| {
            let l = l.trim();
            l.strip_prefix("used_cpu_sys:")
                .or_else(|| l.strip_prefix("used_cpu_user:"))
        })
        .filter_map(|v| v.parse::<f64>().ok())
        .sum::<f64>()
        * 1e6
}

/// This process's CPU time so far (user + system, from its rusage), µs.
pub(crate) fn process_cpu_us() -> f64 {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_SELF).map_or(0.0, |u| {
        let us = |t: nix::sys::time::TimeVal| {
            #[allow(
                clippy::cast_precision_loss,
                reason = "seconds and µs of CPU time stay far below 2^53"
            )]
            let v = t.tv_sec() as f64 * 1e6 + t.tv_usec() as f64;
            v
        };
        us(u.user_time()) + us(u.system_time())
    })
}

/// Calls per command between two snapshots, without the bench's own INFO and
/// without `own_pings` PINGs of the side task; commands with no calls are left out.
pub(crate) fn delta(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
    own_pings: u64,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter(|(name, _)| name.as_str() != "info")
        .map(|(name, &n)| {
            let mut d = n.saturating_sub(before.get(name).copied().unwrap_or(0));
            if name == "ping" {
                d = d.saturating_sub(own_pings);
            }
            (name.clone(), d)
        })
        .filter(|(_, d)| *d > 0)
        .collect()
}

/// The `version` field of `INFO server`.
///
/// # Cancel safety
/// Cancel safe: read-only.
pub(crate) async fn redis_version(conn: &mut MultiplexedConnection) -> anyhow::Result<String> {
    let server = info(conn, "server").await?;
    Ok(server
        .lines()
        .find_map(|l| l.trim().strip_prefix("redis_version:"))
        .unwrap_or("unknown")
        .to_string())
}

/// A client of `url`, a `what` (Redis, Sentinel) URL: an error that shows
/// it without its password when it is not one.
pub(crate) fn client(url: &str, what: &str) -> anyhow::Result<redis::Client> {
    redis::Client::open(url).with_context(|| format!("bad {what} URL {}", redact(url)))
}

/// The bench's own connection to `url`, for INFO.
///
/// # Cancel safety
/// Cancel safe: nothing is written.
pub(crate) async fn stats_connection(url: &str) -> anyhow::Result<MultiplexedConnection> {
    client(url, "Redis")?
        .get_multiplexed_async_connection()
        .await
        .with_context(|| format!("connecting to {}", redact(url)))
}

/// Resolves once `stop` says true or its sender is gone (a dropped
/// [`Pinger`] or run stops its tasks that way).
pub(crate) async fn until_stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// A side task timing PING on its own connection, about every millisecond,
/// while a scenario runs: the floor its latencies are compared with.
#[derive(Debug)]
pub(crate) struct Pinger {
    stop: watch::Sender<bool>,
    task: JoinHandle<anyhow::Result<(Histogram<u64>, u64)>>,
}

impl Pinger {
    /// Connect and start pinging.
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is written.
    pub(crate) async fn start(server: impl IntoConnectionInfo) -> anyhow::Result<Pinger> {
        let mut conn = redis::Client::open(server)?
            .get_multiplexed_async_connection()
            .await
            .context("connecting the PING task")?;
        let (stop, mut stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            let mut h = histogram();
            let mut sent = 0u64;
            loop {
                let t0 = Instant::now();
                let () = redis::cmd("PING")
                    .query_async::<String>(&mut conn)
                    .await
                    .map(drop)
                    .context("PING")?;
                record(&mut h, t0.elapsed());
                sent += 1;
                tokio::select! {
                    () = tokio::time::sleep(PING_GAP) => {}
                    () = until_stopped(&mut stopped) => break,
                }
            }
            Ok((h, sent))
        });
        Ok(Pinger { stop, task })
    }

    /// Stop and return the histogram and the number of PINGs sent. A dropped
    /// `Pinger` stops its task too (the stop channel closes).
    ///
    /// # Cancel safety
    /// Cancel safe: the task stops either way.
    pub(crate) async fn finish(self) -> anyhow::Result<(Histogram<u64>, u64)> {
        let _ = self.stop.send(true);
        self.task.await.context("the PING task panicked")?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_and_ratio() {
        assert!((jain(&[5, 5, 5, 5]) - 1.0).abs() < 1e-12);
        assert!((jain(&[10, 0, 0, 0]) - 0.25).abs() < 1e-12);
        assert!((min_max_ratio(&[2, 4]) - 0.5).abs() < 1e-12);
        assert!((min_max_ratio(&[0, 0]) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn commandstats_delta() {
        let before = parse_commandstats(
            "# Commandstats\r\ncmdstat_ping:calls=3,usec=5\r\ncmdstat_info:calls=1,usec=1\r\n",
        );
        let after = parse_commandstats(
            "cmdstat_ping:calls=10,usec=5\r\ncmdstat_info:calls=3,usec=1\r\n\
             cmdstat_EVALSHA:calls=4,usec=50\r\ncmdstat_script|load:calls=1,usec=1\r\n",
        );
        let d = delta(&before, &after, 5);
        assert_eq!(d.get("ping"), Some(&2));
        assert_eq!(d.get("evalsha"), Some(&4));
        assert_eq!(d.get("script|load"), Some(&1));
        assert_eq!(d.get("info"), None);
        let usec =
            parse_commandstats_usec("cmdstat_EVALSHA:calls=4,usec=50,usec_per_call=12.50\r\n");
        assert_eq!(usec.get("evalsha"), Some(&50));
        let cpu = parse_server_cpu_us("# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:0.25\r\n");
        assert!((cpu - 1_750_000.0).abs() < 1e-6);
    }

    #[test]
    fn summary_has_ratios() {
        let mut h = histogram();
        for _ in 0..10 {
            record(&mut h, Duration::from_micros(100));
        }
        let s = summarize(&h, Some(50.0)).unwrap();
        assert_eq!(s.samples, 10);
        assert!((s.p50_us - 100.0).abs() < 0.2);
        assert!((s.p50_x_ping.unwrap() - 2.0).abs() < 0.01);
        assert!(summarize(&histogram(), None).is_none());
    }
}
