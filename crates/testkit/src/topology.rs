//! What [`RedisCluster`](crate::RedisCluster) and [`RedisSentinelSet`](crate::RedisSentinelSet)
//! share: a set of server processes that can be paused and killed, commands with a bound on
//! every step, and bounded waits for states the servers announce no event for.

use std::future::Future;
use std::io;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::AsyncConnectionConfig;

use crate::RedisServer;

/// Bound on connecting to a node and on each reply.
const QUERY_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(20);
/// How much of each node's log an error message carries.
const LOG_TAIL: usize = 1500;

/// What the topology did to a process last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NodeState {
    Running,
    /// Stopped with SIGSTOP: its port accepts connections but nothing answers.
    Paused,
    /// Killed for good.
    Killed,
}

/// Server processes of a topology and what was done to each.
#[derive(Debug)]
pub(crate) struct Processes {
    servers: Vec<RedisServer>,
    /// Changed only by `pause`, `resume` and `kill`, which also send the signal.
    state: Mutex<Vec<NodeState>>,
}

impl Processes {
    pub(crate) fn new(servers: Vec<RedisServer>) -> Self {
        let state = Mutex::new(vec![NodeState::Running; servers.len()]);
        Self { servers, state }
    }

    /// The servers back, for renumbering; nothing is paused or killed before that.
    pub(crate) fn into_servers(self) -> Vec<RedisServer> {
        self.servers
    }

    pub(crate) fn servers(&self) -> &[RedisServer] {
        &self.servers
    }

    /// Server `i`; panics with the number of servers when out of range.
    pub(crate) fn get(&self, i: usize) -> &RedisServer {
        self.servers.get(i).unwrap_or_else(|| {
            panic!(
                "deadbolt-testkit: no node {i} (there are {})",
                self.servers.len()
            )
        })
    }

    /// Index of the server listening on `port`.
    pub(crate) fn index_of_port(&self, port: u16) -> Option<usize> {
        self.servers.iter().position(|s| s.port() == port)
    }

    /// Running and not paused: it answers.
    pub(crate) fn is_live(&self, i: usize) -> bool {
        self.state.lock()[i] == NodeState::Running
    }

    /// Indices of the servers that answer.
    pub(crate) fn live(&self) -> Vec<usize> {
        let state = self.state.lock();
        (0..self.servers.len())
            .filter(|&i| state[i] == NodeState::Running)
            .collect()
    }

    pub(crate) fn pause(&self, i: usize) {
        self.signal(i, NodeState::Running, NodeState::Paused, RedisServer::pause);
    }

    pub(crate) fn resume(&self, i: usize) {
        self.signal(
            i,
            NodeState::Paused,
            NodeState::Running,
            RedisServer::resume,
        );
    }

    /// If server `i` is `from`, `send` it the signal that makes it `to`; else nothing.
    fn signal(&self, i: usize, from: NodeState, to: NodeState, send: fn(&RedisServer)) {
        let server = self.get(i);
        let mut state = self.state.lock();
        if state[i] == from {
            send(server);
            state[i] = to;
        }
    }

    pub(crate) fn kill(&mut self, i: usize) {
        self.get(i);
        self.servers[i].stop();
        self.state.lock()[i] = NodeState::Killed;
    }

    /// The end of every server's log, for an error message.
    pub(crate) fn logs(&self) -> String {
        logs_of(&self.servers)
    }

    /// `INFO replication` of server `i`; the error names it.
    pub(crate) async fn replication(&self, i: usize) -> Result<String, String> {
        query(self.get(i), &cmd(&["INFO", "replication"]))
            .await
            .map_err(|e| format!("node {i}: {e}"))
    }

    /// Wait up to `timeout` until server `replica` has received everything server `master` had
    /// received when this was called (the replica's `slave_repl_offset` reaches the master's
    /// `master_repl_offset`); a timeout error carries `logs()`.
    pub(crate) async fn wait_caught_up(
        &self,
        master: usize,
        replica: usize,
        timeout: Duration,
        logs: impl FnOnce() -> String,
    ) -> io::Result<()> {
        let info: String = query(self.get(master), &cmd(&["INFO", "replication"])).await?;
        let target: u64 = info_field(&info, "master_repl_offset")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| io::Error::other(format!("no master_repl_offset in {info:?}")))?;
        wait(
            &format!("node {replica} catching up with node {master} (offset {target})"),
            timeout,
            logs,
            || async move {
                let info = self.replication(replica).await?;
                let offset: Option<u64> =
                    info_field(&info, "slave_repl_offset").and_then(|v| v.parse().ok());
                match offset {
                    Some(o) if o >= target => Ok(()),
                    other => Err(format!("replica offset {other:?}")),
                }
            },
        )
        .await
    }
}

/// The end of each server's log, headed by its port.
pub(crate) fn logs_of(servers: &[RedisServer]) -> String {
    servers
        .iter()
        .map(|s| {
            format!(
                "--- redis-server :{} ({}) ---\n{}\n",
                s.port(),
                s.dir().display(),
                s.log_tail(LOG_TAIL)
            )
        })
        .collect()
}

fn redis_err(srv: &RedisServer, cmd: &redis::Cmd, e: &redis::RedisError) -> io::Error {
    let kind = if e.is_timeout() {
        io::ErrorKind::TimedOut
    } else {
        io::ErrorKind::Other
    };
    io::Error::new(
        kind,
        format!("{} on 127.0.0.1:{}: {e}", describe(cmd), srv.port()),
    )
}

/// The command's first two words, for error messages.
fn describe(cmd: &redis::Cmd) -> String {
    cmd.args_iter()
        .take(2)
        .map(|a| match a {
            redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
            _ => "?".to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Run `cmd` on `srv` over a fresh connection, bounded by [`QUERY_TIMEOUT`] per step.
pub(crate) async fn query<T: redis::FromRedisValue>(
    srv: &RedisServer,
    cmd: &redis::Cmd,
) -> io::Result<T> {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(QUERY_TIMEOUT))
        .set_response_timeout(Some(QUERY_TIMEOUT));
    let mut conn = srv
        .client()
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(|e| redis_err(srv, cmd, &e))?;
    cmd.query_async(&mut conn)
        .await
        .map_err(|e| redis_err(srv, cmd, &e))
}

/// [`query`] for code that must not need a runtime (the `start` functions).
pub(crate) fn query_sync<T: redis::FromRedisValue>(
    srv: &RedisServer,
    cmd: &redis::Cmd,
) -> io::Result<T> {
    let mut conn = srv
        .client()
        .get_connection_with_timeout(QUERY_TIMEOUT)
        .map_err(|e| redis_err(srv, cmd, &e))?;
    conn.set_read_timeout(Some(QUERY_TIMEOUT))
        .and_then(|()| conn.set_write_timeout(Some(QUERY_TIMEOUT)))
        .map_err(|e| redis_err(srv, cmd, &e))?;
    cmd.query(&mut conn).map_err(|e| redis_err(srv, cmd, &e))
}

/// A command from its words.
pub(crate) fn cmd(words: &[&str]) -> redis::Cmd {
    let mut cmd = redis::cmd(words[0]);
    for w in &words[1..] {
        cmd.arg(*w);
    }
    cmd
}

/// The value of `field` in an `INFO` reply.
pub(crate) fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines().find_map(|line| {
        line.strip_prefix(field)
            .and_then(|rest| rest.strip_prefix(':'))
            .map(str::trim)
    })
}

/// Whether a wait is over: `Ok(())` when it is, `Err(why not)` to look again.
pub(crate) type Check = Result<(), String>;

fn timed_out(what: &str, timeout: Duration, why: &str, logs: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("deadbolt-testkit: {what}: not done after {timeout:?} ({why}); logs:\n{logs}"),
    )
}

/// Look every [`POLL`] until `check` passes, up to `timeout`; the error says what was awaited,
/// why the last look failed, and carries `logs()`.
pub(crate) fn wait_sync(
    what: &str,
    timeout: Duration,
    logs: impl FnOnce() -> String,
    mut check: impl FnMut() -> Check,
) -> io::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        match check() {
            Ok(()) => return Ok(()),
            Err(why) if Instant::now() >= deadline => {
                return Err(timed_out(what, timeout, &why, &logs()))
            }
            Err(_) => std::thread::sleep(POLL),
        }
    }
}

/// [`wait_sync`] for async checks; sleeps with tokio so other tasks run meanwhile.
pub(crate) async fn wait<F, Fut>(
    what: &str,
    timeout: Duration,
    logs: impl FnOnce() -> String,
    mut check: F,
) -> io::Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Check>,
{
    let deadline = Instant::now() + timeout;
    loop {
        match check().await {
            Ok(()) => return Ok(()),
            Err(why) if Instant::now() >= deadline => {
                return Err(timed_out(what, timeout, &why, &logs()))
            }
            Err(_) => tokio::time::sleep(POLL).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_info_fields() {
        let info =
            "# Replication\r\nrole:slave\r\nmaster_link_status:up\r\nslave_repl_offset:42\r\n";
        assert_eq!(info_field(info, "role"), Some("slave"));
        assert_eq!(info_field(info, "master_link_status"), Some("up"));
        assert_eq!(info_field(info, "slave_repl_offset"), Some("42"));
        assert_eq!(info_field(info, "master_repl_offset"), None);
        assert_eq!(info_field(info, "slave"), None);
    }
}
