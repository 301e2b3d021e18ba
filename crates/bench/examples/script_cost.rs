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
    let c = clients[0].clone();
    println!("Redis µs per call, from SLOWLOG (each workload {RUN:?}):");
    measure(&mut admin, &names, "lock, uncontended", || {
        distinct(&c, |c, i| {
            let l = deadbolt_lock::Lock::new(c, &format!("u:lock:{i}"));
            async move { l.lock().await?.unlock().await }
        })
    })
    .await?;
    measure(&mut admin, &names, "fair lock, uncontended", || {
        distinct(&c, |c, i| {
            let l = deadbolt_fair::FairLock::new(c, &format!("u:fair:{i}"));
            async move { l.lock().await?.unlock().await }
        })
    })
    .await?;
    measure(&mut admin, &names, "rwlock read, uncontended", || {
        distinct(&c, |c, i| {
            let l = deadbolt_rwlock::RwLock::new(c, &format!("u:rw:{i}"));
            async move { l.read_lock().lock().await?.unlock().await }
        })
    })
    .await?;
    measure(&mut admin, &names, "rwlock write, uncontended", || {
        distinct(&c, |c, i| {
            let l = deadbolt_rwlock::RwLock::new(c, &format!("u:rww:{i}"));
            async move { l.write_lock().lock().await?.unlock().await }
        })
    })
    .await?;
    for i in 0..4 {
        let s = deadbolt_semaphore::Semaphore::new(&c, &format!("u:sem:{i}"));
        s.try_set_permits(1).await?;
    }
    measure(&mut admin, &names, "semaphore, uncontended", || {
        distinct(&c, |c, i| {
            let s = deadbolt_semaphore::Semaphore::new(c, &format!("u:sem:{i}"));
            async move { s.acquire(1).await?.release().await }
        })
    })
    .await?;
    measure(&mut admin, &names, "lock, 8 waiters / 4 clients", || {
        contended(&clients, |c| {
            let l = deadbolt_lock::Lock::new(c, "c:lock");
            async move { l.lock().await?.unlock().await }
        })
    })
    .await?;
    measure(
        &mut admin,
        &names,
        "fair lock, 8 waiters / 4 clients",
        || {
            contended(&clients, |c| {
                let l = deadbolt_fair::FairLock::new(c, "c:fair");
                async move { l.lock().await?.unlock().await }
            })
        },
    )
    .await?;
    measure(
        &mut admin,
        &names,
        "rwlock, 8 waiters / 4 clients, 10% writes",
        || {
            contended(&clients, |c| {
                let l = deadbolt_rwlock::RwLock::new(c, "c:rw");
                async move {
                    if rand::random_range(0..10) == 0 {
                        l.write_lock().lock().await?.unlock().await
                    } else {
                        l.read_lock().lock().await?.unlock().await
                    }
                }
            })
        },
    )
    .await?;
    deadbolt_semaphore::Semaphore::new(&c, "c:sem")
        .try_set_permits(4)
        .await?;
    measure(
        &mut admin,
        &names,
        "semaphore of 4, 8 waiters / 4 clients",
        || {
            contended(&clients, |c| {
                let s = deadbolt_semaphore::Semaphore::new(c, "c:sem");
                async move { s.acquire(1).await?.release().await }
            })
        },
    )
    .await?;
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

/// 4 tasks on one client, each locking and unlocking its own name for [`RUN`].
async fn distinct<F, Fut>(c: &Client, op: F) -> anyhow::Result<()>
where
    F: Fn(&Client, usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = deadbolt_core::Result<()>> + Send + 'static,
{
    let end = Instant::now() + RUN;
    let mut tasks = Vec::new();
    for i in 0..4 {
        let (c, op) = (c.clone(), op.clone());
        tasks.push(tokio::spawn(async move {
            while Instant::now() < end {
                op(&c, i).await?;
            }
            Ok::<(), deadbolt_core::Error>(())
        }));
    }
    for t in tasks {
        t.await.expect("a task panicked")?;
    }
    Ok(())
}

/// 8 waiters over the 4 clients on one name for [`RUN`].
async fn contended<F, Fut>(clients: &[Client], op: F) -> anyhow::Result<()>
where
    F: Fn(&Client) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = deadbolt_core::Result<()>> + Send + 'static,
{
    let end = Instant::now() + RUN;
    let mut tasks = Vec::new();
    for i in 0..8 {
        let (c, op) = (clients[i % clients.len()].clone(), op.clone());
        tasks.push(tokio::spawn(async move {
            while Instant::now() < end {
                op(&c).await?;
            }
            Ok::<(), deadbolt_core::Error>(())
        }));
    }
    for t in tasks {
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
    slowlog(admin, "-1").await?;
    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(admin)
        .await?;
    work().await.map_err(|e| format!("{what}: {e:#}"))?;
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
    slowlog(admin, "0").await?;
    let () = redis::cmd("SLOWLOG")
        .arg("RESET")
        .query_async(admin)
        .await?;
    work().await.map_err(|e| format!("{what}: {e:#}"))?;
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

/// Set `slowlog-log-slower-than` (`0`: log every command; `-1`: none).
async fn slowlog(admin: &mut MultiplexedConnection, v: &str) -> redis::RedisResult<()> {
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(v)
        .query_async(admin)
        .await
}
