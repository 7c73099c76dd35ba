//! Files made durable many at a time: the kept copies of secondary zones
//! ([`crate::secondary::keeper`]).
//!
//! A writer thread writes a batch (new versions into `.tmp` files,
//! appends in place), then [`install`] makes the lot durable with one
//! `syncfs` per folder, renames the `.tmp` files over their targets and
//! syncs each folder. After a crash every file is its old or its new
//! version, and 100,000 files cost a handful of syncs instead of one each.

use std::collections::BTreeSet;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// Where a new version of `path` is written before it replaces it.
pub(crate) fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".tmp");
    PathBuf::from(name)
}

/// The folder `path` is in (`.` for a bare file name).
pub(crate) fn folder(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Makes what was written to the `.tmp` files of `renamed` and to the
/// files `written` (appended to, created or removed) durable, renames the
/// `.tmp` files over `renamed`, and makes the renames durable. If a sync
/// fails nothing is renamed: the files stay as they were.
pub(crate) fn install(renamed: &[&Path], written: &[&Path]) {
    let all = renamed.iter().chain(written);
    let folders: BTreeSet<PathBuf> = all.map(|p| folder(p)).collect();
    for dir in &folders {
        if let Err(e) =
            File::open(dir).and_then(|d| rustix::fs::syncfs(&d).map_err(io::Error::from))
        {
            tracing::error!(
                "syncing {}: {e}; files there stay as they were",
                dir.display()
            );
            return;
        }
    }
    for path in renamed {
        if let Err(e) = std::fs::rename(tmp_path(path), path) {
            tracing::error!("replacing {}: {e}", path.display());
        }
    }
    for dir in &folders {
        let _ = File::open(dir).and_then(|d| d.sync_all());
    }
}
