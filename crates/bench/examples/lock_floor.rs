//! The floor under the Lock's Redis cost: one throwaway redis-server, four
//! tasks locking and unlocking distinct names (as the bench's uncontended
//! row), four ways one after another, twice over:
//!
//! - `raw`: the textbook lock, `SET NX PX` and a compare-and-delete script;
//! - `floor`: a script doing only what a reentrant, fenced lock cannot do
//!   without (`deadbolt_bench::floor`'s `floor_lock.lua` and
//!   `floor_unlock.lua`: read the holder, advance the fencing counter, write the hold
//!   with its count and token, set its expiry; the release reads the holder
//!   and deletes), and nothing of what the Lock adds (the stale-hold repair,
//!   the waiting clients' queue, the attempt's field, the
//!   clock floor under the tokens);
//! - `lock`: deadbolt's `Lock` (`lock()` and `unlock()`);
//! - `redisson`: Redisson's `RLock` server side as the bench's `redisson`
//!   contender runs it (`deadbolt_bench::REDISSON_LOCK` and
//!   `REDISSON_UNLOCK`: a hash of hold counts, a PUBLISH on every release,
//!   an unlock latch set by the unlock and deleted after it, as Redisson's
//!   client does), with no fencing token. The latch DEL is counted in its
//!   commands per pair; its own µs (a command sent, not run in a script)
//!   is not in its in-command figure, as the bench's cmds/acq leaves it out.
//!
//! For each: lock+unlock pairs per second, the server's CPU per pair (INFO
//! cpu, its event loop and system calls included), the µs per call inside
//! Redis (INFO commandstats, the commands a script runs included) and the
//! commands run per pair.
//!
//! `cargo run --release -p deadbolt-bench --example lock_floor [SECONDS]`

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use deadbolt_bench::floor::first_arg;
use deadbolt_bench::floor::{
    commandstats, reset_stats, server_cpu_us, ADMIN_COMMANDS, FLOOR_LOCK_LUA, FLOOR_UNLOCK_LUA,
};
use deadbolt_bench::{REDISSON_LOCK, REDISSON_UNLOCK};
use deadbolt_core::{Acquire as _, Client};
use deadbolt_testkit::RedisServer;
use redis::aio::MultiplexedConnection;

/// Redisson's try and unlock, as the bench's `redisson` contender runs them.
static RLOCK: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(REDISSON_LOCK.source()));
static RUNLOCK: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(REDISSON_UNLOCK.source()));

const TASKS: usize = 4;

const RAW_UNLOCK: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

/// One of the three ways, run by one task on its `i`-th name.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    Raw,
    Floor,
    Lock,
    Redisson,
}

/// Run script `src` (EVALSHA, loaded on first use) with `keys` and `args`.
async fn eval(conn: &mut MultiplexedConnection, src: &str, keys: &[&str], args: &[&str]) -> i64 {
    let script = redis::Script::new(src);
    let mut inv = script.prepare_invoke();
    for k in keys {
        inv.key(*k);
    }
    for a in args {
        inv.arg(*a);
    }
    inv.invoke_async(conn).await.unwrap()
}

async fn one(way: Way, conn: &mut MultiplexedConnection, client: &Client, name: &str) {
    let key = format!("{name}:h");
    match way {
        Way::Raw => {
            let set: Option<String> = redis::cmd("SET")
                .arg(&key)
                .arg("me")
                .arg("NX")
                .arg("PX")
                .arg(30_000)
                .query_async(conn)
                .await
                .unwrap();
            assert!(set.is_some());
            eval(conn, RAW_UNLOCK, &[&key], &["me"]).await;
        }
        Way::Floor => {
            let fence = format!("{name}:f");
            assert!(
                eval(
                    conn,
                    FLOOR_LOCK_LUA.source(),
                    &[&key, &fence],
                    &["me", "30000"]
                )
                .await
                    > 0
            );
            eval(conn, FLOOR_UNLOCK_LUA.source(), &[&key], &["me"]).await;
        }
        Way::Lock => {
            let g = deadbolt_lock::Lock::new(client, name).lock().await.unwrap();
            g.unlock().await.unwrap();
        }
        Way::Redisson => {
            let field = "me:1";
            let got: Option<i64> = RLOCK
                .key(&key)
                .arg("30000")
                .arg(field)
                .invoke_async(conn)
                .await
                .unwrap();
            assert!(got.is_none(), "redisson: {key} is held");
            let channel = format!("redisson_lock__channel:{{{key}}}");
            let latch = format!("redisson_unlock_latch:{{{key}}}:{name}");
            let released: Option<i64> = RUNLOCK
                .key(&key)
                .key(&channel)
                .key(&latch)
                .arg(0)
                .arg(30_000)
                .arg(field)
                .arg(13_500)
                .invoke_async(conn)
                .await
                .unwrap();
            assert_eq!(released, Some(1));
            let _: i64 = redis::cmd("DEL")
                .arg(&latch)
                .query_async(conn)
                .await
                .unwrap();
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let secs: f64 = first_arg(1.5);
    let srv = RedisServer::start().expect("redis-server");
    let client = Client::connect(&srv.url()).await.expect("connect");
    let mut admin = srv.conn().await;
    println!("way      pairs/s  server CPU µs/pair  in-command µs/pair  sent+in-script commands/pair  (EVALSHA µs/call)");
    for round in 0..2 {
        for (label, way) in [
            ("raw", Way::Raw),
            ("floor", Way::Floor),
            ("lock", Way::Lock),
            ("redisson", Way::Redisson),
        ] {
            let cpu0 = reset_stats(&mut admin).await.expect("CONFIG RESETSTAT");
            let t0 = Instant::now();
            let until = t0 + Duration::from_secs_f64(secs);
            let tasks = (0..TASKS).map(|t| {
                let mut conn = admin.clone();
                let client = client.clone();
                tokio::spawn(async move {
                    let mut n = 0u64;
                    while Instant::now() < until {
                        one(way, &mut conn, &client, &format!("{label}:{round}:{t}:{n}")).await;
                        n += 1;
                    }
                    n
                })
            });
            let pairs: u64 = futures::future::join_all(tasks)
                .await
                .into_iter()
                .map(Result::unwrap)
                .sum();
            let elapsed = t0.elapsed().as_secs_f64();
            let cpu = server_cpu_us(&mut admin).await.unwrap() - cpu0;
            let st = commandstats(&mut admin).await.unwrap();
            let pairs_f = f64::from(u32::try_from(pairs).unwrap_or(u32::MAX));
            // What the tasks send: the scripts, and the raw lock's SET;
            // every other command but the bench's own ran inside a script.
            let sent: &[&str] = if way == Way::Raw {
                &["set", "evalsha", "eval"]
            } else {
                &["evalsha", "eval"]
            };
            let in_cmd: f64 = sent.iter().filter_map(|c| st.get(*c)).map(|s| s.1).sum();
            let inner: f64 = st
                .iter()
                .filter(|(c, _)| {
                    !sent.contains(&c.as_str()) && !ADMIN_COMMANDS.contains(&c.as_str())
                })
                .map(|(_, s)| s.0)
                .sum();
            let sent_calls: f64 = sent.iter().filter_map(|c| st.get(*c)).map(|s| s.0).sum();
            let evalsha = st.get("evalsha").map_or(0.0, |s| s.1 / s.0.max(1.0));
            println!(
                "{label:<7} {:>8.0}  {:>18.1}  {:>18.1}  {:>28.1}  ({evalsha:.2})",
                pairs_f / elapsed,
                cpu / pairs_f,
                in_cmd / pairs_f,
                (sent_calls + inner) / pairs_f,
            );
        }
    }
}
