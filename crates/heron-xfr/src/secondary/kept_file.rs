//! Where a secondary zone's received copy is kept: a path of its own, or
//! a `{zone}` pattern that a zone group's or a catalog's members share,
//! made into a zone's path when its copy is read or written. 100,000
//! members then hold one pattern, not 100,000 paths (80 octets each).

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use heron_proto::Name;
use heron_proto::name::push_escaped_name_byte;

/// What a `[[zone-group]]` or catalog file pattern replaces with each
/// origin.
pub const ZONE_PLACEHOLDER: &str = "{zone}";

/// The longest suffix Heron adds to a zone's file name for a file beside
/// it: a journal set aside, numbered (`unused_name` counts to 999).
/// `.jnl.reused.tmp`, `.jnl.carried.tmp`, `.key-directory.tmp` and the
/// others are no longer (black-box finding DJ-1: room for `.jnl.tmp`
/// alone left them past NAME_MAX).
pub const LONGEST_SUFFIX: &str = ".jnl.unapplied.999";

/// The longest file name a zone's file may have: the 255 octets Linux
/// file systems allow (NAME_MAX), less room for [`LONGEST_SUFFIX`].
const MAX_FILE_NAME: usize = 255 - LONGEST_SUFFIX.len();

/// The stem of the root zone's file.
const ROOT_STEM: &str = "root";

/// The stem of zone `origin`'s file in a `{zone}` pattern: its name as
/// presentation format writes it (as [`Name`]'s `Display`, so an
/// ordinary name keeps the file it always had), without the final dot;
/// `root` for the root zone. A catalog's producer chooses its members'
/// names, so the stem must be one path component and every zone's own:
/// `/` is written `\047` (else `zones/a.test` would be kept in a folder
/// of the members' folder, over whatever is there), `~` `\126` (it
/// marks a [`member_fitting_stem`]), and a zone named `root` starts `\DDD` (the
/// root zone's stem). Every other octet that is not printable ASCII is
/// `\DDD` already (NUL included), `\` is `\\` and a `.` in a label `\.`.
/// So the stem reads back as the name it came from: no two zones share
/// one, even where a file system ignores case (two zones' names differ in
/// more than case).
pub fn zone_stem(origin: &Name) -> String {
    if origin.is_root() {
        return ROOT_STEM.into();
    }
    let mut stem = String::with_capacity(origin.wire_len() + 4);
    for (i, label) in origin.labels().enumerate() {
        if i > 0 {
            stem.push('.');
        }
        for &b in label {
            match b {
                b'/' | b'~' => stem.push_str(&format!("\\{b:03}")),
                _ => push_escaped_name_byte(&mut stem, b),
            }
        }
    }
    if stem.eq_ignore_ascii_case(ROOT_STEM) {
        stem = format!("\\{:03}{}", stem.as_bytes()[0], &stem[1..]);
    }
    stem
}

/// The stem of a zone configured as `origin` (by hand, in a
/// `[[zone-group]]`): the text without its final dot, `root` for the
/// root zone. The operator chose it, and the file it names stays as
/// it was.
pub fn text_stem(origin: &str) -> &str {
    match origin {
        "." => ROOT_STEM,
        _ => origin.strip_suffix('.').unwrap_or(origin),
    }
}

/// The file of the zone whose stem is `stem` ([`text_stem`]: a zone
/// configured by hand), from a `{zone}` pattern. A file name that would
/// be too long for the file system (origins run to 253 characters) gets
/// a shortened stem instead: see [`fitting_stem`].
pub fn pattern_file(pattern: &str, stem: &str) -> String {
    fill(pattern, stem, fitting_stem)
}

/// `pattern` with `stem`, or with `fit(stem, room)` where the file name
/// would pass [`MAX_FILE_NAME`].
fn fill(pattern: &str, stem: &str, fit: fn(&str, usize) -> String) -> String {
    let mut file = pattern.replace(ZONE_PLACEHOLDER, stem);
    let name_len = file.rsplit('/').next().map_or(0, str::len);
    let pattern_name = pattern.rsplit('/').next().unwrap_or_default();
    let stems = pattern_name.matches(ZONE_PLACEHOLDER).count();
    if name_len > MAX_FILE_NAME && stems > 0 {
        let fixed = pattern_name.len() - stems * ZONE_PLACEHOLDER.len();
        let room = MAX_FILE_NAME.saturating_sub(fixed) / stems;
        file = pattern.replace(ZONE_PLACEHOLDER, &fit(stem, room));
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
/// name after an upgrade. The operator chose these origins; a catalog's
/// producer, who could make two names with one FNV hash, gets
/// [`member_fitting_stem`].
pub fn fitting_stem(stem: &str, room: usize) -> String {
    let hash = stem.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    cut_with(stem, room, &format!("~{hash:016x}"))
}

/// [`fitting_stem`] for a [`zone_stem`]: `~` (which no zone stem holds)
/// and 32 hex digits, the first 128 bits of the stem's SHA-256, which no
/// one can make two names share.
pub fn member_fitting_stem(stem: &str, room: usize) -> String {
    use sha2::{Digest, Sha256};
    let hash = Sha256::digest(stem.as_bytes());
    let hex: String = hash[..16].iter().map(|b| format!("{b:02x}")).collect();
    cut_with(stem, room, &format!("~{hex}"))
}

/// As much of the start of `stem` as leaves room for `suffix` in `room`
/// octets, then `suffix`.
fn cut_with(stem: &str, room: usize, suffix: &str) -> String {
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

    /// The files that `pattern` names, one per zone, by its
    /// [`zone_stem`] (or [`member_fitting_stem`]). Clone it for each zone.
    pub fn pattern(pattern: String) -> KeptFile {
        KeptFile(Arc::new(Where::Pattern(pattern)))
    }

    /// The file of the zone at `origin`.
    pub fn path(&self, origin: &Name) -> Cow<'_, Path> {
        match &*self.0 {
            Where::Path(path) => Cow::Borrowed(path),
            Where::Pattern(pattern) => {
                let stem = zone_stem(origin);
                Cow::Owned(fill(pattern, &stem, member_fitting_stem).into())
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
    use proptest::prelude::*;

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

    /// The members' folder of the tests below.
    const MEMBERS: &str = "/var/lib/heron/members";

    fn member_file(origin: &Name) -> std::path::PathBuf {
        let kept = KeptFile::pattern(format!("{MEMBERS}/{{zone}}.zone"));
        kept.path(origin).into_owned()
    }

    #[test]
    fn a_name_with_a_slash_is_kept_in_the_members_folder_itself() {
        let file = |text: &str| member_file(&n(text));
        assert_eq!(
            file("zones/example.com."),
            Path::new(MEMBERS).join("zones\\047example.com.zone")
        );
        // `x.zone/y` makes no folder `x.zone`, where `x` is kept.
        assert_eq!(file("x"), Path::new(MEMBERS).join("x.zone"));
        assert_eq!(
            file("x.zone/y"),
            Path::new(MEMBERS).join("x.zone\\047y.zone")
        );
        let slash = format!("{MEMBERS}/\\047.zone");
        assert_eq!(file("/"), Path::new(&slash));
        for text in [
            "zones/example.com.",
            "x.zone/y",
            "/",
            "a/.\\./b",
            "\\.\\./x",
        ] {
            assert_eq!(file(text).parent(), Some(Path::new(MEMBERS)), "{text}");
        }
    }

    #[test]
    fn the_root_zone_and_a_zone_named_root_have_files_of_their_own() {
        assert_eq!(
            member_file(&Name::root()),
            Path::new(MEMBERS).join("root.zone")
        );
        let file = |text: &str| member_file(&n(text)).file_name().unwrap().to_owned();
        assert_eq!(file("root."), "\\114oot.zone");
        assert_eq!(file("ROOT."), "\\082OOT.zone");
        assert_eq!(file("root.test."), "root.test.zone", "unchanged");
        assert_eq!(file("~"), "\\126.zone", "the hashed stems' mark");
    }

    /// A producer can read the hashed stem of a long member and list a
    /// second member spelt as that stem: it gets a file of its own.
    #[test]
    fn a_name_spelt_as_a_hashed_stem_does_not_take_its_file() {
        let long = n(&format!("{0}.{0}.{0}.{1}", "a".repeat(63), "b".repeat(60)));
        let file = member_file(&long);
        let stem = file.file_stem().unwrap().to_str().unwrap();
        assert!(stem.contains('~'), "{stem}");
        let spelt_so = n(stem);
        assert_ne!(member_file(&spelt_so), file);
        assert_eq!(member_file(&spelt_so).parent(), file.parent());
    }

    /// FNV-1a is no barrier to a producer who wants two long members in
    /// one file: a member's hashed stem ends with 128 bits of SHA-256
    /// (here as Python's `hashlib.sha256` gives them), a zone group's
    /// keeps its FNV-1a, so that its files keep their names.
    #[test]
    fn a_long_members_file_ends_with_128_bits_of_sha256_of_its_stem() {
        let stem = format!("{0}.{0}.{0}.{1}", "a".repeat(63), "b".repeat(60));
        let file = member_file(&n(&stem));
        let want = format!(
            "{}~682465e95821b31aa282580cef47d1f4.zone",
            &stem[..MAX_FILE_NAME - ".zone".len() - 33]
        );
        assert_eq!(file, Path::new(MEMBERS).join(want));
        let group = pattern_file(&format!("{MEMBERS}/{{zone}}.zone"), &stem);
        assert_eq!(
            group,
            format!(
                "{MEMBERS}/{}.zone",
                fitting_stem(&stem, MAX_FILE_NAME - ".zone".len())
            )
        );
        assert!(group.ends_with(&format!("~{:016x}.zone", fnv_1a(&stem))));
    }

    fn fnv_1a(text: &str) -> u64 {
        let mut hash = 0xcbf2_9ce4_8422_2325_u64;
        for b in text.bytes() {
            hash = (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        hash
    }

    /// Label octets, weighted to the ones a file name must not hold as
    /// they are, and to those that make stems alike.
    fn octet() -> impl Strategy<Value = u8> {
        prop_oneof![
            4 => prop::sample::select(b"/\\.~\0rRoOtT".to_vec()),
            2 => prop::sample::select(b"0123456789aZ-_ ".to_vec()),
            1 => 0x80u8..=0xff,
            1 => any::<u8>(),
        ]
    }

    /// Any name: up to 9 labels of up to 63 octets, cut to fit 255, so
    /// that many are long enough for a hashed stem; the root zone and
    /// names of one label `root` in any case among them.
    fn any_name() -> impl Strategy<Value = Name> {
        let label = prop::collection::vec(octet(), 1..=63);
        let labels = prop::collection::vec(label, 0..=9);
        prop_oneof![
            8 => labels.prop_map(|labels| {
                let mut wire = Vec::new();
                for label in &labels {
                    if wire.len() + label.len() + 2 > 255 {
                        continue;
                    }
                    wire.push(label.len() as u8);
                    wire.extend_from_slice(label);
                }
                wire.push(0);
                Name::from_wire(&wire).unwrap()
            }),
            1 => prop::sample::select(vec![".", "root.", "ROOT.", "Root.", "root.root."])
                .prop_map(n),
        ]
    }

    /// `name` made slightly otherwise: one octet changed or its case
    /// flipped, a label split in two, or a name of its own.
    fn neighbour(name: Name) -> impl Strategy<Value = Name> {
        let wire = name.as_wire().to_vec();
        (any::<prop::sample::Index>(), octet(), 0..4u8, any_name()).prop_map(
            move |(at, octet, how, other)| {
                let mut wire = wire.clone();
                let labels: Vec<usize> = label_offsets(&wire);
                if labels.is_empty() || how == 3 {
                    return other;
                }
                let start = labels[at.index(labels.len())];
                let len = wire[start] as usize;
                let i = start + 1 + at.index(len);
                match how {
                    0 => wire[i] = octet,
                    1 => wire[i] ^= 0x20,
                    _ if len > 1 && wire.len() < 255 => {
                        let cut = 1 + at.index(len - 1);
                        wire[start] = cut as u8;
                        wire.insert(start + 1 + cut, (len - cut) as u8);
                    }
                    _ => return other,
                }
                Name::from_wire(&wire).unwrap_or(other)
            },
        )
    }

    fn label_offsets(wire: &[u8]) -> Vec<usize> {
        let mut offsets = Vec::new();
        let mut i = 0;
        while wire[i] != 0 {
            offsets.push(i);
            i += 1 + wire[i] as usize;
        }
        offsets
    }

    /// What any name's file must be: a child of the members' folder, a
    /// name the file system takes, and, unless hashed, the zone's name
    /// itself written so that it reads back.
    fn assert_fits_its_folder(origin: &Name, file: &Path) {
        assert_eq!(file.parent(), Some(Path::new(MEMBERS)), "{origin:?}");
        let name = file.file_name().unwrap().to_str().unwrap();
        assert!(!name.contains(['/', '\0']), "{name}");
        assert!(name.len() <= MAX_FILE_NAME, "{name}");
        let stem = name.strip_suffix(".zone").unwrap();
        match stem.split_once('~') {
            None if origin.is_root() => assert_eq!(stem, "root"),
            None => assert_eq!(n(stem).as_wire(), origin.as_wire(), "{stem}"),
            Some((_, hash)) => {
                assert!(origin.wire_len() > 50, "{origin:?}");
                assert!(hash.len() == 32 && hash.bytes().all(|b| b.is_ascii_hexdigit()));
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// No name's file is outside the members' folder, or another
        /// zone's (even on a file system that ignores case).
        #[test]
        fn no_name_maps_outside_its_folder_or_onto_another_zones_file(
            (a, b) in any_name().prop_flat_map(|a| (Just(a.clone()), neighbour(a)))
        ) {
            let (file_a, file_b) = (member_file(&a), member_file(&b));
            assert_fits_its_folder(&a, &file_a);
            assert_fits_its_folder(&b, &file_b);
            let (text_a, text_b) = (file_a.to_str().unwrap(), file_b.to_str().unwrap());
            if a != b {
                prop_assert!(!text_a.eq_ignore_ascii_case(text_b), "{a:?} {b:?}: {text_a}");
            }
        }
    }

    #[test]
    fn a_zone_file_is_one_pointer() {
        assert_eq!(size_of::<KeptFile>(), size_of::<usize>());
    }
}
