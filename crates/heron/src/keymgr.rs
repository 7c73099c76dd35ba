//! `heron keymgr`: a zone's DNSSEC keys as its state file in the key
//! directory records them (`heron_dnssec::rollover::state_file`): list
//! them with their next event, ask a key's rollover, delete a retired key,
//! and say that the parent's DS now matches the zone's CDS records.
//!
//! The commands edit the state file while the server is stopped, or for a
//! zone it does not sign; the server re-reads it when it next takes up the
//! zone. `import` brings a zone's keys from BIND or Knot ([`import`]).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use heron_dnssec::rollover::state_file::{ZoneKeys, file_name};
use heron_dnssec::rollover::{Event, Rollover, UnixTime};

use crate::plan::key_state::{self, Hold, find_key, keys_to_roll};

pub mod generate;
pub mod import;

#[derive(clap::Args, Debug)]
pub struct KeymgrArgs {
    /// The key directory; the zone's state file is ZONE.keys.json in it.
    #[arg(long, short = 'd', value_name = "DIR")]
    pub key_dir: PathBuf,
    /// The zone, e.g. example.com
    pub zone: String,
    #[command(subcommand)]
    pub command: KeymgrCommand,
}

#[derive(clap::Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum KeymgrCommand {
    /// List the keys: tag, algorithm, role, goal, the RFC 7583 states of
    /// DNSKEY, RRSIGs and DS, and each key's next event.
    List,
    /// Start a key's rollover at the next step, before its lifetime ends
    /// (KEY: its id or key tag, or ksk, zsk or csk for the key of that
    /// role). With the server running, `heron ctl roll` does it at once.
    /// (Alias retire: the key retires once its successor is in place.)
    #[command(visible_alias = "retire")]
    Roll { key: String },
    /// Make a new key now (file mode 0600) and enter it in the state file
    /// as the zone's next key of its role: before the zone is first signed
    /// its first key, afterwards the key in use of that role rolls over to
    /// it at the zone's next signing. Prints its tag, file and, for a KSK
    /// or CSK, the DS record for the parent. Refused while a rollover of
    /// that role is under way.
    Generate {
        /// csk, ksk or zsk (default: csk, unless the zone has a KSK and a ZSK).
        #[arg(long, value_enum)]
        role: Option<generate::RoleArg>,
        /// ecdsap256sha256 or ed25519 (default: that of the policy the zone
        /// was last signed under, else that of its keys, else
        /// ecdsap256sha256; the configuration is not read: for a zone not
        /// signed yet, name its policy's algorithm).
        #[arg(long)]
        algorithm: Option<String>,
    },
    /// Delete a retired key that no cache holds any more.
    Delete { key: String },
    /// The parent now publishes the DS records the CDS/CDNSKEY records
    /// ask for (for parents that cannot be queried).
    DsSeen,
    /// Import the zone's keys from BIND or Knot, so the zone moves to Heron
    /// with them (the DS at the parent stays valid, no rollover): each key
    /// becomes a Heron key file (mode 0600) and an entry of the state file
    /// with its role and states. Prints what it imported, never a private key.
    /// Refused while the key directory has other keys of the zone in use
    /// (Heron's own): import before Heron first signs the zone.
    Import {
        /// The signer the keys come from.
        #[arg(long, value_enum)]
        from: import::KeySource,
        /// BIND: the directory of K<zone>+<alg>+<tag>.key/.private (and
        /// .state) files; Knot: its KASP database directory.
        dir: PathBuf,
        /// Knot: a file with what `keymgr -D KASPDIR ZONE list -j` prints,
        /// for when Knot's keymgr is not installed here.
        #[arg(long, value_name = "FILE")]
        knot_list: Option<PathBuf>,
        /// Knot: the folder of the keys' PEM files when they are not in
        /// KASPDIR/keys (a `keystore` with `backend: pem` and `config: DIR`).
        #[arg(long, value_name = "DIR")]
        keystore: Option<PathBuf>,
        /// The TTL, in seconds, the old signer serves its DNSKEY RRset
        /// with: rollovers wait by it until that RRset can have left
        /// caches. BIND's .key files give it (the longer of the two is
        /// kept); otherwise a day is taken.
        #[arg(long, value_name = "SECONDS")]
        dnskey_ttl: Option<u32>,
    },
}

pub fn run(args: KeymgrArgs) -> ExitCode {
    if let Some(why) = zone_name_refused(&args.zone) {
        eprintln!("heron keymgr: {why}");
        return ExitCode::from(2);
    }
    let path = args.key_dir.join(file_name(&args.zone));
    let now = heron_proto::time::unix_now();
    // A server signing from the same directory holds it shared while it
    // changes a state file: the edit below waits for that, and it for us.
    let _alone = match args.command {
        KeymgrCommand::List => None,
        _ => match key_state::lock_directory(&args.key_dir, Hold::Alone) {
            Ok(held) => held,
            Err(e) => {
                eprintln!("heron keymgr: {e}");
                return ExitCode::FAILURE;
            }
        },
    };
    let result = match &args.command {
        KeymgrCommand::Import {
            from,
            dir,
            knot_list,
            keystore,
            dnskey_ttl,
        } => {
            let knot = import::KnotFiles {
                list: knot_list.as_deref(),
                keystore: keystore.as_deref(),
            };
            let source = import::Source {
                from: *from,
                dir,
                knot,
                dnskey_ttl: *dnskey_ttl,
            };
            import::import(&args.key_dir, &args.zone, source, now)
        }
        KeymgrCommand::Generate { role, algorithm } => {
            generate::generate(&args.key_dir, &args.zone, *role, algorithm.as_deref(), now)
        }
        command => execute(&path, command, now),
    };
    match result {
        Ok(output) => {
            keep_directory_owner(&args.key_dir);
            out!("{output}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("heron keymgr: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Files root made or replaced in a key directory another user owns
/// (the server's, as it runs as its own user) go to that user: run as
/// root, as the docs' commands are, a roll left the state file root's
/// and 0600, and every signing of the running server failed (black-box
/// finding AY-3). The start as root hands them over the same way.
fn keep_directory_owner(dir: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(owner) = std::fs::metadata(dir) else {
        return;
    };
    if owner.uid() != 0 {
        let ids = heron_sys::privileges::Ids {
            uid: owner.uid(),
            gid: owner.gid(),
        };
        crate::privileges::hand_over_key_directories([dir], ids);
    }
}

/// Runs `command` on the state file at `path` at `now`; what to print.
pub fn execute(path: &Path, command: &KeymgrCommand, now: UnixTime) -> Result<String, String> {
    let state = ZoneKeys::load(path).map_err(|e| e.to_string())?;
    if *command == KeymgrCommand::List {
        return Ok(list(&state, now));
    }
    let events = match command {
        KeymgrCommand::Roll { key } => (keys_to_roll(&state.keys, key)?.into_iter())
            .map(Event::Roll)
            .collect(),
        KeymgrCommand::Delete { key } => {
            vec![Event::Forget(find_key(&state.keys, key)?.id.clone())]
        }
        KeymgrCommand::DsSeen => vec![Event::DsSeen],
        KeymgrCommand::List | KeymgrCommand::Import { .. } | KeymgrCommand::Generate { .. } => {
            return Err("import and generate are run by `run`, with the key directory".into());
        }
    };
    let policy = state.policy.clone().unwrap_or_else(placeholder_policy);
    // As `heron ctl ds-seen`: a zone that waits for no parent has nothing
    // to record (black-box finding: success was said, nothing recorded).
    if *command == KeymgrCommand::DsSeen
        && crate::plan::rollover::outlook(&state, policy.clone(), now)
            .parent
            .is_none()
    {
        return Err(format!("{} is not waiting for the parent", state.zone));
    }
    let mut machine = Rollover::new(policy, state.keys.clone());
    for event in &events {
        machine
            .handle(event.clone(), now)
            .map_err(|e| e.to_string())?;
    }
    let changed = ZoneKeys {
        keys: machine.keys().to_vec(),
        ..state
    };
    changed.save(path).map_err(|e| e.to_string())?;
    Ok(match (command, events.first()) {
        (KeymgrCommand::Roll { key }, _) => format!("key {key} rolls over at the next step\n"),
        (KeymgrCommand::Delete { key }, Some(Event::Forget(id))) => remove_key_file(path, key, id)?,
        _ => "the parent's DS is recorded as matching the CDS records\n".to_string(),
    })
}

/// Removes the private key file of `id`, a key the state file no longer
/// has, from the key directory (beside the state file at `path`); what
/// was done, for `key` as the operator named it.
fn remove_key_file(path: &Path, key: &str, id: &str) -> Result<String, String> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let file = dir.join(format!("{id}{}", crate::plan::key_state::KEY_SUFFIX));
    match std::fs::remove_file(&file) {
        Ok(()) => Ok(format!(
            "key {key} deleted from the state file, and its file {} removed\n",
            file.display()
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(format!(
            "key {key} deleted from the state file (it had no file)\n"
        )),
        Err(e) => Err(format!(
            "key {key} deleted from the state file, but its file {} is still there: {e}",
            file.display()
        )),
    }
}

/// Events the offline commands apply need no timings; only `list`
/// computes times, and it says so when the file has no policy.
/// Why `zone` is no zone name (an empty label, `z.test..`, say: the
/// state file's name was made from the text as given, so `a..b` named a
/// file of its own; black-box finding CA-7).
fn zone_name_refused(zone: &str) -> Option<String> {
    let empty_label = zone.trim_end_matches('.').contains("..") || zone.ends_with("..");
    match heron_proto::Name::parse(zone) {
        Err(e) => Some(format!("zone '{zone}': {e}")),
        Ok(_) if empty_label => Some(format!("zone '{zone}': empty label in name")),
        Ok(_) => None,
    }
}

pub(crate) fn placeholder_policy() -> heron_dnssec::rollover::Policy {
    heron_dnssec::rollover::Policy {
        algorithm: 13,
        csk: false,
        ksk_lifetime: 0,
        zsk_lifetime: 0,
        csk_lifetime: 0,
        ksk_method: Default::default(),
        propagation_delay: 0,
        dnskey_ttl: 0,
        max_zone_ttl: 0,
        signature_validity: 0,
        parent_ds_ttl: 0,
        parent_propagation_delay: 0,
        retire_safety: 0,
        insecure: false,
    }
}

fn list(state: &ZoneKeys, now: UnixTime) -> String {
    let mut out = format!("{}: {} keys\n", state.zone, state.keys.len());
    let Some(policy) = state.policy.clone() else {
        out.push_str("(no policy recorded yet: next events unknown)\n");
        let machine = Rollover::new(placeholder_policy(), state.keys.clone());
        for (key, status) in state.keys.iter().zip(machine.status(now)) {
            let line = status.to_string();
            let states = line.split(" next:").next().unwrap_or(&line);
            out.push_str(&format!("{states}  id={}\n", key.id));
        }
        return out;
    };
    let machine = Rollover::new(policy, state.keys.clone());
    for (key, status) in state.keys.iter().zip(machine.status(now)) {
        // The states as the status writes them; the next event's time as
        // `heron ctl keys` writes it (a date, not Unix seconds).
        let line = status.to_string();
        let states = line.split(" next:").next().unwrap_or(&line);
        let next = match status.next.at() {
            Some(at) => format!(
                "{} at {}",
                status.next.what(),
                crate::control::ctl::format_time(at)
            ),
            None => status.next.what(),
        };
        out.push_str(&format!("{states} next: {next}  id={}\n", key.id));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_dnssec::rollover::{Key, KskMethod, Policy, Role, State};
    use std::os::unix::fs::PermissionsExt;

    fn policy() -> Policy {
        Policy {
            zsk_lifetime: 30 * 86_400,
            propagation_delay: 3600,
            dnskey_ttl: 3600,
            max_zone_ttl: 86_400,
            signature_validity: 14 * 86_400,
            parent_ds_ttl: 86_400,
            parent_propagation_delay: 3600,
            ksk_method: KskMethod::DoubleSignature,
            ..placeholder_policy()
        }
    }

    /// A zone run for 3 days by the machine, its parent silent.
    fn zone_file(dir: &Path) -> PathBuf {
        let mut machine = Rollover::new(policy(), Vec::new());
        let start = 1_800_000_000;
        for (tag, role) in [(11, Role::Ksk), (22, Role::Zsk)] {
            let key = Key::new(format!("k{tag}"), tag, 13, role, start);
            machine.handle(Event::KeyAdded(key), start).unwrap();
        }
        for hour in 0..72 {
            machine.advance(start + hour * 3600);
        }
        let mut state = ZoneKeys::new("example.com.", machine.keys().to_vec());
        state.policy = Some(policy());
        let path = dir.join(file_name("example.com."));
        state.save(&path).unwrap();
        path
    }

    const NOW: UnixTime = 1_800_000_000 + 72 * 3600;

    #[test]
    fn list_shows_states_and_next_events() {
        let dir = tempfile::tempdir().unwrap();
        let path = zone_file(dir.path());
        let out = execute(&path, &KeymgrCommand::List, NOW).unwrap();
        assert!(out.starts_with("example.com.: 2 keys\n"), "{out}");
        assert!(
            out.contains("ds=rumoured next: waits for the parent to add its DS  id=k11"),
            "{out}"
        );
        assert!(
            out.contains("zsk active   dnskey=omnipresent rrsig=omnipresent"),
            "{out}"
        );
        // A date, as `heron ctl keys` writes it, not Unix seconds.
        assert!(out.contains("next: rollover at 2027-"), "{out}");
        assert!(out.contains("Z  id="), "{out}");
    }

    #[test]
    fn ds_seen_roll_and_delete_edit_the_state_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = zone_file(dir.path());
        execute(&path, &KeymgrCommand::DsSeen, NOW).unwrap();
        let keys = ZoneKeys::load(&path).unwrap().keys;
        assert_eq!(keys[0].ds_seen, Some(NOW));
        assert_eq!(keys[0].ds.state, State::Rumoured);
        execute(&path, &KeymgrCommand::Roll { key: "22".into() }, NOW).unwrap();
        assert!(ZoneKeys::load(&path).unwrap().keys[1].roll_requested);
        let busy = execute(&path, &KeymgrCommand::Delete { key: "k22".into() }, NOW);
        assert_eq!(busy, Err("key k22 is still in use".to_string()));
        let unknown = execute(&path, &KeymgrCommand::Roll { key: "33".into() }, NOW);
        assert_eq!(unknown, Err("no key 33".to_string()));
    }

    /// As `heron ctl ds-seen`: a zone that waits for no parent is told
    /// so, with a failure, and nothing is recorded (black-box finding:
    /// success was said).
    #[test]
    fn ds_seen_for_a_zone_waiting_for_no_parent_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = ZoneKeys::new("example.com.", Vec::new());
        state.policy = Some(policy());
        let path = dir.path().join(file_name("example.com."));
        state.save(&path).unwrap();
        let before = std::fs::read(&path).unwrap();
        let said = execute(&path, &KeymgrCommand::DsSeen, NOW);
        assert_eq!(
            said,
            Err("example.com. is not waiting for the parent".to_string())
        );
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    /// A roll names a key by id or tag, or a role: its key in use. A
    /// role the zone has no key of, or a key already retiring, is refused
    /// and the file stays as it was.
    #[test]
    fn roll_takes_a_role_and_refuses_a_retiring_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = zone_file(dir.path());
        let roll = |key: &str| execute(&path, &KeymgrCommand::Roll { key: key.into() }, NOW);
        roll("KSK").unwrap();
        let keys = ZoneKeys::load(&path).unwrap().keys;
        assert!(keys[0].roll_requested && !keys[1].roll_requested);
        assert_eq!(roll("csk"), Err("the zone has no csk in use".to_string()));
        let mut state = ZoneKeys::load(&path).unwrap();
        let mut old = Key::new("k44".into(), 44, 13, Role::Zsk, NOW);
        old.goal = heron_dnssec::rollover::Goal::Hidden;
        let mut gone = Key::new("k45".into(), 45, 13, Role::Zsk, NOW);
        gone.goal = heron_dnssec::rollover::Goal::Hidden;
        old.dnskey.state = heron_dnssec::rollover::State::Omnipresent;
        state.keys.insert(0, old);
        state.keys.insert(0, gone);
        state.save(&path).unwrap();
        assert_eq!(roll("44"), Err("key 44 is already retiring".to_string()));
        let removed = "key 45 is retired and removed: nothing left to roll";
        assert_eq!(roll("45"), Err(removed.to_string()));
        roll("zsk").unwrap();
        let keys = ZoneKeys::load(&path).unwrap().keys;
        let requested: Vec<&str> = (keys.iter())
            .filter(|k| k.roll_requested)
            .map(|k| k.id.as_str())
            .collect();
        assert_eq!(requested, ["k11", "k22"], "the retiring zsk is not asked");
    }

    /// A key generated for a zone never signed is its first CSK, with its
    /// DS printed for the parent; a second waits for the first to settle.
    #[test]
    fn generate_makes_a_first_csk_and_prints_its_ds() {
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("keys");
        let said = generate::generate(&keys, "New.Test", None, None, NOW).unwrap();
        let state = ZoneKeys::load(&keys.join("new.test.keys.json")).unwrap();
        let [key] = &state.keys[..] else {
            panic!("{state:?}")
        };
        assert_eq!((key.role, key.algorithm), (Role::Csk, 13));
        assert!(said.contains(&format!("key {} (CSK, algorithm 13) generated", key.tag)));
        assert!(
            said.contains(&format!("new.test. IN DS {} 13 2 ", key.tag)),
            "{said}"
        );
        let file = keys.join(format!("{}.heron-key", key.id));
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // Before the zone's first signing there is no rollover to wait for.
        let again = generate::generate(&keys, "new.test.", None, None, NOW).unwrap_err();
        assert!(again.contains("waiting for its first signing"), "{again}");
        assert!(!again.contains("rollover"), "{again}");
        // As it says, the key waiting may be deleted, and another made
        // (regression hunt BC-2: delete refused it as in use).
        let path = keys.join("new.test.keys.json");
        let delete = KeymgrCommand::Delete {
            key: key.tag.to_string(),
        };
        execute(&path, &delete, NOW).unwrap();
        assert!(ZoneKeys::load(&path).unwrap().keys.is_empty());
        generate::generate(&keys, "new.test.", None, None, NOW).unwrap();
        let rsa = generate::generate(&keys, "other.test.", None, Some("rsasha256"), NOW);
        assert!(rsa.unwrap_err().contains("ecdsap256sha256 or ed25519"));
    }

    /// A zone never signed takes a KSK generated first: its first
    /// signing under a KSK+ZSK policy publishes that KSK (whose DS the
    /// parent may have already) and makes only a ZSK beside it, and a
    /// ZSK may then be made ahead as well (black-box finding AY-2).
    #[test]
    fn generate_makes_a_first_ksk_that_the_first_signing_keeps() {
        use generate::RoleArg;
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("keys");
        let said = generate::generate(&keys, "new.test.", Some(RoleArg::Ksk), None, NOW).unwrap();
        assert!(said.contains("(KSK, algorithm 13) generated"), "{said}");
        assert!(said.contains("new.test. IN DS "), "{said}");
        let state = ZoneKeys::load(&keys.join("new.test.keys.json")).unwrap();
        let ksk = state.keys[0].clone();
        let split = heron_dnssec::policy::Policy {
            keys: heron_dnssec::policy::KeySet::KskZsk,
            ..heron_dnssec::policy::Policy::default()
        };
        let origin = heron_proto::Name::parse("new.test.").unwrap();
        crate::plan::key_state::step(&origin, &split, &keys, 300, NOW).unwrap();
        let state = ZoneKeys::load(&keys.join("new.test.keys.json")).unwrap();
        let roles: Vec<(Role, u16)> = state.keys.iter().map(|k| (k.role, k.tag)).collect();
        assert_eq!(roles.len(), 2, "{roles:?}");
        assert!(roles.contains(&(Role::Ksk, ksk.tag)), "{roles:?}");
        assert!(roles.iter().any(|(r, _)| *r == Role::Zsk), "{roles:?}");
    }

    /// A key generated before the zone's first signing has its DS printed
    /// for the parent: a zone signed with it that then goes insecure, even
    /// before its CDS was asked for, publishes the CDS delete and stays
    /// signed until the parent drops the DS (black-box finding AY-6: it
    /// was served unsigned at once, bogus under the DS).
    #[test]
    fn a_generated_key_whose_ds_was_printed_keeps_the_zone_signed_going_insecure() {
        use heron_dnssec::policy::Policy;
        let origin = heron_proto::Name::parse("new.test.").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("keys");
        generate::generate(&keys, "new.test.", None, None, NOW).unwrap();
        let step = |policy: &Policy, at| {
            crate::plan::key_state::step(&origin, policy, &keys, 300, at).unwrap()
        };
        let signed = step(&Policy::default(), NOW);
        assert_eq!(signed.keys.len(), 1, "signed with the key generated");
        let going = step(&Policy::insecure(), NOW + 60);
        assert_eq!(going.keys.len(), 1, "still signed");
        assert_eq!(going.cds, [heron_dnssec::ds::CDS_DELETE.to_vec()]);
        // Black-box finding CA-7: said as a rollover under way.
        let refused = generate::generate(&keys, "new.test.", None, None, NOW + 120).unwrap_err();
        assert!(refused.contains("going insecure"), "{refused}");
    }

    #[test]
    fn a_zone_name_with_an_empty_label_is_refused() {
        for bad in ["z10.test..", "a..b", "a..b.", ".."] {
            assert!(zone_name_refused(bad).is_some(), "{bad}");
        }
        for good in ["z10.test", "z10.test.", ".", "xn--bcher-kva.example"] {
            assert_eq!(zone_name_refused(good), None, "{good}");
        }
    }

    /// In a zone with a KSK and a ZSK the role is named, and must be one
    /// of those; a new ZSK takes over from the one in use by rollover,
    /// while the KSK, still waiting for its DS, cannot be replaced yet.
    #[test]
    fn generate_names_a_role_of_the_policy_and_rolls_to_the_new_key() {
        use generate::RoleArg;
        let dir = tempfile::tempdir().unwrap();
        let path = zone_file(dir.path());
        let run =
            |role, algorithm| generate::generate(dir.path(), "example.com", role, algorithm, NOW);
        assert!(run(None, None).unwrap_err().contains("name the role"));
        assert!(
            run(Some(RoleArg::Csk), None)
                .unwrap_err()
                .contains("would not be used")
        );
        assert!(
            run(Some(RoleArg::Ksk), None)
                .unwrap_err()
                .contains("under way (key 11)")
        );
        // Another algorithm than the policy's would never be published.
        assert!(
            run(Some(RoleArg::Zsk), Some("ed25519"))
                .unwrap_err()
                .contains("change the policy's `algorithm`")
        );
        let said = run(Some(RoleArg::Zsk), None).unwrap();
        assert!(said.contains("key 22 rolls over to it"), "{said}");
        assert!(!said.contains(" IN DS "), "a ZSK has no DS: {said}");
        let state = ZoneKeys::load(&path).unwrap();
        assert_eq!(state.keys.len(), 3);
        let mut machine = Rollover::new(policy(), state.keys);
        machine.advance(NOW);
        let keys = machine.keys();
        assert_eq!(
            keys[1].goal,
            heron_dnssec::rollover::Goal::Hidden,
            "k22 retires"
        );
        assert_eq!(
            keys[2].dnskey.state,
            State::Rumoured,
            "the new ZSK is published"
        );
    }

    /// A retired key no cache holds any more leaves the state file and
    /// takes its private key file with it; other keys' files stay.
    #[test]
    fn deleting_a_retired_key_removes_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = zone_file(dir.path());
        let mut state = ZoneKeys::load(&path).unwrap();
        let mut gone = Key::new("k33".into(), 33, 13, Role::Zsk, NOW);
        gone.goal = heron_dnssec::rollover::Goal::Hidden;
        state.keys.push(gone);
        state.save(&path).unwrap();
        let file = |id: &str| dir.path().join(format!("{id}.heron-key"));
        for id in ["k22", "k33"] {
            std::fs::write(file(id), "secret").unwrap();
        }
        let said = execute(&path, &KeymgrCommand::Delete { key: "33".into() }, NOW).unwrap();
        assert!(said.contains("removed"), "{said}");
        assert!(!file("k33").exists() && file("k22").exists());
        let ids: Vec<String> = ZoneKeys::load(&path)
            .unwrap()
            .keys
            .into_iter()
            .map(|k| k.id)
            .collect();
        assert_eq!(ids, ["k11", "k22"]);
    }

    #[test]
    fn a_missing_or_broken_state_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("none.keys.json");
        assert!(
            execute(&path, &KeymgrCommand::List, NOW)
                .unwrap_err()
                .contains("none.keys.json")
        );
        std::fs::write(&path, "{").unwrap();
        let error = execute(&path, &KeymgrCommand::List, NOW).unwrap_err();
        assert!(error.contains("not a key state file"), "{error}");
    }

    #[test]
    fn without_a_policy_the_list_says_next_events_are_unknown() {
        let dir = tempfile::tempdir().unwrap();
        let path = zone_file(dir.path());
        let mut state = ZoneKeys::load(&path).unwrap();
        state.policy = None;
        state.save(&path).unwrap();
        let out = execute(&path, &KeymgrCommand::List, NOW).unwrap();
        assert!(out.contains("no policy recorded"), "{out}");
        assert!(!out.contains("next:"), "{out}");
    }
}
