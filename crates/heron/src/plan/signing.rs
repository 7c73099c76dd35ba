//! Zones Heron signs: their keys in the key directory (made when there
//! are none), and the signing of a zone as loaded from its file.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::time::Instant;

use heron_dnssec::keys::{KeyFile, KeyRole, MAX_KEY_FILE};
use heron_dnssec::policy::{KeySet, Policy};
use heron_dnssec::sign::{ZoneKey, sign_zone_after};
use heron_proto::Name;
use heron_zone::Zone;

use crate::config::dnssec::Signing;

/// How often the server looks for signed zones with signatures due for
/// refresh (each is re-signed then, keeping the signatures not due).
pub const REFRESH_CHECK: std::time::Duration = std::time::Duration::from_secs(3600);

/// Of the `signed` zones (`ZoneFiles::signed_zones`), those (lower-cased)
/// with a signature due for refresh before the next check.
pub fn zones_due(
    catalog: &heron_zone::Catalog,
    signed: Vec<(Name, std::sync::Arc<Signing>)>,
) -> std::collections::HashSet<Name> {
    let now = heron_proto::time::unix_now();
    let within = REFRESH_CHECK.as_secs() as u32;
    (signed.into_iter())
        .filter(|(origin, signing)| {
            catalog.get(origin).is_some_and(|zone| {
                heron_dnssec::sign::refresh_due(zone, now, signing.policy.signature_refresh, within)
            })
        })
        .map(|(origin, _)| origin.to_lowercase())
        .collect()
}

/// Suffix of Heron's key files in a key directory.
const KEY_SUFFIX: &str = ".heron-key";

/// Signs `zone`, loaded from its file, under `signing`; the keys are read
/// from the key directory, or made there when the zone has none. `previous`
/// is the version served now: its signatures over RRsets that did not
/// change are kept (unless due for refresh), and a new signing of the
/// same serial takes the next one, so that secondaries see the change.
pub fn sign_loaded(
    zone: &Zone,
    previous: Option<&Zone>,
    signing: &Signing,
) -> Result<Zone, Vec<String>> {
    let started = Instant::now();
    let origin = zone.origin();
    let keys = zone_keys(origin, &signing.policy, &signing.key_directory)
        .map_err(|e| vec![format!("zone '{origin}': keys: {e}")])?;
    let mut config = signing.policy.sign_config();
    // After a restart the version served last is gone; its serial is kept.
    let served = previous
        .map(Zone::serial)
        .or_else(|| read_served_serial(&signing.key_directory, origin));
    config.serial = next_serial(zone.serial(), served);
    let now = heron_proto::time::unix_now();
    let signed = sign_zone_after(zone, previous, &keys, &config, now)
        .map_err(|e| vec![format!("zone '{origin}': cannot sign: {e}")])?;
    write_served_serial(&signing.key_directory, origin, signed.zone.serial())
        .map_err(|e| vec![format!("zone '{origin}': {e}")])?;
    tracing::info!(
        zone = %origin,
        policy = %signing.policy.name,
        signatures = signed.signatures,
        kept = signed.reused,
        serial = signed.zone.serial(),
        ms = started.elapsed().as_millis() as u64,
        "zone signed"
    );
    Ok(signed.zone)
}

/// Where the serial last served of a signed zone is kept, so that a
/// restart never serves a lower one (secondaries would keep their copy,
/// and its signatures would expire there).
fn served_serial_path(dir: &Path, origin: &Name) -> std::path::PathBuf {
    let zone = origin.to_string().to_ascii_lowercase();
    let zone = zone.trim_end_matches('.');
    dir.join(format!(
        "{}.heron-serial",
        if zone.is_empty() { "root" } else { zone }
    ))
}

fn read_served_serial(dir: &Path, origin: &Name) -> Option<u32> {
    let text = fs::read_to_string(served_serial_path(dir, origin)).ok()?;
    text.get(..text.len().min(16))?.trim().parse().ok()
}

/// Written to a temporary file and renamed: a crash leaves the old or the
/// new serial, never half of one.
fn write_served_serial(dir: &Path, origin: &Name, serial: u32) -> Result<(), String> {
    let path = served_serial_path(dir, origin);
    let tmp = path.with_extension("heron-serial.tmp");
    fs::write(&tmp, format!("{serial}\n"))
        .and_then(|()| fs::rename(&tmp, &path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The serial of a new signing: the file's, unless the version served
/// has it or a later one (serial arithmetic, RFC 1982), then one past.
fn next_serial(file: u32, served: Option<u32>) -> Option<u32> {
    let served = served?;
    let ahead = file.wrapping_sub(served) as i32 > 0;
    (!ahead).then(|| served.wrapping_add(1))
}

/// The keys of the zone's policy: one CSK, or a KSK and a ZSK, of its
/// algorithm, the newest of each role found, made when there is none.
fn zone_keys(origin: &Name, policy: &Policy, dir: &Path) -> Result<Vec<ZoneKey>, String> {
    ensure_private_directory(dir)?;
    let zone = origin.to_string().to_ascii_lowercase();
    let found = read_keys(dir, &zone, policy)?;
    let roles: &[KeyRole] = match policy.keys {
        KeySet::Csk => &[KeyRole::Csk],
        KeySet::KskZsk => &[KeyRole::Ksk, KeyRole::Zsk],
    };
    let mut keys = Vec::with_capacity(roles.len());
    for &role in roles {
        let newest = (found.iter())
            .filter(|f| f.role == role)
            .max_by_key(|f| f.created);
        let file = match newest {
            Some(file) => file.clone(),
            None => generate(dir, &zone, role, policy)?,
        };
        let key = file.signing_key().map_err(|e| e.to_string())?;
        keys.push(ZoneKey::new(key, role));
    }
    Ok(keys)
}

/// The directory, made owner-only if new; a warning if others can read it.
fn ensure_private_directory(dir: &Path) -> Result<(), String> {
    if !dir.exists() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    }
    let meta = fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if meta.permissions().mode() & 0o077 != 0 {
        tracing::warn!(
            "key directory {} can be read by others than its owner (chmod 700 it)",
            dir.display()
        );
    }
    Ok(())
}

/// The zone's key files of the policy's algorithm.
fn read_keys(dir: &Path, zone: &str, policy: &Policy) -> Result<Vec<KeyFile>, String> {
    let entries = fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if !name.to_string_lossy().ends_with(KEY_SUFFIX) {
            continue;
        }
        let file = read_key_file(&path)?;
        if file.zone.eq_ignore_ascii_case(zone) && file.algorithm == policy.algorithm {
            out.push(file);
        }
    }
    Ok(out)
}

fn read_key_file(path: &Path) -> Result<KeyFile, String> {
    let meta = fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.len() > MAX_KEY_FILE as u64 {
        return Err(format!("{}: not a key file (too long)", path.display()));
    }
    let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    KeyFile::from_text(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// A new key, written owner-only (0600) and never over another file.
fn generate(dir: &Path, zone: &str, role: KeyRole, policy: &Policy) -> Result<KeyFile, String> {
    let now = heron_proto::time::unix_now();
    let (file, key) =
        KeyFile::generate(zone, role, policy.algorithm, now).map_err(|e| e.to_string())?;
    let path = dir.join(file.file_name(&key));
    let mut out = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    out.write_all(file.to_text().as_bytes())
        .and_then(|()| out.sync_all())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    tracing::info!(
        zone,
        role = role.name(),
        algorithm = %policy.algorithm,
        file = %path.display(),
        "DNSSEC key generated"
    );
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const ZONE: &str = "@ 300 IN SOA ns hm 7 2 3 4 5\n@ 300 IN NS ns\nns 300 IN A 192.0.2.1\n";

    fn load() -> Zone {
        heron_zone::load_zone_str(ZONE, "t", &Name::parse("k.test").unwrap())
            .unwrap()
            .zone
    }

    #[test]
    fn keys_are_made_once_owner_only_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("keys");
        let signing = Signing {
            policy: Arc::new(Policy {
                keys: KeySet::KskZsk,
                ..Policy::default()
            }),
            key_directory: keys.clone(),
        };
        let first = sign_loaded(&load(), None, &signing).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&keys), 0o700);
        let files: Vec<_> = fs::read_dir(&keys).unwrap().flatten().collect();
        let files: Vec<_> = files
            .into_iter()
            .filter(|f| f.file_name().to_string_lossy().ends_with(KEY_SUFFIX))
            .collect();
        assert_eq!(files.len(), 2, "a KSK and a ZSK");
        for f in &files {
            assert_eq!(mode(&f.path()), 0o600);
        }
        let dnskeys = |z: &Zone| -> Vec<Vec<u8>> {
            let set = z.apex().rrset(heron_proto::RType::DNSKEY).unwrap();
            let mut all: Vec<Vec<u8>> = set.rdatas().map(|r| r.to_vec()).collect();
            all.sort();
            all
        };
        let second = sign_loaded(&load(), Some(&first), &signing).unwrap();
        assert_eq!(dnskeys(&first), dnskeys(&second), "the same keys");
        assert_eq!(
            fs::read_dir(&keys).unwrap().count(),
            3,
            "two keys, one serial"
        );
        assert_eq!((first.serial(), second.serial()), (7, 8));
        // A restart (no version served) goes on from the serial kept.
        let third = sign_loaded(&load(), None, &signing).unwrap();
        assert_eq!(third.serial(), 9);
        assert_eq!(
            fs::read_dir(&keys).unwrap().count(),
            3,
            "two keys, one serial"
        );
    }

    #[test]
    fn a_new_signing_moves_the_serial_past_the_one_served() {
        assert_eq!(next_serial(7, None), None);
        assert_eq!(next_serial(8, Some(7)), None, "the file is ahead");
        assert_eq!(next_serial(7, Some(7)), Some(8));
        assert_eq!(next_serial(7, Some(9)), Some(10));
        assert_eq!(next_serial(u32::MAX, Some(u32::MAX)), Some(0));
        assert_eq!(next_serial(3, Some(u32::MAX - 2)), None, "wrapped ahead");
    }

    #[test]
    fn a_broken_key_file_stops_the_signing_with_its_name() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join("Kk.test+013+00001.csk.heron-key"),
            "zone: x",
        )
        .unwrap();
        let signing = Signing {
            policy: Arc::new(Policy::default()),
            key_directory: dir.path().to_path_buf(),
        };
        let errors = sign_loaded(&load(), None, &signing).unwrap_err();
        assert!(errors[0].contains("heron-key"), "{errors:?}");
    }
}
