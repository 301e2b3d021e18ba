//! A throwaway PostgreSQL server: `initdb` into a fresh temporary directory,
//! then `postgres` on a free loopback port with its socket in that
//! directory, stopped (immediate shutdown) and removed on drop.
//!
//! `postgres` refuses to run as root. As root, both programs run as
//! `nobody` (uid and gid 65534, through `setpriv`, which executes the
//! program in place, so the child is the postmaster itself), and the
//! directory is handed to that user first. As any other user they run
//! directly. Durability is off (`fsync`, `synchronous_commit`,
//! `full_page_writes`): the data lives as long as the run.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::tempdir::TempDir;

/// The uid and gid PostgreSQL runs as when this process is root.
const NOBODY: u32 = 65534;

/// The directory holding `initdb` and `postgres`: `$DEADBOLT_PG_BIN` when
/// set (and then only it), else the newest `/usr/lib/postgresql/<version>/bin`
/// (Debian's layout), else the directory of an `initdb` on `PATH`. `None`
/// when there is none.
pub fn pg_bin_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("DEADBOLT_PG_BIN") {
        let dir = PathBuf::from(dir);
        return dir.join("initdb").exists().then_some(dir);
    }
    let mut debian: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    debian.sort();
    if let Some((_, bin)) = debian.pop() {
        return Some(bin);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .find(|p| p.join("initdb").exists() && p.join("postgres").exists())
    })
}

/// A running PostgreSQL server, stopped and deleted on drop.
#[derive(Debug)]
pub struct Postgres {
    child: Child,
    port: u16,
    dir: TempDir,
}

impl Postgres {
    /// Runs `initdb` and starts `postgres`, and waits until it accepts a
    /// connection.
    ///
    /// # Errors
    /// When the binaries are missing ([`pg_bin_dir`]), `initdb` fails, or
    /// the server does not accept connections within 30 s (the error
    /// carries the end of its log).
    pub async fn start() -> anyhow::Result<Postgres> {
        let bin = pg_bin_dir().context(
            "PostgreSQL is not installed (no initdb): run scripts/ensure-postgres, \
             or set DEADBOLT_PG_BIN to the directory holding initdb and postgres",
        )?;
        let dir = TempDir::new("pg")?;
        let as_root = nix::unistd::geteuid().is_root();
        if as_root {
            std::os::unix::fs::chown(dir.path(), Some(NOBODY), Some(NOBODY))
                .context("hand the data directory to nobody")?;
        }
        let data = dir.path().join("data");
        let log = dir.path().join("initdb.log");
        let out = Self::command(&bin.join("initdb"), as_root)
            .arg("-D")
            .arg(&data)
            .args(["-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C"])
            .arg("--no-sync")
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .output()
            .context("run initdb")?;
        if !out.status.success() {
            std::fs::write(&log, &out.stderr).ok();
            bail!(
                "initdb failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let port = deadbolt_testkit::free_port();
        let log = std::fs::File::create(dir.path().join("postgres.log"))?;
        if as_root {
            std::os::unix::fs::chown(dir.path().join("postgres.log"), Some(NOBODY), Some(NOBODY))?;
        }
        let child = Self::command(&bin.join("postgres"), as_root)
            .arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string(), "-h", "127.0.0.1", "-k"])
            .arg(dir.path())
            .args(["-c", "fsync=off", "-c", "synchronous_commit=off"])
            .args(["-c", "full_page_writes=off", "-c", "max_connections=200"])
            .args([
                "-c",
                "shared_buffers=64MB",
                "-c",
                "log_min_messages=warning",
            ])
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("start postgres")?;
        let mut pg = Postgres { child, port, dir };
        pg.wait_ready().await?;
        Ok(pg)
    }

    fn command(program: &std::path::Path, as_root: bool) -> Command {
        if as_root {
            let mut c = Command::new("setpriv");
            c.args([
                &format!("--reuid={NOBODY}"),
                &format!("--regid={NOBODY}"),
                "--clear-groups",
                "--",
            ])
            .arg(program);
            c
        } else {
            Command::new(program)
        }
    }

    /// Connects until the server answers; there is no event to wait on
    /// before the socket is open, so this retries every 50 ms (30 s bound).
    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!("postgres exited ({status}) at start: {}", self.log_tail());
            }
            match tokio_postgres::connect(&self.conn_str(), tokio_postgres::NoTls).await {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() > deadline => {
                    bail!(
                        "postgres did not accept connections in 30 s ({e}): {}",
                        self.log_tail()
                    )
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// The loopback port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A libpq-style connection string for the `postgres` database.
    pub fn conn_str(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres connect_timeout=5",
            self.port
        )
    }

    /// A new connection; its driver task runs on the current runtime and
    /// ends when the client is dropped.
    ///
    /// # Errors
    /// When the server cannot be reached.
    pub async fn connect(&self) -> anyhow::Result<tokio_postgres::Client> {
        let (client, conn) = tokio_postgres::connect(&self.conn_str(), tokio_postgres::NoTls)
            .await
            .context("connect to postgres")?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(client)
    }
}

impl Drop for Postgres {
    /// SIGQUIT is PostgreSQL's immediate shutdown: the postmaster stops its
    /// backends and exits. SIGKILL follows if it is still there after 5 s.
    fn drop(&mut self) {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).unwrap_or(i32::MAX));
        let _ = kill(pid, Signal::SIGQUIT);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
