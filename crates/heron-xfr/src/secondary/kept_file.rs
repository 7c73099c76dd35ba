//! Where a secondary zone's received copy is kept: a path of its own, or
//! a `{zone}` pattern that a zone group's or a catalog's members share,
//! made into a zone's path when its copy is read or written. 100,000
//! members then hold one pattern, not 100,000 paths (80 octets each).

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use heron_proto::Name;

/// What a `[[zone-group]]` or catalog file pattern replaces with each
/// origin.
pub const ZONE_PLACEHOLDER: &str = "{zone}";

/// The longest file name a zone's file may have: the 255 octets Linux
/// file systems allow (NAME_MAX), less room for the suffixes added to it
/// (`.jnl.tmp`).
const MAX_FILE_NAME: usize = 255 - ".jnl.tmp".len();

/// The file of the zone at `origin` (its name as text), from a `{zone}`
/// pattern. A file name that would be too long for the file system
/// (origins run to 253 characters) gets a shortened stem instead: see
/// [`fitting_stem`].
pub fn pattern_file(pattern: &str, origin: &str) -> String {
    let stem = match origin {
        "." => "root",
        _ => origin.strip_suffix('.').unwrap_or(origin),
    };
    let mut file = pattern.replace(ZONE_PLACEHOLDER, stem);
    let name_len = file.rsplit('/').next().map_or(0, str::len);
    let pattern_name = pattern.rsplit('/').next().unwrap_or_default();
    let stems = pattern_name.matches(ZONE_PLACEHOLDER).count();
    if name_len > MAX_FILE_NAME && stems > 0 {
        let fixed = pattern_name.len() - stems * ZONE_PLACEHOLDER.len();
        let room = MAX_FILE_NAME.saturating_sub(fixed) / stems;
        file = pattern.replace(ZONE_PLACEHOLDER, &fitting_stem(stem, room));
    }
    // Some callers keep it for the zone's life: `replace` leaves up to
    // twice the room the path needs.
    file.shrink_to_fit();
    file
}

/// `stem` cut to at most `room` octets: as much of its start as fits,
/// `~`, and 16 hex digits of a hash of the whole, so that long origins
/// that start alike still get files of their own. The hash (64-bit
/// FNV-1a) is spelt out here, not taken from std, whose hashers may
/// change between releases: a kept copy must be found under the same
/// name after an upgrade.
pub fn fitting_stem(stem: &str, room: usize) -> String {
    let hash = stem.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let suffix = format!("~{hash:016x}");
    let mut keep = room.saturating_sub(suffix.len()).min(stem.len());
    while !stem.is_char_boundary(keep) {
        keep -= 1;
    }
    format!("{}{suffix}", &stem[..keep])
}

/// Where a zone's copy is kept; one pointer, shared by the zones that
/// share a pattern.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KeptFile(Arc<Where>);

#[derive(Debug, PartialEq, Eq, Hash)]
enum Where {
    Path(PathBuf),
    /// A pattern with [`ZONE_PLACEHOLDER`], its folder joined already.
    Pattern(String),
}

impl KeptFile {
    /// A file of the zone's own.
    pub fn at(path: impl Into<PathBuf>) -> KeptFile {
        KeptFile(Arc::new(Where::Path(path.into())))
    }

    /// The files that `pattern` names, one per zone, by the zone's name
    /// as [`Name`]'s `Display` writes it. Clone it for each zone.
    pub fn pattern(pattern: String) -> KeptFile {
        KeptFile(Arc::new(Where::Pattern(pattern)))
    }

    /// The file of the zone at `origin`.
    pub fn path(&self, origin: &Name) -> Cow<'_, Path> {
        match &*self.0 {
            Where::Path(path) => Cow::Borrowed(path),
            Where::Pattern(pattern) => {
                Cow::Owned(pattern_file(pattern, &origin.to_string()).into())
            }
        }
    }

    /// `self` if it gives `origin` the file `path`, else a file of its
    /// own: a zone whose configured name reads otherwise than `Name`
    /// writes it (escapes, say) keeps the file it always had.
    pub fn or_own(self, origin: &Name, path: &Path) -> KeptFile {
        match self.path(origin) == path {
            true => self,
            false => KeptFile::at(path),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(text: &str) -> Name {
        Name::parse(text).unwrap()
    }

    #[test]
    fn a_pattern_makes_each_zone_its_own_file() {
        let kept = KeptFile::pattern("/var/lib/heron/kept/{zone}.zone".into());
        let path = |origin: &str| kept.path(&n(origin)).into_owned();
        assert_eq!(
            path("a.test."),
            Path::new("/var/lib/heron/kept/a.test.zone")
        );
        assert_eq!(path("B.Test"), Path::new("/var/lib/heron/kept/B.Test.zone"));
        assert_eq!(path("."), Path::new("/var/lib/heron/kept/root.zone"));
        let own = KeptFile::at("/k/own");
        assert_eq!(own.path(&n("a.test")), Path::new("/k/own"));
    }

    #[test]
    fn a_zone_whose_name_reads_otherwise_keeps_a_file_of_its_own() {
        let kept = KeptFile::pattern("k/{zone}".into());
        let same = kept.clone().or_own(&n("a.test"), Path::new("k/a.test"));
        assert_eq!(same, kept);
        let other = kept.or_own(&n("a.test"), Path::new("k/A\\046test"));
        assert_eq!(other.path(&n("a.test")), Path::new("k/A\\046test"));
    }

    #[test]
    fn a_pattern_file_holds_no_more_room_than_its_path() {
        for origin in ["short.test.", &format!("{}.test.", "x".repeat(60)), "."] {
            let file = pattern_file("/var/lib/heron/members/{zone}.zone", origin);
            assert_eq!(file.capacity(), file.len(), "{file}");
        }
    }

    #[test]
    fn a_zone_file_is_one_pointer() {
        assert_eq!(size_of::<KeptFile>(), size_of::<usize>());
    }
}
