//! Any bytes as two wire names, each kept by the pattern a catalog gives
//! its members (`heron_xfr::secondary::kept_file`): a catalog's producer
//! chooses its members' names, so a name's file must be a child of the
//! members' folder (one file name, no `/` or NUL, not `.` or `..`, short
//! enough for the file system), the zone's own: unless its stem is hashed
//! (too long; then it holds the one `~`, then 32 hex digits), the stem
//! reads back as the very name; and two zones never get the same file,
//! even where case is ignored.
#![no_main]

use std::path::Path;

use heron_proto::Name;
use heron_xfr::secondary::kept_file::KeptFile;
use libfuzzer_sys::fuzz_target;

const MEMBERS: &str = "/fuzz/members";

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let (a, b) = rest.split_at((split as usize).min(rest.len()));
    let (a, b) = (name_of(a), name_of(b));
    let kept = KeptFile::pattern(format!("{MEMBERS}/{{zone}}.zone"));
    let (file_a, file_b) = (kept.path(&a), kept.path(&b));
    fits_its_folder(&a, &file_a);
    fits_its_folder(&b, &file_b);
    if a != b {
        let (text_a, text_b) = (file_a.to_str().unwrap(), file_b.to_str().unwrap());
        assert!(!text_a.eq_ignore_ascii_case(text_b), "{a:?} and {b:?}: {text_a}");
    }
});

/// A name from any bytes: each octet's low 6 bits give a label's length
/// (0 ends the name), the octets after it the label, until 255 octets.
fn name_of(mut bytes: &[u8]) -> Name {
    let mut wire = Vec::with_capacity(256);
    while let Some((&len, rest)) = bytes.split_first() {
        let len = (len & 63) as usize;
        if len == 0 || wire.len() + 1 + len + 1 > 255 {
            break;
        }
        let label = &rest[..len.min(rest.len())];
        wire.push(label.len() as u8);
        wire.extend_from_slice(label);
        bytes = &rest[label.len()..];
        if label.is_empty() {
            wire.pop();
            break;
        }
    }
    wire.push(0);
    Name::from_wire(&wire).expect("built label by label")
}

fn fits_its_folder(origin: &Name, file: &Path) {
    assert_eq!(file.parent(), Some(Path::new(MEMBERS)), "{origin:?}");
    let name = file.file_name().unwrap().to_str().unwrap();
    assert!(!name.contains(['/', '\0']) && name != "." && name != "..");
    assert!(name.len() <= 255 - ".jnl.tmp".len(), "{name}");
    let stem = name.strip_suffix(".zone").unwrap();
    match stem.split_once('~') {
        None if origin.is_root() => assert_eq!(stem, "root"),
        None => {
            let read = Name::parse(stem).unwrap();
            assert_eq!(read.as_wire(), origin.as_wire(), "{stem}");
        }
        Some((start, hash)) => {
            assert!(!start.contains('~') && hash.len() == 32, "{stem}");
            assert!(hash.bytes().all(|b| b.is_ascii_hexdigit()), "{stem}");
        }
    }
}
