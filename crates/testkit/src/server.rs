//! Real `redis-server` child processes.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use parking_lot::Mutex;

use crate::resp;
#[cfg(feature = "tls")]
use crate::tls::{self, ServerFiles, TlsCerts};

/// How long to wait for a started server to answer.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How many fresh ports [`RedisServer::start`] tries when the chosen port turns out to be taken.
const PORT_ATTEMPTS: usize = 20;
/// Directories searched for `redis-server` after `PATH`.
const FALLBACK_DIRS: [&str; 3] = ["/usr/bin", "/usr/local/bin", "/usr/sbin"];

/// The environment variable that names the server executable testkit
/// starts: `redis-server` when unset; `valkey-server` runs the same tests
/// against Valkey (it answers to Redis clients, runs the same Lua and
/// takes the same command line).
pub const SERVER_ENV: &str = "DEADBOLT_TEST_SERVER";

/// The server executable's name: [`SERVER_ENV`], else `redis-server`.
pub fn server_name() -> String {
    std::env::var(SERVER_ENV)
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "redis-server".to_string())
}

/// Path of the server executable ([`server_name`]: `redis-server` unless
/// [`SERVER_ENV`] names another) if it is installed.
///
/// Looks in every directory of `PATH`, then in `/usr/bin`, `/usr/local/bin` and `/usr/sbin`.
pub fn redis_server_path() -> Option<PathBuf> {
    let name = server_name();
    let from_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    from_path
        .into_iter()
        .chain(FALLBACK_DIRS.iter().map(PathBuf::from))
        .map(|dir| dir.join(&name))
        .find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

fn handed_out_ports() -> &'static Mutex<HashSet<u16>> {
    static PORTS: OnceLock<Mutex<HashSet<u16>>> = OnceLock::new();
    PORTS.get_or_init(|| Mutex::new(HashSet::new()))
}

/// Remember `port` as taken so [`free_port`] never hands it out in this process.
pub(crate) fn reserve_port(port: u16) {
    handed_out_ports().lock().insert(port);
}

/// Pick a free loopback TCP port.
///
/// Binds `127.0.0.1:0`, reads the port the OS chose and closes the socket again. A process-wide
/// set of ports already handed out guarantees that concurrently running tests of one test binary
/// never get the same port. Another process may still grab the port before it is used;
/// [`RedisServer::start`] therefore retries on a fresh port when `redis-server` cannot bind.
///
/// # Panics
///
/// If no loopback port can be bound at all.
pub fn free_port() -> u16 {
    for _ in 0..1000 {
        let listener = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))
            .expect("cannot bind a loopback TCP port");
        let port = listener
            .local_addr()
            .expect("bound listener has a local address")
            .port();
        drop(listener);
        if handed_out_ports().lock().insert(port) {
            return port;
        }
    }
    panic!("could not find a free loopback port that was not handed out before");
}

/// A directory under the system temp dir, removed (recursively) on drop.
#[derive(Debug)]
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> io::Result<Self> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let path = std::env::temp_dir().join(format!(
                "deadbolt-testkit-{}-{n}-{nanos}",
                std::process::id()
            ));
            match fs::create_dir(&path) {
                Ok(()) => return Ok(Self(path)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Builder for a [`RedisServer`] with non-default configuration.
#[derive(Debug, Clone, Default)]
pub struct RedisServerBuilder {
    persistence: bool,
    cluster: bool,
    sentinel: Option<String>,
    args: Vec<(String, String)>,
    #[cfg(feature = "tls")]
    tls: bool,
    #[cfg(feature = "tls")]
    tls_auth_clients: bool,
}

impl RedisServerBuilder {
    /// Turn on AOF persistence (`--appendonly yes --appendfsync always`), so data written before
    /// [`RedisServer::stop`] (even a SIGKILL) is there again after [`RedisServer::restart`].
    /// Off by default.
    pub fn persistence(mut self, on: bool) -> Self {
        self.persistence = on;
        self
    }

    /// Add a configuration directive, passed as `--<name> <value>` after the defaults (so it
    /// overrides them). `name` may be given with or without the leading `--`.
    pub fn arg(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let name = name.into();
        let name = name.trim_start_matches("--").to_owned();
        self.args.push((name, value.into()));
        self
    }

    /// Run as a Redis Cluster node: `--cluster-enabled yes`, the cluster configuration in
    /// `nodes.conf` in the server's [`dir`](RedisServer::dir) (so a
    /// [`restart`](RedisServer::restart) keeps the node's identity), and the cluster bus on a
    /// second free loopback port ([`RedisServer::cluster_port`], passed as `--cluster-port`).
    ///
    /// The bus port is chosen like the client port rather than left at the default
    /// client port + 10000: ports from the ephemeral range (32768 and up on Linux) plus 10000
    /// are often above 65535, and redis-server refuses to start then. Off by default.
    pub fn cluster(mut self, on: bool) -> Self {
        self.cluster = on;
        self
    }

    /// Run as a Redis Sentinel (`redis-server <config file> --sentinel`) whose configuration
    /// file starts out as `config` (for example `sentinel monitor ...` lines).
    ///
    /// The file is `sentinel.conf` in the server's [`dir`](RedisServer::dir); it is written on
    /// the first start only, because Sentinel rewrites it with what it learns (its id, the
    /// current master, known replicas and sentinels) and a
    /// [`restart`](RedisServer::restart) should keep that. `--port`, `--bind` and the other
    /// defaults are passed on the command line as for a plain server.
    pub fn sentinel(mut self, config: impl Into<String>) -> Self {
        self.sentinel = Some(config.into());
        self
    }

    /// Also listen for TLS on a second free loopback port
    /// ([`RedisServer::tls_url`]), with a certificate for `127.0.0.1` and
    /// `localhost` signed by a CA generated for this server alone
    /// ([`RedisServer::tls_certs`]). The plain port stays open, so the
    /// helpers ([`RedisServer::conn`], [`RedisServer::commandstats`], ...)
    /// work as ever. Clients need not present a certificate unless
    /// [`tls_auth_clients`](Self::tls_auth_clients) is set. Off by default;
    /// needs the `tls` feature.
    #[cfg(feature = "tls")]
    pub fn tls(mut self, on: bool) -> Self {
        self.tls = on;
        self
    }

    /// Require a client certificate signed by the test CA on the TLS port
    /// (`--tls-auth-clients yes`); implies [`tls`](Self::tls). Off by default;
    /// needs the `tls` feature.
    #[cfg(feature = "tls")]
    pub fn tls_auth_clients(mut self, on: bool) -> Self {
        self.tls_auth_clients = on;
        self.tls |= on;
        self
    }

    /// Start the server and wait until it answers; see [`RedisServer::start`].
    pub fn start(self) -> io::Result<RedisServer> {
        let exe = redis_server_path().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "redis-server is not installed (looked in PATH and {}); \
                     install it with `apt-get install -y redis-server`",
                    FALLBACK_DIRS.join(", ")
                ),
            )
        })?;
        let dir = TempDir::new()?;
        #[cfg(feature = "tls")]
        let tls = if self.tls {
            let (certs, files) = tls::generate(&dir.0)?;
            Some(TlsState {
                port: 0,
                certs,
                files,
            })
        } else {
            None
        };
        let mut server = RedisServer {
            exe,
            config: self,
            port: 0,
            cluster_port: None,
            dir,
            child: None,
            #[cfg(feature = "tls")]
            tls,
        };
        let mut last_err = None;
        for _ in 0..PORT_ATTEMPTS {
            server.port = free_port();
            if server.config.cluster {
                server.cluster_port = Some(free_port());
            }
            #[cfg(feature = "tls")]
            if let Some(tls) = &mut server.tls {
                tls.port = free_port();
            }
            match server.spawn_and_wait() {
                Ok(()) => return Ok(server),
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => last_err = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last_err.unwrap_or_else(|| io::Error::other("could not start redis-server")))
    }
}

/// A real `redis-server` child process listening on a free loopback port.
///
/// It runs with no persistence unless configured otherwise, with its working directory in a fresh
/// temporary directory. Dropping it kills the process (SIGKILL), waits for it and removes the
/// directory.
#[derive(Debug)]
pub struct RedisServer {
    exe: PathBuf,
    config: RedisServerBuilder,
    port: u16,
    cluster_port: Option<u16>,
    dir: TempDir,
    child: Option<Child>,
    #[cfg(feature = "tls")]
    tls: Option<TlsState>,
}

/// The TLS listener of a server built with [`RedisServerBuilder::tls`].
#[cfg(feature = "tls")]
#[derive(Debug)]
struct TlsState {
    port: u16,
    certs: TlsCerts,
    files: ServerFiles,
}

impl RedisServer {
    /// Start a server with the default configuration and wait until it answers.
    ///
    /// The server runs with `--save "" --appendonly no` (no persistence), `--bind 127.0.0.1`,
    /// `--port <free port>`, `--dir <fresh temp dir>` (removed on drop), `--protected-mode no`,
    /// and logs to `redis.log` in that directory. Readiness is checked for up to about 10 s.
    ///
    /// # Errors
    ///
    /// If `redis-server` is not installed (the message says to run
    /// `apt-get install -y redis-server`), cannot be spawned, exits early or does not answer in
    /// time (the message then includes the end of its log).
    pub fn start() -> io::Result<RedisServer> {
        Self::builder().start()
    }

    /// For examples and tools whose Redis URL is optional: `url` when given,
    /// else that of a throwaway server started as by [`start`](Self::start).
    /// Keep the returned server (if any) for as long as the URL is used: it
    /// stops when dropped.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start), when a server had to be started.
    pub fn given_or_started(url: Option<String>) -> io::Result<(String, Option<RedisServer>)> {
        match url {
            Some(url) => Ok((url, None)),
            None => {
                let srv = Self::start()?;
                Ok((srv.url(), Some(srv)))
            }
        }
    }

    /// A builder to configure persistence or extra directives before starting.
    pub fn builder() -> RedisServerBuilder {
        RedisServerBuilder::default()
    }

    /// The TCP port the server listens on (stays the same across [`restart`](Self::restart)).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The cluster bus port of a server built with [`RedisServerBuilder::cluster`] (stays the
    /// same across [`restart`](Self::restart)); `None` otherwise.
    pub fn cluster_port(&self) -> Option<u16> {
        self.cluster_port
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, self.port))
    }

    /// `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The TLS port of a server built with [`RedisServerBuilder::tls`]
    /// (stays the same across [`restart`](Self::restart)); `None` otherwise.
    #[cfg(feature = "tls")]
    pub fn tls_port(&self) -> Option<u16> {
        self.tls.as_ref().map(|t| t.port)
    }

    /// `rediss://127.0.0.1:<tls port>/`.
    ///
    /// # Panics
    ///
    /// If the server was not built with [`RedisServerBuilder::tls`].
    #[cfg(feature = "tls")]
    pub fn tls_url(&self) -> String {
        format!("rediss://127.0.0.1:{}/", self.tls_state().port)
    }

    /// The certificates generated for this server: the test CA to trust, and
    /// a client certificate it accepts.
    ///
    /// # Panics
    ///
    /// If the server was not built with [`RedisServerBuilder::tls`].
    #[cfg(feature = "tls")]
    pub fn tls_certs(&self) -> &TlsCerts {
        &self.tls_state().certs
    }

    /// A `redis::Client` for [`tls_url`](Self::tls_url) that trusts the test
    /// CA (and nothing else) and presents the test client certificate.
    /// Installs ring as rustls's process-wide crypto provider if none is
    /// installed yet (redis-rs needs one).
    ///
    /// # Panics
    ///
    /// If the server was not built with [`RedisServerBuilder::tls`].
    #[cfg(feature = "tls")]
    pub fn tls_client(&self) -> redis::Client {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // An `Err` means another thread installed one first: that one stands.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        redis::Client::build_with_tls(self.tls_url(), self.tls_certs().redis_certificates(true))
            .expect("valid TLS client for the test server")
    }

    #[cfg(feature = "tls")]
    fn tls_state(&self) -> &TlsState {
        self.tls
            .as_ref()
            .expect("deadbolt-testkit: this server was not built with .tls(true)")
    }

    /// The server's working directory (holds `redis.log` and any persistence files).
    pub fn dir(&self) -> &Path {
        &self.dir.0
    }

    /// Process id of the server, `None` after [`stop`](Self::stop).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kill the server (SIGKILL) and wait for it to exit. Does nothing if already stopped.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stop the server if it is running, then start it again on the same port with the same
    /// directory and configuration, and wait until it answers.
    ///
    /// Without persistence all data is gone afterwards.
    ///
    /// # Errors
    ///
    /// If the server cannot be started again (for example the port was taken by someone else
    /// in the meantime and stayed taken for about 10 s).
    pub fn restart(&mut self) -> io::Result<()> {
        self.stop();
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            match self.spawn_and_wait() {
                Err(e) if e.kind() == io::ErrorKind::AddrInUse && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                other => return other,
            }
        }
    }

    /// Freeze the server process (SIGSTOP): connections stay open but nothing is answered.
    pub fn pause(&self) {
        self.signal(Signal::SIGSTOP);
    }

    /// Let a paused server continue (SIGCONT).
    pub fn resume(&self) {
        self.signal(Signal::SIGCONT);
    }

    fn signal(&self, sig: Signal) {
        if let Some(pid) = self.pid().and_then(|p| i32::try_from(p).ok()) {
            let _ = kill(Pid::from_raw(pid), sig);
        }
    }

    /// Whether the server process is alive (a paused server counts as running).
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(None)) => true,
            Some(Ok(Some(_)) | Err(_)) | None => false,
        }
    }

    /// A plain (RESP2) `redis::Client` for this server.
    ///
    /// # Panics
    ///
    /// Never in practice: the URL is always valid.
    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("valid redis URL")
    }

    /// A new multiplexed async connection to this server.
    ///
    /// # Panics
    ///
    /// If the connection cannot be established.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call leaves at most an unused connection behind.
    pub async fn conn(&self) -> redis::aio::MultiplexedConnection {
        // Commands of a test, not of deadbolt: bounded by the test's own
        // bounds (HANG), not redis-rs's 500 ms default, which a loaded host
        // exceeds (a raw GET timed out in a CI rehearsal with builds
        // running beside it).
        let config = redis::AsyncConnectionConfig::new()
            .set_response_timeout(Some(std::time::Duration::from_secs(30)));
        match self
            .client()
            .get_multiplexed_async_connection_with_config(&config)
            .await
        {
            Ok(c) => c,
            Err(e) => panic!(
                "deadbolt-testkit: cannot connect to redis-server at {}: {e}",
                self.url()
            ),
        }
    }

    /// `INFO commandstats`, parsed: lowercased command name (e.g. `"evalsha"`, `"publish"`,
    /// `"ping"`, `"subscribe"`, `"client|setinfo"`) to number of calls since start or the last
    /// [`reset_stats`](Self::reset_stats).
    ///
    /// # Panics
    ///
    /// If the server cannot be reached.
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn commandstats(&self) -> HashMap<String, u64> {
        let mut conn = self.conn().await;
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("deadbolt-testkit: INFO commandstats failed: {e}"));
        parse_commandstats(&info)
    }

    /// How many `EVALSHA` calls the server ran since its statistics were last
    /// reset (from [`commandstats`](RedisServer::commandstats); 0 for none).
    ///
    /// # Panics
    /// As [`commandstats`](RedisServer::commandstats).
    pub async fn evalsha_calls(&self) -> u64 {
        self.commandstats()
            .await
            .get("evalsha")
            .copied()
            .unwrap_or(0)
    }

    /// Reset the server's statistics (`CONFIG RESETSTAT`), including command stats.
    ///
    /// # Panics
    ///
    /// If the server cannot be reached.
    ///
    /// # Cancel safety
    /// Cancel safe: the reset either ran or did not.
    pub async fn reset_stats(&self) {
        let mut conn = self.conn().await;
        let () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("deadbolt-testkit: CONFIG RESETSTAT failed: {e}"));
    }

    /// Wait until the server has at least `n` Pub/Sub channels of keys with
    /// subscribers (`PUBSUB CHANNELS` with a hash tag: every client's own
    /// channel, which it listens on from its start, is left out). The
    /// server offers no event for this, so it looks every 2 ms; panics
    /// after 20 s.
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn wait_for_channels(&self, n: usize) {
        let mut conn = self.conn().await;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let channels: Vec<String> = redis::cmd("PUBSUB")
                .arg("CHANNELS")
                .query_async(&mut conn)
                .await
                .unwrap_or_else(|e| panic!("deadbolt-testkit: PUBSUB CHANNELS failed: {e}"));
            if channels.iter().filter(|c| c.contains('{')).count() >= n {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "deadbolt-testkit: {n} channel(s) never appeared (have {channels:?})"
            );
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    }

    fn log_path(&self) -> PathBuf {
        self.dir.0.join("redis.log")
    }

    fn stderr_path(&self) -> PathBuf {
        self.dir.0.join("stderr.log")
    }

    /// Spawn the process on `self.port` and wait until it answers.
    /// `AddrInUse` means the port is taken; the child has been reaped in every error case.
    fn spawn_and_wait(&mut self) -> io::Result<()> {
        debug_assert!(self.child.is_none());
        let dir = self.dir.0.to_string_lossy().into_owned();
        let mut cmd = Command::new(&self.exe);
        if let Some(config) = &self.config.sentinel {
            let path = self.dir.0.join("sentinel.conf");
            if !path.exists() {
                fs::write(&path, config)?;
            }
            cmd.arg(path).arg("--sentinel");
        }
        cmd.arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--protected-mode", "no"])
            .args(["--daemonize", "no"])
            .arg("--dir")
            .arg(&dir)
            .arg("--logfile")
            .arg(self.log_path());
        if self.config.persistence {
            cmd.args(["--appendonly", "yes", "--appendfsync", "always"]);
        } else {
            cmd.args(["--appendonly", "no"]);
        }
        if let Some(bus) = self.cluster_port {
            cmd.args(["--cluster-enabled", "yes"])
                .arg("--cluster-config-file")
                .arg(self.dir.0.join("nodes.conf"))
                .arg("--cluster-port")
                .arg(bus.to_string());
        }
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            let auth = if self.config.tls_auth_clients {
                "yes"
            } else {
                "no"
            };
            cmd.arg("--tls-port")
                .arg(tls.port.to_string())
                .arg("--tls-cert-file")
                .arg(&tls.files.cert)
                .arg("--tls-key-file")
                .arg(&tls.files.key)
                .arg("--tls-ca-cert-file")
                .arg(&tls.files.ca)
                .args(["--tls-auth-clients", auth]);
        }
        for (name, value) in &self.config.args {
            cmd.arg(format!("--{name}")).arg(value);
        }
        let stderr = File::create(self.stderr_path())?;
        let stdout = stderr.try_clone()?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::from(stderr));
        let child = cmd.spawn().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot spawn {}: {e}", self.exe.display()),
            )
        })?;
        let pid = child.id();
        self.child = Some(child);
        match self.wait_ready(pid) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.stop();
                Err(e)
            }
        }
    }

    fn wait_ready(&mut self, pid: u32) -> io::Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().transpose())
                .transpose()?
            {
                self.child = None;
                let logs = self.logs();
                let kind = if logs.contains("Address already in use")
                    || logs.contains("Could not create server TCP listening socket")
                {
                    io::ErrorKind::AddrInUse
                } else {
                    io::ErrorKind::Other
                };
                return Err(io::Error::new(
                    kind,
                    format!(
                        "redis-server on port {} exited early ({status}); log:\n{logs}",
                        self.port
                    ),
                ));
            }
            if probe_server_pid(self.addr()) == Some(pid) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "redis-server on port {} did not answer within {READY_TIMEOUT:?}; log:\n{}",
                        self.port,
                        self.logs()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The last few KiB of stderr and the log file, for error messages.
    fn logs(&self) -> String {
        self.log_tail(4096)
    }

    /// The last `max` bytes (or a little less) of stderr and of the log file, for error
    /// messages.
    pub(crate) fn log_tail(&self, max: usize) -> String {
        let tail = |p: PathBuf| {
            let s = fs::read_to_string(&p).unwrap_or_default();
            let cut = s.len().saturating_sub(max);
            let cut = (cut..=s.len())
                .find(|&i| s.is_char_boundary(i))
                .unwrap_or(s.len());
            s[cut..].to_owned()
        };
        format!("{}{}", tail(self.stderr_path()), tail(self.log_path()))
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Ask whatever listens on `addr` for `INFO server` and return its `process_id`, so a server
/// started by another process on the same port is not mistaken for ours.
fn probe_server_pid(addr: SocketAddr) -> Option<u32> {
    let timeout = Duration::from_millis(500);
    let mut stream = TcpStream::connect_timeout(&addr, timeout).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    stream.set_write_timeout(Some(timeout)).ok()?;
    stream
        .write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
        .ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let len = loop {
        if let Some(n) = resp::frame_len(&buf, false).ok()? {
            break n;
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    // An error such as `-LOADING` means "not ready yet".
    if buf.first() != Some(&b'$') {
        return None;
    }
    String::from_utf8_lossy(&buf[..len])
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Parse the text of `INFO commandstats` into lowercased command name → calls.
pub fn parse_commandstats(info: &str) -> HashMap<String, u64> {
    commandstats_field(info, "calls")
}

/// One integer field (`calls`, `usec`, `failed_calls`, ...) of every line
/// of `INFO commandstats`, by lowercased command name.
pub fn commandstats_field(info: &str, field: &str) -> HashMap<String, u64> {
    info.lines()
        .filter_map(|line| {
            let rest = line.trim().strip_prefix("cmdstat_")?;
            let (name, fields) = rest.split_once(':')?;
            let value = fields
                .split(',')
                .find_map(|f| f.strip_prefix(field)?.strip_prefix('='))?
                .parse()
                .ok()?;
            Some((name.to_ascii_lowercase(), value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_commandstats() {
        let info = "# Commandstats\r\n\
            cmdstat_ping:calls=3,usec=5,usec_per_call=1.67,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_EVALSHA:calls=12,usec=50,usec_per_call=4.17,rejected_calls=0,failed_calls=1\r\n\
            cmdstat_client|setinfo:calls=2,usec=3,usec_per_call=1.50,rejected_calls=0,failed_calls=0\r\n";
        let stats = parse_commandstats(info);
        assert_eq!(stats.get("ping"), Some(&3));
        assert_eq!(stats.get("evalsha"), Some(&12));
        assert_eq!(stats.get("client|setinfo"), Some(&2));
        assert_eq!(stats.len(), 3);
    }

    #[test]
    fn free_ports_are_distinct() {
        let ports: HashSet<u16> = (0..50).map(|_| free_port()).collect();
        assert_eq!(ports.len(), 50);
    }
}
