//! The members' folders each consumed catalog has kept copies in, noted
//! beside its kept copy (`FILE.members-dirs`, a folder a line), so that a
//! start finds copies a folder no longer configured still holds: those
//! of a restart with another `members-dir`, or of a crash in the middle
//! of a reload's move. Each such copy is moved to where its member is
//! kept now when it is newer than the copy there, else deleted; never
//! left to be served later, older, when the folder is used again
//! (black-box finding BF-7: serial 2 served, then 1 from an old folder).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use heron_xfr::secondary::refresh::SecondaryZone;

use crate::config::shared_files::beside;

/// Beside a consumed catalog's kept copy: its members' folders.
pub(crate) const MEMBER_DIRS: &str = ".members-dirs";

/// The folders noted for the catalog kept at `catalog_file`.
fn noted(catalog_file: &Path) -> BTreeSet<PathBuf> {
    let text = std::fs::read_to_string(beside(catalog_file, MEMBER_DIRS)).unwrap_or_default();
    text.lines()
        .filter(|l| !l.is_empty())
        .map(PathBuf::from)
        .collect()
}

/// Notes `dirs` (with those noted already, if `keep`) for the catalog
/// kept at `catalog_file`.
pub(crate) fn note(catalog_file: &Path, dirs: &[PathBuf], keep: bool) {
    let mut all = if keep {
        noted(catalog_file)
    } else {
        BTreeSet::new()
    };
    all.extend(dirs.iter().cloned());
    let text: String = all.iter().map(|d| format!("{}\n", d.display())).collect();
    let path = beside(catalog_file, MEMBER_DIRS);
    // Before the catalog's first copy, its folder may not be made yet.
    if let Some(parent) = path.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    if let Err(e) = crate::config::shared_files::replace_file(&path, text.as_bytes()) {
        tracing::warn!(
            "cannot write {}: {e}; copies left in an old members-dir may not be found",
            path.display()
        );
    }
}

/// At a start: the copies of `members` in folders noted for the catalog
/// kept at `catalog_file` and not among `dirs` (those configured now)
/// are taken up or deleted, and the note says `dirs` alone.
pub(crate) fn take_up_left_copies(
    catalog_file: &Path,
    dirs: &[PathBuf],
    members: &[&SecondaryZone],
) {
    let old: Vec<PathBuf> = (noted(catalog_file).into_iter())
        .filter(|d| !dirs.contains(d))
        .collect();
    if !old.is_empty() {
        let moved = members.iter().filter(|m| take_up(&old, m)).count();
        tracing::info!(
            catalog_file = %catalog_file.display(),
            moved,
            "member copies in folders no longer configured ({}) taken up where newer, the rest deleted",
            old.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
        );
    }
    note(catalog_file, dirs, false);
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Moves the newest copy of `member` in `old` over its kept path if that
/// is older or missing; deletes the others. True if one was moved.
fn take_up(old: &[PathBuf], member: &SecondaryZone) -> bool {
    let path = member.kept_path();
    let Some(name) = path.file_name() else {
        return false;
    };
    let mut found: Vec<(SystemTime, PathBuf)> = (old.iter())
        .map(|dir| dir.join(name))
        .filter_map(|p| Some((modified(&p)?, p)))
        .collect();
    found.sort();
    let newest = found.pop();
    let mut moved = false;
    if let Some((at, from)) = newest {
        match modified(&path).is_none_or(|here| here < at) {
            true => moved = move_copy(&from, &path),
            false => remove_copy(&from),
        }
    }
    for (_, left) in found {
        remove_copy(&left);
    }
    moved
}

/// The copy at `from` (and its journal) in place of the one at `to`.
fn move_copy(from: &Path, to: &Path) -> bool {
    if let Some(parent) = to.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    let (from_jnl, to_jnl) = (beside(from, ".jnl"), beside(to, ".jnl"));
    let _ = std::fs::remove_file(&to_jnl);
    match std::fs::rename(from, to) {
        Ok(()) => {
            let _ = std::fs::rename(&from_jnl, &to_jnl);
            true
        }
        Err(e) => {
            tracing::warn!(
                "cannot move {} to {}: {e}; deleted",
                from.display(),
                to.display()
            );
            remove_copy(from);
            false
        }
    }
}

fn remove_copy(path: &Path) {
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_file(beside(path, ".jnl"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_xfr::secondary::kept_file::KeptFile;

    fn member(dir: &Path, origin: &str) -> SecondaryZone {
        SecondaryZone {
            origin: heron_proto::Name::parse(origin).unwrap(),
            primaries: Default::default(),
            file: KeptFile::pattern(dir.join("{zone}.zone").display().to_string()),
            catalog: None,
        }
    }

    #[test]
    fn copies_in_an_old_folder_are_taken_up_when_newer_and_deleted_else() {
        let root = tempfile::tempdir().unwrap();
        let (old, new) = (root.path().join("old"), root.path().join("new"));
        std::fs::create_dir_all(&old).unwrap();
        std::fs::create_dir_all(&new).unwrap();
        let catalog = root.path().join("cat.zone");
        note(&catalog, std::slice::from_ref(&old), false);
        // a: only in the old folder; b: older there than here; c: newer there.
        std::fs::write(old.join("a.test.zone"), "a-old").unwrap();
        std::fs::write(old.join("a.test.zone.jnl"), "a-jnl").unwrap();
        std::fs::write(old.join("b.test.zone"), "b-old").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(new.join("b.test.zone"), "b-new").unwrap();
        std::fs::write(new.join("c.test.zone"), "c-stale").unwrap();
        std::fs::write(new.join("c.test.zone.jnl"), "c-stale-jnl").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(old.join("c.test.zone"), "c-fresh").unwrap();
        let members = [
            member(&new, "a.test"),
            member(&new, "b.test"),
            member(&new, "c.test"),
        ];
        let refs: Vec<&SecondaryZone> = members.iter().collect();
        take_up_left_copies(&catalog, std::slice::from_ref(&new), &refs);
        let read = |p: PathBuf| std::fs::read_to_string(p).ok();
        assert_eq!(read(new.join("a.test.zone")).as_deref(), Some("a-old"));
        assert_eq!(read(new.join("a.test.zone.jnl")).as_deref(), Some("a-jnl"));
        assert_eq!(read(new.join("b.test.zone")).as_deref(), Some("b-new"));
        assert_eq!(read(new.join("c.test.zone")).as_deref(), Some("c-fresh"));
        assert_eq!(
            read(new.join("c.test.zone.jnl")),
            None,
            "the stale copy's journal went"
        );
        let left: Vec<_> = std::fs::read_dir(&old).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
        assert_eq!(noted(&catalog), BTreeSet::from([new]));
    }
}
