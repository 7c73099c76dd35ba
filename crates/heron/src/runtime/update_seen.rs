//! Signed UPDATEs answered, remembered across a restart. The processor's
//! replay cache refuses a copy of a signed UPDATE for as long as its
//! Time Signed and fudge allow it, and one signed before the server
//! started; but one signed at or ahead of the server's clock (a client's
//! clock running fast, within the fudge) is still good after a quick
//! restart, and a copy captured on the way was applied again, undoing
//! what came after it (black-box finding BC-4). So each such request
//! answered is noted beside its zone's journal (`JOURNAL.seen`: a digest
//! and the second its time window ends, a line each), and a copy of one
//! is refused while that window lasts. Requests signed before the second
//! they are answered in need no note: the next start refuses them.
//!
//! Bounded: [`MAX_KEPT`] notes a zone, those whose window ended dropped
//! at each write (a window is at most 300 s + the clock's lead).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use heron_proto::Name;
use heron_xfr::primary::ZonePolicy;
use std::sync::{LazyLock, Mutex};

/// Notes kept per zone at most; the oldest go first past it.
pub(crate) const MAX_KEPT: usize = 4096;

/// A request answered: its digest and when its window ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Note {
    digest: [u8; 16],
    until: u64,
}

/// The notes of each journal read or written by this run.
static NOTES: LazyLock<Mutex<HashMap<PathBuf, Vec<Note>>>> = LazyLock::new(Default::default);

fn notes_path(journal: &Path) -> PathBuf {
    crate::config::shared_files::beside(journal, crate::config::shared_files::SEEN)
}

/// Whether the request `digest` was answered for the zone whose journal
/// is `journal` and its window has not ended at `now`.
pub(crate) fn answered_before(journal: &Path, digest: [u8; 16], now: u64) -> bool {
    let mut notes = NOTES.lock().unwrap_or_else(|e| e.into_inner());
    let kept = notes
        .entry(journal.to_path_buf())
        .or_insert_with(|| read_notes(&notes_path(journal)));
    kept.iter().any(|n| n.digest == digest && n.until >= now)
}

/// Notes the request `digest` (its window ending at `until`), answered
/// at `now` with `time_signed`, if a restart could leave it good: signed
/// at or after this second. A note that cannot be written is said; the
/// request was answered all the same.
pub(crate) fn remember(
    journal: &Path,
    (digest, until): ([u8; 16], u64),
    time_signed: u64,
    now: u64,
) {
    if time_signed < now {
        return;
    }
    let mut notes = NOTES.lock().unwrap_or_else(|e| e.into_inner());
    let path = notes_path(journal);
    let kept = notes
        .entry(journal.to_path_buf())
        .or_insert_with(|| read_notes(&path));
    if kept.iter().any(|n| n.digest == digest) {
        return; // a copy refused, or answered again
    }
    kept.retain(|n| n.until >= now);
    kept.push(Note { digest, until });
    if kept.len() > MAX_KEPT {
        kept.sort_by_key(|n| n.until);
        let extra = kept.len() - MAX_KEPT;
        kept.drain(..extra);
    }
    if let Err(e) = write_notes(&path, kept) {
        tracing::warn!(
            "cannot write {}: {e}; a copy of an update just answered may be applied again after a restart",
            path.display()
        );
    }
}

/// Before a new configuration takes effect: the notes of each zone whose
/// journal moves (another `file`, or `journal-file`) go with it, unless
/// some are there already (regression hunt BG-6: left beside the old
/// journal, a copy signed ahead was applied again after a restart).
pub(crate) fn move_notes(
    old: &HashMap<Name, std::sync::Arc<ZonePolicy>>,
    new: &HashMap<Name, ZonePolicy>,
) {
    for (origin, policy) in old {
        let from = policy.journal_file.as_deref();
        let to = new.get(origin).and_then(|p| p.journal_file.as_deref());
        let (Some(from), Some(to)) = (from, to) else {
            continue;
        };
        let (from, to) = (notes_path(from), notes_path(to));
        if from == to || !from.exists() || to.exists() {
            continue;
        }
        if let Err(e) = std::fs::rename(&from, &to)
            .or_else(|_| std::fs::copy(&from, &to).and_then(|_| std::fs::remove_file(&from)))
        {
            tracing::warn!(zone = %origin, "cannot move {} to {}: {e}", from.display(), to.display());
        }
        NOTES.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// The notes in `path`; lines that do not read are skipped (a torn
/// write leaves the rest).
fn read_notes(path: &Path) -> Vec<Note> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.lines().filter_map(parse_note).take(MAX_KEPT).collect()
}

fn parse_note(line: &str) -> Option<Note> {
    let (hex, until) = line.split_once(' ')?;
    if hex.len() != 32 {
        return None;
    }
    let mut digest = [0u8; 16];
    for (i, byte) in digest.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(Note {
        digest,
        until: until.trim().parse().ok()?,
    })
}

/// Written to a temporary file and renamed over the old.
fn write_notes(path: &Path, notes: &[Note]) -> std::io::Result<()> {
    let mut text = String::with_capacity(notes.len() * 44);
    for n in notes {
        n.digest
            .iter()
            .for_each(|b| text.push_str(&format!("{b:02x}")));
        text.push_str(&format!(" {}\n", n.until));
    }
    crate::config::shared_files::replace_file(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_signed_ahead_is_known_after_a_restart_until_its_window_ends() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("z.jnl");
        remember(&journal, ([1; 16], 1300), 1000, 1000);
        remember(&journal, ([2; 16], 1299), 999, 1000); // signed before: no note
        NOTES.lock().unwrap().clear(); // as a new run
        assert!(answered_before(&journal, [1; 16], 1001));
        assert!(answered_before(&journal, [1; 16], 1300));
        assert!(
            !answered_before(&journal, [1; 16], 1301),
            "its window ended"
        );
        assert!(!answered_before(&journal, [2; 16], 1001));
    }

    /// A zone whose journal moves (its `file` changed by a reload) takes
    /// its notes along (regression hunt BG-6).
    #[test]
    fn notes_move_with_the_journal() {
        let dir = tempfile::tempdir().unwrap();
        let (from, to) = (dir.path().join("a.zone.jnl"), dir.path().join("b.zone.jnl"));
        remember(&from, ([7; 16], 2000), 1000, 1000);
        let origin = Name::parse("m.test").unwrap();
        let policy = |journal: &Path| ZonePolicy {
            journal_file: Some(journal.to_path_buf()),
            ..ZonePolicy::default()
        };
        let old = HashMap::from([(origin.clone(), std::sync::Arc::new(policy(&from)))]);
        let new = HashMap::from([(origin, policy(&to))]);
        move_notes(&old, &new);
        assert!(!notes_path(&from).exists());
        NOTES.lock().unwrap().clear();
        assert!(answered_before(&to, [7; 16], 1001));
    }

    #[test]
    fn notes_are_bounded_and_torn_lines_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("b.jnl");
        for i in 0..MAX_KEPT + 10 {
            let mut digest = [0u8; 16];
            digest[..8].copy_from_slice(&(i as u64).to_be_bytes());
            remember(&journal, (digest, 2000 + i as u64), 1000, 1000);
        }
        let path = notes_path(&journal);
        let mut text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), MAX_KEPT, "the oldest dropped");
        text.push_str("zz not a note\n0102 5\n");
        std::fs::write(&path, text).unwrap();
        NOTES.lock().unwrap().clear();
        assert!(!answered_before(&journal, [0; 16], 1000), "the first went");
        let mut last = [0u8; 16];
        last[..8].copy_from_slice(&((MAX_KEPT + 9) as u64).to_be_bytes());
        assert!(answered_before(&journal, last, 1000));
    }
}
