//! One file per zone recording every key's timeline, in JSON.
//!
//! Written atomically (a temporary file in the same folder, fsync, rename,
//! fsync of the folder) with mode 0600, so that a crash leaves the old
//! file or the new one, and only the owner reads which keys exist.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::waits::HeldWaits;
use super::{Key, Policy};

/// The version written; a file of another version is refused, not guessed at.
pub const FORMAT_VERSION: u32 = 1;

/// The largest state file read: far above any zone's keys, and a bound on
/// what a damaged or hostile file can make us allocate.
pub const MAX_FILE_SIZE: u64 = 1 << 20;

/// Everything the state file of a zone holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZoneKeys {
    pub version: u32,
    /// The zone's name, as the configuration spells it.
    pub zone: String,
    /// The keys, oldest first.
    pub keys: Vec<Key>,
    /// The policy the keys last ran under, so that offline tools
    /// (`heron keymgr`) compute the same next events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Policy>,
    /// The waits the zone was last served under, and those lowered since
    /// that are still waited for (`waits::effective_policy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits: Option<HeldWaits>,
}

/// The state file's name for a zone in the key directory: the zone's name
/// without its final dot (`root` for the root), lower-cased, escaped and
/// shortened as [`crate::file_names`] says (no `/` can leave the folder),
/// then `.keys.json`.
pub fn file_name(zone: &str) -> String {
    let trimmed = zone.trim_end_matches('.');
    if trimmed.is_empty() {
        return "root.keys.json".to_string();
    }
    let lower = trimmed.to_ascii_lowercase();
    let suffix = ".keys.json";
    crate::file_names::zone_in_file_name(&lower, "", suffix.len()) + suffix
}

/// Why a state file could not be read or written.
#[derive(Debug)]
pub enum StateFileError {
    Io(PathBuf, std::io::Error),
    TooLarge(PathBuf, u64),
    Malformed(PathBuf, String),
}

impl std::fmt::Display for StateFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StateFileError::Io(path, e) => write!(f, "{}: {e}", path.display()),
            StateFileError::TooLarge(path, size) => write!(
                f,
                "{}: {size} bytes, more than the {MAX_FILE_SIZE} a key state file may have",
                path.display()
            ),
            StateFileError::Malformed(path, why) => {
                write!(f, "{}: not a key state file: {why}", path.display())
            }
        }
    }
}

impl std::error::Error for StateFileError {}

impl ZoneKeys {
    pub fn new(zone: &str, keys: Vec<Key>) -> ZoneKeys {
        ZoneKeys {
            version: FORMAT_VERSION,
            zone: zone.to_string(),
            keys,
            policy: None,
            waits: None,
        }
    }

    /// Parses a state file's text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<ZoneKeys, StateFileError> {
        let malformed = |why: String| StateFileError::Malformed(path.to_path_buf(), why);
        let state: ZoneKeys = serde_json::from_str(text).map_err(|e| malformed(e.to_string()))?;
        if state.version != FORMAT_VERSION {
            return Err(malformed(format!(
                "version {} (this Heron reads version {FORMAT_VERSION})",
                state.version
            )));
        }
        for (index, key) in state.keys.iter().enumerate() {
            if state.keys[..index].iter().any(|k| k.id == key.id) {
                return Err(malformed(format!("key {} appears twice", key.id)));
            }
        }
        Ok(state)
    }

    /// Reads the state file at `path`.
    pub fn load(path: &Path) -> Result<ZoneKeys, StateFileError> {
        let io = |e| StateFileError::Io(path.to_path_buf(), e);
        let size = fs::metadata(path).map_err(io)?.len();
        if size > MAX_FILE_SIZE {
            return Err(StateFileError::TooLarge(path.to_path_buf(), size));
        }
        let text = fs::read_to_string(path).map_err(io)?;
        ZoneKeys::parse(&text, path)
    }

    /// The file's text.
    pub fn to_text(&self) -> String {
        // Serializing plain structs of strings and numbers cannot fail.
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// Replaces the file at `path` atomically, readable by its owner only.
    pub fn save(&self, path: &Path) -> Result<(), StateFileError> {
        let io = |e| StateFileError::Io(path.to_path_buf(), e);
        let folder = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let mut temporary = path.as_os_str().to_owned();
        temporary.push(".tmp");
        let temporary = PathBuf::from(temporary);
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temporary)
            .map_err(io)?;
        let written = (file.write_all(self.to_text().as_bytes()))
            .and_then(|()| file.sync_all())
            .and_then(|()| fs::rename(&temporary, path));
        drop(file);
        // A full disk leaves no half-written temporary behind.
        written
            .inspect_err(|_| drop(fs::remove_file(&temporary)))
            .map_err(io)?;
        File::open(folder).and_then(|d| d.sync_all()).map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollover::{Goal, Role, State};
    use std::os::unix::fs::PermissionsExt;

    fn sample() -> ZoneKeys {
        let mut ksk = Key::new("Kexample.+013+12345".into(), 12345, 13, Role::Ksk, 1000);
        ksk.dnskey.state = State::Omnipresent;
        ksk.ds.state = State::Rumoured;
        ksk.ds.since = 2000;
        ksk.published = Some(1000);
        let mut zsk = Key::new("Kexample.+013+54321".into(), 54321, 13, Role::Zsk, 1000);
        zsk.goal = Goal::Hidden;
        zsk.retired = Some(3000);
        zsk.zone_rrsig.state = State::Unretentive;
        ZoneKeys::new("example.", vec![ksk, zsk])
    }

    #[test]
    fn round_trip_keeps_every_field() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("example.keys.json");
        let state = sample();
        state.save(&path).unwrap();
        assert_eq!(ZoneKeys::load(&path).unwrap(), state);
        let mode = fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(!dir.path().join("example.keys.json.tmp").exists());
    }

    #[test]
    fn the_policy_is_kept_when_recorded() {
        let mut state = sample();
        assert!(!state.to_text().contains("policy"));
        let policy: Policy = serde_json::from_str(POLICY).unwrap();
        state.policy = Some(policy);
        let back = ZoneKeys::parse(&state.to_text(), Path::new("z")).unwrap();
        assert_eq!(back, state);
    }

    const POLICY: &str = r#"{"algorithm":13,"csk":false,"ksk_lifetime":0,"zsk_lifetime":2592000,
        "csk_lifetime":0,"ksk_method":"double-signature","propagation_delay":3600,"dnskey_ttl":3600,
        "max_zone_ttl":86400,"signature_validity":1209600,"parent_ds_ttl":86400,
        "parent_propagation_delay":3600,"retire_safety":3600,"insecure":false}"#;

    #[test]
    fn file_names_follow_the_zone() {
        assert_eq!(file_name("Example.COM."), "example.com.keys.json");
        assert_eq!(file_name("example.com"), "example.com.keys.json");
        assert_eq!(file_name("."), "root.keys.json");
        assert_eq!(file_name("a/b..x."), "a%2fb..x.keys.json");
    }

    #[test]
    fn save_replaces_an_existing_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("z.json");
        fs::write(&path, "old").unwrap();
        let mut state = sample();
        state.save(&path).unwrap();
        state.keys.pop();
        state.save(&path).unwrap();
        assert_eq!(ZoneKeys::load(&path).unwrap().keys.len(), 1);
    }

    fn parse_error(text: &str) -> String {
        match ZoneKeys::parse(text, Path::new("z.json")) {
            Err(e) => e.to_string(),
            Ok(state) => panic!("parsed {state:?}"),
        }
    }

    #[test]
    fn malformed_files_give_clear_errors() {
        assert!(parse_error("").contains("z.json: not a key state file"));
        assert!(parse_error("{").contains("EOF"));
        assert!(parse_error(r#"{"version":1,"zone":"x."}"#).contains("missing field `keys`"));
        assert!(parse_error(r#"{"version":2,"zone":"x.","keys":[]}"#).contains("version 2"));
        let text = sample().to_text().replace("\"ksk\"", "\"kzk\"");
        assert!(parse_error(&text).contains("unknown variant `kzk`"));
        let text = sample().to_text().replace("12345,", "70000,");
        assert!(parse_error(&text).contains("70000"));
        let mut twice = sample();
        twice.keys[1].id = twice.keys[0].id.clone();
        assert!(parse_error(&twice.to_text()).contains("appears twice"));
    }

    #[test]
    fn missing_and_oversized_files_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("none.json");
        assert!(matches!(
            ZoneKeys::load(&missing),
            Err(StateFileError::Io(..))
        ));
        let big = dir.path().join("big.json");
        fs::write(&big, vec![b' '; MAX_FILE_SIZE as usize + 1]).unwrap();
        assert!(matches!(
            ZoneKeys::load(&big),
            Err(StateFileError::TooLarge(..))
        ));
    }

    /// Truncations and byte flips of a valid file never panic.
    #[test]
    fn mutated_files_never_panic() {
        let text = sample().to_text().into_bytes();
        let mut seed: u32 = 0x9e37_79b9;
        for round in 0..2000 {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            let mut bytes = text.clone();
            if round % 2 == 0 {
                bytes.truncate(seed as usize % text.len());
            } else {
                let at = seed as usize % bytes.len();
                bytes[at] = (seed >> 8) as u8;
            }
            let text = String::from_utf8_lossy(&bytes);
            let _ = ZoneKeys::parse(&text, Path::new("z.json"));
        }
    }
}
