//! The signing policies of BIND (`dnssec-policy NAME { ... }`) and Knot
//! (`policy:` items) as Heron `[[dnssec-policy]]`s: algorithm, CSK or
//! KSK+ZSK, lifetimes, NSEC or NSEC3, signature validity and refresh,
//! DNSKEY TTL, rollover timing (TTLs, propagation delays, retire safety).
//! A setting with no Heron equivalent is returned as a note
//! (setting, advice) for the listing.

use heron_dnssec::keys::Algorithm;
use heron_dnssec::policy::parse_duration;

use super::knot_syntax::Item;
use super::model::SigningPolicy;
use super::source::Loc;

/// Heron's defaults, which a translated validity and refresh are checked
/// against (the jitter must stay below their difference).
const DEFAULT_VALIDITY: u32 = 14 * 86_400;
const DEFAULT_REFRESH: u32 = 5 * 86_400;
const DEFAULT_JITTER: u32 = 5 * 86_400;

/// BIND `dnssec-policy` durations, each with the Heron policy key that
/// means the same (BIND's `publish-safety` has none).
pub const BIND_DURATIONS: &[(&str, &str)] = &[
    ("dnskey-ttl", "dnskey-ttl"),
    ("signatures-validity", "signature-validity"),
    ("signatures-refresh", "signature-refresh"),
    ("max-zone-ttl", "max-zone-ttl"),
    ("zone-propagation-delay", "propagation-delay"),
    ("parent-ds-ttl", "parent-ds-ttl"),
    ("parent-propagation-delay", "parent-propagation-delay"),
    ("retire-safety", "retire-safety"),
    // 0 keeps retired keys for good in both.
    ("purge-keys", "purge-keys"),
];

/// Knot `policy:` durations, each with its Heron policy key and Knot's
/// default where it differs from Heron's (None: translated only when set,
/// Heron's value applying otherwise).
const KNOT_DURATIONS: &[(&str, &str, Option<&str>)] = &[
    ("dnskey-ttl", "dnskey-ttl", None),
    // Knot waits 1h at each rollover step where Heron waits 5m: a zone
    // moved keeps Knot's pace unless its policy said otherwise.
    ("propagation-delay", "propagation-delay", Some("1h")),
    ("zone-max-ttl", "max-zone-ttl", None),
];

/// A policy being built, with what could not be carried over.
#[derive(Default)]
pub struct PolicyBuilder {
    pub policy: SigningPolicy,
    pub notes: Vec<(String, String)>,
    validity: Option<u32>,
    refresh: Option<u32>,
    /// Each lifetime set: its key and the setting as the source wrote it.
    lifetimes: Vec<(String, String)>,
}

impl PolicyBuilder {
    pub fn new(name: &str) -> PolicyBuilder {
        PolicyBuilder {
            policy: SigningPolicy {
                name: name.to_string(),
                settings: Vec::new(),
            },
            ..PolicyBuilder::default()
        }
    }

    /// Sets `key`, replacing a value set before (a key given twice is a
    /// TOML error).
    fn set(&mut self, key: &str, value: String) {
        let settings = &mut self.policy.settings;
        match settings.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = value,
            None => settings.push((key.to_string(), value)),
        }
    }

    fn untranslated(&mut self, setting: impl Into<String>, advice: impl Into<String>) {
        self.notes.push((setting.into(), advice.into()));
    }

    /// A setting Heron has no equivalent for.
    pub fn untranslated_setting(&mut self, setting: String) {
        self.untranslated(
            setting,
            "not translated: Heron's value applies (docs/configuration.md, [[dnssec-policy]])",
        );
    }

    /// `algorithm` as BIND or Knot names it.
    pub fn algorithm(&mut self, text: &str) {
        match Algorithm::from_name(text) {
            Some(a) => self.set("algorithm", format!("\"{}\"", a.to_string().to_lowercase())),
            None => self.untranslated(
                format!("algorithm {text}"),
                "Heron signs with ecdsap256sha256, ed25519 and (imported keys only) rsasha256: \
                 the policy keeps Heron's default, so moving needs an algorithm rollover",
            ),
        }
    }

    pub fn csk(&mut self, csk: bool) {
        self.set(
            "keys",
            format!("\"{}\"", if csk { "csk" } else { "ksk-zsk" }),
        );
    }

    /// A duration setting. `unlimited`/`0` leaves Heron's default: a
    /// lifetime's "never", or for `max-zone-ttl` the zone's largest TTL.
    pub fn duration(&mut self, key: &str, source: &str, text: &str) {
        let unbounded = key.ends_with("lifetime") || key == "max-zone-ttl";
        if matches!(text, "unlimited" | "0") && unbounded {
            return;
        }
        let Some(seconds) = seconds(text) else {
            self.untranslated(
                format!("{source} {text}"),
                format!("not a duration Heron reads: set {key} by hand"),
            );
            return;
        };
        match key {
            "signature-validity" => self.validity = Some(seconds),
            "signature-refresh" => self.refresh = Some(seconds),
            "ksk-lifetime" | "zsk-lifetime" => {
                (self.lifetimes).push((key.to_string(), format!("{source} {text}")));
            }
            _ => {}
        }
        self.set(key, seconds.to_string());
    }

    /// Knot deletes a retired key `delete-delay` after it is gone, at once
    /// when 0 (its default); Heron's `purge-keys = 0` keeps it for good,
    /// so only a delay is carried (without one, Heron keeps it 90 days).
    fn knot_delete_delay(&mut self, delay: &str) {
        if seconds(delay).is_some_and(|s| s > 0) {
            return self.duration("purge-keys", "delete-delay", delay);
        }
        self.untranslated(
            format!("delete-delay {delay}"),
            "Knot deletes a retired key at once; Heron keeps it purge-keys long (90 days unless set)",
        );
    }

    pub fn nsec3(&mut self, iterations: Option<&str>, opt_out: bool, salt_length: Option<&str>) {
        self.set("denial", "\"nsec3\"".into());
        if let Some(n) = iterations.and_then(|i| i.parse::<u16>().ok()) {
            self.set("nsec3-iterations", n.to_string());
        }
        if opt_out {
            self.set("nsec3-opt-out", "true".into());
        }
        if salt_length.is_some_and(|l| l != "0") {
            self.untranslated(
                format!("salt-length {}", salt_length.unwrap_or("")),
                "Heron's NSEC3 salt is fixed (nsec3-salt, none by default, RFC 9276): the \
                 translated policy has none",
            );
        }
    }

    /// The policy, its signature jitter narrowed when the validity less
    /// the refresh and the hour between looks leaves less than Heron's
    /// default.
    pub fn finish(mut self) -> (SigningPolicy, Vec<(String, String)>) {
        self.no_lifetimes_for_imported_keys();
        let validity = self.validity.unwrap_or(DEFAULT_VALIDITY);
        let mut refresh = self.refresh.unwrap_or(DEFAULT_REFRESH);
        // Signatures are looked at hourly: a refresh that leaves less than
        // that (and some room to spread them) before expiry is lowered,
        // or the policy would not load (regression hunt finding: BIND's
        // 2h validity, 90m refresh).
        let most = validity.saturating_sub(heron_dnssec::policy::SIGNATURE_LOOK + REFRESH_ROOM);
        if refresh > most && most > 0 {
            self.untranslated(
                format!("signature refresh {refresh} s"),
                format!(
                    "lowered to {most} s: Heron looks at signatures hourly, and re-makes those \
                     due before its next look"
                ),
            );
            refresh = most;
            self.set("signature-refresh", refresh.to_string());
        }
        let room =
            (validity.saturating_sub(refresh)).saturating_sub(heron_dnssec::policy::SIGNATURE_LOOK);
        if room <= DEFAULT_JITTER {
            self.set("signature-jitter", (room / 2).to_string());
        }
        (self.policy, self.notes)
    }
}

impl PolicyBuilder {
    /// Keys of an algorithm Heron does not make (RSASHA256: imported
    /// only) are not rolled, and a lifetime with it is refused: the
    /// lifetimes set are left out and listed (black-box finding AQ-5:
    /// Knot's default ZSK lifetime made an RSA policy Heron refused).
    fn no_lifetimes_for_imported_keys(&mut self) {
        let settings = &mut self.policy.settings;
        let algorithm = (settings.iter())
            .find(|(k, _)| k == "algorithm")
            .and_then(|(_, v)| Algorithm::from_name(v.trim_matches('"')));
        let Some(algorithm) = algorithm.filter(|a| !a.can_generate()) else {
            return;
        };
        settings.retain(|(k, _)| k != "ksk-lifetime" && k != "zsk-lifetime");
        for (_, setting) in std::mem::take(&mut self.lifetimes) {
            self.untranslated(
                setting,
                format!(
                    "Heron makes no {algorithm} keys, so it does not roll the imported ones: \
                     they stay until an algorithm rollover (set `algorithm` to one Heron makes)"
                ),
            );
        }
    }
}

/// Room kept between a lowered refresh and the hourly look, for the
/// jitter to spread signatures in.
const REFRESH_ROOM: u32 = 600;

/// Seconds of a BIND or Knot duration: `3600`, `14d`, `1h30m`, or ISO 8601
/// (`P1Y`, `P30D`, `PT1H`; a year 365 days, a month 30).
pub fn seconds(text: &str) -> Option<u32> {
    let Some(iso) = text.strip_prefix(['P', 'p']) else {
        return parse_duration(text);
    };
    if iso.is_empty() || iso.eq_ignore_ascii_case("t") {
        return None;
    }
    let mut total: u64 = 0;
    let mut number: Option<u64> = None;
    let mut in_time = false;
    for c in iso.chars() {
        if let Some(d) = c.to_digit(10) {
            number = Some(number.unwrap_or(0).checked_mul(10)?.checked_add(d.into())?);
            continue;
        }
        let c = c.to_ascii_uppercase();
        if c == 'T' {
            in_time = true;
            continue;
        }
        let unit: u64 = match (c, in_time) {
            ('Y', false) => 365 * 86_400,
            ('M', false) => 30 * 86_400,
            ('W', false) => 7 * 86_400,
            ('D', false) => 86_400,
            ('H', true) => 3600,
            ('M', true) => 60,
            ('S', true) => 1,
            _ => return None,
        };
        total = total.checked_add(number.take()?.checked_mul(unit)?)?;
    }
    if number.is_some() {
        return None;
    }
    u32::try_from(total).ok()
}

/// Knot's default policy (`dnssec-signing: on` without `dnssec-policy`),
/// a policy item that sets nothing (ECDSA P-256, a KSK and a ZSK rolled
/// every 30 days, NSEC, signatures valid 14 days, 1h of propagation
/// delay), and what it could not carry over.
pub fn knot_default(loc: &Loc) -> (SigningPolicy, Vec<(String, String)>) {
    let nothing = Item {
        loc: loc.clone(),
        fields: Vec::new(),
    };
    knot_policy("knot-default", &nothing)
}

/// The note for Knot's `cds-cdnskey-publish` (`value` as Knot has it)
/// when it is not `always`: Heron has no such setting.
pub fn knot_cds_note(value: &str) -> (String, String) {
    (
        format!("cds-cdnskey-publish {value}"),
        "Knot publishes CDS and CDNSKEY as this says (with rollover, only while a KSK rollover \
         waits for the parent); Heron publishes them always, for the keys in every cache, and \
         has no setting for it: a parent that scans for CDS (RFC 7344, RFC 8078) reads them"
            .to_string(),
    )
}

/// Knot 3.2's refresh when the policy sets none: the propagation delay
/// (1h unless set) plus the zone's largest TTL, which the policy's
/// `zone-max-ttl` gives; without it Knot measures the zone, which the
/// import does not read, so 7 days is written and the difference listed
/// (black-box finding BT-12: 7 days was written as Knot's default).
fn knot_default_refresh(
    p: &mut PolicyBuilder,
    delay: Option<&str>,
    max_ttl: Option<&str>,
) -> String {
    let delay = seconds(delay.unwrap_or("1h"));
    if let (Some(delay), Some(max_ttl)) = (delay, max_ttl.and_then(seconds)) {
        return (delay + max_ttl).to_string();
    }
    p.untranslated(
        "rrsig-refresh (Knot's default: propagation-delay + the zone's largest TTL)",
        "written as 7 days before expiry: set signature-refresh to the propagation delay plus \
         the zone's largest TTL to re-sign when Knot did",
    );
    "7d".into()
}

/// A Knot `policy:` item, Knot's defaults where it says nothing (ECDSA
/// P-256, a KSK and a ZSK, ZSKs rolled every 30 days, signatures valid 14
/// days and refreshed the propagation delay plus the zone's largest TTL
/// before they expire, NSEC).
pub fn knot_policy(id: &str, item: &Item) -> (SigningPolicy, Vec<(String, String)>) {
    let mut p = PolicyBuilder::new(id);
    let value = |key: &str| item.value(key);
    p.algorithm(value("algorithm").unwrap_or("ecdsap256sha256"));
    let csk = value("single-type-signing").is_some_and(knot_on);
    p.csk(csk);
    knot_lifetimes(&mut p, csk, item);
    let validity = value("rrsig-lifetime").unwrap_or("14d");
    p.duration("signature-validity", "rrsig-lifetime", validity);
    let refresh = match value("rrsig-refresh") {
        Some(text) => text.to_string(),
        None => knot_default_refresh(&mut p, value("propagation-delay"), value("zone-max-ttl")),
    };
    p.duration("signature-refresh", "rrsig-refresh", &refresh);
    for (knot, heron, knot_default) in KNOT_DURATIONS {
        if let Some(text) = value(knot).or(*knot_default) {
            p.duration(heron, knot, text);
        }
    }
    if let Some(delay) = value("delete-delay") {
        p.knot_delete_delay(delay);
    }
    if value("dnskey-ttl").is_none() {
        p.untranslated(
            "dnskey-ttl (Knot's default: the zone's SOA TTL)",
            "Heron's DNSKEY TTL is 1h unless the policy sets dnskey-ttl: set it to the SOA TTL \
             to keep Knot's",
        );
    }
    // Knot publishes its CDS and CDNSKEY RRsets with TTL 0 (Heron's
    // default is the DNSKEY TTL): kept, so that compare finds them alike
    // (black-box finding BT-8).
    p.set("cds-ttl", "0".into());
    match value("cds-cdnskey-publish") {
        Some("always") => {}
        Some(other) => p.notes.push(knot_cds_note(other)),
        None => p.notes.push(knot_cds_note("rollover (Knot's default)")),
    }
    if value("nsec3").is_some_and(knot_on) {
        let opt_out = value("nsec3-opt-out").is_some_and(knot_on);
        // Knot's default salt is 8 octets, new every 30 days; Heron's none.
        let salt = value("nsec3-salt-length").or(Some("8"));
        p.nsec3(value("nsec3-iterations").or(Some("0")), opt_out, salt);
    }
    const READ: &[&str] = &[
        "id",
        "algorithm",
        "single-type-signing",
        "ksk-lifetime",
        "zsk-lifetime",
        "rrsig-lifetime",
        "rrsig-refresh",
        "dnskey-ttl",
        "propagation-delay",
        "zone-max-ttl",
        "nsec3",
        "nsec3-opt-out",
        "nsec3-salt-length",
        "nsec3-iterations",
        "cds-cdnskey-publish",
        "delete-delay",
        "manual",
        // Where the keys are: read by the importer for the keymgr command.
        "keystore",
    ];
    for f in item
        .fields
        .iter()
        .filter(|f| !READ.contains(&f.key.as_str()))
    {
        p.untranslated_setting(format!("{} {}", f.key, f.values.join(" ")));
    }
    p.finish()
}

/// A Knot policy's key lifetimes, Knot's 30-day ZSK where it says none;
/// none with `manual: on`.
fn knot_lifetimes(p: &mut PolicyBuilder, csk: bool, item: &Item) {
    let value = |key: &str| item.value(key);
    if value("manual").is_some_and(knot_on) {
        // Knot makes and rolls no key by itself: no lifetimes, Heron's
        // "never rolled", not Knot's defaults it ignores.
        return p.untranslated(
            "manual on",
            "Knot makes and rolls no key by itself under this policy: the translated policy has \
             no key lifetimes, so Heron never rolls its keys unless asked (`heron ctl roll ZONE \
             KEY`); a zone with no key imported still gets keys Heron makes at its first signing",
        );
    }
    if let Some(l) = value("ksk-lifetime") {
        p.duration("ksk-lifetime", "ksk-lifetime", l);
    }
    match (csk, value("zsk-lifetime")) {
        // Knot rolls a CSK by ksk-lifetime and ignores zsk-lifetime.
        (true, Some(l)) => p.untranslated(
            format!("zsk-lifetime {l}"),
            "Knot ignores it with single-type-signing: the CSK rolls by ksk-lifetime",
        ),
        (true, None) => {}
        (false, l) => p.duration("zsk-lifetime", "zsk-lifetime", l.unwrap_or("30d")),
    }
}

fn knot_on(value: &str) -> bool {
    matches!(value, "on" | "true" | "yes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_of_both_servers_are_read() {
        assert_eq!(seconds("3600"), Some(3600));
        assert_eq!(seconds("14d"), Some(14 * 86_400));
        assert_eq!(seconds("P1Y"), Some(365 * 86_400));
        assert_eq!(seconds("P30D"), Some(30 * 86_400));
        assert_eq!(seconds("PT1H30M"), Some(5400));
        assert_eq!(seconds("P1M"), Some(30 * 86_400));
        for bad in ["", "P", "P1", "PT1D", "P1H", "x", "P99999999999Y", "1q"] {
            assert_eq!(seconds(bad), None, "{bad}");
        }
    }

    #[test]
    fn no_duration_text_makes_the_reader_panic() {
        let mut rng = super::super::testutil::Rng::new(38);
        let alphabet: Vec<char> = "PpTt0123456789YMWDHSmhdsw \u{0}é".chars().collect();
        for _ in 0..5000 {
            let len = rng.below(24);
            let text: String = (0..len)
                .map(|_| alphabet[rng.below(alphabet.len())])
                .collect();
            let _ = seconds(&text);
        }
    }

    #[test]
    fn a_short_validity_narrows_the_jitter() {
        let mut p = PolicyBuilder::new("p");
        p.duration("signature-validity", "signatures-validity", "7d");
        p.duration("signature-refresh", "signatures-refresh", "5d");
        let (policy, notes) = p.finish();
        assert!(notes.is_empty());
        assert!(
            policy
                .settings
                .contains(&("signature-jitter".into(), "84600".into())),
            "{policy:?}"
        );
    }

    #[test]
    fn a_refresh_too_close_to_expiry_is_lowered_and_said() {
        let mut p = PolicyBuilder::new("p");
        p.duration("signature-validity", "signatures-validity", "2h");
        p.duration("signature-refresh", "signatures-refresh", "90m");
        let (policy, notes) = p.finish();
        assert_eq!(setting(&policy, "signature-refresh"), Some("3000"));
        assert!(
            notes.iter().any(|(_, advice)| advice.contains("hourly")),
            "{notes:?}"
        );
        assert_heron_takes(&policy);
    }

    /// The translated policy, written as the import writes it, loads.
    fn assert_heron_takes(policy: &SigningPolicy) {
        let text: String = (policy.settings.iter())
            .map(|(k, v)| format!("{k} = {v}\n"))
            .collect();
        let entry: crate::config::dnssec::PolicyEntry =
            toml::from_str(&format!("name = \"p\"\n{text}")).unwrap();
        let (_, errors) = crate::config::dnssec::policies_and_errors(&[entry]);
        assert!(errors.is_empty(), "{errors:?}");
    }

    #[test]
    fn a_narrowed_jitter_leaves_a_policy_heron_takes() {
        let mut p = PolicyBuilder::new("p");
        p.duration("signature-validity", "signatures-validity", "3h");
        p.duration("signature-refresh", "signatures-refresh", "1h");
        let (policy, _) = p.finish();
        assert_eq!(setting(&policy, "signature-jitter"), Some("1800"));
        assert_heron_takes(&policy);
    }

    #[test]
    fn what_heron_lacks_is_listed() {
        let mut p = PolicyBuilder::new("p");
        p.algorithm("ecdsap384sha384");
        p.duration("zsk-lifetime", "lifetime", "soon");
        p.duration("ksk-lifetime", "lifetime", "unlimited");
        p.nsec3(Some("0"), true, Some("8"));
        let (policy, notes) = p.finish();
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(!policy.settings.iter().any(|(k, _)| k.ends_with("lifetime")));
        assert!(
            policy
                .settings
                .contains(&("nsec3-opt-out".into(), "true".into()))
        );
    }

    fn setting<'p>(policy: &'p SigningPolicy, key: &str) -> Option<&'p str> {
        let found = policy.settings.iter().find(|(k, _)| k == key);
        found.map(|(_, v)| v.as_str())
    }

    #[test]
    fn a_bind_dnssec_policy_and_its_zones_are_translated_with_the_import_command() {
        let dir = tempfile::tempdir().unwrap();
        let text = "dnssec-policy \"edge\" {\n  keys {\n    ksk lifetime unlimited algorithm ed25519;\n    \
                    zsk lifetime P90D algorithm ed25519;\n  };\n  \
                    nsec3param iterations 0 optout yes salt-length 0;\n  signatures-validity 7d;\n  \
                    signatures-refresh 5d;\n  purge-keys P90D;\n};\n\
                    zone \"a.test\" { type primary; file \"a\"; dnssec-policy edge; key-directory \"/var/lib/bind/k\"; };\n\
                    zone \"b.test\" { type primary; file \"b\"; dnssec-policy default; };\n\
                    zone \"c.test\" { type primary; file \"c\"; dnssec-policy unknown; };\n\
                    zone \"d.test\" { type primary; file \"d\"; dnssec-policy insecure; };\n";
        let path = super::super::testutil::write_files(dir.path(), &[("named.conf", text)]);
        let got = super::super::bind::parse(&path).unwrap();
        let edge = &got.policies[0];
        assert_eq!(edge.name, "edge");
        assert_eq!(setting(edge, "algorithm"), Some("\"ed25519\""));
        assert_eq!(setting(edge, "keys"), Some("\"ksk-zsk\""));
        assert_eq!(setting(edge, "zsk-lifetime"), Some("7776000"));
        assert_eq!(setting(edge, "ksk-lifetime"), None);
        assert_eq!(setting(edge, "denial"), Some("\"nsec3\""));
        assert_eq!(setting(edge, "nsec3-opt-out"), Some("true"));
        assert_eq!(setting(edge, "signature-jitter"), Some("84600"));
        let policy_of = |o: &str| {
            got.zones
                .iter()
                .find(|z| z.origin == o)
                .unwrap()
                .dnssec_policy
                .clone()
        };
        assert_eq!(policy_of("a.test").as_deref(), Some("edge"));
        assert_eq!(policy_of("b.test").as_deref(), Some("default"));
        // Going insecure goes on in Heron, with the zone's keys.
        assert_eq!(policy_of("d.test").as_deref(), Some("insecure"));
        assert_eq!(
            policy_of("c.test"),
            None,
            "an undefined policy is listed, not guessed"
        );
        let advice = |needle: &str| got.notes.iter().any(|n| n.advice.contains(needle));
        assert!(advice(
            "heron keymgr -d keys a.test import --from bind /var/lib/bind/k"
        ));
        assert!(advice(&format!(
            "heron keymgr -d keys b.test import --from bind {}",
            "."
        )));
        assert!(advice("heron keymgr -d keys d.test import --from bind"));
        let edge = got.policies.iter().find(|p| p.name == "edge").unwrap();
        assert_eq!(setting(edge, "purge-keys"), Some("7776000"));
        assert!(
            got.notes
                .iter()
                .any(|n| n.setting.contains("dnssec-policy unknown"))
        );
    }

    #[test]
    fn knot_policies_and_signed_zones_are_translated_with_the_import_command() {
        let dir = tempfile::tempdir().unwrap();
        let text = "database:\n  storage: /var/lib/knot\n\
                    policy:\n  - id: one\n    algorithm: ed25519\n    single-type-signing: on\n    \
                    nsec3: on\n    nsec3-salt-length: 8\n    ksk-submission: parent\n\
                    zone:\n  - domain: a.test\n    dnssec-signing: on\n    dnssec-policy: one\n\
                    \x20 - domain: b.test\n    dnssec-signing: on\n";
        let path = super::super::testutil::write_files(dir.path(), &[("knot.conf", text)]);
        let got = super::super::knot::parse(&path).unwrap();
        let one = got.policies.iter().find(|p| p.name == "one").unwrap();
        assert_eq!(setting(one, "keys"), Some("\"csk\""));
        assert_eq!(setting(one, "algorithm"), Some("\"ed25519\""));
        assert_eq!(setting(one, "denial"), Some("\"nsec3\""));
        let default = got
            .policies
            .iter()
            .find(|p| p.name == "knot-default")
            .unwrap();
        assert_eq!(setting(default, "keys"), Some("\"ksk-zsk\""));
        assert_eq!(setting(default, "signature-refresh"), Some("604800"));
        assert_eq!(setting(default, "propagation-delay"), Some("3600"));
        let policy_of = |o: &str| {
            got.zones
                .iter()
                .find(|z| z.origin == o)
                .unwrap()
                .dnssec_policy
                .clone()
        };
        assert_eq!(policy_of("a.test").as_deref(), Some("one"));
        assert_eq!(policy_of("b.test").as_deref(), Some("knot-default"));
        let advice = |needle: &str| got.notes.iter().any(|n| n.advice.contains(needle));
        assert!(advice(
            "heron keymgr -d keys a.test import --from knot /var/lib/knot/keys"
        ));
        assert!(
            got.notes
                .iter()
                .any(|n| n.setting.contains("salt-length 8"))
        );
        assert!(
            got.notes
                .iter()
                .any(|n| n.setting.contains("ksk-submission parent"))
        );
    }

    /// BIND's rollover timing has Heron keys of its own: each is written
    /// in seconds (BIND's TTL-style, ISO 8601 and plain seconds read),
    /// and only what Heron lacks (`publish-safety`) is listed.
    #[test]
    fn bind_rollover_timing_is_translated_in_seconds() {
        let dir = tempfile::tempdir().unwrap();
        let text = "dnssec-policy \"timed\" {\n  max-zone-ttl 2h;\n  \
                    zone-propagation-delay PT5M;\n  parent-ds-ttl 1d;\n  \
                    parent-propagation-delay 3600;\n  retire-safety P1D;\n  \
                    publish-safety 1h;\n};\n";
        let path = super::super::testutil::write_files(dir.path(), &[("named.conf", text)]);
        let got = super::super::bind::parse(&path).unwrap();
        let timed = &got.policies[0];
        assert_eq!(setting(timed, "max-zone-ttl"), Some("7200"));
        assert_eq!(setting(timed, "propagation-delay"), Some("300"));
        assert_eq!(setting(timed, "parent-ds-ttl"), Some("86400"));
        assert_eq!(setting(timed, "parent-propagation-delay"), Some("3600"));
        assert_eq!(setting(timed, "retire-safety"), Some("86400"));
        let listed: Vec<&str> = (got.notes.iter())
            .map(|n| n.setting.as_str())
            .filter(|s| s.starts_with("dnssec-policy"))
            .collect();
        assert_eq!(listed, ["dnssec-policy timed: publish-safety 1h"]);
    }

    /// BIND's `max-zone-ttl unlimited` (or 0) leaves Heron's default,
    /// the zone's own largest TTL.
    #[test]
    fn an_unlimited_bind_max_zone_ttl_leaves_the_zones_own() {
        let mut p = PolicyBuilder::new("p");
        p.duration("max-zone-ttl", "max-zone-ttl", "unlimited");
        p.duration("max-zone-ttl", "max-zone-ttl", "0");
        let (policy, notes) = p.finish();
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(setting(&policy, "max-zone-ttl"), None);
    }

    #[test]
    fn knot_rollover_timing_is_translated_in_seconds() {
        let dir = tempfile::tempdir().unwrap();
        let text = "policy:\n  - id: timed\n    propagation-delay: 2h\n    \
                    zone-max-ttl: 86400\n    delete-delay: 1d\n";
        let path = super::super::testutil::write_files(dir.path(), &[("knot.conf", text)]);
        let got = super::super::knot::parse(&path).unwrap();
        let timed = got.policies.iter().find(|p| p.name == "timed").unwrap();
        assert_eq!(setting(timed, "propagation-delay"), Some("7200"));
        assert_eq!(setting(timed, "max-zone-ttl"), Some("86400"));
        let listed = |needle: &str| got.notes.iter().any(|n| n.setting.contains(needle));
        assert!(!listed("propagation-delay") && !listed("zone-max-ttl"));
        assert_eq!(setting(timed, "purge-keys"), Some("86400"));
        assert!(!listed("delete-delay"));
    }

    /// Knot's own defaults where Heron's differ: a rollover step waits
    /// Knot's 1h of propagation delay, and the DNSKEY TTL it took from the
    /// SOA is listed for the operator to set.
    #[test]
    fn a_knot_policy_that_says_nothing_keeps_knots_timing() {
        let dir = tempfile::tempdir().unwrap();
        let text = "policy:\n  - id: plain\n    algorithm: ecdsap256sha256\n";
        let path = super::super::testutil::write_files(dir.path(), &[("knot.conf", text)]);
        let got = super::super::knot::parse(&path).unwrap();
        let plain = got.policies.iter().find(|p| p.name == "plain").unwrap();
        assert_eq!(setting(plain, "propagation-delay"), Some("3600"));
        assert_eq!(setting(plain, "dnskey-ttl"), None);
        assert_eq!(setting(plain, "cds-ttl"), Some("0"), "Knot's CDS TTL");
        // Knot 3.2 refreshes the propagation delay plus the zone's largest
        // TTL before expiry; without zone-max-ttl the import cannot tell.
        assert_eq!(setting(plain, "signature-refresh"), Some("604800"));
        assert!(
            got.notes
                .iter()
                .any(|n| n.setting.starts_with("policy plain: rrsig-refresh"))
        );
        assert!(
            got.notes
                .iter()
                .any(|n| n.setting.starts_with("policy plain: dnskey-ttl"))
        );
    }

    /// Knot 3.2's refresh without `rrsig-refresh` is `propagation-delay`
    /// plus `zone-max-ttl` (black-box finding BT-12: 7 days was written
    /// as Knot's default); an `rrsig-refresh` set is taken as it is.
    #[test]
    fn a_knot_policy_without_rrsig_refresh_gets_knots_refresh() {
        let dir = tempfile::tempdir().unwrap();
        let text = "policy:\n  - id: bounded\n    propagation-delay: 2h\n    zone-max-ttl: 1d\n\
                    \x20 - id: set\n    zone-max-ttl: 1d\n    rrsig-refresh: 3d\n";
        let path = super::super::testutil::write_files(dir.path(), &[("knot.conf", text)]);
        let got = super::super::knot::parse(&path).unwrap();
        let policy = |name: &str| got.policies.iter().find(|p| p.name == name).unwrap();
        let refresh = |name: &str| setting(policy(name), "signature-refresh");
        assert_eq!(refresh("bounded"), Some("93600"));
        assert_eq!(refresh("set"), Some("259200"));
        assert!(
            !got.notes
                .iter()
                .any(|n| n.setting.contains("rrsig-refresh"))
        );
    }

    /// A zone Knot signs is served at Knot's serial, raised at each
    /// signing (serial-policy increment by default): the to-do says to
    /// raise the file's, as for BIND. Knot publishes CDS/CDNSKEY only
    /// during a KSK rollover by default, Heron always: listed, unless the
    /// policy says `always`.
    #[test]
    fn knot_signed_zones_get_the_serial_step_and_the_cds_note() {
        let dir = tempfile::tempdir().unwrap();
        let text = "policy:\n  - id: quiet\n\
                    \x20 - id: loud\n    cds-cdnskey-publish: always\n\
                    zone:\n  - domain: a.test\n    dnssec-signing: on\n    dnssec-policy: quiet\n\
                    \x20 - domain: b.test\n    dnssec-signing: on\n    serial-policy: unixtime\n\
                    \x20 - domain: c.test\n    dnssec-signing: on\n    dnssec-policy: loud\n";
        let path = super::super::testutil::write_files(dir.path(), &[("knot.conf", text)]);
        let got = super::super::knot::parse(&path).unwrap();
        let to_do = |origin: &str| {
            let setting = format!("zone {origin}: dnssec-signing on (serial)");
            let note = got.notes.iter().find(|n| n.setting == setting);
            note.filter(|n| n.kind == super::super::model::NoteKind::ToDo)
                .unwrap_or_else(|| panic!("{origin}: {:?}", got.notes))
                .advice
                .clone()
        };
        assert!(to_do("a.test").contains("serial-policy (increment)"));
        assert!(to_do("b.test").contains("serial-policy (unixtime)"));
        to_do("c.test");
        let cds: Vec<&str> = (got.notes.iter())
            .filter(|n| n.setting.contains("cds-cdnskey-publish"))
            .map(|n| n.setting.as_str())
            .collect();
        assert_eq!(
            cds,
            [
                "policy quiet: cds-cdnskey-publish rollover (Knot's default)",
                "knot-default: cds-cdnskey-publish rollover (Knot's default)"
            ]
        );
    }

    /// Keys in a PEM keystore of their own are imported from its folder
    /// (`--keystore`, relative to the KASP database like Knot reads it);
    /// the default keystore needs no option; keys in a PKCS #11 token
    /// cannot be imported and are listed.
    #[test]
    fn knot_keystores_give_the_key_import_its_folder() {
        let dir = tempfile::tempdir().unwrap();
        let text = "database:\n  storage: /var/lib/knot\n\
                    keystore:\n  - id: ks\n    backend: pem\n    config: /srv/pem\n\
                    \x20 - id: rel\n    config: other\n\
                    \x20 - id: hsm\n    backend: pkcs11\n    config: \"pkcs11:token=x /usr/lib/p.so\"\n\
                    policy:\n  - id: a\n    keystore: ks\n  - id: b\n    keystore: rel\n\
                    \x20 - id: c\n    keystore: hsm\n\
                    zone:\n  - domain: a.test\n    dnssec-signing: on\n    dnssec-policy: a\n\
                    \x20 - domain: b.test\n    dnssec-signing: on\n    dnssec-policy: b\n\
                    \x20 - domain: c.test\n    dnssec-signing: on\n    dnssec-policy: c\n\
                    \x20 - domain: d.test\n    dnssec-signing: on\n";
        let path = super::super::testutil::write_files(dir.path(), &[("knot.conf", text)]);
        let got = super::super::knot::parse(&path).unwrap();
        let advice = |needle: &str| got.notes.iter().any(|n| n.advice.contains(needle));
        assert!(advice(
            "heron keymgr -d keys a.test import --from knot /var/lib/knot/keys --keystore /srv/pem`"
        ));
        assert!(advice(
            "heron keymgr -d keys b.test import --from knot /var/lib/knot/keys --keystore /var/lib/knot/keys/other`"
        ));
        assert!(advice(
            "heron keymgr -d keys d.test import --from knot /var/lib/knot/keys`"
        ));
        assert!(!advice("keymgr -d keys c.test"));
        assert!(
            got.notes
                .iter()
                .any(|n| n.setting == "zone c.test: keystore backend pkcs11")
        );
        assert!(!got.notes.iter().any(|n| n.setting.contains("keystore ks")));
        let c = got.zones.iter().find(|z| z.origin == "c.test").unwrap();
        assert_eq!(c.dnssec_policy, None);
    }

    /// Knot's `manual: on` makes and rolls no key (black-box finding
    /// AQ-14: it became Knot's 30-day ZSK lifetime, and Heron rolled an
    /// imported ZSK at its first start): no lifetimes, with a line.
    #[test]
    fn a_manual_knot_policy_has_no_key_lifetimes() {
        let dir = tempfile::tempdir().unwrap();
        let text = "policy:\n  - id: man\n    manual: on\n    algorithm: ecdsap256sha256\n    \
                    ksk-lifetime: 365d\n\
                    \x20 - id: auto\n    algorithm: ecdsap256sha256\n";
        let path = super::super::testutil::write_files(dir.path(), &[("knot.conf", text)]);
        let got = super::super::knot::parse(&path).unwrap();
        let man = got.policies.iter().find(|p| p.name == "man").unwrap();
        assert_eq!(setting(man, "zsk-lifetime"), None, "{man:?}");
        assert_eq!(setting(man, "ksk-lifetime"), None, "{man:?}");
        assert_heron_takes(man);
        let auto = got.policies.iter().find(|p| p.name == "auto").unwrap();
        assert_eq!(setting(auto, "zsk-lifetime"), Some("2592000"));
        let said = got
            .notes
            .iter()
            .find(|n| n.setting == "policy man: manual on");
        let said = said.unwrap_or_else(|| panic!("{:?}", got.notes));
        assert!(said.advice.contains("never rolls"), "{}", said.advice);
    }

    /// An RSASHA256 policy (keys Heron only imports, never makes or
    /// rolls) gets no lifetime, Knot's default ZSK lifetime included, and
    /// each lifetime left out is listed: the policy loads. Black-box
    /// finding AQ-5: the import wrote a policy Heron refused.
    #[test]
    fn an_rsa_policy_gets_no_lifetime_and_loads() {
        let dir = tempfile::tempdir().unwrap();
        let knot = "policy:\n  - id: rsa\n    algorithm: rsasha256\n\
                    \x20 - id: csk\n    algorithm: rsasha256\n    single-type-signing: on\n    ksk-lifetime: 365d\n";
        let bind = "dnssec-policy \"rsa\" { keys { ksk lifetime unlimited algorithm rsasha256 2048;\n\
                    \x20 zsk lifetime 30d algorithm rsasha256 1024; }; };\n";
        let path = super::super::testutil::write_files(dir.path(), &[("knot.conf", knot)]);
        let from_knot = super::super::knot::parse(&path).unwrap();
        let path = super::super::testutil::write_files(dir.path(), &[("named.conf", bind)]);
        let from_bind = super::super::bind::parse(&path).unwrap();
        for (got, listed) in [
            (&from_knot, &["zsk-lifetime 30d", "ksk-lifetime 365d"][..]),
            (&from_bind, &["zsk lifetime 30d"][..]),
        ] {
            for policy in &got.policies {
                assert_eq!(setting(policy, "algorithm"), Some("\"rsasha256\""));
                let lifetime = policy
                    .settings
                    .iter()
                    .find(|(k, _)| k.ends_with("lifetime"));
                assert_eq!(lifetime, None, "{policy:?}");
                assert_heron_takes(policy);
            }
            for setting in listed {
                let note = got.notes.iter().find(|n| n.setting.ends_with(setting));
                let note = note.unwrap_or_else(|| panic!("{setting}: {:?}", got.notes));
                assert!(note.advice.contains("does not roll"), "{}", note.advice);
            }
        }
    }

    /// Knot rolls a CSK by ksk-lifetime and ignores zsk-lifetime; Heron
    /// refuses a zsk-lifetime in a CSK policy, so it is not written.
    #[test]
    fn a_knot_csk_policy_gets_no_zsk_lifetime() {
        let dir = tempfile::tempdir().unwrap();
        let text = "policy:\n  - id: plain\n    single-type-signing: on\n    ksk-lifetime: 90d\n\
                    \n  - id: said\n    single-type-signing: on\n    zsk-lifetime: 10d\n";
        let path = super::super::testutil::write_files(dir.path(), &[("knot.conf", text)]);
        let got = super::super::knot::parse(&path).unwrap();
        for name in ["plain", "said"] {
            let p = got.policies.iter().find(|p| p.name == name).unwrap();
            assert_eq!(setting(p, "zsk-lifetime"), None, "{name}");
            assert_eq!(setting(p, "keys"), Some("\"csk\""), "{name}");
        }
        let plain = got.policies.iter().find(|p| p.name == "plain").unwrap();
        assert_eq!(setting(plain, "ksk-lifetime"), Some("7776000"));
        assert!(
            got.notes
                .iter()
                .any(|n| n.setting.contains("zsk-lifetime 10d"))
        );
    }
}
