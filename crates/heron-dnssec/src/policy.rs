//! A DNSSEC policy: which keys a zone has, how long signatures live, how
//! denial of existence is proved. The server reads one from each
//! `[[dnssec-policy]]`; [`Policy::default`] is the built-in `default`.

use crate::keys::Algorithm;
use crate::sign::{Denial, SignConfig};

/// One key, or a pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeySet {
    /// A combined signing key (flags 257) signs everything.
    Csk,
    /// A KSK signs the DNSKEY RRset, a ZSK the rest.
    KskZsk,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    pub name: String,
    pub algorithm: Algorithm,
    pub keys: KeySet,
    /// Seconds a KSK (or CSK) and a ZSK are used before they are rolled
    /// (0: never). Recorded for the rollover state machine.
    pub ksk_lifetime: u64,
    pub zsk_lifetime: u64,
    /// Seconds a signature is valid.
    pub signature_validity: u32,
    /// Seconds before expiration at which a signature is made anew.
    pub signature_refresh: u32,
    /// Seconds over which a zone's expirations are spread.
    pub signature_jitter: u32,
    /// Seconds inceptions are back-dated.
    pub inception_offset: u32,
    pub denial: Denial,
    pub dnskey_ttl: u32,
    /// TTL of the CDS and CDNSKEY RRsets.
    pub cds_ttl: u32,
    /// Rollover timing (RFC 7583), seconds: from a change of the zone to
    /// every secondary serving it, from a change at the parent to every
    /// parent server, the parent's DS TTL, and a margin added to every
    /// wait before a withdrawn record counts as gone.
    pub propagation_delay: u32,
    pub parent_propagation_delay: u32,
    pub parent_ds_ttl: u32,
    pub retire_safety: u32,
    /// Seconds a retired key stays in the key directory (its file and its
    /// entry in the state file) once no cache holds any of its records;
    /// 0: kept for good (BIND's `purge-keys`).
    pub purge_keys: u32,
    /// The largest TTL of the zone's records, if the operator bounds it;
    /// else each signing takes the zone's own largest TTL.
    pub max_zone_ttl: Option<u32>,
    pub ksk_method: crate::rollover::KskMethod,
    /// Name servers of the parent zone asked for the zone's DS RRset
    /// during a KSK or CSK rollover (as Knot's `ksk-submission`).
    pub parent_servers: Vec<std::net::SocketAddr>,
    /// An apex ZONEMD (RFC 8976, scheme SIMPLE) of this hash algorithm is
    /// made for each signed version, when set.
    pub zonemd: Option<crate::zonemd::HashAlg>,
    /// The zone goes insecure (BIND's `dnssec-policy insecure`): the CDS
    /// and CDNSKEY delete records (RFC 8078) are published, and once the
    /// parent's DS has left every cache, every key is retired and the
    /// zone is served unsigned.
    pub insecure: bool,
}

/// Most NSEC3 iterations a policy may ask for: RFC 9276 3.2 says 0, and
/// validators treat more than 100 (BIND: 50) as insecure.
pub const MAX_NSEC3_ITERATIONS: u16 = 50;
/// Longest NSEC3 salt (one length octet), though RFC 9276 says none.
pub const MAX_SALT: usize = 255;

const DAY: u32 = 86_400;

impl Default for Policy {
    /// ECDSA P-256, one CSK, NSEC, signatures valid 14 days and made anew
    /// 5 days before they expire, expirations spread over 5 days (120
    /// hours, so no hour holds more than 1/100 of them).
    fn default() -> Policy {
        Policy {
            name: "default".into(),
            algorithm: Algorithm::EcdsaP256Sha256,
            keys: KeySet::Csk,
            ksk_lifetime: 0,
            zsk_lifetime: 0,
            signature_validity: 14 * DAY,
            signature_refresh: 5 * DAY,
            signature_jitter: 5 * DAY,
            inception_offset: 3600,
            denial: Denial::Nsec,
            dnskey_ttl: 3600,
            cds_ttl: 3600,
            propagation_delay: 300,
            parent_propagation_delay: 3600,
            parent_ds_ttl: DAY,
            retire_safety: 3600,
            purge_keys: 90 * DAY,
            max_zone_ttl: None,
            ksk_method: crate::rollover::KskMethod::DoubleSignature,
            parent_servers: Vec::new(),
            zonemd: None,
            insecure: false,
        }
    }
}

/// The name of the built-in policy that takes a signed zone to unsigned
/// safely (as BIND names it).
pub const INSECURE: &str = "insecure";

impl Policy {
    /// The built-in `insecure`: [`Policy::default`]'s timing, going insecure.
    pub fn insecure() -> Policy {
        Policy {
            name: INSECURE.into(),
            insecure: true,
            ..Policy::default()
        }
    }
}

/// The longest `signature-validity`, and `inception-offset`: 3660 days,
/// BIND's bound. An RRSIG's expiration and inception are 32-bit times
/// compared in serial arithmetic (RFC 4034 3.1.5): 2^31 s (68 years)
/// or more from one to the other wraps, and the expiration reads as
/// before the inception (every signature bogus); the two together stay
/// below 20 years.
pub const MAX_SIGNATURE_VALIDITY: u32 = 3660 * DAY;

/// Seconds between the server's looks for signatures due for refresh:
/// each look makes anew those due before the next one.
pub const SIGNATURE_LOOK: u32 = 3600;

impl Policy {
    /// Seconds the shortest-lived new signature is valid: the validity
    /// less the most the jitter takes in.
    fn shortest_signature_life(&self) -> u32 {
        self.signature_validity
            .saturating_sub(self.signature_jitter)
    }

    /// What is wrong with the policy, each a sentence naming the key.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.algorithm.can_generate() {
            out.push(format!(
                "algorithm {} needs keys imported (Heron generates only ECDSAP256SHA256 and ED25519)",
                self.algorithm
            ));
        }
        if self.signature_validity < 2 * 3600 {
            out.push("signature-validity must be at least 2h".into());
        }
        for (key, seconds) in [
            ("signature-validity", self.signature_validity),
            ("inception-offset", self.inception_offset),
        ] {
            if seconds > MAX_SIGNATURE_VALIDITY {
                out.push(format!(
                    "{key} must be at most 3660d (10 years), not {}d: an RRSIG's expiration \
                     must stay less than 68 years past its inception (RFC 4034 3.1.5)",
                    seconds / DAY
                ));
            }
        }
        // RFC 2181 8: a TTL above 2^31 - 1 is read as 0 (black-box
        // finding CA-3: a CDS/CDNSKEY TTL went on the wire so).
        for (key, seconds) in [
            ("dnskey-ttl", self.dnskey_ttl),
            ("cds-ttl", self.cds_ttl),
            ("parent-ds-ttl", self.parent_ds_ttl),
        ] {
            if seconds > MAX_TTL {
                out.push(format!(
                    "{key} must be at most {MAX_TTL} seconds (about 68 years, RFC 2181 8), not {seconds}"
                ));
            }
        }
        let after_refresh = self
            .signature_validity
            .saturating_sub(self.signature_refresh);
        if self.signature_refresh == 0 || self.signature_refresh >= self.signature_validity {
            out.push("signature-refresh must be above 0 and below signature-validity".into());
        }
        if self.signature_jitter >= after_refresh.max(1) {
            out.push(
                "signature-jitter must be below signature-validity less signature-refresh".into(),
            );
        } else if self.shortest_signature_life() <= self.signature_refresh + SIGNATURE_LOOK {
            // Signatures due before the next look are made anew at each
            // look: a signature living no longer than that is made anew
            // every hour, and so is every other one of the zone.
            out.push(
                "signature-validity less signature-jitter must be more than an hour longer \
                 than signature-refresh (signatures are looked at hourly; shorter, every \
                 signature is made anew at every look)"
                    .into(),
            );
        }
        let rollover = self.rollover_policy(self.max_zone_ttl.unwrap_or(0));
        if let Err(why) = rollover.validate() {
            out.push(
                why.replace("Ksk", "KSK")
                    .replace("Zsk", "ZSK")
                    .replace("Csk", "CSK"),
            );
        }
        if let Denial::Nsec3 {
            iterations, salt, ..
        } = &self.denial
        {
            if *iterations > MAX_NSEC3_ITERATIONS {
                out.push(format!(
                    "nsec3-iterations {iterations} is above {MAX_NSEC3_ITERATIONS} (RFC 9276: use 0)"
                ));
            }
            if salt.len() > MAX_SALT {
                out.push(format!("nsec3-salt is longer than {MAX_SALT} octets"));
            }
        }
        out
    }

    /// The rollover state machine's policy for a zone whose largest TTL
    /// is `zone_max_ttl` (the policy's `max_zone_ttl` wins when larger).
    pub fn rollover_policy(&self, zone_max_ttl: u32) -> crate::rollover::Policy {
        crate::rollover::Policy {
            algorithm: self.algorithm.number(),
            csk: self.keys == KeySet::Csk,
            ksk_lifetime: self.ksk_lifetime,
            zsk_lifetime: self.zsk_lifetime,
            // A CSK lives as long as a KSK (`ksk-lifetime` names both).
            csk_lifetime: self.ksk_lifetime,
            ksk_method: self.ksk_method,
            propagation_delay: self.propagation_delay.into(),
            dnskey_ttl: self.dnskey_ttl.into(),
            max_zone_ttl: zone_max_ttl.max(self.max_zone_ttl.unwrap_or(0)).into(),
            signature_validity: self.signature_validity.into(),
            parent_ds_ttl: self.parent_ds_ttl.into(),
            parent_propagation_delay: self.parent_propagation_delay.into(),
            retire_safety: self.retire_safety.into(),
            insecure: self.insecure,
        }
    }

    /// How a signing under this policy signs.
    pub fn sign_config(&self) -> SignConfig {
        SignConfig {
            denial: self.denial.clone(),
            dnskey_ttl: self.dnskey_ttl,
            validity: self.signature_validity,
            jitter: self.signature_jitter,
            inception_offset: self.inception_offset,
            refresh: self.signature_refresh,
            serial: None,
        }
    }
}

/// Seconds from `90`, `"90"`, `"45m"`, `"14d"`, `"2w"` (s, m, h, d, w;
/// parts may follow each other: `"1d12h"`). None if malformed or past
/// `u32`.
pub fn parse_duration(text: &str) -> Option<u32> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let mut total: u64 = 0;
    let mut number: Option<u64> = None;
    for c in text.chars() {
        if let Some(d) = c.to_digit(10) {
            number = Some(
                number
                    .unwrap_or(0)
                    .checked_mul(10)?
                    .checked_add(u64::from(d))?,
            );
            continue;
        }
        let unit = match c.to_ascii_lowercase() {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            'w' => 604_800,
            _ => return None,
        };
        total = total.checked_add(number.take()?.checked_mul(unit)?)?;
    }
    total = total.checked_add(number.unwrap_or(0))?;
    u32::try_from(total).ok()
}

/// The largest TTL a record may have (RFC 2181 8).
const MAX_TTL: u32 = 0x7fff_ffff;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_policy_is_sound() {
        let p = Policy::default();
        assert!(p.problems().is_empty(), "{:?}", p.problems());
        assert_eq!(p.algorithm.number(), 13);
        assert_eq!(p.keys, KeySet::Csk);
        assert_eq!(p.denial, Denial::Nsec);
        // 1/100 of the signatures per hour at most needs 100 hours.
        assert!(p.signature_jitter >= 100 * 3600);
    }

    #[test]
    fn bad_policies_are_explained() {
        let base = Policy::default();
        let cases = [
            Policy {
                algorithm: Algorithm::RsaSha256,
                ..base.clone()
            },
            Policy {
                signature_refresh: base.signature_validity,
                ..base.clone()
            },
            Policy {
                signature_jitter: base.signature_validity,
                ..base.clone()
            },
            Policy {
                signature_validity: 60,
                ..base.clone()
            },
            // Black-box finding AM-1: "3650w" wrapped every expiration.
            Policy {
                signature_validity: 3650 * 7 * DAY,
                ..base.clone()
            },
            Policy {
                inception_offset: MAX_SIGNATURE_VALIDITY + 1,
                ..base.clone()
            },
            // Every signature would come due at each hourly look.
            Policy {
                signature_validity: 3 * 3600,
                signature_refresh: 3600,
                signature_jitter: 3600,
                ..base.clone()
            },
            Policy {
                denial: Denial::Nsec3 {
                    iterations: MAX_NSEC3_ITERATIONS + 1,
                    salt: Vec::new(),
                    opt_out: false,
                },
                ..base.clone()
            },
            Policy {
                denial: Denial::Nsec3 {
                    iterations: 0,
                    salt: vec![0; MAX_SALT + 1],
                    opt_out: false,
                },
                ..base.clone()
            },
        ];
        for policy in cases {
            assert!(!policy.problems().is_empty(), "{policy:?}");
        }
        // Black-box finding CA-3: a CDS TTL past 2^31 - 1 went on the wire.
        for ttl in [MAX_TTL + 1, u32::MAX] {
            let past = [
                (
                    "cds-ttl",
                    Policy {
                        cds_ttl: ttl,
                        ..base.clone()
                    },
                ),
                (
                    "dnskey-ttl",
                    Policy {
                        dnskey_ttl: ttl,
                        ..base.clone()
                    },
                ),
                (
                    "parent-ds-ttl",
                    Policy {
                        parent_ds_ttl: ttl,
                        ..base.clone()
                    },
                ),
            ];
            for (key, policy) in past {
                let said = policy.problems().join("; ");
                assert!(said.contains(&format!("{key} must be at most")), "{said}");
            }
        }
        let cds_at_limit = Policy {
            cds_ttl: MAX_TTL,
            ..base.clone()
        };
        assert!(
            cds_at_limit.problems().is_empty(),
            "{:?}",
            cds_at_limit.problems()
        );
        let shortest_life_at_limit = Policy {
            signature_validity: 3 * 3600,
            signature_refresh: 3600,
            signature_jitter: 3599,
            ..base.clone()
        };
        assert!(shortest_life_at_limit.problems().is_empty());
        let longest = Policy {
            signature_validity: MAX_SIGNATURE_VALIDITY,
            inception_offset: MAX_SIGNATURE_VALIDITY,
            ..base.clone()
        };
        assert!(longest.problems().is_empty(), "{:?}", longest.problems());
        let at_limit = Policy {
            denial: Denial::Nsec3 {
                iterations: MAX_NSEC3_ITERATIONS,
                salt: vec![0; MAX_SALT],
                opt_out: true,
            },
            ..base
        };
        assert!(at_limit.problems().is_empty());
    }

    #[test]
    fn durations_read_with_units() {
        for (text, want) in [
            ("90", Some(90)),
            ("45m", Some(2700)),
            ("14d", Some(14 * 86_400)),
            ("2w", Some(1_209_600)),
            ("1d12h", Some(129_600)),
            ("1H", Some(3600)),
            ("", None),
            ("d", None),
            ("5x", None),
            ("-5", None),
            ("99999999999", None),
            ("9999999w", None),
        ] {
            assert_eq!(parse_duration(text), want, "{text}");
        }
    }
}
