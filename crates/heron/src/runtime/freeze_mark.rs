//! The mark `heron ctl freeze` leaves beside a zone's file (`FILE.frozen`,
//! renewed by a reload that takes an edit meanwhile, removed by the
//! thaw): the serial the freeze wrote and a digest of the text it wrote.
//! A restart does not keep the freeze (as BIND's and Knot's are not
//! kept): the start reads the mark to tell an edit made during the
//! freeze, which it takes as a thaw does, with the next serial written to
//! the file first when the edit left the serial as it was
//! (`update::thaw_at_start`; black-box finding AM-33: the edit was served
//! under the old serial, which secondaries hold without it).

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::config::shared_files::{FROZEN, beside};

/// The mark beside `file`.
pub(crate) fn mark_of(file: &Path) -> PathBuf {
    beside(file, FROZEN)
}

fn digest(text: &[u8]) -> String {
    Sha256::digest(text)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Marks `file` as written by a freeze at `serial`: its text as it is
/// now (synced, so that a crash keeps it with the file).
pub(crate) fn mark(file: &Path, serial: u32) -> std::io::Result<()> {
    use std::io::Write;
    let text = std::fs::read(file)?;
    let mark = mark_of(file);
    // Whole or not at all (a crash leaves no half mark, which would not
    // read as one).
    let writing = beside(&mark, ".tmp");
    let mut out = std::fs::File::create(&writing)?;
    let said = format!("{HEADER}\nserial {serial}\nsha256 {}\n", digest(&text));
    let written = (out.write_all(said.as_bytes()))
        .and_then(|()| out.sync_all())
        .and_then(|()| std::fs::rename(&writing, &mark));
    if written.is_err() {
        // Not left behind (regression hunt AW-3).
        let _ = std::fs::remove_file(&writing);
    }
    written
}

/// The mark beside `file` while a thaw takes the file's edit.
fn thawing(file: &Path) -> PathBuf {
    beside(&mark_of(file), ".thawing")
}

/// Moves the mark beside `file` aside for a thaw, before the edit is
/// taken: one that cannot be moved keeps the zone frozen with nothing
/// taken (regression hunt AW-2: the edit was taken at a new serial and
/// the mark left at the old one). Nothing to move is fine.
pub(crate) fn set_aside(file: &Path) -> Result<(), String> {
    match std::fs::rename(mark_of(file), thawing(file)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(format!("cannot remove {}: {e}", mark_of(file).display()))
        }
        _ => Ok(()),
    }
}

/// Puts the mark set aside back (the thaw did not take the edit), or
/// removes it (it did).
pub(crate) fn end_thaw(file: &Path, taken: bool) {
    let result = match taken {
        true => std::fs::remove_file(thawing(file)),
        false => std::fs::rename(thawing(file), mark_of(file)),
    };
    if let Err(e) = result.or_else(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Ok(()),
        _ => Err(e),
    }) {
        tracing::warn!("{}: {e}", thawing(file).display());
    }
}

/// A mark's first line: a file beside a zone's that does not start so is
/// no mark of ours (another zone's file, say), read as none and never
/// removed (black-box finding AS-11: it was, and the zone's file
/// rewritten).
const HEADER: &str = "; written by heron ctl freeze, removed by heron ctl thaw: the zone file's serial and digest as frozen";

/// The file at the mark's place beside `file` when it is not a mark of
/// Heron's (an operator's own): a freeze must not write over it, nor a
/// thaw remove it (regression hunt AW-5).
pub(crate) fn foreign(file: &Path) -> Option<PathBuf> {
    let mark = mark_of(file);
    (std::fs::symlink_metadata(&mark).is_ok() && read_mark(&mark).is_none()).then_some(mark)
}

/// The serial the mark beside `file` holds; None if there is no mark, or
/// the file there is not one (said).
pub(crate) fn serial_marked(file: &Path) -> Option<u32> {
    let mark = mark_of(file);
    let read = read_mark(&mark);
    if read.is_none() && mark.exists() {
        tracing::warn!(
            "{} is not a freeze mark of Heron's: left alone, the zone not taken as frozen",
            mark.display()
        );
    }
    read.map(|(serial, _)| serial)
}

/// Marks `file` again, as taken at `serial` while its zone stays frozen
/// (a reload, or a thaw before it removes the mark); not written, said.
pub(crate) fn remark(file: &Path, serial: u32) {
    if let Err(e) = mark(file, serial) {
        tracing::warn!(
            "cannot write {}: {e}; a restart before the thaw may serve a later edit of the file under serial {serial}",
            mark_of(file).display()
        );
    }
}

/// Removes the mark beside `file`, if any.
pub(crate) fn unmark(file: &Path) {
    if let Err(e) = try_unmark(file) {
        tracing::warn!("{e}; the next start takes the zone file as edited during a freeze");
    }
}

/// Removes the mark beside `file`, if any; why not, naming it.
pub(crate) fn try_unmark(file: &Path) -> Result<(), String> {
    match std::fs::remove_file(mark_of(file)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(format!("cannot remove {}: {e}", mark_of(file).display()))
        }
        _ => Ok(()),
    }
}

/// The serial and digest a mark holds.
fn read_mark(mark: &Path) -> Option<(u32, String)> {
    let text = std::fs::read_to_string(mark).ok()?;
    text.starts_with(HEADER).then_some(())?;
    let field = |key: &str| {
        (text.lines()).find_map(|l| l.strip_prefix(key)?.strip_prefix(' ').map(str::trim))
    };
    Some((field("serial")?.parse().ok()?, field("sha256")?.to_string()))
}

/// Whether each of `files` has a mark (the folders listed once).
pub(crate) fn which_marked(files: &[&Path]) -> Vec<bool> {
    let marks: Vec<PathBuf> = files.iter().map(|f| mark_of(f)).collect();
    heron_xfr::secondary::store::which_exist(&marks.iter().map(|p| p.as_path()).collect::<Vec<_>>())
}

/// Whether the marked `file`, its zone loaded at `serial`, was edited
/// with the serial left as the freeze wrote it: its text is not the
/// freeze's.
pub(crate) fn edited_at(file: &Path, serial: u32) -> bool {
    read_mark(&mark_of(file)).is_some_and(|(frozen, sha)| {
        let text = std::fs::read(file).unwrap_or_default();
        frozen == serial && digest(&text) != sha
    })
}

/// The serial the freeze wrote the marked `file` at, if its text is no
/// longer the freeze's (an edit made during the freeze, whatever serial
/// it left). None without a mark that can be read.
pub(crate) fn edited_since(file: &Path) -> Option<u32> {
    let (frozen, sha) = read_mark(&mark_of(file))?;
    let text = std::fs::read(file).ok()?;
    (digest(&text) != sha).then_some(frozen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_holds_the_serial_and_the_texts_digest() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("z.zone");
        std::fs::write(&file, "text").unwrap();
        mark(&file, 7).unwrap();
        let (serial, sha) = read_mark(&mark_of(&file)).unwrap();
        assert_eq!((serial, sha), (7, digest(b"text")));
        unmark(&file);
        assert!(!mark_of(&file).exists());
        unmark(&file); // gone already: nothing said
    }
}
