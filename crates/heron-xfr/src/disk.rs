//! Files made durable many at a time: the kept copies of secondary zones
//! ([`crate::secondary::keeper`]) and the journal files
//! ([`crate::primary::journal_files`]).
//!
//! A writer thread writes a batch (new versions into `.tmp` files,
//! appends in place), then [`install`] makes the lot durable with one
//! `syncfs` per folder, renames the `.tmp` files over their targets and
//! syncs each folder. After a crash every file is its old or its new
//! version, and 100,000 files cost a handful of syncs instead of one each.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::OsStr;
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

/// Folders with at least this many of the paths asked about are listed
/// rather than asked about path by path.
const LIST_FROM: usize = 16;

/// Which of `paths` exist. Where many are in one folder, it is listed
/// once instead of looking each path up: with 100,000 zones in a folder
/// and no journal files yet, startup does one listing, not 100,000 failed
/// lookups.
pub(crate) fn existing<'p>(paths: impl IntoIterator<Item = &'p Path>) -> HashSet<PathBuf> {
    let mut by_folder: HashMap<PathBuf, Vec<&Path>> = HashMap::new();
    for path in paths {
        by_folder.entry(folder(path)).or_default().push(path);
    }
    let mut found = HashSet::new();
    for (dir, paths) in by_folder {
        if paths.len() < LIST_FROM {
            found.extend(paths.iter().filter(|p| p.exists()).map(|p| p.to_path_buf()));
            continue;
        }
        let wanted: HashMap<&OsStr, &Path> = paths
            .iter()
            .filter_map(|p| Some((p.file_name()?, *p)))
            .collect();
        let Ok(listing) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in listing.flatten() {
            if let Some(path) = wanted.get(entry.file_name().as_os_str()) {
                found.insert(path.to_path_buf());
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn existing_files_are_found_whether_their_folder_is_listed_or_not() {
        let dir = tempfile::tempdir().unwrap();
        let many = dir.path().join("many");
        let few = dir.path().join("few");
        std::fs::create_dir_all(&many).unwrap();
        std::fs::create_dir_all(&few).unwrap();
        let mut asked = Vec::new();
        let mut present = HashSet::new();
        for i in 0..100 {
            let p = many.join(format!("z{i}.jnl"));
            if i % 7 == 0 {
                std::fs::write(&p, "x").unwrap();
                present.insert(p.clone());
            }
            asked.push(p);
        }
        let lone = few.join("z.jnl");
        std::fs::write(&lone, "x").unwrap();
        present.insert(lone.clone());
        asked.push(lone);
        asked.push(few.join("absent.jnl"));
        asked.push(dir.path().join("no-such-folder").join("z.jnl"));
        std::fs::write(many.join("not-asked.jnl"), "x").unwrap();
        let found = existing(asked.iter().map(|p| p.as_path()));
        assert_eq!(found, present);
    }
}
