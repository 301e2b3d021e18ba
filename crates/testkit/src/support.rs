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
