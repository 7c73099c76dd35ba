//! `[server] user` and `group`: whom the server becomes once its sockets
//! are bound, and whether it can still write what it writes later.

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use heron_sys::privileges::{self, Ids};

/// The ids of `user`, with `group`'s gid in place of the user's own
/// group when one is named.
pub fn resolve(user: &str, group: Option<&str>) -> Result<Ids, String> {
    let mut ids = privileges::user(user).map_err(|e| format!("user '{user}': {e}"))?;
    if let Some(group) = group {
        ids.gid = privileges::group(group).map_err(|e| format!("group '{group}': {e}"))?;
    }
    Ok(ids)
}

/// A warning for each folder, among those of `files`, that the user of
/// `ids` can not write: the server writes kept copies of secondary zones,
/// journals and its control socket there after it dropped root (by
/// renaming a new file into place, which needs the folder, not the file).
pub fn unwritable_folders<'a>(
    files: impl IntoIterator<Item = &'a Path>,
    ids: Ids,
    groups: &[u32],
) -> Vec<String> {
    let folders: BTreeSet<&Path> = files
        .into_iter()
        .map(|f| {
            f.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
        })
        .collect();
    folders
        .into_iter()
        .filter(|folder| !writable_by(folder, ids, groups))
        .map(|folder| {
            format!(
                "{} is not writable by uid {} (the [server] user): the files Heron writes \
                 there after dropping root (kept copies, journals, signed copies, keys, the control socket) would \
                 fail; make the folder belong to that user",
                folder.display(),
                ids.uid
            )
        })
        .collect()
}

/// Hands the key directories the start made or wrote as root (a signed
/// zone's first signing: its keys, state and serial files) to the user
/// about to run the server, so that every later signing, as that user,
/// can read and write them (BIND and Knot sign as the user from the
/// start). Only what root owns is handed over; symbolic links are not
/// followed. Failures are said, not fatal.
pub fn hand_over_key_directories<'a>(dirs: impl IntoIterator<Item = &'a Path>, ids: Ids) {
    let mut seen = BTreeSet::new();
    for dir in dirs.into_iter().filter(|d| seen.insert(*d)) {
        let entries = std::fs::read_dir(dir).into_iter().flatten().flatten();
        let paths = std::iter::once(dir.to_path_buf()).chain(entries.map(|e| e.path()));
        for path in paths {
            let root_owned = std::fs::symlink_metadata(&path).is_ok_and(|m| m.uid() == 0);
            if root_owned {
                hand_over(&path, ids);
            }
        }
    }
}

/// Hands `path` (made by root) to the user about to run the server; a
/// failure is said, not fatal.
pub fn hand_over(path: &Path, ids: Ids) {
    if let Err(e) = std::os::unix::fs::lchown(path, Some(ids.uid), Some(ids.gid)) {
        tracing::warn!("cannot hand {} to uid {}: {e}", path.display(), ids.uid);
    }
}

/// Unreadable files said one by one; the rest are counted.
const UNREADABLE_SAID: usize = 10;

/// Warnings for the `files` this process (once it dropped root) cannot
/// open: the start read them as root, but a reload reads them again as
/// the user and would fail on each.
pub fn unreadable(files: &[std::path::PathBuf], user: &str) -> Vec<String> {
    // A file not there failed at the start too, and was said then.
    let failed: Vec<(&Path, std::io::Error)> = (files.iter())
        .filter_map(|f| std::fs::File::open(f).err().map(|e| (f.as_path(), e)))
        .filter(|(_, e)| e.kind() != std::io::ErrorKind::NotFound)
        .collect();
    let mut said: Vec<String> = (failed.iter().take(UNREADABLE_SAID))
        .map(|(file, e)| {
            format!(
                "{}: {e} as user {user}: it was read at the start, as root, but a reload reads it again as {user} (a TLS certificate or key once it changed) and would fail; let {user} read it",
                file.display()
            )
        })
        .collect();
    if failed.len() > UNREADABLE_SAID {
        said.push(format!(
            "{} more files user {user} cannot read",
            failed.len() - UNREADABLE_SAID
        ));
    }
    said
}

/// Whether the owner, group or other write bit of `folder` lets `ids`
/// (with its supplementary `groups`) write it, as the kernel decides: the
/// owner's bits for the owner, else the group's for a member, else the
/// others'. A folder that does not exist yet is not writable.
fn writable_by(folder: &Path, ids: Ids, groups: &[u32]) -> bool {
    let Ok(meta) = std::fs::metadata(folder) else {
        return false;
    };
    let mode = meta.mode();
    if ids.uid == 0 {
        return true;
    }
    if meta.uid() == ids.uid {
        return mode & 0o200 != 0;
    }
    if meta.gid() == ids.gid || groups.contains(&meta.gid()) {
        return mode & 0o020 != 0;
    }
    mode & 0o002 != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn folders_the_user_cannot_write_are_named_once() {
        let dir = std::env::temp_dir().join(format!("heron-privileges-{}", std::process::id()));
        let (open, closed) = (dir.join("open"), dir.join("closed"));
        for (folder, mode) in [(&open, 0o777), (&closed, 0o755)] {
            std::fs::create_dir_all(folder).unwrap();
            std::fs::set_permissions(folder, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        // A uid that owns neither folder.
        let stranger = Ids {
            uid: 4_000_000,
            gid: 4_000_000,
        };
        let files = [
            open.join("a.zone"),
            closed.join("b.zone"),
            closed.join("b.zone.jnl"),
        ];
        let warnings = unwritable_folders(files.iter().map(|f| f.as_path()), stranger, &[]);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains(&closed.display().to_string()));
        let missing = dir.join("missing/c.zone");
        assert_eq!(
            unwritable_folders([missing.as_path()], stranger, &[]).len(),
            1
        );
        let owner = Ids {
            uid: std::fs::metadata(&closed).unwrap().uid(),
            gid: 4_000_000,
        };
        assert!(unwritable_folders(files.iter().map(|f| f.as_path()), owner, &[]).is_empty());
        // A member of the folder's group, by a supplementary group: the
        // group's write bit is what counts.
        let group = std::fs::metadata(&closed).unwrap().gid();
        let shared = dir.join("shared");
        std::fs::create_dir_all(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o2770)).unwrap();
        let in_shared = [shared.join("d.zone")];
        let by = |groups: &[u32]| {
            unwritable_folders(in_shared.iter().map(|f| f.as_path()), stranger, groups).len()
        };
        assert_eq!((by(&[]), by(&[group])), (1, 0));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unknown_users_and_groups_are_errors() {
        assert_eq!(resolve("root", None).unwrap(), Ids { uid: 0, gid: 0 });
        assert!(
            resolve("no-such-user-heron", None)
                .unwrap_err()
                .contains("user")
        );
        assert!(
            resolve("root", Some("no-such-group-heron"))
                .unwrap_err()
                .contains("group")
        );
    }
}
