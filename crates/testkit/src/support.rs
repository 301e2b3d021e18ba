//! Small helpers every test file against a real server needs: a server that
//! says how to install redis-server when it is missing, a bound that turns a
//! hang into a failure with a name, a poll for server states that have no
//! event, and a one-line command.

use std::future::Future;
use std::time::Duration;

use crate::RedisServer;

/// Generous bound on one awaited step of a test: catches hangs, not speed.
pub const HANG: Duration = Duration::from_secs(30);

/// Start a throwaway redis-server, or panic saying how to install one.
///
/// # Panics
/// When redis-server cannot be started.
pub fn server() -> RedisServer {
    RedisServer::start().expect("start redis-server (apt-get install -y redis-server)")
}

/// Await `f`, failing with `what` if it takes longer than [`HANG`].
///
/// # Panics
/// When `f` hangs.
///
/// # Cancel safety
/// As `f`.
pub async fn within<F: Future>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(HANG, f)
        .await
        .unwrap_or_else(|_| panic!("{what}: hung for {HANG:?}"))
}

/// Wait until `cond` holds, asking every 2 ms, up to [`HANG`]. Only for
/// states the server announces no event for (a queue's length, a count).
///
/// # Panics
/// When it does not hold within [`HANG`].
///
/// # Cancel safety
/// Cancel safe.
pub async fn until<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    within(what, async {
        while !cond().await {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await;
}

/// Run one command on `srv` (`args[0]` is the command) and decode the reply.
///
/// # Panics
/// When the command fails or the reply does not decode.
///
/// # Cancel safety
/// Cancel safe; a dropped call may still have run.
pub async fn cmd<T: redis::FromRedisValue>(srv: &RedisServer, args: &[&str]) -> T {
    let mut c = srv.conn().await;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query_async(&mut c)
        .await
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// The PTTL of each of `keys` in ms, in order (-1: no TTL, -2: no key).
///
/// # Panics
/// When the server cannot answer.
///
/// # Cancel safety
/// Cancel safe: it only reads.
pub async fn pttls(srv: &RedisServer, keys: &[&str]) -> Vec<i64> {
    let mut out = Vec::with_capacity(keys.len());
    for k in keys {
        out.push(cmd::<i64>(srv, &["PTTL", k]).await);
    }
    out
}

/// Run `cmd` (stdin closed, stdout and stderr captured) to its end; kill it
/// and panic, naming `what`, if it takes longer than [`HANG`]. Blocking:
/// call it off an async runtime's threads (`spawn_blocking`) when the test
/// has tasks that must keep running meanwhile.
///
/// # Panics
/// When the command cannot be started or hangs.
pub fn output_within(what: &str, cmd: &mut std::process::Command) -> std::process::Output {
    use std::process::Stdio;
    let started = std::time::Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    while child.try_wait().expect("wait for the child").is_none() {
        if started.elapsed() > HANG {
            child.kill().ok();
            panic!("{what}: hung for {HANG:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("the child's output")
}

/// The port of a `redis://host:port[/db]` URL.
///
/// # Panics
/// When the URL names no port.
pub fn port_of(url: &str) -> u16 {
    url.trim_end_matches('/')
        .rsplit(':')
        .next()
        .and_then(|p| p.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {url}"))
}

/// True when nothing listens on `port` of the loopback address (a server
/// that a command started was stopped again).
pub fn port_closed(port: u16) -> bool {
    std::net::TcpStream::connect(("127.0.0.1", port)).is_err()
}

/// One key as the server has it: type, serialized value, absolute expiry
/// (ms since the epoch; -1 none). Compare two [`snapshot`]s to check that
/// a call wrote nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyState {
    /// The key.
    pub key: String,
    /// Its TYPE.
    pub kind: String,
    /// Its DUMP.
    pub dump: Option<Vec<u8>>,
    /// Its PEXPIRETIME.
    pub expires_at: i64,
}

/// Every key whose name starts with `prefix`, sorted by name. Two equal
/// snapshots mean nothing was written in between (a refreshed TTL shows as
/// a new expiry). PEXPIRETIME needs Redis 7.
///
/// # Panics
/// When a command fails.
///
/// # Cancel safety
/// Reads only.
pub async fn snapshot(srv: &RedisServer, prefix: &str) -> Vec<KeyState> {
    let mut c = srv.conn().await;
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query_async(&mut c)
        .await
        .expect("KEYS");
    keys.sort();
    let mut out = Vec::new();
    for key in keys {
        let (kind, dump, expires_at): (String, Option<Vec<u8>>, i64) = redis::pipe()
            .cmd("TYPE")
            .arg(&key)
            .cmd("DUMP")
            .arg(&key)
            .cmd("PEXPIRETIME")
            .arg(&key)
            .query_async(&mut c)
            .await
            .expect("TYPE, DUMP, PEXPIRETIME");
        out.push(KeyState {
            key,
            kind,
            dump,
            expires_at,
        });
    }
    out
}

/// What a key held before [`plant_list`] replaced it.
#[derive(Debug)]
pub struct Saved {
    dump: Option<Vec<u8>>,
    expires_at: i64,
}

/// Replace `key` by a LIST (a key of another type for every primitive) in
/// one atomic step, so no heartbeat or renewal slips in between; returns
/// what it held, for [`restore`].
///
/// # Panics
/// When the commands fail.
///
/// # Cancel safety
/// The step is atomic: done or not.
pub async fn plant_list(srv: &RedisServer, key: &str) -> Saved {
    let mut c = srv.conn().await;
    let (dump, expires_at): (Option<Vec<u8>>, i64) = redis::pipe()
        .atomic()
        .cmd("DUMP")
        .arg(key)
        .cmd("PEXPIRETIME")
        .arg(key)
        .cmd("DEL")
        .arg(key)
        .ignore()
        .cmd("RPUSH")
        .arg(key)
        .arg("not-a-lock")
        .ignore()
        .query_async(&mut c)
        .await
        .expect("plant a LIST");
    Saved { dump, expires_at }
}

/// Put back what [`plant_list`] took away, with its expiry, atomically.
///
/// # Panics
/// When the commands fail.
///
/// # Cancel safety
/// The step is atomic: done or not.
pub async fn restore(srv: &RedisServer, key: &str, saved: Saved) {
    let mut c = srv.conn().await;
    let mut pipe = redis::pipe();
    pipe.atomic().cmd("DEL").arg(key).ignore();
    if let Some(dump) = saved.dump {
        let restore = pipe.cmd("RESTORE").arg(key);
        if saved.expires_at > 0 {
            restore.arg(saved.expires_at).arg(dump).arg("ABSTTL");
        } else {
            restore.arg(0).arg(dump);
        }
        restore.ignore();
    }
    let () = pipe.query_async(&mut c).await.expect("restore");
}

/// How many connections are subscribed to `channel`.
///
/// # Cancel safety
/// Reads only.
pub async fn subscribers(srv: &RedisServer, channel: &str) -> i64 {
    let (_, n): (String, i64) = cmd(srv, &["PUBSUB", "NUMSUB", channel]).await;
    n
}

/// Every key without a TTL, sorted, but for the hash slots' fencing
/// counters ([`is_slot_fence`]), which stay by design.
///
/// # Cancel safety
/// Reads only.
pub async fn persistent_keys(srv: &RedisServer) -> Vec<String> {
    let mut keys: Vec<String> = cmd(srv, &["KEYS", "*"]).await;
    keys.sort();
    let mut left = Vec::new();
    for k in keys.into_iter().filter(|k| !is_slot_fence(k)) {
        let ttl: i64 = cmd(srv, &["PTTL", &k]).await;
        if ttl == -1 {
            left.push(k);
        }
    }
    left
}

/// Whether `key` looks like a hash slot's fencing counter of deadbolt,
/// `<ns>:{<decimal>}:fence`: one per slot and namespace, kept without a TTL
/// so that tokens keep rising after every name's keys are gone (deadbolt-
/// core's `Keys::fence`).
pub fn is_slot_fence(key: &str) -> bool {
    key.strip_suffix("}:fence")
        .and_then(|r| r.rsplit_once(":{"))
        .is_some_and(|(ns, tag)| {
            !ns.is_empty() && !tag.is_empty() && tag.bytes().all(|b| b.is_ascii_digit())
        })
}

/// Fill the server's memory and set `maxmemory` 256 kB below what is used
/// (with `maxmemory-policy noeviction`, set by the caller), so that every
/// write that needs memory fails with OOM: 1 MB of values first, so that a
/// freed buffer cannot bring the server back under the limit. Checked with
/// a probe write. `CONFIG SET maxmemory 0` undoes it.
///
/// # Panics
/// When a command fails or the probe write still succeeds.
///
/// # Cancel safety
/// Not cancel safe: a dropped call may leave memory filled without the
/// limit set.
pub async fn fill_memory(srv: &RedisServer) {
    let mut raw = srv.conn().await;
    let blob = vec![b'x'; 64 * 1024];
    for i in 0..16 {
        let () = redis::cmd("SET")
            .arg(format!("filler:{i}"))
            .arg(&blob)
            .query_async(&mut raw)
            .await
            .expect("SET filler");
    }
    let info: String = cmd(srv, &["INFO", "memory"]).await;
    let used: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory in INFO");
    let limit = (used - 256 * 1024).to_string();
    let () = cmd(srv, &["CONFIG", "SET", "maxmemory", &limit]).await;
    let r: redis::RedisResult<()> = redis::cmd("SET")
        .arg("probe")
        .arg(1)
        .query_async(&mut raw)
        .await;
    assert_eq!(r.unwrap_err().code(), Some("OOM"), "memory is not full");
}

/// Start a throwaway redis-server listening for TLS (a CA generated at
/// start), or panic saying how to install one.
///
/// # Panics
/// When redis-server cannot be started.
#[cfg(feature = "tls")]
pub fn tls_server() -> RedisServer {
    RedisServer::builder()
        .tls(true)
        .start()
        .expect("redis-server with TLS (apt-get install -y redis-server)")
}

/// Run `cmd` to its end with only `ca` trusted (put in `SSL_CERT_FILE`,
/// which rustls-native-certs reads in place of the system's store; nothing
/// extra trusted when `None`) and without backtraces; its output.
///
/// # Panics
/// When the command cannot be started.
pub fn output_trusting(
    cmd: &mut std::process::Command,
    ca: Option<&std::path::Path>,
) -> std::process::Output {
    cmd.env_remove("SSL_CERT_FILE")
        .env_remove("SSL_CERT_DIR")
        .env("RUST_BACKTRACE", "0");
    if let Some(ca) = ca {
        cmd.env("SSL_CERT_FILE", ca);
    }
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}
