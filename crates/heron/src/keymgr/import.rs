//! `heron keymgr -d KEYDIR ZONE import --from bind|knot DIR`: a zone signed
//! by BIND or Knot moves to Heron with its keys, so the DS at the parent
//! stays valid and no rollover is needed.
//!
//! Each key is written as a Heron key file (the same file the server
//! makes, mode 0600) and recorded in the zone's state file with its role
//! and RFC 7583 states: BIND's `.state` file gives them; otherwise the
//! timing metadata does (a key published and active before now, and not
//! retired, is taken as in place). Every key is checked before anything is
//! written, so a refused key leaves the key directory as it was.

use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use heron_dnssec::dnskey::{self, FLAG_SEP};
use heron_dnssec::import::bind_state::{self, BindState};
use heron_dnssec::import::{ImportedKey, bind, knot};
use heron_dnssec::keys::{Algorithm, KeyFile, KeyRole, SigningKey};
use heron_dnssec::rollover::state_file::{ZoneKeys, file_name};
use heron_dnssec::rollover::{self, Goal, Role, State, UnixTime};

/// The most keys one zone may bring: far above any rollover's few, and a
/// bound on what a crowded or hostile directory makes us read.
pub const MAX_KEYS: usize = 32;

/// The largest keymgr JSON list or `.state` file read.
const MAX_TEXT: u64 = 1 << 20;

/// Suffix of Heron's key files (as `plan::signing` writes them).
const KEY_SUFFIX: &str = ".heron-key";

/// Which signer the keys come from.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeySource {
    /// BIND: a directory of `K<zone>+<alg>+<tag>.key`/`.private` (and `.state`) files.
    Bind,
    /// Knot: the KASP database directory (with `keys/*.pem`, or see --keystore).
    Knot,
}

/// One key of the old signer, checked, before anything is written.
struct Found {
    key: ImportedKey,
    /// The TTL the old signer served its DNSKEY with, if its files say.
    dnskey_ttl: Option<u32>,
    role: Role,
    /// BIND's own states for the key (dnssec-policy), if it kept them.
    state: Option<BindState>,
    /// Where it came from, for messages.
    source: String,
}

/// Where Knot's keys are besides its KASP database: `--knot-list` and
/// `--keystore`.
#[derive(Clone, Copy, Default)]
pub struct KnotFiles<'a> {
    /// What `keymgr -D KASPDIR ZONE list -j` printed, instead of running it.
    pub list: Option<&'a Path>,
    /// The folder of the PEM files, instead of KASPDIR/keys.
    pub keystore: Option<&'a Path>,
}

/// Imports the keys of `zone` from `dir` into `key_dir`; what to print.
/// Where the keys come from: the signer, its folder, Knot's extras, and
/// the DNSKEY TTL it serves if the operator gives it.
pub struct Source<'a> {
    pub from: KeySource,
    pub dir: &'a Path,
    pub knot: KnotFiles<'a>,
    pub dnskey_ttl: Option<u32>,
}

pub fn import(key_dir: &Path, zone: &str, source: Source, now: UnixTime) -> Result<String, String> {
    let zone = zone_name(zone)?;
    let Source {
        from,
        dir,
        knot,
        dnskey_ttl,
    } = source;
    if from == KeySource::Bind && knot.list.is_some() {
        return Err("--knot-list is for --from knot".into());
    }
    if from == KeySource::Bind && knot.keystore.is_some() {
        return Err("--keystore is for --from knot".into());
    }
    let mut found = match from {
        KeySource::Bind => bind_keys(dir, &zone)?,
        KeySource::Knot => knot_keys(dir, &zone, knot)?,
    };
    refuse_without_sep(&found)?;
    take_given_dnskey_ttl(&mut found, dnskey_ttl);
    write_keys(key_dir, &zone, found, now)
}

/// Keys none of which has the SEP flag: the old signer signed the DNSKEY
/// RRset with a key of flags 256, the one a DS at the parent names. Heron
/// signs it only with keys of flags 257 (a KSK or CSK), so the zone would
/// be bogus from its first signing until the parent took a new DS
/// (regression hunt BC-6): refused, with the way out.
fn refuse_without_sep(found: &[Found]) -> Result<(), String> {
    if found.is_empty() || found.iter().any(|f| f.key.flags & FLAG_SEP != 0) {
        return Ok(());
    }
    let tags: Vec<String> = found.iter().map(|f| f.key.tag().to_string()).collect();
    Err(format!(
        "none of the zone's keys ({}) has the SEP flag (DNSKEY flags 257): the old signer signs \
         the DNSKEY RRset with a key of flags 256, which a DS at the parent names, and Heron \
         signs it only with a KSK or CSK (flags 257), so the zone would not validate under that \
         DS. Roll the zone to a key with the SEP flag in the old signer first (a KSK or CSK), \
         have its DS at the parent, then import",
        tags.join(", ")
    ))
}

/// `--dnskey-ttl` for each key: the longer of the one given and the one
/// its files say (a BIND .key file's TTL), since waiting too little for
/// the old DNSKEY RRset leaves a bogus window (it replaced the file's).
fn take_given_dnskey_ttl(found: &mut [Found], given: Option<u32>) {
    found
        .iter_mut()
        .for_each(|f| f.dnskey_ttl = f.dnskey_ttl.max(given));
}

/// The zone in the form Heron's key files hold: lower case, final dot.
fn zone_name(zone: &str) -> Result<String, String> {
    let name = heron_proto::Name::parse(zone).map_err(|e| format!("zone '{zone}': {e}"))?;
    Ok(name.to_string().to_ascii_lowercase())
}

fn same_zone(a: &str, b: &str) -> bool {
    a.trim_end_matches('.')
        .eq_ignore_ascii_case(b.trim_end_matches('.'))
}

fn read_bounded(path: &Path) -> Result<String, String> {
    let failed = |e: std::io::Error| format!("{}: {e}", path.display());
    let size = fs::metadata(path).map_err(failed)?.len();
    if size > MAX_TEXT {
        return Err(format!("{}: {size} bytes, too large", path.display()));
    }
    fs::read_to_string(path).map_err(failed)
}

/// The `K<zone>+<alg>+<tag>` stems in `dir` of the zone's keys (others'
/// are left alone), sorted.
fn bind_stems(dir: &Path, zone: &str) -> Result<Vec<PathBuf>, String> {
    let entries = fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut stems = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".key") else {
            continue;
        };
        let file_zone = bind::name_parts(stem).map(|(z, _, _)| z);
        if file_zone.is_some_and(|z| same_zone(z, zone) || (z == "." && zone == ".")) {
            stems.push(dir.join(stem));
            if stems.len() > MAX_KEYS {
                return Err(format!(
                    "{}: more than {MAX_KEYS} keys of {zone}; move the old ones away",
                    dir.display()
                ));
            }
        }
    }
    stems.sort();
    Ok(stems)
}

fn bind_keys(dir: &Path, zone: &str) -> Result<Vec<Found>, String> {
    let stems = bind_stems(dir, zone)?;
    if stems.is_empty() {
        let bare = zone.trim_end_matches('.');
        return Err(format!(
            "{}: no key of {zone} (no K{bare}.+ALG+TAG.key file)",
            dir.display()
        ));
    }
    let mut found = Vec::with_capacity(stems.len());
    for stem in stems {
        let shown = stem.display().to_string();
        let key = bind::read(&stem).map_err(|e| e.to_string())?;
        if !same_zone(&key.zone, zone) {
            return Err(format!(
                "{shown}: the key is of zone {}, not {zone}",
                key.zone
            ));
        }
        let state_path = PathBuf::from(format!("{shown}.state"));
        let state = match state_path.exists() {
            true => Some(
                bind_state::parse(&read_bounded(&state_path)?)
                    .map_err(|e| format!("{}: {e}", state_path.display()))?,
            ),
            false => None,
        };
        let role = state.as_ref().map_or(Role::Zsk, |s| s.role);
        found.push(Found {
            key: key.key,
            dnskey_ttl: key.ttl,
            role,
            state,
            source: shown,
        });
    }
    guess_roles(&mut found);
    Ok(found)
}

/// Keys without a `.state` file have only their flags: SEP keys are KSKs
/// when the zone has a key without SEP, otherwise CSKs.
fn guess_roles(found: &mut [Found]) {
    let has_zsk = found.iter().any(|f| f.key.flags & FLAG_SEP == 0);
    for f in found.iter_mut().filter(|f| f.state.is_none()) {
        f.role = f.key.role(!has_zsk);
    }
}

fn knot_keys(kasp: &Path, zone: &str, files: KnotFiles) -> Result<Vec<Found>, String> {
    let list_file = files.list;
    check_knot_folder(kasp, list_file.is_none())?;
    let pem_dir = files
        .keystore
        .map_or_else(|| kasp.join("keys"), Path::to_path_buf);
    let json = match list_file {
        Some(file) => read_bounded(file)?,
        None => run_keymgr(kasp, zone)?,
    };
    // keymgr prints nothing at all for a zone the database does not know.
    let metas = match json.trim().is_empty() {
        true => Vec::new(),
        false => knot::parse_list(&json).map_err(|e| e.to_string())?,
    };
    if metas.is_empty() {
        return Err(match list_file {
            Some(file) => format!("{} lists no keys for {zone}", file.display()),
            None => format!(
                "the Knot key database in {} has no keys for {zone}",
                kasp.display()
            ),
        });
    }
    if metas.len() > MAX_KEYS {
        return Err(format!("more than {MAX_KEYS} keys of {zone} in the list"));
    }
    let mut found = Vec::with_capacity(metas.len());
    for meta in metas {
        if !same_zone(&meta.zone, zone) {
            return Err(format!(
                "key {} is of zone {}, not {zone}",
                meta.id, meta.zone
            ));
        }
        if meta.public_only {
            return Err(public_only(&meta));
        }
        let key = knot::read_key_in(&pem_dir, &meta).map_err(|e| e.to_string())?;
        let role = match (meta.ksk, meta.zsk) {
            (true, true) => Role::Csk,
            (true, false) => Role::Ksk,
            _ => Role::Zsk,
        };
        found.push(Found {
            key,
            dnskey_ttl: None,
            role,
            state: None,
            source: format!("Knot key {}", meta.id),
        });
    }
    Ok(found)
}

/// Why a key Knot holds without its private half (`keymgr import-pub`)
/// stops the import.
fn public_only(meta: &knot::KnotKeyMeta) -> String {
    let role = match (meta.ksk, meta.zsk) {
        (true, true) => "CSK",
        (true, false) => "KSK",
        _ => "ZSK",
    };
    format!(
        "Knot key {} ({role} {}, algorithm {}) is public-only: Knot publishes its DNSKEY (added \
         with `keymgr import-pub`, as for another signer's key) but holds no private key, so \
         there is nothing to import, and Heron publishes only the DNSKEYs of keys it holds: \
         after the move that DNSKEY would be gone, and signatures the key makes elsewhere (a \
         multi-signer partner's) would no longer validate. Keep Knot as the signer while the \
         key is needed; once it is not, remove it from Knot (`keymgr ZONE delete {}`) and import \
         again. Nothing was written",
        meta.id, meta.tag, meta.algorithm, meta.id
    )
}

/// The KASP folder (the PEM files are read from its `keys/`), and its
/// database when keymgr is to read it: keymgr makes a new database
/// wherever it is pointed, and the source must only be read.
fn check_knot_folder(kasp: &Path, needs_database: bool) -> Result<(), String> {
    let shown = kasp.display();
    match fs::metadata(kasp) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("{shown} does not exist"));
        }
        Err(e) => return Err(format!("{shown}: {e}")),
        Ok(meta) if !meta.is_dir() => return Err(format!("{shown} is not a directory")),
        Ok(_) => {}
    }
    if needs_database && !kasp.join("data.mdb").is_file() {
        return Err(format!("{shown} is not a Knot key database (no data.mdb)"));
    }
    Ok(())
}

/// Knot keeps the keys' metadata in LMDB: its own keymgr prints it.
fn run_keymgr(kasp: &Path, zone: &str) -> Result<String, String> {
    let output = std::process::Command::new("keymgr")
        .arg("-j")
        .arg("-D")
        .arg(kasp)
        .arg(zone)
        .arg("list")
        .output()
        .map_err(|e| {
            format!(
                "cannot run Knot's keymgr ({e}): where Knot is installed, run \
                 `keymgr -D {} {zone} list -j > keys.json` and give --knot-list keys.json",
                kasp.display()
            )
        })?;
    if !output.status.success() {
        return Err(format!(
            "keymgr -D {} {zone} list -j failed: {}",
            kasp.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    String::from_utf8(output.stdout).map_err(|_| "keymgr printed text that is not UTF-8".into())
}

/// A key ready to be written: its Heron file and its state entry.
struct Planned {
    file_name: String,
    file: KeyFile,
    entry: rollover::Key,
    write_file: bool,
}

fn key_role(role: Role) -> KeyRole {
    match role {
        Role::Ksk => KeyRole::Ksk,
        Role::Zsk => KeyRole::Zsk,
        Role::Csk => KeyRole::Csk,
    }
}

/// Checks one key and makes its Heron file; `None` when the state file
/// already has it (same tag and algorithm).
fn plan(
    found: &Found,
    zone: &str,
    key_dir: &Path,
    state: &ZoneKeys,
    now: UnixTime,
) -> Result<Option<Planned>, String> {
    let source = &found.source;
    let algorithm = Algorithm::from_number(found.key.algorithm).ok_or_else(|| {
        format!(
            "{source}: algorithm {} is not one Heron signs with (8, 13, 15)",
            found.key.algorithm
        )
    })?;
    let role = key_role(found.role);
    if found.key.flags != role.flags() {
        return Err(format!(
            "{source}: DNSKEY flags {} (Heron signs with keys of flags {} for a {}; a revoked key \
             or one without the zone flag cannot be imported)",
            found.key.flags,
            role.flags(),
            role.name().to_uppercase()
        ));
    }
    let tag = found.key.tag();
    if (state.keys.iter()).any(|k| k.tag == tag && k.algorithm == algorithm.number()) {
        return Ok(None);
    }
    let file = KeyFile {
        zone: zone.to_string(),
        role,
        algorithm,
        created: found.key.times.created.unwrap_or(now).min(now),
        pkcs8: found.key.pkcs8.clone(),
    };
    let signing = file.signing_key().map_err(|e| format!("{source}: {e}"))?;
    check_same_key(&signing, &found.key, source)?;
    let file_name = file.file_name(&signing);
    let write_file = !existing_file_holds(&key_dir.join(&file_name), &found.key, source)?;
    let id = file_name.trim_end_matches(KEY_SUFFIX).to_string();
    Ok(Some(Planned {
        file_name,
        file,
        entry: entry_of(found, id, now),
        write_file,
    }))
}

/// The key's state entry, from BIND's states or from its times.
/// A KSK or CSK in use whose DS the old signer's states do not place at
/// the parent may be there all the same (BIND never saw it, the operator put
/// it there): it counts as offered, withdrawn before the key leaves
/// (black-box finding AY-6).
fn entry_of(found: &Found, id: String, now: UnixTime) -> rollover::Key {
    let mut key = match &found.state {
        Some(bind) => bind.to_rollover_key(&found.key, id, now),
        None => found.key.to_rollover_key(id, found.role, now),
    };
    // A key the old signer retired, its DS gone by its states, is taken
    // at its word.
    key.ds_offered =
        key.goal == Goal::Omnipresent && key.role.signs_keys() && key.ds.state == State::Hidden;
    key
}

/// The key as Heron will publish it is the key the old signer published.
fn check_same_key(signing: &SigningKey, key: &ImportedKey, source: &str) -> Result<(), String> {
    let ours = signing.dnskey_rdata(key.flags);
    if ours != key.dnskey_rdata() {
        return Err(format!(
            "{source}: Heron would publish this key as tag {}, not {}",
            dnskey::key_tag(&ours),
            key.tag()
        ));
    }
    Ok(())
}

/// Whether a key file of that name is already there with this very key
/// (an import run twice); a different key under the name is an error.
fn existing_file_holds(path: &Path, key: &ImportedKey, source: &str) -> Result<bool, String> {
    if !path.exists() {
        return Ok(false);
    }
    let text = read_bounded(path)?;
    let file = KeyFile::from_text(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let same = file
        .signing_key()
        .is_ok_and(|k| k.dnskey_rdata(key.flags) == key.dnskey_rdata());
    match same {
        true => Ok(true),
        false => Err(format!(
            "{source}: {} exists and holds another key",
            path.display()
        )),
    }
}

/// Where a key stands in the succession of its role: the state file
/// lists predecessors first, and a key retires once a later one of its
/// role is in use. When it was made, or, where the old signer does not
/// say (Knot's key list has no creation time), when it was published or
/// made active; of keys made in the same second, the one active first
/// (a key not yet active last): a successor caught mid-rollover comes
/// after the key it replaces.
fn succession(found: &Found, now: UnixTime) -> (UnixTime, UnixTime) {
    let times = &found.key.times;
    let made = (times.created)
        .or(times.publish)
        .or(times.activate)
        .unwrap_or(now);
    (made, times.activate.unwrap_or(UnixTime::MAX))
}

fn write_keys(
    key_dir: &Path,
    zone: &str,
    mut found: Vec<Found>,
    now: UnixTime,
) -> Result<String, String> {
    let state_path = key_dir.join(file_name(zone));
    let recorded = match state_path.exists() {
        true => Some(ZoneKeys::load(&state_path).map_err(|e| e.to_string())?),
        false => None,
    };
    refuse_keys_in_use(key_dir, zone, recorded.as_ref(), &found)?;
    let mut state = recorded.unwrap_or_else(|| ZoneKeys::new(zone, Vec::new()));
    ensure_private_directory(key_dir)?;
    found.sort_by_key(|f| succession(f, now));
    let mut out = String::new();
    let mut planned = Vec::new();
    for f in &found {
        match plan(f, zone, key_dir, &state, now)? {
            Some(p) => planned.push((f, p)),
            None => out.push_str(&format!(
                "{} {} (algorithm {}): already there, left as it is\n",
                key_role(f.role).name(),
                f.key.tag(),
                f.key.algorithm
            )),
        }
    }
    for (f, p) in planned {
        let path = key_dir.join(&p.file_name);
        if p.write_file {
            write_private(&path, &p.file.to_text())?;
        }
        out.push_str(&format!(
            "{} {} (algorithm {}): {}; from {} to {}\n",
            key_role(f.role).name(),
            f.key.tag(),
            f.key.algorithm,
            describe(&p.entry),
            f.source,
            path.display()
        ));
        state.keys.push(p.entry);
    }
    out.push_str(&hold_served_ttl(&mut state, &found));
    state.save(&state_path).map_err(|e| e.to_string())?;
    out.push_str(&advice(&found, now));
    out.push_str(&others_warning(key_dir, zone, &state));
    Ok(out)
}

/// The DNSKEY TTL taken for an old signer whose files do not say it
/// (Knot's keys, BIND's without a TTL): a day, so that no cache can still
/// hold the DNSKEY RRset it served when a rollover counts it gone.
const UNKNOWN_DNSKEY_TTL: u32 = 86_400;

/// Records in the state file the DNSKEY TTL the old signer served its
/// keys with, as the waits the zone was last served under: while caches
/// may hold that RRset, Heron's rollovers wait by it, whatever the
/// policy's `dnskey-ttl` (black-box finding: a ZSK rollover under way at
/// the import dropped the old signatures after Heron's 30 s while
/// resolvers held BIND's 120 s RRset: bogus). What to tell the operator.
fn hold_served_ttl(state: &mut ZoneKeys, found: &[Found]) -> String {
    use heron_dnssec::rollover::waits::{HeldWaits, Waits};
    let said = found.iter().filter_map(|f| f.dnskey_ttl).max();
    let ttl = said.unwrap_or(UNKNOWN_DNSKEY_TTL);
    let mut waits = state.waits.unwrap_or(HeldWaits {
        last: Waits::default(),
        held: Waits::default(),
        until: 0,
    });
    waits.last.dnskey_ttl = waits.last.dnskey_ttl.max(u64::from(ttl));
    state.waits = Some(waits);
    match said {
        Some(_) => format!(
            "the old signer served its DNSKEY RRset with TTL {ttl}: Heron's rollovers wait by it \
             (or by the policy's dnskey-ttl if longer) until that RRset can have left caches\n"
        ),
        None => format!(
            "the old signer's files do not say the TTL of its DNSKEY RRset: Heron's rollovers \
             wait by {ttl} s (a day) until that RRset can have left caches (give \
             --dnskey-ttl SECONDS to say it)\n"
        ),
    }
}

/// Refuses the import while Heron has keys of the zone in use that the
/// old signer did not have. Import moves keys without a rollover: taken
/// in beside Heron's, they would sign at once in the version that first
/// publishes them and Heron's would go, so resolvers holding the old
/// DNSKEY RRset (or the parent's DS) would fail to validate.
fn refuse_keys_in_use(
    key_dir: &Path,
    zone: &str,
    state: Option<&ZoneKeys>,
    found: &[Found],
) -> Result<(), String> {
    let imported = |tag: u16, algorithm: u8| {
        (found.iter()).any(|f| f.key.tag() == tag && f.key.algorithm == algorithm)
    };
    let in_use: Vec<String> = match state {
        Some(state) => (state.keys.iter())
            .filter(|k| !k.is_gone() && !imported(k.tag, k.algorithm))
            .map(|k| k.id.clone())
            .collect(),
        // No state file: the next signing takes the key files up as in use.
        None => (zone_key_ids(key_dir, zone).into_iter())
            .filter(|id| !tag_and_algorithm(id).is_some_and(|(t, a)| imported(t, a)))
            .collect(),
    };
    if in_use.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{dir} already has keys of {zone} in use ({ids}): importing would replace them at \
         once, and resolvers holding their DNSKEY RRset would fail to validate. Import into an \
         empty key directory, before Heron first signs the zone; if these keys were never \
         served, stop the server and remove {state} and their {KEY_SUFFIX} files from {dir} \
         first. A zone Heron already serves signed keeps its keys.",
        dir = key_dir.display(),
        ids = in_use.join(", "),
        state = file_name(zone),
    ))
}

/// The ids (file names less [`KEY_SUFFIX`]) of the zone's key files in
/// `key_dir`, sorted.
fn zone_key_ids(key_dir: &Path, zone: &str) -> Vec<String> {
    let bare = zone.trim_end_matches('.');
    let prefix = format!("K{}+", if bare.is_empty() { "." } else { bare });
    let Ok(entries) = fs::read_dir(key_dir) else {
        return Vec::new();
    };
    let mut ids: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(&prefix))
        .filter_map(|name| Some(name.strip_suffix(KEY_SUFFIX)?.to_string()))
        .collect();
    ids.sort();
    ids
}

/// The tag and algorithm a key id `K<zone>+<alg>+<tag>.<role>` names.
fn tag_and_algorithm(id: &str) -> Option<(u16, u8)> {
    let (stem, _role) = id.rsplit_once('.')?;
    let (_, algorithm, tag) = bind::name_parts(stem)?;
    Some((tag, algorithm))
}

/// Key files of the zone that the state file does not record: the signer
/// does not use them (only a missing state file has them taken up).
fn others_warning(key_dir: &Path, zone: &str, state: &ZoneKeys) -> String {
    let others: Vec<String> = (zone_key_ids(key_dir, zone).into_iter())
        .filter(|id| !state.keys.iter().any(|k| &k.id == id))
        .collect();
    if others.is_empty() {
        return String::new();
    }
    format!(
        "warning: {} also holds key files of {zone} its state file does not record ({}): \
         Heron does not sign with them; remove them (server stopped) so that they are never \
         taken up\n",
        key_dir.display(),
        others.join(", ")
    )
}

/// Where the key stands, in words.
fn describe(key: &rollover::Key) -> String {
    if key.goal == Goal::Hidden {
        return "retired (Heron will not sign with it)".into();
    }
    if key.is_active() {
        // A ZSK has no DS: only a KSK or CSK is in use at the parent.
        return match key.role {
            rollover::Role::Zsk => "active: published, signing".into(),
            _ => "active: published, signing, in use at the parent".into(),
        };
    }
    if key.dnskey.state == State::Omnipresent && key.ds.state == State::Rumoured {
        // Knot's `ready`: in place but for the parent's DS.
        let signs = match key.role {
            rollover::Role::Csk => "the zone",
            _ => "the DNSKEY RRset",
        };
        return format!(
            "published, signing {signs}, waiting for its DS at the parent (its CDS and CDNSKEY \
             are published; `heron ctl ds-seen ZONE` once the parent has the DS, unless the \
             policy's parent-servers are asked)"
        );
    }
    let state = |s: State| format!("{s:?}").to_lowercase();
    format!(
        "not yet in place (dnskey={} rrsig={} ds={})",
        state(key.dnskey.state),
        state(key.zone_rrsig.state),
        state(key.ds.state)
    )
}

/// The policy the keys need, and a warning when a rollover was under way.
fn advice(found: &[Found], now: UnixTime) -> String {
    let in_use: Vec<&Found> = found
        .iter()
        .filter(|f| entry_of(f, String::new(), now).goal != Goal::Hidden)
        .collect();
    let Some(first) = in_use.first() else {
        return "note: every key imported is retired; Heron will make new ones\n".into();
    };
    let keys = match in_use.iter().any(|f| f.role == Role::Csk) {
        true => "csk",
        false => "ksk-zsk",
    };
    let algorithm = Algorithm::from_number(first.key.algorithm)
        .map_or("?".into(), |a| a.to_string().to_lowercase());
    let mut out = format!(
        "sign the zone with a [[dnssec-policy]] of algorithm = \"{algorithm}\" and keys = \"{keys}\"\n"
    );
    let roles = in_use.iter().map(|f| f.role);
    let mut seen = Vec::new();
    for role in roles {
        if seen.contains(&role) {
            out.push_str(&format!(
                "warning: more than one {} is in use (a rollover was under way): Heron goes on \
                 with it, the newest key taking over and the older ones retiring\n",
                key_role(role).name()
            ));
        }
        seen.push(role);
    }
    out
}

/// The key directory, made owner-only if new.
fn ensure_private_directory(dir: &Path) -> Result<(), String> {
    if dir.exists() {
        return Ok(());
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot make {}: {e}", dir.display()))
}

/// A new owner-only (0600) file, never over another.
fn write_private(path: &Path, text: &str) -> Result<(), String> {
    crate::plan::key_state::write_new_private(path, text)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bind_source<'a>(dir: &'a Path, knot: KnotFiles<'a>) -> Source<'a> {
        Source {
            from: KeySource::Bind,
            dir,
            knot,
            dnskey_ttl: None,
        }
    }

    fn knot_source(dir: &Path) -> Source<'_> {
        Source {
            from: KeySource::Knot,
            dir,
            knot: KnotFiles::default(),
            dnskey_ttl: None,
        }
    }
    use heron_dnssec::import::{KeyTimes, public_key_of};
    use std::os::unix::fs::PermissionsExt;

    const ZONE: &str = "moved.test.";
    const NOW: UnixTime = 1_800_000_000;

    /// A CSK as another signer would hand it over: published and active.
    fn found(flags: u16) -> Found {
        let (file, _) =
            KeyFile::generate(ZONE, KeyRole::Csk, Algorithm::EcdsaP256Sha256, 1).unwrap();
        let key = ImportedKey {
            algorithm: 13,
            flags,
            public_key: public_key_of(13, &file.pkcs8).unwrap(),
            pkcs8: file.pkcs8,
            times: KeyTimes {
                created: Some(NOW - 100),
                publish: Some(NOW - 100),
                activate: Some(NOW - 100),
                ..KeyTimes::default()
            },
        };
        Found {
            key,
            dnskey_ttl: Some(120),
            role: Role::Csk,
            state: None,
            source: "test".into(),
        }
    }

    #[test]
    fn a_key_is_written_owner_only_recorded_active_and_not_twice() {
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("keys");
        let key = found(257);
        let tag = key.key.tag();
        let again = Found {
            key: key.key.clone(),
            dnskey_ttl: None,
            role: key.role,
            state: None,
            source: "again".into(),
        };
        let out = write_keys(&keys, ZONE, vec![key], NOW).unwrap();
        assert!(
            out.contains(&format!("csk {tag} (algorithm 13): active")),
            "{out}"
        );
        // The TTL the old signer served the DNSKEY RRset with is what
        // rollovers wait by while caches may hold it.
        let state = ZoneKeys::load(&keys.join(file_name(ZONE))).unwrap();
        assert_eq!(state.waits.map(|w| w.last.dnskey_ttl), Some(120));
        assert!(out.contains("TTL 120"), "{out}");
        assert!(!out.contains("warning"), "{out}");
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&keys), 0o700);
        let file = keys.join(format!("Kmoved.test+013+{tag:05}.csk.heron-key"));
        assert_eq!(mode(&file), 0o600);
        let state = ZoneKeys::load(&keys.join(file_name(ZONE))).unwrap();
        assert_eq!(state.keys.len(), 1);
        assert!(state.keys[0].is_active());
        assert_eq!(state.keys[0].id, format!("Kmoved.test+013+{tag:05}.csk"));
        let out = write_keys(&keys, ZONE, vec![again], NOW).unwrap();
        assert!(out.contains("already there"), "{out}");
        assert_eq!(
            ZoneKeys::load(&keys.join(file_name(ZONE)))
                .unwrap()
                .keys
                .len(),
            1
        );
    }

    #[test]
    fn a_given_dnskey_ttl_never_shortens_the_one_the_files_say() {
        let mut keys = vec![found(257)];
        take_given_dnskey_ttl(&mut keys, Some(60));
        assert_eq!(keys[0].dnskey_ttl, Some(120), "the .key file's, longer");
        take_given_dnskey_ttl(&mut keys, Some(300));
        assert_eq!(keys[0].dnskey_ttl, Some(300));
        keys[0].dnskey_ttl = None;
        take_given_dnskey_ttl(&mut keys, Some(60));
        assert_eq!(keys[0].dnskey_ttl, Some(60), "the files say none");
    }

    #[test]
    fn a_knot_list_with_bind_keys_is_a_usage_error() {
        let dir = tempfile::tempdir().unwrap();
        let list = KnotFiles {
            list: Some(Path::new("keys.json")),
            keystore: None,
        };
        let error = import(dir.path(), ZONE, bind_source(dir.path(), list), NOW);
        assert_eq!(error, Err("--knot-list is for --from knot".to_string()));
        let keystore = KnotFiles {
            list: None,
            keystore: Some(Path::new("pem")),
        };
        let error = import(dir.path(), ZONE, bind_source(dir.path(), keystore), NOW);
        assert_eq!(error, Err("--keystore is for --from knot".to_string()));
        let none = KnotFiles::default();
        let error = import(dir.path(), "a..b", bind_source(dir.path(), none), NOW);
        assert!(error.unwrap_err().starts_with("zone 'a..b'"));
    }

    #[test]
    fn a_revoked_key_is_refused_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let error = write_keys(dir.path(), ZONE, vec![found(257), found(257 | 0x80)], NOW);
        let error = error.unwrap_err();
        assert!(error.contains("DNSKEY flags 385"), "{error}");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn two_keys_of_one_role_in_use_warn_of_a_rollover_under_way() {
        let dir = tempfile::tempdir().unwrap();
        let out = write_keys(dir.path(), ZONE, vec![found(257), found(257)], NOW).unwrap();
        assert!(
            out.contains("warning: more than one csk is in use"),
            "{out}"
        );
        assert!(out.contains("keys = \"csk\""), "{out}");
    }

    /// Knot's key list gives no creation time: a ZSK rolled mid-way
    /// (the successor published, not yet active) is listed after the key
    /// it replaces, whatever order the list has, so that the older one
    /// retires and the rollover goes on.
    #[test]
    fn a_successor_without_a_creation_time_comes_after_its_predecessor() {
        let dir = tempfile::tempdir().unwrap();
        let zsk = |publish: UnixTime, activate: Option<UnixTime>| {
            let mut f = found(256);
            f.role = Role::Zsk;
            f.key.times = KeyTimes {
                publish: Some(publish),
                activate,
                ..KeyTimes::default()
            };
            f
        };
        let old = zsk(NOW - 100, Some(NOW - 100));
        // Published later, or in the same second (Knot rolled at once).
        let new = zsk(NOW - 5, None);
        let at_once = zsk(NOW - 100, None);
        let tags = [old.key.tag(), new.key.tag(), at_once.key.tag()];
        let (old_tag, new_tag) = (tags[0], tags[1]);
        let order = |found: Vec<Found>| {
            let dir = tempfile::tempdir().unwrap();
            write_keys(dir.path(), ZONE, found, NOW).unwrap();
            let state = ZoneKeys::load(&dir.path().join(file_name(ZONE))).unwrap();
            state.keys.iter().map(|k| k.tag).collect::<Vec<u16>>()
        };
        let copy = |f: &Found| Found {
            key: f.key.clone(),
            dnskey_ttl: None,
            role: f.role,
            state: None,
            source: String::new(),
        };
        assert_eq!(order(vec![copy(&at_once), copy(&old)]), [old_tag, tags[2]]);
        write_keys(dir.path(), ZONE, vec![new, old], NOW).unwrap();
        let state = ZoneKeys::load(&dir.path().join(file_name(ZONE))).unwrap();
        let found: Vec<u16> = state.keys.iter().map(|k| k.tag).collect();
        assert_eq!(found, [old_tag, new_tag]);
        let policy = heron_dnssec::policy::Policy::default().rollover_policy(60);
        let mut machine = rollover::Rollover::new(policy, state.keys);
        machine.advance(NOW);
        let goal =
            |m: &rollover::Rollover, tag| m.keys().iter().find(|k| k.tag == tag).unwrap().goal;
        assert_eq!(goal(&machine, old_tag), Goal::Hidden, "the old ZSK retires");
        assert_eq!(goal(&machine, new_tag), Goal::Omnipresent);
    }

    /// A key Heron made, as its state file records it: `served` its
    /// records in caches, else retired and gone from them.
    fn heron_key(dir: &Path, served: bool) -> rollover::Key {
        let (own, key) = KeyFile::generate(ZONE, KeyRole::Csk, Algorithm::Ed25519, NOW).unwrap();
        let name = own.file_name(&key);
        fs::write(dir.join(&name), own.to_text()).unwrap();
        let id = name.trim_end_matches(KEY_SUFFIX).to_string();
        let tag = heron_dnssec::sign::ZoneKey::new(key, KeyRole::Csk).tag;
        let mut entry = rollover::Key::new(id, tag, 15, Role::Csk, NOW - 1000);
        let state = if served {
            State::Omnipresent
        } else {
            State::Hidden
        };
        for record in [&mut entry.dnskey, &mut entry.zone_rrsig, &mut entry.ds] {
            record.state = state;
        }
        if !served {
            entry.goal = Goal::Hidden;
        }
        entry
    }

    /// The key directory's files and the state file's text.
    fn snapshot(dir: &Path) -> (Vec<String>, String) {
        let mut names: Vec<String> = (fs::read_dir(dir).unwrap())
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let state = fs::read_to_string(dir.join(file_name(ZONE))).unwrap_or_default();
        (names, state)
    }

    /// Import moves a zone to Heron without a rollover: keys taken in
    /// beside those Heron signs with would replace them at once (new
    /// DNSKEYs signing in the version that first publishes them, the old
    /// key gone while resolvers hold it), so the import is refused.
    #[test]
    fn keys_heron_signs_with_are_never_replaced_by_an_import() {
        let dir = tempfile::tempdir().unwrap();
        let own = heron_key(dir.path(), true);
        let own_id = own.id.clone();
        let path = dir.path().join(file_name(ZONE));
        ZoneKeys::new(ZONE, vec![own]).save(&path).unwrap();
        let before = snapshot(dir.path());
        let error = write_keys(dir.path(), ZONE, vec![found(257)], NOW).unwrap_err();
        assert!(error.contains(&own_id), "{error}");
        assert!(error.contains("empty key directory"), "{error}");
        assert_eq!(snapshot(dir.path()), before, "nothing is written");
    }

    /// Without a state file the next signing takes the zone's key files
    /// up as in use: they refuse the import the same way.
    #[test]
    fn key_files_heron_made_without_a_state_file_refuse_the_import() {
        let dir = tempfile::tempdir().unwrap();
        let own = heron_key(dir.path(), true);
        let before = snapshot(dir.path());
        let error = write_keys(dir.path(), ZONE, vec![found(257)], NOW).unwrap_err();
        assert!(error.contains(&own.id), "{error}");
        assert_eq!(snapshot(dir.path()), before, "nothing is written");
    }

    /// A key that retired and left every cache is no longer in use: it
    /// does not stand in the way, and stays recorded as it was.
    #[test]
    fn a_retired_key_gone_from_caches_does_not_refuse_the_import() {
        let dir = tempfile::tempdir().unwrap();
        let gone = heron_key(dir.path(), false);
        let path = dir.path().join(file_name(ZONE));
        ZoneKeys::new(ZONE, vec![gone.clone()]).save(&path).unwrap();
        let out = write_keys(dir.path(), ZONE, vec![found(257)], NOW).unwrap();
        assert!(out.contains("active"), "{out}");
        let state = ZoneKeys::load(&path).unwrap();
        assert_eq!(state.keys.len(), 2);
        assert_eq!(state.keys[0], gone);
    }

    /// Key files the state file does not record are not signed with
    /// (only a missing state file takes them up): a warning names them.
    #[test]
    fn key_files_the_state_file_does_not_record_are_warned_about() {
        let dir = tempfile::tempdir().unwrap();
        ZoneKeys::new(ZONE, Vec::new())
            .save(&dir.path().join(file_name(ZONE)))
            .unwrap();
        let stray = heron_key(dir.path(), true);
        let out = write_keys(dir.path(), ZONE, vec![found(257)], NOW).unwrap();
        assert!(out.contains("warning:") && out.contains(&stray.id), "{out}");
    }

    /// The folder's files, recursively, as paths below it.
    fn tree(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            out.extend(tree(&path));
            out.push(path.strip_prefix(dir).unwrap().to_path_buf());
        }
        out.sort();
        out
    }

    /// Knot's keymgr would make a key database wherever it is pointed:
    /// a folder that is not one (BIND's key files, a path that does not
    /// exist) is refused before it runs, and left as it was.
    #[test]
    fn a_folder_that_is_not_a_knot_key_database_is_refused_and_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("keys");
        let bind = dir.path().join("bind");
        fs::create_dir(&bind).unwrap();
        fs::write(bind.join("Kfr.test.+013+01234.key"), "").unwrap();
        let error = import(&keys, "fr.test", knot_source(&bind), NOW).unwrap_err();
        let expected = format!(
            "{} is not a Knot key database (no data.mdb)",
            bind.display()
        );
        assert_eq!(error, expected);
        assert_eq!(tree(&bind), [PathBuf::from("Kfr.test.+013+01234.key")]);
        let missing = dir.path().join("missing");
        let error = import(&keys, "fr.test", knot_source(&missing), NOW).unwrap_err();
        assert!(error.contains("does not exist"), "{error}");
        assert!(!missing.exists() && !keys.exists());
    }

    /// Whether Knot's keymgr runs here; tests that need it skip otherwise.
    fn knot_keymgr_installed() -> bool {
        let ran = std::process::Command::new("keymgr").arg("-V").output();
        let installed = ran.is_ok_and(|out| out.status.success());
        if !installed {
            eprintln!("skipped: Knot's keymgr is not installed");
        }
        installed
    }

    #[test]
    fn a_knot_key_database_without_the_zone_says_it_has_no_keys_for_it() {
        if !knot_keymgr_installed() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let kasp = dir.path().join("kasp");
        fs::create_dir(&kasp).unwrap();
        let made = std::process::Command::new("keymgr")
            .arg("-D")
            .arg(&kasp)
            .args([
                "other.test",
                "generate",
                "algorithm=13",
                "ksk=yes",
                "zsk=yes",
            ])
            .output()
            .unwrap();
        assert!(made.status.success(), "{made:?}");
        let keys = dir.path().join("keys");
        let error = import(&keys, "fr.test", knot_source(&kasp), NOW).unwrap_err();
        let expected = format!(
            "the Knot key database in {} has no keys for fr.test.",
            kasp.display()
        );
        assert_eq!(error, expected);
        assert!(!keys.exists());
    }

    /// Keys none of which has the SEP flag are refused: the DNSKEY RRset
    /// was signed with a key of flags 256 (regression hunt BC-6); one SEP
    /// key among them is enough.
    #[test]
    fn keys_without_a_sep_flag_are_refused() {
        let error = refuse_without_sep(&[found(256), found(256)]).unwrap_err();
        assert!(error.contains("has the SEP flag"), "{error}");
        assert!(refuse_without_sep(&[found(256), found(257)]).is_ok());
        assert!(refuse_without_sep(&[]).is_ok());
    }
}
