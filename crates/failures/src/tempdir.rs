//! A fresh directory under the system temp dir, removed on drop.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// A directory made for one server and removed (with everything in it)
/// when dropped.
#[derive(Debug)]
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    /// Makes `<tmp>/deadbolt-failures-<what>-<pid>-<n>`.
    pub(crate) fn new(what: &str) -> std::io::Result<TempDir> {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "deadbolt-failures-{what}-{}-{n}",
            std::process::id()
        ));
        // A directory left by a killed run with the same pid: start clean.
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path)?;
        Ok(TempDir(path))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
