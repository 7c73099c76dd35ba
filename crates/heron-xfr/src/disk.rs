//! Files made durable many at a time: the kept copies of secondary zones
//! ([`crate::secondary::keeper`]) and the journal files
//! ([`crate::journal::files`]).
//!
//! A writer thread writes a batch (new versions into `.tmp` files,
//! appends in place), then [`install`] makes the lot durable with one
//! `syncfs` per folder (one `fsync` per file when they are few), renames
//! the `.tmp` files over their targets and syncs each folder. After a crash every file is its old or its new
//! version, and 100,000 files cost a handful of syncs instead of one each.

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// Whether the file at `path` is there and starts otherwise than
/// `prefix`, the start of every file of its kind Heron writes: then
/// another server's (BIND's `FILE.jnl` or `FILE.signed`), which Heron
/// never writes over, cuts or removes. No file, an empty one, or one cut
/// short within `prefix` (a crash while it was created) is Heron's.
pub(crate) fn starts_otherwise(path: &Path, prefix: &[u8]) -> io::Result<bool> {
    use std::io::Read;
    let file = match File::open(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        opened => opened?,
    };
    let mut start = Vec::with_capacity(prefix.len());
    file.take(prefix.len() as u64).read_to_end(&mut start)?;
    Ok(start[..] != prefix[..start.len()])
}

/// Where a new version of `path` is written before it replaces it.
pub(crate) fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".tmp");
    PathBuf::from(name)
}

/// The folder `path` is in (`.` for a bare file name).
pub(crate) fn folder(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Makes what was written to the `.tmp` files of `renamed`, to the files
/// `written` (created or removed) and to the existing files `appended`
/// durable, renames the `.tmp` files over `renamed`, and makes the
/// renames, creations and removals durable. An append changes no folder,
/// so a batch that only appends (a dynamic update's journal entry) costs
/// one sync of its file and none of its folder. If a sync fails nothing
/// is renamed: the files stay as they were.
pub(crate) fn install<'p>(
    renamed: &[&'p Path],
    written: &[&Path],
    appended: &[&Path],
) -> Installed<'p> {
    let changed = renamed.iter().chain(written);
    let folders: BTreeSet<&Path> = changed.map(|p| folder(p)).collect();
    if renamed.len() + written.len() + appended.len() <= SYNC_EACH_UP_TO {
        if !sync_each(renamed, written, appended) {
            return Installed::NotSynced;
        }
    } else {
        let mut every_folder = folders.clone();
        every_folder.extend(appended.iter().map(|p| folder(p)));
        if !sync_folders(&every_folder) {
            return Installed::NotSynced;
        }
    }
    let mut not_renamed = Vec::new();
    for path in renamed {
        if let Err(e) = std::fs::rename(tmp_path(path), path) {
            not_renamed.push((*path, format!("cannot replace it: {e}")));
        }
    }
    for dir in &folders {
        let _ = File::open(dir).and_then(|d| d.sync_all());
    }
    Installed::Synced(not_renamed)
}

/// What [`install`] did.
pub(crate) enum Installed<'p> {
    /// A file or folder could not be synced: nothing was renamed, the
    /// files are as they were.
    NotSynced,
    /// Durable, but for the files that could not be replaced by their
    /// new version (an immutable file, say), with why: they hold their
    /// old content (black-box finding: a journal whose replacement
    /// failed was said to be written, and the updates in it were lost).
    Synced(Vec<(&'p Path, String)>),
}

/// Up to this many files are synced one by one; more, with one `syncfs`
/// per folder. A `syncfs` also waits for whatever else was written to the
/// file system (another program's gigabytes): for the few journal files
/// of a batch of dynamic updates, one `fsync` each is far shorter.
const SYNC_EACH_UP_TO: usize = 64;

/// Syncs each file (the `.tmp` file of each of `renamed`); a file of
/// `written` that is gone was removed, which the folder's sync covers,
/// and what is not a regular file has nothing to sync.
fn sync_each(renamed: &[&Path], written: &[&Path], appended: &[&Path]) -> bool {
    let tmps: Vec<PathBuf> = renamed.iter().map(|p| tmp_path(p)).collect();
    let files = tmps.iter().map(|p| (p.as_path(), false));
    let written = written.iter().map(|p| (*p, true));
    let appended = appended.iter().map(|p| (*p, false));
    for (path, may_be_gone) in files.chain(written).chain(appended) {
        // Only a regular file has data to sync; opening anything else to
        // sync it (a FIFO put where a file goes) would wait for a writer.
        if std::fs::symlink_metadata(path).is_ok_and(|m| !m.is_file()) {
            continue;
        }
        match File::open(path).and_then(|f| f.sync_all()) {
            Ok(()) => {}
            Err(e) if may_be_gone && e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::error!("syncing {}: {e}; files stay as they were", path.display());
                return false;
            }
        }
    }
    true
}

fn sync_folders(folders: &BTreeSet<&Path>) -> bool {
    for dir in folders {
        if let Err(e) =
            File::open(dir).and_then(|d| rustix::fs::syncfs(&d).map_err(io::Error::from))
        {
            tracing::error!(
                "syncing {}: {e}; files there stay as they were",
                dir.display()
            );
            return false;
        }
    }
    true
}

/// Folders with at least this many of the paths asked about are listed
/// rather than asked about path by path.
const LIST_FROM: usize = 16;

/// The `items` whose file (`path_of`) exists, in their order. Where many
/// are in one folder, it is listed once instead of looking each file up:
/// with 100,000 zones in a folder and no journal files yet, startup does
/// one listing, not 100,000 failed lookups. Paths are compared as the
/// octets they are spelt with (hashing a `Path` parses it, which costs
/// more than the lookup it saves).
pub(crate) fn keep_existing<T>(items: Vec<T>, path_of: impl Fn(&T) -> &Path) -> Vec<T> {
    let mut exists = vec![false; items.len()];
    for (dir, indices) in by_folder(&items, &path_of) {
        if indices.len() < LIST_FROM {
            indices
                .iter()
                .for_each(|&i| exists[i] = path_of(&items[i]).exists());
            continue;
        }
        let mut by_name: HashMap<&OsStr, usize> = HashMap::with_capacity(indices.len());
        for i in indices {
            if let Some(name) = path_of(&items[i]).file_name() {
                by_name.insert(name, i);
            }
        }
        let Ok(listing) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in listing.flatten() {
            if let Some(&i) = by_name.get(entry.file_name().as_os_str()) {
                exists[i] = true;
            }
        }
    }
    let mut exists = exists.into_iter();
    items
        .into_iter()
        .filter(|_| exists.next() == Some(true))
        .collect()
}

/// The indices of `items` by the folder of their path. The paths of one
/// folder mostly come in a row: a folder is hashed only when it changes.
fn by_folder<'i, T>(items: &'i [T], path_of: &impl Fn(&T) -> &Path) -> Vec<(&'i Path, Vec<usize>)> {
    let mut folders: Vec<(&Path, Vec<usize>)> = Vec::new();
    let mut slot_of: HashMap<&OsStr, usize> = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        let dir = folder(path_of(item));
        let slot = match folders.last() {
            Some((last, _)) if last.as_os_str() == dir.as_os_str() => folders.len() - 1,
            _ => *slot_of.entry(dir.as_os_str()).or_insert_with(|| {
                folders.push((dir, Vec::new()));
                folders.len() - 1
            }),
        };
        folders[slot].1.push(i);
    }
    folders
}

/// `path` with `suffix` added, or, if a file is there already (a copy an
/// earlier failure set aside, not yet recovered), with `.1`, `.2`, ...
/// after it: a copy kept for the operator is never written over.
pub fn unused_name(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    let first = PathBuf::from(&name);
    if !first.exists() {
        return first;
    }
    (1..1000u32)
        .map(|n| {
            let mut numbered = name.clone();
            numbered.push(format!(".{n}"));
            PathBuf::from(numbered)
        })
        .find(|p| !p.exists())
        .unwrap_or(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn a_copy_set_aside_earlier_is_never_written_over() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("z.jnl");
        let first = unused_name(&journal, ".unapplied");
        assert_eq!(first, dir.path().join("z.jnl.unapplied"));
        std::fs::write(&first, "x").unwrap();
        let second = unused_name(&journal, ".unapplied");
        assert_eq!(second, dir.path().join("z.jnl.unapplied.1"));
        std::fs::write(&second, "y").unwrap();
        assert_eq!(
            unused_name(&journal, ".unapplied"),
            dir.path().join("z.jnl.unapplied.2")
        );
    }

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
        let found: HashSet<PathBuf> = keep_existing(asked, |p| p).into_iter().collect();
        assert_eq!(found, present);
    }
}
