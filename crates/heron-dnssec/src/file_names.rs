//! How a zone's name goes into the names of the files kept for it in the
//! key directory (key files, the key state file, the serial last served):
//! every octet but letters, digits, `-`, `_` and `.` written `%XX`, so no
//! `/` of a name can reach another folder (black-box finding DH-3), and a
//! name too long for one file name (NAME_MAX, 255 octets, with room for
//! the `.tmp` each is first written as) cut short and ended with `~` and
//! 16 hex digits of a hash of it all, so that every zone still has files
//! of its own (black-box finding DJ-2: a 230-octet origin could not be
//! signed). Names of zones short and plain enough are written as they
//! are, so key directories made before keep their file names.

/// The most octets of a file name on Linux file systems.
const NAME_MAX: usize = 255;

/// Room left for the suffix a file is written under before its rename.
const TEMPORARY: usize = ".tmp".len();

/// `zone` (its name in text, without the final dot) as it goes into a
/// file name between `prefix` and a suffix of `suffix_len` octets.
pub fn zone_in_file_name(zone: &str, prefix: &str, suffix_len: usize) -> String {
    let escaped = escape(zone);
    let room = NAME_MAX - TEMPORARY - prefix.len() - suffix_len;
    if escaped.len() <= room {
        return escaped;
    }
    // The escaped name is ASCII: any cut is at a character's boundary.
    let hash = fnv1a(escaped.as_bytes());
    let keep = room.saturating_sub(17);
    format!("{}~{hash:016x}", &escaped[..keep])
}

fn escape(zone: &str) -> String {
    let mut out = String::with_capacity(zone.len());
    for byte in zone.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02x}"));
        }
    }
    out
}

/// 64-bit FNV-1a, spelt out so that the names never change with a
/// library's hasher.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_name_is_kept_as_it_is() {
        assert_eq!(zone_in_file_name("Example.com", "K", 24), "Example.com");
        assert_eq!(zone_in_file_name("a-b_c.test", "", 10), "a-b_c.test");
    }

    #[test]
    fn a_slash_or_any_other_octet_is_escaped() {
        assert_eq!(zone_in_file_name("a/b.test", "K", 24), "a%2fb.test");
        assert_eq!(zone_in_file_name("a\\.b%", "", 10), "a%5c.b%25");
    }

    /// At the limit the name is kept; one octet past it, cut and hashed,
    /// and the whole file name (with `.tmp`) is NAME_MAX exactly.
    #[test]
    fn a_name_past_the_limit_is_cut_and_hashed_to_fit() {
        let (prefix, suffix) = ("K", "+013+12345.csk.heron-key");
        let room = NAME_MAX - TEMPORARY - prefix.len() - suffix.len();
        let at_limit = "a".repeat(room);
        assert_eq!(zone_in_file_name(&at_limit, prefix, suffix.len()), at_limit);
        let past = "a".repeat(room + 1);
        let cut = zone_in_file_name(&past, prefix, suffix.len());
        assert_eq!(
            prefix.len() + cut.len() + suffix.len() + TEMPORARY,
            NAME_MAX
        );
        assert!(cut.starts_with("aaaa") && cut.contains('~'), "{cut}");
        // Two long names alike but for their end get files of their own.
        let other = format!("{}b", "a".repeat(room));
        assert_ne!(zone_in_file_name(&other, prefix, suffix.len()), cut);
    }

    /// Escapes counted: a name of 90 escaped octets (270 long) fits.
    #[test]
    fn an_escaped_long_name_still_fits() {
        let name = "\u{1}".repeat(90);
        let cut = zone_in_file_name(&name, "", ".keys.json".len());
        assert!(
            cut.len() + ".keys.json".len() + TEMPORARY <= NAME_MAX,
            "{cut}"
        );
    }
}
