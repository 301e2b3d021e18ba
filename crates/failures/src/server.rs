//! A throwaway redis-server whose wall clock can be made to jump.
//!
//! deadbolt-testkit's `RedisServer` takes no environment, so this starts
//! its own: `redis-server` on a free loopback port, in a fresh temporary
//! directory, with `LD_PRELOAD` of the clockjump shim (`clockjump/`,
//! built by `build.rs`) reading its offset from a file in that directory.
//! [`ClockServer::jump`] writes a new offset; the server's `TIME`, key
//! expiry and everything else that reads the wall clock move at once.
//! Killed and removed on drop.

use std::os::unix::fs::FileExt as _;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use crate::tempdir::TempDir;

/// The clockjump shim this crate was built with.
const CLOCKJUMP_SO: &str = env!("CLOCKJUMP_SO");

/// A redis-server with a movable wall clock.
#[derive(Debug)]
pub struct ClockServer {
    child: Child,
    port: u16,
    offset: Duration,
    dir: TempDir,
}

impl ClockServer {
    /// Starts the server (clock offset 0) and waits until it answers PING.
    ///
    /// # Errors
    /// When redis-server is missing or does not answer within 10 s.
    pub async fn start() -> anyhow::Result<ClockServer> {
        let bin = deadbolt_testkit::redis_server_path()
            .context("redis-server is not installed: run scripts/ensure-redis")?;
        let dir = TempDir::new("redis")?;
        let clock = dir.path().join("clock");
        std::fs::write(&clock, 0i64.to_le_bytes())?;
        let port = deadbolt_testkit::free_port();
        let log = std::fs::File::create(dir.path().join("redis.log"))?;
        let child = Command::new(bin)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir.path())
            .env("LD_PRELOAD", CLOCKJUMP_SO)
            .env("CLOCKJUMP_FILE", &clock)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("start redis-server")?;
        let mut s = ClockServer {
            child,
            port,
            offset: Duration::ZERO,
            dir,
        };
        s.wait_ready().await?;
        Ok(s)
    }

    /// PING until it answers: nothing to wait on before the port opens.
    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let client = redis::Client::open(self.url())?;
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!("redis-server exited ({status}) at start");
            }
            if let Ok(mut c) = client.get_multiplexed_async_connection().await {
                if redis::cmd("PING")
                    .query_async::<String>(&mut c)
                    .await
                    .is_ok()
                {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                bail!("redis-server on port {} did not answer in 10 s", self.port);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The loopback address it listens on.
    pub fn addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Moves the server's wall clock `by` further forward (offsets add
    /// up), at once.
    ///
    /// # Errors
    /// When the offset file cannot be written.
    pub fn jump(&mut self, by: Duration) -> anyhow::Result<()> {
        self.offset += by;
        let ms = i64::try_from(self.offset.as_millis()).context("offset too large")?;
        // One aligned 8-byte write into the page the shim has mapped.
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(self.dir.path().join("clock"))?;
        f.write_all_at(&ms.to_le_bytes(), 0)?;
        Ok(())
    }
}

impl Drop for ClockServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
