//! Files that two zones, or a zone and a journal, would both use. Zones
//! that read one zone file are fine (parked domains); but a secondary's
//! kept copy, a journal, the zone file of a zone taking updates (written
//! back) and the files Heron keeps beside a zone's file (`FILE.signed`,
//! ...) are written to, so a file that is one of those and anything else
//! besides is a mistake: a transfer would overwrite another zone's
//! source, or a journal append to a zone file.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::OsString;
use std::fmt;
use std::path::{Component, Path, PathBuf};

use heron_proto::Name;

/// What a zone does with a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Use {
    /// Read: a primary zone's source.
    ZoneFile,
    /// Read, and written back after updates: the source of a primary
    /// zone that takes updates.
    UpdatedZoneFile,
    /// Written by each transfer: a secondary zone's copy.
    KeptCopy,
    /// Appended to: a zone's IXFR history.
    Journal,
    /// Written by every change: a catalog zone Heron generates.
    GeneratedCatalog,
    /// Written by every signing: a signed zone's signed copy
    /// ([`SIGNED_COPY`]).
    SignedCopy,
    /// Written by the signing: where a signed zone's keys are
    /// ([`KEY_NOTE`]).
    KeyNote,
    /// Written at a restart: the updates a signed zone carried over
    /// ([`CARRIED`], beside its journal).
    Carried,
    /// Written by a reload that does not take an edit of the file of a
    /// zone taking updates ([`REJECTED`]).
    Rejected,
    /// Written by `heron ctl freeze` ([`FROZEN`]).
    FreezeMark,
    /// Written when the zone changes under the same serial ([`REUSED`],
    /// beside its journal).
    ReusedMark,
    /// Written by each version of a consumed catalog: the version taken
    /// (`FILE.consumed`) and the members it lists but does not own
    /// (`FILE.ceded`), beside its kept copy.
    CatalogState,
    /// Written by each signed UPDATE answered ahead of the clock
    /// ([`SEEN`], beside its journal).
    SeenNotes,
    /// Where a file Heron writes is written first, then renamed over it
    /// (`FILE.tmp`): another zone's file there is replaced (black-box
    /// finding BF-5).
    Temporary,
}

/// Beside a signed zone's file (or kept copy): its signed version.
pub const SIGNED_COPY: &str = ".signed";
/// Beside a signed zone's file: the key directory its keys are in.
pub const KEY_NOTE: &str = ".key-directory";
/// Beside a signed zone's journal: what a restart carried over.
pub const CARRIED: &str = ".carried";
/// Beside a zone's file: its edit a reload did not take.
pub const REJECTED: &str = ".rejected";
/// Beside a frozen zone's file: the serial and text the freeze wrote
/// (`heron ctl freeze`, removed by the thaw).
pub const FROZEN: &str = ".frozen";
/// Beside a zone's journal: the serial it was served with two contents
/// under, from which no IXFR starts.
pub const REUSED: &str = heron_xfr::journal::files::REUSED_MARK;
/// Beside a zone's journal: the signed UPDATEs answered that a restart
/// would not refuse (`runtime::update_seen`).
pub const SEEN: &str = ".seen";
/// Beside every file Heron writes whole: the new version, until renamed.
pub const TEMPORARY: &str = ".tmp";

/// The file named as `file` with `suffix` added (`FILE.signed`): where
/// Heron keeps what it writes for a zone beside its file.
pub fn beside(file: &Path, suffix: &str) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Writes `text` to `path` whole or not at all: to `path`'s [`TEMPORARY`]
/// file, then renamed over it (a crash leaves the old file or the new).
pub fn replace_file(path: &Path, text: &[u8]) -> std::io::Result<()> {
    let tmp = beside(path, TEMPORARY);
    let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        // A write cut short (a full disk, a file-size limit) leaves none.
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

impl Use {
    fn is_written(self) -> bool {
        self != Use::ZoneFile
    }
}

impl fmt::Display for Use {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Use::ZoneFile => "zone file",
            Use::UpdatedZoneFile => "zone file (written back after updates)",
            Use::KeptCopy => "kept copy (rewritten by every transfer)",
            Use::Journal => "journal (written by every change)",
            Use::GeneratedCatalog => "generated catalog (written by every change)",
            Use::SignedCopy => "signed copy (written by every signing)",
            Use::KeyNote => "key directory note (written by the signing)",
            Use::Carried => "updates carried over (written at a restart)",
            Use::Rejected => "rejected edit (written by a reload)",
            Use::FreezeMark => "freeze mark (written by heron ctl freeze)",
            Use::ReusedMark => "reused serial mark (written when the serial did not move)",
            Use::CatalogState => "consumed catalog state (written by every version of it)",
            Use::SeenNotes => "updates answered (written by signed updates)",
            Use::Temporary => "temporary file (written, then renamed over a file Heron writes)",
        })
    }
}

/// A zone, what it does with a file, and the file.
pub type FileUse<'a> = (&'a Name, Use, Cow<'a, Path>);

/// One error per file that a zone writes and something else uses too,
/// naming the zones, the path and what to do. Paths are compared as
/// [`Paths::key`] resolves them.
pub fn conflicts<'a>(uses: impl IntoIterator<Item = FileUse<'a>>) -> Vec<String> {
    let mut paths = Paths::default();
    // Keyed by the octets: hashing a Path walks its components, which cost
    // more than the rest of the check for 100,000 zones.
    let mut by_file: HashMap<OsString, Vec<FileUse>> = HashMap::new();
    for (zone, what, path) in uses {
        let users = by_file
            .entry(paths.key(&path).into_os_string())
            .or_default();
        // A zone configured twice (an error of its own) names each of its
        // files twice: no conflict of the zone with itself (black-box
        // finding DJ-6).
        let same = |(z, w, _): &FileUse| *w == what && z.eq(&zone);
        if !users.iter().any(same) {
            users.push((zone, what, path));
        }
    }
    let mut errors: Vec<String> = by_file
        .into_values()
        .filter(|users| users.len() > 1 && users.iter().any(|(_, what, _)| what.is_written()))
        .map(|users| {
            let listed: Vec<String> = users
                .iter()
                .map(|(zone, what, _)| format!("zone {zone} ({what})"))
                .collect();
            format!(
                "{} is used by {}: a file a zone writes must be used by nothing else; \
                 give each its own file",
                users[0].2.display(),
                listed.join(" and ")
            )
        })
        .collect();
    errors.sort();
    errors
}

/// Of `files`, those that resolve (as [`Paths::key`] resolves paths) to
/// one of `others`: each with the index of that one.
pub fn among<'a, T>(
    files: impl IntoIterator<Item = (T, &'a Path)>,
    others: &[&Path],
) -> Vec<(T, &'a Path, usize)> {
    let mut paths = Paths::default();
    let keys: Vec<PathBuf> = others.iter().map(|other| paths.key(other)).collect();
    let mut found = Vec::new();
    for (tag, file) in files {
        let key = paths.key(file);
        found.extend(keys.iter().position(|k| *k == key).map(|i| (tag, file, i)));
    }
    found
}

/// The names of the files among `used` in each of `folders`, as octets:
/// a file is in a folder if its own folder resolves to it as
/// [`Paths::key`] resolves paths (the file itself is not followed if it
/// is a symbolic link: deleting that deletes the link).
pub fn names_in<'a>(
    folders: &[&Path],
    used: impl IntoIterator<Item = &'a Path>,
) -> Vec<BTreeSet<Vec<u8>>> {
    use std::os::unix::ffi::OsStrExt;
    let mut paths = Paths::default();
    let keys: Vec<PathBuf> = folders.iter().map(|folder| paths.key(folder)).collect();
    let mut names = vec![BTreeSet::new(); folders.len()];
    for path in used {
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            continue;
        };
        let dir = paths.key(dir);
        for (i, _) in keys.iter().enumerate().filter(|(_, key)| **key == dir) {
            names[i].insert(name.as_bytes().to_vec());
        }
    }
    names
}

/// Resolves paths for comparison: a file that exists, or whose folder
/// does, by its canonical path; otherwise by its absolute path with `.`
/// and `..` taken out. A folder is resolved once and listed once (for its
/// symbolic links), so that 100,000 zone files in a few folders cost a few
/// system calls, not one per file.
#[derive(Default)]
struct Paths {
    folders: HashMap<OsString, Folder>,
    /// Asked once: relative paths are common (a configuration named
    /// without its folder).
    cwd: Option<PathBuf>,
}

struct Folder {
    canonical: PathBuf,
    /// Entries that are symbolic links: resolved one by one.
    links: HashSet<OsString>,
}

impl Paths {
    fn key(&mut self, path: &Path) -> PathBuf {
        let cwd = self
            .cwd
            .get_or_insert_with(|| std::env::current_dir().unwrap_or_default());
        let path = absolute(path, cwd);
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return path;
        };
        let folder = self
            .folders
            .entry(dir.as_os_str().to_owned())
            .or_insert_with(|| Folder::read(dir));
        if folder.links.contains(name)
            && let Ok(target) = std::fs::canonicalize(&path)
        {
            return target;
        }
        folder.canonical.join(name)
    }
}

impl Folder {
    fn read(dir: &Path) -> Folder {
        let links = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|entry| entry.file_type().is_ok_and(|t| t.is_symlink()))
            .map(|entry| entry.file_name())
            .collect();
        Folder {
            canonical: std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf()),
            links,
        }
    }
}

/// `path` made absolute (from `cwd`), with `.` and `..` taken out by
/// their text.
fn absolute(path: &Path, cwd: &Path) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let joined = cwd.join(path);
    let text = joined.as_os_str().as_bytes();
    let has_dots = text.windows(2).any(|w| w == b"/." || w == b"//");
    if !has_dots {
        return joined; // the usual case, without rebuilding it
    }
    let mut out = PathBuf::new();
    for part in joined.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zone configured twice names its files twice: that is said once,
    /// as the zone configured twice, not as the zone sharing files with
    /// itself (black-box finding DJ-6); two uses of one path by one zone
    /// are still a conflict.
    #[test]
    fn a_zone_named_twice_does_not_conflict_with_itself() {
        let zone = Name::parse("cat.test").unwrap();
        let same = Name::parse("CAT.test").unwrap();
        let path = |p: &'static str| Cow::Borrowed(Path::new(p));
        let twice = [
            (&zone, Use::ReusedMark, path("/k/cat.test.zone.jnl.reused")),
            (&same, Use::ReusedMark, path("/k/cat.test.zone.jnl.reused")),
        ];
        assert!(conflicts(twice).is_empty());
        let two_uses = [
            (&zone, Use::KeptCopy, path("/k/cat.test.zone")),
            (&zone, Use::Journal, path("/k/cat.test.zone")),
        ];
        assert_eq!(conflicts(two_uses).len(), 1);
    }

    #[test]
    fn paths_that_name_one_file_compare_equal() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("c.zone");
        std::fs::write(&real, "").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link.zone")).unwrap();
        std::os::unix::fs::symlink(dir.path(), dir.path().join("dirlink")).unwrap();
        let mut paths = Paths::default();
        let want = std::fs::canonicalize(&real).unwrap();
        for same in [
            "c.zone",
            "sub/../c.zone",
            "./c.zone",
            "link.zone",
            "dirlink/c.zone",
        ] {
            assert_eq!(paths.key(&dir.path().join(same)), want, "{same}");
        }
        // Files that do not exist yet: by their folder, or by their text.
        let missing = std::fs::canonicalize(dir.path()).unwrap().join("new.zone");
        assert_eq!(paths.key(&dir.path().join("dirlink/new.zone")), missing);
        assert_eq!(paths.key(&dir.path().join("sub//../c.zone")), want);
        assert_eq!(
            paths.key(Path::new("/nowhere/a/../b/./kept")),
            Path::new("/nowhere/b/kept")
        );
    }

    #[test]
    fn the_files_in_a_folder_are_found_by_any_path_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let members = dir.path().join("members");
        std::fs::create_dir_all(members.join("sub")).unwrap();
        std::os::unix::fs::symlink(&members, dir.path().join("link")).unwrap();
        let used = [
            members.join("a.zone"),
            dir.path().join("link/b.zone"),
            members.join("sub/../c.zone"),
            members.join("sub/d.zone"),
            dir.path().join("e.zone"),
        ];
        let names = names_in(
            &[&members, &dir.path().join("link/sub")],
            used.iter().map(|p| &**p),
        );
        let want: Vec<Vec<u8>> = ["a.zone", "b.zone", "c.zone"].map(|n| n.into()).into();
        assert_eq!(names[0].iter().cloned().collect::<Vec<_>>(), want);
        assert_eq!(names[1].iter().collect::<Vec<_>>(), [b"d.zone"]);
    }
}
