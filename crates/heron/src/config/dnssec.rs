//! `[[dnssec-policy]]` and a zone's `dnssec-policy` / `key-directory`:
//! zones Heron signs itself.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use heron_dnssec::keys::Algorithm;
use heron_dnssec::policy::{KeySet, Policy, parse_duration};
use heron_dnssec::rollover::KskMethod;
use heron_dnssec::sign::Denial;
use serde::Deserialize;

/// A duration as written: seconds, or text with units (`"14d"`).
#[derive(Debug, Deserialize, Clone)]
#[serde(untagged)]
pub enum DurationValue {
    Seconds(u64),
    Text(String),
}

impl DurationValue {
    fn seconds(&self, key: &str) -> Result<u32, String> {
        let parsed = match self {
            DurationValue::Seconds(s) => u32::try_from(*s).ok(),
            DurationValue::Text(t) => parse_duration(t),
        };
        // Digits and units that do not fit are too large, not unreadable
        // (black-box finding CA-7: "100000d" was "not a duration").
        let well_formed = match self {
            DurationValue::Seconds(_) => true,
            DurationValue::Text(t) => t
                .trim()
                .chars()
                .all(|c| c.is_ascii_digit() || "smhdwSMHDW".contains(c)),
        };
        parsed.ok_or_else(|| match well_formed {
            true => format!(
                "{key}: too large (at most {} seconds, about 136 years)",
                u32::MAX
            ),
            false => format!("{key}: not a duration (seconds, or e.g. \"14d\", \"12h\")"),
        })
    }
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PolicyEntry {
    pub name: String,
    /// `ecdsap256sha256` (13), `ed25519` (15) or `rsasha256` (8).
    pub algorithm: Option<String>,
    /// `"csk"` or `"ksk-zsk"`.
    pub keys: Option<String>,
    pub ksk_lifetime: Option<DurationValue>,
    pub zsk_lifetime: Option<DurationValue>,
    pub signature_validity: Option<DurationValue>,
    pub signature_refresh: Option<DurationValue>,
    pub signature_jitter: Option<DurationValue>,
    pub inception_offset: Option<DurationValue>,
    /// `"nsec"` or `"nsec3"`.
    pub denial: Option<String>,
    pub nsec3_iterations: Option<u16>,
    /// Hex, or `"-"` for none.
    pub nsec3_salt: Option<String>,
    pub nsec3_opt_out: Option<bool>,
    pub dnskey_ttl: Option<DurationValue>,
    /// TTL of CDS and CDNSKEY (default: the DNSKEY TTL).
    pub cds_ttl: Option<DurationValue>,
    /// Rollover timing: see `heron_dnssec::policy::Policy`.
    pub propagation_delay: Option<DurationValue>,
    pub parent_propagation_delay: Option<DurationValue>,
    pub parent_ds_ttl: Option<DurationValue>,
    pub retire_safety: Option<DurationValue>,
    /// How long a retired key gone from every cache is kept; 0: for good.
    pub purge_keys: Option<DurationValue>,
    pub max_zone_ttl: Option<DurationValue>,
    /// `"double-signature"` (default) or `"double-ds"`.
    pub ksk_method: Option<String>,
    /// `ADDRESS[:PORT]` of each name server of the parent zone, asked for
    /// the DS RRset during a KSK or CSK rollover.
    #[serde(default)]
    pub parent_servers: Vec<String>,
    /// `"sha384"` or `"sha512"`: an apex ZONEMD (RFC 8976) in each signed
    /// version; unset, none.
    pub zonemd: Option<String>,
    /// Take the zone to unsigned (as the built-in `insecure`): CDS delete,
    /// then, once the parent's DS is gone from every cache, no keys.
    pub insecure: Option<bool>,
}

/// How a zone is signed: its policy and where its keys are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signing {
    pub policy: Arc<Policy>,
    pub key_directory: PathBuf,
}

impl PolicyEntry {
    fn policy(&self) -> Result<Policy, Vec<String>> {
        let mut errors = Vec::new();
        let mut p = Policy {
            name: self.name.clone(),
            ..Policy::default()
        };
        if let Some(a) = &self.algorithm {
            match Algorithm::from_name(a) {
                Some(a) => p.algorithm = a,
                None => errors.push(format!(
                    "algorithm '{a}': expected ecdsap256sha256, ed25519 or rsasha256"
                )),
            }
        }
        match self.keys.as_deref() {
            None | Some("csk") if self.zsk_lifetime.is_some() => errors.push(
                "zsk-lifetime: a CSK policy has no ZSK; its CSK rolls by ksk-lifetime \
                 (as Knot's single-type-signing)"
                    .into(),
            ),
            None | Some("csk") => {}
            Some("ksk-zsk") => p.keys = KeySet::KskZsk,
            Some(k) => errors.push(format!("keys '{k}': expected \"csk\" or \"ksk-zsk\"")),
        }
        self.signature_timing(&mut p, &mut errors);
        self.rollover_timing(&mut p, &mut errors);
        match self.denial() {
            Ok(d) => p.denial = d,
            Err(e) => errors.push(e),
        }
        match self.zonemd.as_deref() {
            None => {}
            Some("sha384") => p.zonemd = Some(heron_dnssec::zonemd::HashAlg::Sha384),
            Some("sha512") => p.zonemd = Some(heron_dnssec::zonemd::HashAlg::Sha512),
            Some(other) => errors.push(format!(
                "zonemd '{other}': expected \"sha384\" or \"sha512\""
            )),
        }
        let named_insecure = self.name == heron_dnssec::policy::INSECURE;
        p.insecure = self.insecure.unwrap_or(named_insecure);
        if named_insecure && !p.insecure {
            errors.push("the policy named \"insecure\" goes insecure (insecure = false)".into());
        }
        if p.parent_servers.len() > MAX_PARENT_SERVERS {
            errors.push(format!(
                "parent-servers: {} given, at most {MAX_PARENT_SERVERS}",
                p.parent_servers.len()
            ));
        }
        // RSA/SHA-256 is signed only with imported keys: whether the zone
        // has them is checked per zone ([`check_imported_keys`]). Such
        // keys cannot be rolled (a rollover makes a key of the policy's
        // algorithm): a lifetime would stop the zone's signing when it
        // ends (black-box finding).
        if !p.algorithm.can_generate() && (p.ksk_lifetime > 0 || p.zsk_lifetime > 0) {
            errors.push(format!(
                "ksk-lifetime and zsk-lifetime: Heron generates no {} keys to roll the imported \
                 ones to; leave them out, or roll to another algorithm (change `algorithm`)",
                p.algorithm
            ));
        }
        let generated = Policy {
            algorithm: Algorithm::EcdsaP256Sha256,
            ..p.clone()
        };
        errors.extend(generated.problems());
        if errors.is_empty() {
            Ok(p)
        } else {
            Err(errors)
        }
    }

    /// Key lifetimes, signature validity, refresh, jitter and inception,
    /// and the DNSKEY TTL.
    fn signature_timing(&self, p: &mut Policy, errors: &mut Vec<String>) {
        let mut duration = |value: &Option<DurationValue>, key: &str, into: &mut u32| {
            if let Some(v) = value {
                match v.seconds(key) {
                    Ok(s) => *into = s,
                    Err(e) => errors.push(e),
                }
            }
        };
        let (mut ksk, mut zsk) = (0u32, 0u32);
        duration(&self.ksk_lifetime, "ksk-lifetime", &mut ksk);
        duration(&self.zsk_lifetime, "zsk-lifetime", &mut zsk);
        duration(
            &self.signature_validity,
            "signature-validity",
            &mut p.signature_validity,
        );
        duration(
            &self.signature_refresh,
            "signature-refresh",
            &mut p.signature_refresh,
        );
        duration(
            &self.signature_jitter,
            "signature-jitter",
            &mut p.signature_jitter,
        );
        duration(
            &self.inception_offset,
            "inception-offset",
            &mut p.inception_offset,
        );
        duration(&self.dnskey_ttl, "dnskey-ttl", &mut p.dnskey_ttl);
        (p.ksk_lifetime, p.zsk_lifetime) = (ksk.into(), zsk.into());
    }

    /// The keys of key rollovers: TTLs, delays, method, parent servers.
    fn rollover_timing(&self, p: &mut Policy, errors: &mut Vec<String>) {
        let mut duration = |value: &Option<DurationValue>, key: &str, into: &mut u32| {
            if let Some(v) = value {
                match v.seconds(key) {
                    Ok(s) => *into = s,
                    Err(e) => errors.push(e),
                }
            }
        };
        p.cds_ttl = p.dnskey_ttl;
        duration(&self.cds_ttl, "cds-ttl", &mut p.cds_ttl);
        let timing = [
            (
                &self.propagation_delay,
                "propagation-delay",
                &mut p.propagation_delay,
            ),
            (
                &self.parent_propagation_delay,
                "parent-propagation-delay",
                &mut p.parent_propagation_delay,
            ),
            (&self.parent_ds_ttl, "parent-ds-ttl", &mut p.parent_ds_ttl),
            (&self.retire_safety, "retire-safety", &mut p.retire_safety),
            (&self.purge_keys, "purge-keys", &mut p.purge_keys),
        ];
        for (value, key, into) in timing {
            duration(value, key, into);
        }
        let mut max_ttl = 0;
        duration(&self.max_zone_ttl, "max-zone-ttl", &mut max_ttl);
        p.max_zone_ttl = self.max_zone_ttl.as_ref().map(|_| max_ttl);
        match self.ksk_method.as_deref() {
            None | Some("double-signature") => {}
            Some("double-ds") => p.ksk_method = KskMethod::DoubleDs,
            Some(m) => errors.push(format!(
                "ksk-method '{m}': expected \"double-signature\" or \"double-ds\""
            )),
        }
        for server in &self.parent_servers {
            match parent_server(server) {
                Ok(addr) => p.parent_servers.push(addr),
                Err(e) => errors.push(e),
            }
        }
    }

    fn denial(&self) -> Result<Denial, String> {
        let nsec3_keys = self.nsec3_iterations.is_some()
            || self.nsec3_salt.is_some()
            || self.nsec3_opt_out.is_some();
        match self.denial.as_deref() {
            None | Some("nsec") if nsec3_keys => {
                Err("nsec3-iterations, nsec3-salt and nsec3-opt-out need denial = \"nsec3\"".into())
            }
            None | Some("nsec") => Ok(Denial::Nsec),
            Some("nsec3") => Ok(Denial::Nsec3 {
                iterations: self.nsec3_iterations.unwrap_or(0),
                salt: salt(self.nsec3_salt.as_deref().unwrap_or("-"))?,
                opt_out: self.nsec3_opt_out.unwrap_or(false),
            }),
            Some(d) => Err(format!("denial '{d}': expected \"nsec\" or \"nsec3\"")),
        }
    }
}

/// Most parent servers a policy names: each is asked once per check.
pub const MAX_PARENT_SERVERS: usize = 16;

/// `ADDRESS` (port 53) or `ADDRESS:PORT`, `[V6]:PORT`.
fn parent_server(text: &str) -> Result<std::net::SocketAddr, String> {
    if let Ok(addr) = text.parse::<std::net::SocketAddr>() {
        // Port 0 reaches no server: refused here, not at each check.
        return match addr.port() {
            0 => Err(format!(
                "parent-servers: '{text}': port 0 is no server's port"
            )),
            _ => Ok(addr),
        };
    }
    text.parse::<std::net::IpAddr>()
        .map(|ip| std::net::SocketAddr::new(ip, 53))
        .map_err(|_| format!("parent-servers: '{text}' is not an address or address:port"))
}

fn salt(text: &str) -> Result<Vec<u8>, String> {
    if text == "-" || text.is_empty() {
        return Ok(Vec::new());
    }
    let bytes = text.as_bytes();
    let hex = |c: u8| (c as char).to_digit(16);
    if !bytes.len().is_multiple_of(2) {
        return Err(format!(
            "nsec3-salt '{text}': an even number of hex digits, or \"-\""
        ));
    }
    bytes
        .chunks(2)
        .map(|p| Some((hex(p[0])? << 4 | hex(p[1])?) as u8))
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(|| format!("nsec3-salt '{text}': not hex"))
}

/// The policies by name, `default` and `insecure` built in unless the
/// file defines them: those that are right, and what is wrong with the
/// others (so that a zone naming a built-in one is not refused for them).
pub fn policies_and_errors(entries: &[PolicyEntry]) -> (HashMap<String, Arc<Policy>>, Vec<String>) {
    let mut out = HashMap::from([
        ("default".to_string(), Arc::new(Policy::default())),
        (
            heron_dnssec::policy::INSECURE.to_string(),
            Arc::new(Policy::insecure()),
        ),
    ]);
    let mut errors = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for entry in entries {
        if entry.name.trim().is_empty() {
            errors.push("[[dnssec-policy]] with an empty name: zones name it by its name".into());
            continue;
        }
        if !seen.insert(entry.name.as_str()) {
            errors.push(format!(
                "[[dnssec-policy]] '{}' is defined twice",
                entry.name
            ));
            continue;
        }
        match entry.policy() {
            Ok(p) => {
                out.insert(entry.name.clone(), Arc::new(p));
            }
            Err(e) => errors.extend(
                e.into_iter()
                    .map(|e| format!("[[dnssec-policy]] '{}': {e}", entry.name)),
            ),
        }
    }
    (out, errors)
}

/// A zone's signing from its `dnssec-policy` and `key-directory`
/// (default: `keys` next to the configuration file).
pub fn zone_signing(
    policy: Option<&str>,
    key_directory: Option<&Path>,
    policies: &HashMap<String, Arc<Policy>>,
    base: &Path,
) -> Result<Option<Arc<Signing>>, String> {
    let Some(name) = policy else {
        return match key_directory {
            Some(_) => Err("key-directory is set but no dnssec-policy".into()),
            None => Ok(None),
        };
    };
    let policy = policies
        .get(name)
        .ok_or_else(|| format!("dnssec-policy '{name}' is not defined"))?;
    Ok(Some(Arc::new(Signing {
        policy: policy.clone(),
        key_directory: base.join(key_directory.unwrap_or(Path::new("keys"))),
    })))
}

/// A zone signed with NSEC3 whose name leaves no room for the hash label
/// (1 + 32 octets) within 255: its signing would fail at every load, the
/// zone never served; refused here, for check-config to say it too
/// (black-box finding DH-2).
pub fn check_nsec3_room(
    origin: &heron_proto::Name,
    signing: Option<&Signing>,
) -> Result<(), String> {
    let nsec3 = signing.is_some_and(|s| matches!(s.policy.denial, Denial::Nsec3 { .. }));
    let len = origin.as_wire().len();
    match nsec3 && 1 + 32 + len > 255 {
        true => Err(format!(
            "zone {origin}: its name ({len} octets) is too long for NSEC3, whose owner names add a              33-octet hash label (255 at most): sign it with a policy of denial = \"nsec\""
        )),
        false => Ok(()),
    }
}

/// What the error of a zone whose keys are still to be imported says:
/// `heron import` writes such zones with the import as a step to do.
pub const NO_IMPORTED_KEY: &str = "holds no imported";

/// A policy of an algorithm Heron does not generate (RSA/SHA-256) needs
/// the zone's keys imported into its key directory (`heron keymgr ZONE
/// import`): without one, the zone could not be signed.
pub fn check_imported_keys(
    origin: &heron_proto::Name,
    signing: Option<&Signing>,
) -> Result<(), String> {
    let Some(signing) = signing else {
        return Ok(());
    };
    let algorithm = signing.policy.algorithm;
    if algorithm.can_generate() {
        return Ok(());
    }
    let zone = origin.to_string().to_ascii_lowercase();
    let prefix = format!(
        "K{}+{:03}+",
        heron_dnssec::keys::key_file_zone(&zone),
        algorithm.number()
    );
    let dir = &signing.key_directory;
    let roles: Vec<String> = std::fs::read_dir(dir).map_or(Vec::new(), |entries| {
        (entries.flatten())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with(&prefix))
            .filter_map(|name| {
                Some(
                    name.strip_suffix(".heron-key")?
                        .rsplit('.')
                        .next()?
                        .to_string(),
                )
            })
            .collect()
    });
    // The policy's key set must be made of the imported keys: a role
    // they lack would need an RSA key made, which stops every signing
    // (regression hunt finding: keys = "csk" over an imported KSK/ZSK).
    let wanted: &[&str] = match signing.policy.keys {
        heron_dnssec::policy::KeySet::Csk => &["csk"],
        heron_dnssec::policy::KeySet::KskZsk => &["ksk", "zsk"],
    };
    let lacking: Vec<&str> = (wanted.iter().copied())
        .filter(|w| !roles.iter().any(|r| r == w))
        .collect();
    match (roles.is_empty(), lacking.is_empty()) {
        (false, true) => Ok(()),
        (false, false) => Err(format!(
            "dnssec-policy '{}' signs with {algorithm}, which Heron does not generate, and its \
             keys need a {} key that {} does not hold for {zone}: set `keys` to what was \
             imported, or roll to another algorithm",
            signing.policy.name,
            lacking.join(" and a ").to_uppercase(),
            dir.display()
        )),
        (true, _) => Err(format!(
            "dnssec-policy '{}' signs with {algorithm}, which Heron does not generate: \
             {} {NO_IMPORTED_KEY} {algorithm} key of {zone} (import them first: \
             heron keymgr -d {} {zone} import --from bind|knot DIR)",
            signing.policy.name,
            dir.display(),
            dir.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The policies, or every error if any.
    fn policies(entries: &[PolicyEntry]) -> Result<HashMap<String, Arc<Policy>>, Vec<String>> {
        match policies_and_errors(entries) {
            (out, errors) if errors.is_empty() => Ok(out),
            (_, errors) => Err(errors),
        }
    }

    fn entry(toml_text: &str) -> PolicyEntry {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn a_policy_reads_every_key() {
        let p = entry(
            r#"
            name = "p"
            algorithm = "ed25519"
            keys = "ksk-zsk"
            ksk-lifetime = "365d"
            zsk-lifetime = 2592000
            signature-validity = "21d"
            signature-refresh = "7d"
            signature-jitter = "6d"
            denial = "nsec3"
            nsec3-iterations = 0
            nsec3-salt = "aabb"
            nsec3-opt-out = true
            dnskey-ttl = "1h"
            "#,
        )
        .policy()
        .unwrap();
        assert_eq!(p.algorithm, Algorithm::Ed25519);
        assert_eq!(p.keys, KeySet::KskZsk);
        assert_eq!((p.ksk_lifetime, p.zsk_lifetime), (365 * 86400, 2_592_000));
        assert_eq!(p.signature_validity, 21 * 86400);
        assert_eq!(
            p.denial,
            Denial::Nsec3 {
                iterations: 0,
                salt: vec![0xAA, 0xBB],
                opt_out: true
            }
        );
        assert_eq!(p.dnskey_ttl, 3600);
        assert_eq!(p.cds_ttl, 3600, "the DNSKEY TTL unless set");
        assert_eq!(p.zonemd, None, "no ZONEMD unless asked");
        let p = entry("name = \"z\"\nzonemd = \"sha512\"").policy().unwrap();
        assert_eq!(p.zonemd, Some(heron_dnssec::zonemd::HashAlg::Sha512));
    }

    #[test]
    fn insecure_is_built_in_and_a_key_of_any_policy() {
        let all = policies(&[]).unwrap();
        let builtin = &all["insecure"];
        assert!(builtin.insecure && builtin.rollover_policy(0).insecure);
        assert!(!all["default"].insecure);
        let own = entry("name = \"going\"\ninsecure = true\nparent-ds-ttl = \"1h\"");
        let own = own.policy().unwrap();
        assert!(own.insecure && own.parent_ds_ttl == 3600);
        assert!(!entry("name = \"p\"").policy().unwrap().insecure);
        // A policy of the file named insecure goes insecure, as the built-in.
        let named = policies(&[entry("name = \"insecure\"\nparent-ds-ttl = \"2h\"")]).unwrap();
        assert!(named["insecure"].insecure && named["insecure"].parent_ds_ttl == 7200);
        let errors = entry("name = \"insecure\"\ninsecure = false")
            .policy()
            .unwrap_err();
        assert!(errors[0].contains("goes insecure"), "{errors:?}");
        assert!(toml::from_str::<PolicyEntry>("name = \"p\"\ninsecure = \"yes\"").is_err());
    }

    #[test]
    fn rollover_timing_reads_seconds() {
        let p = entry(
            r#"
            name = "fast"
            keys = "ksk-zsk"
            zsk-lifetime = "30s"
            propagation-delay = "1s"
            parent-propagation-delay = "2s"
            parent-ds-ttl = "3s"
            retire-safety = "4s"
            max-zone-ttl = "5s"
            cds-ttl = "6s"
            dnskey-ttl = "7s"
            ksk-method = "double-ds"
            parent-servers = ["192.0.2.1", "[2001:db8::1]:5353", "127.0.0.1:53001"]
            "#,
        )
        .policy()
        .unwrap();
        let timing = (
            p.propagation_delay,
            p.parent_propagation_delay,
            p.parent_ds_ttl,
            p.retire_safety,
            p.max_zone_ttl,
            p.cds_ttl,
        );
        assert_eq!(timing, (1, 2, 3, 4, Some(5), 6));
        assert_eq!(p.ksk_method, KskMethod::DoubleDs);
        let servers: Vec<String> = p.parent_servers.iter().map(|a| a.to_string()).collect();
        assert_eq!(
            servers,
            ["192.0.2.1:53", "[2001:db8::1]:5353", "127.0.0.1:53001"]
        );
        let rollover = p.rollover_policy(9);
        assert_eq!(rollover.max_zone_ttl, 9, "the zone's TTL when larger");
        assert_eq!(p.rollover_policy(1).max_zone_ttl, 5);
    }

    #[test]
    fn bad_policies_say_what_is_wrong() {
        for (text, needle) in [
            ("algorithm = \"rsasha1\"", "algorithm 'rsasha1'"),
            ("keys = \"two\"", "keys 'two'"),
            (
                "signature-validity = \"14x\"",
                "signature-validity: not a duration",
            ),
            ("signature-refresh = \"30d\"", "signature-refresh must be"),
            ("denial = \"nsec5\"", "denial 'nsec5'"),
            ("nsec3-iterations = 1", "need denial = \"nsec3\""),
            ("denial = \"nsec3\"\nnsec3-iterations = 51", "above 50"),
            ("denial = \"nsec3\"\nnsec3-salt = \"abc\"", "even number"),
            ("denial = \"nsec3\"\nnsec3-salt = \"zz\"", "not hex"),
            ("ksk-method = \"triple\"", "ksk-method 'triple'"),
            ("zonemd = \"sha1\"", "zonemd 'sha1'"),
            (
                "parent-servers = [\"nowhere\"]",
                "parent-servers: 'nowhere'",
            ),
            (
                "propagation-delay = \"5y\"",
                "propagation-delay: not a duration",
            ),
            (
                "keys = \"ksk-zsk\"\nzsk-lifetime = \"1h\"\nmax-zone-ttl = \"1d\"",
                "ZSK lifetime (3600s) is shorter than one rollover",
            ),
            ("zsk-lifetime = \"30d\"", "a CSK policy has no ZSK"),
            (
                "keys = \"csk\"\nzsk-lifetime = \"30d\"",
                "rolls by ksk-lifetime",
            ),
        ] {
            let e = entry(&format!("name = \"p\"\n{text}"));
            let errors = policies(&[e]).unwrap_err();
            assert!(
                errors.iter().any(|e| e.contains(needle)),
                "{text}: {errors:?}"
            );
        }
        for name in ["", "  "] {
            let errors = policies(&[entry(&format!("name = \"{name}\""))]).unwrap_err();
            assert!(errors[0].contains("empty name"), "{errors:?}");
        }
        let many: Vec<String> = (1..=MAX_PARENT_SERVERS + 1)
            .map(|i| format!("\"192.0.2.{i}\""))
            .collect();
        let text = format!("name = \"p\"\nparent-servers = [{}]", many.join(","));
        let errors = policies(&[entry(&text)]).unwrap_err();
        assert!(errors[0].contains("at most 16"), "{errors:?}");
        let text = format!(
            "name = \"p\"\nparent-servers = [{}]",
            many[..MAX_PARENT_SERVERS].join(",")
        );
        assert!(policies(&[entry(&text)]).is_ok(), "16 is allowed");
        // Black-box finding CA-7: a duration past 32 bits is too large.
        for large in ["\"100000d\"", "4294967296"] {
            let text = format!("name = \"p\"\ndnskey-ttl = {large}");
            let errors = policies(&[entry(&text)]).unwrap_err();
            assert!(errors[0].contains("dnskey-ttl: too large"), "{errors:?}");
        }
        let errors = policies(&[entry("name = \"p\"\ndnskey-ttl = \"1x\"")]).unwrap_err();
        assert!(errors[0].contains("not a duration"), "{errors:?}");
        // Black-box finding CA-4: accepted, it failed at each check.
        for zero in ["127.0.0.1:0", "[::1]:0"] {
            let text = format!("name = \"p\"\nparent-servers = [\"{zero}\"]");
            let errors = policies(&[entry(&text)]).unwrap_err();
            assert!(errors[0].contains("port 0"), "{errors:?}");
        }
        let port = "name = \"p\"\nparent-servers = [\"127.0.0.1:5353\", \"192.0.2.1\"]";
        assert!(policies(&[entry(port)]).is_ok());
        let twice = [entry("name = \"p\""), entry("name = \"p\"")];
        assert!(policies(&twice).unwrap_err()[0].contains("defined twice"));
        assert!(toml::from_str::<PolicyEntry>("name = \"p\"\nbogus = 1").is_err());
    }

    #[test]
    fn rsasha256_is_accepted_when_the_zone_has_imported_rsa_keys() {
        let dir = tempfile::tempdir().unwrap();
        let rsa = entry("name = \"rsa\"\nalgorithm = \"rsasha256\"");
        let policies = policies(&[rsa]).unwrap();
        let signing = zone_signing(Some("rsa"), Some(dir.path()), &policies, Path::new("/"))
            .unwrap()
            .unwrap();
        let origin = heron_proto::Name::parse("Old.Test").unwrap();
        let refused = check_imported_keys(&origin, Some(&signing)).unwrap_err();
        assert!(
            refused.contains("holds no imported RSASHA256 key of old.test."),
            "{refused}"
        );
        assert!(refused.contains("heron keymgr -d"), "{refused}");
        // An ECDSA key of the zone, or an RSA key of another, is not enough.
        std::fs::write(dir.path().join("Kold.test+013+00001.ksk.heron-key"), "").unwrap();
        std::fs::write(dir.path().join("Kother.test+008+00002.ksk.heron-key"), "").unwrap();
        assert!(check_imported_keys(&origin, Some(&signing)).is_err());
        std::fs::write(dir.path().join("Kold.test+008+00003.ksk.heron-key"), "").unwrap();
        // A CSK policy over an imported KSK would need an RSA CSK made.
        let lacking = check_imported_keys(&origin, Some(&signing)).unwrap_err();
        assert!(lacking.contains("need a CSK key"), "{lacking}");
        std::fs::write(dir.path().join("Kold.test+008+00004.csk.heron-key"), "").unwrap();
        assert_eq!(check_imported_keys(&origin, Some(&signing)), Ok(()));
        assert_eq!(check_imported_keys(&origin, None), Ok(()));
        // Imported RSA keys cannot be rolled: a lifetime is refused.
        let rolled = entry("name = \"rsa\"\nalgorithm = \"rsasha256\"\nksk-lifetime = \"30d\"");
        let errors = self::policies(&[rolled]).unwrap_err();
        assert!(
            errors[0].contains("generates no RSASHA256 keys"),
            "{errors:?}"
        );
    }

    #[test]
    fn zones_and_groups_are_signed_as_configured() {
        let s = super::super::tests_support::parse(
            "[[dnssec-policy]]\nname = \"ed\"\nalgorithm = \"ed25519\"\n\
             [[zone]]\norigin = \"a.test\"\nfile = \"a\"\ndnssec-policy = \"ed\"\n\
             [[zone]]\norigin = \"b.test\"\nfile = \"b\"\n\
             [[zone-group]]\norigins = [\"c.test\"]\nfile = \"{zone}.zone\"\n\
             dnssec-policy = \"default\"\nkey-directory = \"/var/lib/heron/keys\"\n",
        )
        .unwrap();
        let signing = |o: &str| {
            let origin = heron_proto::Name::parse(o).unwrap();
            s.zones
                .iter()
                .find(|z| z.origin == origin)
                .unwrap()
                .signing
                .clone()
        };
        let a = signing("a.test").unwrap();
        assert_eq!(a.policy.algorithm, Algorithm::Ed25519);
        assert_eq!(a.key_directory, Path::new("/etc/heron/keys"));
        assert!(signing("b.test").is_none());
        let c = signing("c.test").unwrap();
        assert_eq!(c.key_directory, Path::new("/var/lib/heron/keys"));
    }

    /// A secondary zone with a policy is signed here (bump in the wire):
    /// served signed, transferred unsigned; a group of them too.
    #[test]
    fn secondaries_with_a_policy_are_signed_here() {
        let s = super::super::tests_support::parse(
            "[[dnssec-policy]]\nname = \"ed\"\nalgorithm = \"ed25519\"\n\
             [[zone]]\norigin = \"s.test\"\nfile = \"s\"\nprimaries = [\"192.0.2.1\"]\n\
             dnssec-policy = \"ed\"\n\
             [[zone]]\norigin = \"u.test\"\nfile = \"u\"\nprimaries = [\"192.0.2.1\"]\n\
             [[zone-group]]\norigins = [\"g1.test\", \"g2.test\"]\nfile = \"{zone}.zone\"\n\
             primaries = [\"192.0.2.2\"]\ndnssec-policy = \"default\"\nkey-directory = \"k\"\n",
        )
        .unwrap();
        let mut signed: Vec<(String, Algorithm, PathBuf)> = (s.signed_secondaries.iter())
            .map(|(o, g)| (o.to_string(), g.policy.algorithm, g.key_directory.clone()))
            .collect();
        signed.sort_by(|a, b| a.0.cmp(&b.0));
        let k = Path::new("/etc/heron/k").to_path_buf();
        assert_eq!(
            signed,
            [
                ("g1.test.".into(), Algorithm::EcdsaP256Sha256, k.clone()),
                ("g2.test.".into(), Algorithm::EcdsaP256Sha256, k),
                (
                    "s.test.".into(),
                    Algorithm::Ed25519,
                    "/etc/heron/keys".into()
                ),
            ]
        );
        assert_eq!(s.secondaries.len(), 4, "all four are transferred");
        assert!(s.zones.is_empty(), "none is loaded from a file");
    }

    #[test]
    fn a_secondary_with_a_wrong_policy_is_refused() {
        let zone = "[[zone]]\norigin = \"s.test\"\nfile = \"s\"\nprimaries = [\"192.0.2.1\"]\n";
        for (text, needle) in [
            (
                "dnssec-policy = \"nope\"",
                "dnssec-policy 'nope' is not defined",
            ),
            (
                "key-directory = \"k\"",
                "key-directory is set but no dnssec-policy",
            ),
            ("dnssec-policy = 7", "invalid type"),
            (
                "dnssec-policy = \"rsa\"\nkey-directory = \"/nonexistent\"\n\
                 [[dnssec-policy]]\nname = \"rsa\"\nalgorithm = \"rsasha256\"",
                "Heron does not generate",
            ),
        ] {
            let errors =
                super::super::tests_support::parse(&format!("{zone}{text}\n")).unwrap_err();
            assert!(
                errors.iter().any(|e| e.contains(needle)),
                "{text}: {errors:?}"
            );
        }
        // A catalog's members are not signed here: the template refuses a
        // policy rather than serve them unsigned.
        let catalog = "[[catalog]]\nzone = \"cat.test\"\nfile = \"cat\"\n\
                       primaries = [\"192.0.2.1\"]\nmembers-dir = \"m\"\n\
                       [catalog.default]\ndnssec-policy = \"default\"\n";
        let errors = super::super::tests_support::parse(catalog).unwrap_err();
        assert!(errors[0].contains("dnssec-policy"), "{errors:?}");
    }

    #[test]
    fn zones_name_a_defined_policy() {
        let all = policies(&[]).unwrap();
        let base = Path::new("/etc/heron");
        let s = zone_signing(Some("default"), None, &all, base)
            .unwrap()
            .unwrap();
        assert_eq!(s.key_directory, Path::new("/etc/heron/keys"));
        assert_eq!(*s.policy, Policy::default());
        assert!(zone_signing(Some("nope"), None, &all, base).is_err());
        assert!(zone_signing(None, Some(Path::new("k")), &all, base).is_err());
        assert_eq!(zone_signing(None, None, &all, base), Ok(None));
    }
}
