//! `heron keymgr ... generate`: a key made now, offline, that becomes the
//! zone's next key of its role. Before the zone is first signed it is
//! the zone's first key (its DS can go to the parent before the zone is
//! served signed); afterwards the key in use of that role rolls over to
//! it at the zone's next signing, as `roll` would to a key the server
//! made. Never while a rollover of that role is under way.

use std::path::Path;

use heron_dnssec::ds::{DigestType, ds_rdata};
use heron_dnssec::keys::Algorithm;
use heron_dnssec::rollover::state_file::{ZoneKeys, file_name};
use heron_dnssec::rollover::{Event, Goal, Key, KeyRequest, Role, Rollover, UnixTime};
use heron_proto::{Name, RType};

use crate::plan::key_state;

/// The roles `--role` names.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoleArg {
    Csk,
    Ksk,
    Zsk,
}

impl From<RoleArg> for Role {
    fn from(role: RoleArg) -> Role {
        match role {
            RoleArg::Csk => Role::Csk,
            RoleArg::Ksk => Role::Ksk,
            RoleArg::Zsk => Role::Zsk,
        }
    }
}

/// Makes the key (file mode 0600) and enters it in the zone's state file
/// in `key_dir`; what to print: its tag, file, and DS for a KSK or CSK.
pub fn generate(
    key_dir: &Path,
    zone: &str,
    role: Option<RoleArg>,
    algorithm: Option<&str>,
    now: UnixTime,
) -> Result<String, String> {
    let origin = (Name::parse(zone).map_err(|e| format!("zone '{zone}': {e}"))?).to_lowercase();
    let zone = key_state::zone_text(&origin);
    let path = key_dir.join(file_name(&zone));
    let state = match path.exists() {
        true => ZoneKeys::load(&path).map_err(|e| e.to_string())?,
        false => ZoneKeys::new(&zone, Vec::new()),
    };
    let role = choose_role(&state, role.map(Role::from))?;
    let algorithm = match algorithm {
        Some(name) => Algorithm::from_name(name)
            .filter(|a| *a != Algorithm::RsaSha256)
            .ok_or_else(|| format!("algorithm '{name}': ecdsap256sha256 or ed25519"))?
            .number(),
        None => algorithm_in_use(&state),
    };
    // A key of another algorithm is never published by the policy's
    // rollovers (they roll algorithms only when the policy's changes):
    // it would sign unpublished, and its roll never end.
    if let Some(policy) = state.policy.as_ref().filter(|p| p.algorithm != algorithm) {
        return Err(format!(
            "the zone's policy signs with algorithm {}: to move to algorithm {algorithm}, \
             change the policy's `algorithm` (an algorithm rollover follows)",
            policy.algorithm
        ));
    }
    may_generate(&state, role)?;
    key_state::ensure_private_directory(key_dir)?;
    let mut key = key_state::generate(key_dir, &zone, KeyRequest { role, algorithm }, now)?;
    // Its DS is printed for the parent before the zone goes live: it may
    // be there from now on (black-box finding AY-6).
    key.ds_offered = state.policy.is_none() && role.signs_keys();
    let replaced: Vec<u16> = (state.keys.iter())
        .filter(|k| k.goal == Goal::Omnipresent && covers(role, k.role))
        .map(|k| k.tag)
        .collect();
    let said = describe(key_dir, &origin, &key, &replaced)?;
    let policy = state
        .policy
        .clone()
        .unwrap_or_else(super::placeholder_policy);
    let mut machine = Rollover::new(policy, state.keys.clone());
    machine
        .handle(Event::KeyAdded(key), now)
        .map_err(|e| e.to_string())?;
    let changed = ZoneKeys {
        keys: machine.keys().to_vec(),
        ..state
    };
    changed.save(&path).map_err(|e| e.to_string())?;
    Ok(said)
}

/// Whether a key of `role` may be made now: not while the zone goes
/// insecure, nor while a rollover of that role is under way.
fn may_generate(state: &ZoneKeys, role: Role) -> Result<(), String> {
    // Going insecure, every key retires: none is made, and no rollover
    // is under way (black-box finding CA-7: "a rollover of the zone's
    // KSK is under way" was said).
    if state.policy.as_ref().is_some_and(|p| p.insecure) {
        return Err(
            "the zone is going insecure (its policy is `insecure`): no key is made while its \
             keys retire; give the zone a signing policy first"
                .into(),
        );
    }
    if let Some(busy) = rolling(&state.keys, role) {
        // Before the first signing there is no rollover: the key made
        // first is simply waiting to be published.
        return Err(match state.policy {
            None => format!(
                "the zone already has a {} (key {}) waiting for its first signing: \
                 delete it first to make another",
                role_name(role),
                busy.tag
            ),
            Some(_) => format!(
                "a rollover of the zone's {} is under way (key {}): generate once it is done",
                role_name(role),
                busy.tag
            ),
        });
    }
    Ok(())
}

/// The role asked, if the zone's policy (as its last signing recorded
/// it) has keys of that role; else the policy's one role (a CSK), or a
/// CSK for a zone never signed that has no KSK and ZSK. A zone with a
/// KSK and a ZSK must say which. A zone never signed that has no key
/// yet takes any role asked: the policy is not known here, and a
/// KSK+ZSK zone gets its KSK's DS to the parent before it goes live
/// (black-box finding AY-2: only a CSK was made, rolled to a KSK and a
/// ZSK once its DS was in: two changes at the parent).
fn choose_role(state: &ZoneKeys, asked: Option<Role>) -> Result<Role, String> {
    if let (None, true, Some(role)) = (&state.policy, state.keys.is_empty(), asked) {
        return Ok(role);
    }
    let split = match &state.policy {
        Some(policy) => !policy.csk,
        None => (state.keys.iter()).any(|k| k.goal == Goal::Omnipresent && k.role != Role::Csk),
    };
    let roles: &[Role] = if split {
        &[Role::Ksk, Role::Zsk]
    } else {
        &[Role::Csk]
    };
    match asked {
        Some(role) if roles.contains(&role) => Ok(role),
        Some(role) => Err(format!(
            "the zone's keys are {}: a {} would not be used",
            match split {
                true => "a KSK and a ZSK",
                false => "one CSK",
            },
            role_name(role)
        )),
        None if split => {
            Err("the zone has a KSK and a ZSK: name the role, --role ksk or --role zsk".into())
        }
        None => Ok(Role::Csk),
    }
}

/// The recorded policy's algorithm, else that of the newest key in use,
/// else ECDSA P-256 (the default policy's).
fn algorithm_in_use(state: &ZoneKeys) -> u8 {
    let newest = (state.keys.iter().rev())
        .find(|k| k.goal == Goal::Omnipresent)
        .map(|k| k.algorithm);
    (state.policy.as_ref().map(|p| p.algorithm))
        .or(newest)
        .unwrap_or(Algorithm::EcdsaP256Sha256.number())
}

/// Whether a key of role `new` does all a key of role `old` does: the
/// older key then retires.
fn covers(new: Role, old: Role) -> bool {
    (new.signs_keys() || !old.signs_keys()) && (new.signs_zone() || !old.signs_zone())
}

/// Whether two roles share a function (signing keys, signing the zone).
fn overlaps(a: Role, b: Role) -> bool {
    (a.signs_keys() && b.signs_keys()) || (a.signs_zone() && b.signs_zone())
}

/// A key of a function `role` has that is not settled: coming in, or
/// retired and still in caches.
fn rolling(keys: &[Key], role: Role) -> Option<&Key> {
    keys.iter().find(|k| {
        overlaps(k.role, role)
            && match k.goal {
                Goal::Omnipresent => !k.is_active(),
                Goal::Hidden => !k.is_gone(),
            }
    })
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Csk => "CSK",
        Role::Ksk => "KSK",
        Role::Zsk => "ZSK",
    }
}

/// The lines printed for the new key: what it is, where, what it
/// replaces, and for a KSK or CSK the DS the parent will need.
fn describe(dir: &Path, origin: &Name, key: &Key, replaced: &[u16]) -> Result<String, String> {
    let file = dir.join(format!("{}{}", key.id, key_state::KEY_SUFFIX));
    let mut said = format!(
        "key {} ({}, algorithm {}) generated: {}\n",
        key.tag,
        role_name(key.role),
        key.algorithm,
        file.display()
    );
    said += &match replaced {
        [] => "it is published at the zone's first signing\n".to_string(),
        tags => format!(
            "at the zone's next signing it is published and key {} rolls over to it \
             (with the server running: heron ctl reload ZONE)\n",
            tags.iter()
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    if key.role.signs_keys() {
        let file = key_state::read_key(dir, &key.id)?;
        let signing = file.signing_key().map_err(|e| e.to_string())?;
        let dnskey = signing.dnskey_rdata(file.role.flags());
        if let Some(ds) = ds_rdata(origin, &dnskey, DigestType::Sha256) {
            let mut text = String::new();
            heron_proto::rdata::format_text(RType::DS, &ds, &mut text);
            said += &format!("{origin} IN DS {text}\n");
        }
    }
    Ok(said)
}
