//! What each of deadbolt's Lua scripts costs Redis per call, read from the
//! server's SLOWLOG (every call logged: `slowlog-log-slower-than 0`), beside
//! the textbook lock's `SET NX PX` and compare-and-delete script.
//!
//! `cargo run --release -p deadbolt-bench --example script_cost [-- redis://host:port/]`:
//! with no URL a throwaway redis-server is started on a free loopback port
//! and stopped at the end (a given server gets its SLOWLOG settings changed
//! and its SLOWLOG reset). Each workload runs on its own, one after another:
//! uncontended lock+unlock of every primitive (4 tasks on distinct names,
//! one client), then the Lock and the FairLock contended (8 waiters over 4
//! clients on one name). Prints, per script, its calls and the µs a call
//! took inside Redis (p50 and mean; the time of the commands it runs, not
//! the network or the event loop around it). SLOWLOG adds to that time
//! (it logs every command a script runs), so each workload first runs
//! without it, and the mean µs per EVALSHA of all its scripts together from
//! INFO commandstats is printed above its table: the figure to compare
//! with the textbook lock's.

use std::collections::BTreeMap;
use std::time::Duration;

use deadbolt_core::{Acquire as _, Client};
use redis::aio::MultiplexedConnection;
use tokio::time::Instant;

/// How long each workload runs.
const RUN: Duration = Duration::from_millis(1500);
/// The SLOWLOG's length: more than a workload's calls.
const SLOWLOG_LEN: u32 = 1_000_000;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _server) = deadbolt_testkit::RedisServer::given_or_started(std::env::args().nth(1))?;
    // A SLOWLOG of a workload is a large reply: no response timeout.
    let mut admin = redis::Client::open(url.as_str())?
        .get_multiplexed_async_connection_with_config(
            &redis::AsyncConnectionConfig::new().set_response_timeout(None),
        )
        .await?;
    for (k, v) in [
        ("slowlog-log-slower-than", "0".to_string()),
        ("slowlog-max-len", SLOWLOG_LEN.to_string()),
    ] {
        let () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(k)
            .arg(v)
            .query_async(&mut admin)
            .await?;
    }
    let names = script_names();
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(Client::connect(&url).await?);
    }
    println!("Redis µs per call, from SLOWLOG (each workload {RUN:?}):");
    for (what, tasks, op, name) in WORKLOADS {
        if let Op::Sem = op {
            // One permit on each name of its own, four on the shared one.
            let permits = match tasks {
                Tasks::Distinct => 1,
                Tasks::Contended => 4,
            };
            for name in tasks.names(name) {
                deadbolt_semaphore::Semaphore::new(&clients[0], &name)
                    .try_set_permits(permits)
                    .await?;
            }
        }
        let on = &clients[..tasks.sizes().1];
        measure(&mut admin, &names, what, || run(on, tasks, op, name)).await?;
    }
    measure(
        &mut admin,
        &names,
        "textbook lock (SET NX PX, compare-and-delete)",
        || textbook(url.clone()),
    )
    .await?;
    for c in &clients {
        c.shutdown().await;
    }
    Ok(())
}

/// The deadbolt workloads, in order: what is printed, the tasks, what each
/// does, and the name (of distinct tasks, the prefix of their names).
const WORKLOADS: [(&str, Tasks, Op, &str); 9] = [
    ("lock, uncontended", Tasks::Distinct, Op::Lock, "u:lock"),
    (
        "fair lock, uncontended",
        Tasks::Distinct,
        Op::Fair,
        "u:fair",
    ),
    (
        "rwlock read, uncontended",
        Tasks::Distinct,
        Op::Read,
        "u:rw",
    ),
    (
        "rwlock write, uncontended",
        Tasks::Distinct,
        Op::Write,
        "u:rww",
    ),
    ("semaphore, uncontended", Tasks::Distinct, Op::Sem, "u:sem"),
    (
        "lock, 8 waiters / 4 clients",
        Tasks::Contended,
        Op::Lock,
        "c:lock",
    ),
    (
        "fair lock, 8 waiters / 4 clients",
        Tasks::Contended,
        Op::Fair,
        "c:fair",
    ),
    (
        "rwlock, 8 waiters / 4 clients, 10% writes",
        Tasks::Contended,
        Op::Mixed,
        "c:rw",
    ),
    (
        "semaphore of 4, 8 waiters / 4 clients",
        Tasks::Contended,
        Op::Sem,
        "c:sem",
    ),
];

/// Who takes the locks of a workload.
#[derive(Debug, Clone, Copy)]
enum Tasks {
    /// 4 tasks on one client, each on a name of its own (uncontended).
    Distinct,
    /// 8 waiters over the 4 clients on one name.
    Contended,
}

impl Tasks {
    /// How many tasks, over how many of the clients.
    fn sizes(self) -> (usize, usize) {
        match self {
            Tasks::Distinct => (4, 1),
            Tasks::Contended => (8, 4),
        }
    }

    /// The names they take, from `name`: one per task, or the one.
    fn names(self, name: &str) -> Vec<String> {
        match self {
            Tasks::Distinct => (0..4).map(|i| format!("{name}:{i}")).collect(),
            Tasks::Contended => vec![name.to_string()],
        }
    }
}

/// What a task does, again and again.
#[derive(Debug, Clone, Copy)]
enum Op {
    /// Lock and unlock a `Lock`.
    Lock,
    /// Lock and unlock a `FairLock`.
    Fair,
    /// Read-lock and unlock a `RwLock`.
    Read,
    /// Write-lock and unlock a `RwLock`.
    Write,
    /// A `RwLock`: a write one time in ten, else a read.
    Mixed,
    /// Take a permit of a `Semaphore` and give it back.
    Sem,
}

impl Op {
    /// Do it once on the primitive `name` of `c`.
    async fn once(self, c: &Client, name: &str) -> deadbolt_core::Result<()> {
        match self {
            Op::Lock => {
                deadbolt_lock::Lock::new(c, name)
                    .lock()
                    .await?
                    .unlock()
                    .await
            }
            Op::Fair => {
                let l = deadbolt_fair::FairLock::new(c, name);
                l.lock().await?.unlock().await
            }
            Op::Read => Op::rw(c, name, false).await,
            Op::Write => Op::rw(c, name, true).await,
            Op::Mixed => Op::rw(c, name, rand::random_range(0..10) == 0).await,
            Op::Sem => {
                let s = deadbolt_semaphore::Semaphore::new(c, name);
                s.acquire(1).await?.release().await
            }
        }
    }

    /// Write-lock (or read-lock) the `RwLock` `name` of `c`, and unlock.
    async fn rw(c: &Client, name: &str, write: bool) -> deadbolt_core::Result<()> {
        let l = deadbolt_rwlock::RwLock::new(c, name);
        if write {
            l.write_lock().lock().await?.unlock().await
        } else {
            l.read_lock().lock().await?.unlock().await
        }
    }
}

/// The tasks of a workload over `clients` in turn, each doing `op` on its
/// name (of [`Tasks::names`]) for [`RUN`].
async fn run(clients: &[Client], tasks: Tasks, op: Op, name: &str) -> anyhow::Result<()> {
    let end = Instant::now() + RUN;
    let names = tasks.names(name);
    let mut running = Vec::new();
    for i in 0..tasks.sizes().0 {
        let c = clients[i % clients.len()].clone();
        let name = names[i % names.len()].clone();
        running.push(tokio::spawn(async move {
            while Instant::now() < end {
                op.once(&c, &name).await?;
            }
            Ok::<(), deadbolt_core::Error>(())
        }));
    }
    for t in running {
        t.await.expect("a task panicked")?;
    }
    Ok(())
}

/// The textbook lock, uncontended: `SET NX PX`, then a compare-and-delete
/// script, by 4 tasks on distinct names.
async fn textbook(url: String) -> anyhow::Result<()> {
    {
        let conn = redis::Client::open(url.as_str())?
            .get_multiplexed_async_connection()
            .await?;
        let release = redis::Script::new(
            "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
        );
        let end = Instant::now() + RUN;
        let mut tasks = Vec::new();
        for i in 0..4 {
            let (mut conn, release) = (conn.clone(), release.clone());
            tasks.push(tokio::spawn(async move {
                let key = format!("u:textbook:{i}");
                while Instant::now() < end {
                    let _: Option<String> = redis::cmd("SET")
                        .arg(&key)
                        .arg("t")
                        .arg("NX")
                        .arg("PX")
                        .arg(30_000)
                        .query_async(&mut conn)
                        .await?;
                    let _: i64 = release.key(&key).arg("t").invoke_async(&mut conn).await?;
                }
                redis::RedisResult::Ok(())
            }));
        }
        for t in tasks {
            t.await.expect("a task panicked")?;
        }
        Ok(())
    }
}

/// Every script of deadbolt by SHA: `<crate>/<script>`.
fn script_names() -> BTreeMap<String, String> {
    let lists: [(&str, &[&deadbolt_core::scripts::LuaScript]); 6] = [
        ("core", deadbolt_core::scripts::ALL),
        ("lock", deadbolt_lock::SCRIPTS),
        ("fair", deadbolt_fair::SCRIPTS),
        ("rwlock", deadbolt_rwlock::SCRIPTS),
        ("semaphore", deadbolt_semaphore::SCRIPTS),
        ("multilock", deadbolt_multilock::SCRIPTS),
    ];
    lists
        .iter()
        .flat_map(|(_, list)| {
            list.iter()
                .map(|s| (s.sha().to_string(), s.name().to_string()))
        })
        .collect()
}

/// Run `work` with a fresh SLOWLOG and print what each script cost.
async fn measure<F, Fut>(
    admin: &mut MultiplexedConnection,
    names: &BTreeMap<String, String>,
    what: &str,
    work: F,
) -> Result<(), Box<dyn std::error::Error>>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    // First without the SLOWLOG (logging every command inside a script
    // adds to the script's time): INFO commandstats of all scripts together.
    fresh_run(admin, ("-1", ["CONFIG", "RESETSTAT"]), what, &work).await?;
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(admin)
        .await?;
    let plain = info
        .lines()
        .filter_map(|l| l.strip_prefix("cmdstat_"))
        .filter(|l| l.starts_with("evalsha:") || l.starts_with("eval:") || l.starts_with("set:"))
        .map(|l| {
            let (cmd, rest) = l.split_once(':').unwrap_or((l, ""));
            let field = |k: &str| {
                rest.split(',')
                    .find_map(|f| f.strip_prefix(k))
                    .unwrap_or("?")
                    .to_string()
            };
            format!(
                "{cmd} {} calls, {} µs",
                field("calls="),
                field("usec_per_call=")
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    fresh_run(admin, ("0", ["SLOWLOG", "RESET"]), what, &work).await?;
    let entries: Vec<redis::Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(SLOWLOG_LEN)
        .query_async(admin)
        .await?;
    let mut by: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for e in entries {
        let redis::Value::Array(fields) = e else {
            continue;
        };
        let (Some(redis::Value::Int(us)), Some(redis::Value::Array(args))) =
            (fields.get(2), fields.get(3))
        else {
            continue;
        };
        let word = |i: usize| match args.get(i) {
            Some(redis::Value::BulkString(b)) => String::from_utf8_lossy(b).to_string(),
            _ => String::new(),
        };
        let cmd = word(0).to_ascii_lowercase();
        let name = match cmd.as_str() {
            "evalsha" => {
                let sha = word(1);
                names
                    .get(&sha)
                    .cloned()
                    .unwrap_or_else(|| format!("script {}", &sha[..sha.len().min(8)]))
            }
            "slowlog" | "config" | "ping" | "info" | "client" | "hello" | "subscribe"
            | "unsubscribe" | "script" => continue,
            other => other.to_string(),
        };
        by.entry(name)
            .or_default()
            .push(u64::try_from(*us).unwrap_or(0));
    }
    println!("\n{what}");
    println!("  without SLOWLOG, INFO commandstats per call: {plain}");
    println!(
        "  {:<24} {:>8} {:>8} {:>8}",
        "script", "calls", "p50 µs", "mean µs"
    );
    for (name, mut us) in by {
        us.sort_unstable();
        let calls = us.len();
        let p50 = us[calls / 2];
        // Sums of a few million µs: exact in a double.
        let total = u32::try_from(us.iter().sum::<u64>()).unwrap_or(u32::MAX);
        let mean = f64::from(total) / f64::from(u32::try_from(calls).unwrap_or(u32::MAX));
        println!("  {name:<24} {calls:>8} {p50:>8} {mean:>8.1}");
    }
    Ok(())
}

/// Run `work` once afresh: `slowlog-log-slower-than` set to `slower` (`0`:
/// log every command; `-1`: none), and the counters it is read by reset
/// first (`reset`: the command and its argument).
async fn fresh_run<F, Fut>(
    admin: &mut MultiplexedConnection,
    (slower, reset): (&str, [&str; 2]),
    what: &str,
    work: &F,
) -> Result<(), Box<dyn std::error::Error>>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(slower)
        .query_async(admin)
        .await?;
    let () = redis::cmd(reset[0])
        .arg(reset[1])
        .query_async(admin)
        .await?;
    work().await.map_err(|e| format!("{what}: {e:#}"))?;
    Ok(())
}
