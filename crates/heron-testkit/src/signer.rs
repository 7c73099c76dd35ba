//! Signed zones for DNSSEC tests: zone files signed once by
//! `scripts/sign-test-zones.sh` (BIND's `dnssec-signzone`, signatures
//! valid 2026 to 2040) and checked in, and `delv` (bind9-dnsutils) to
//! validate a server's answers with the zone's key-signing key as the
//! trust anchor.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::process::{TempDir, require_binary, write};

pub const DELV: &str = "/usr/bin/delv";

/// How a signed zone denies existence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chain {
    Nsec,
    /// NSEC3 with a salt (hex) and extra iterations, optionally opt-out.
    Nsec3 {
        salt: &'static str,
        iterations: u16,
        opt_out: bool,
    },
}

impl Chain {
    /// The ways `scripts/sign-test-zones.sh` signs each zone.
    pub const ALL: [Chain; 3] = [
        Chain::Nsec,
        Chain::Nsec3 {
            salt: "aabbccdd",
            iterations: 5,
            opt_out: false,
        },
        Chain::Nsec3 {
            salt: "-",
            iterations: 0,
            opt_out: true,
        },
    ];

    /// The fixture's name part: `nsec`, `nsec3` or `optout`.
    pub fn file_tag(&self) -> &'static str {
        match self {
            Chain::Nsec => "nsec",
            Chain::Nsec3 { opt_out: false, .. } => "nsec3",
            Chain::Nsec3 { opt_out: true, .. } => "optout",
        }
    }
}

impl fmt::Display for Chain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Chain::Nsec => f.write_str("NSEC"),
            Chain::Nsec3 {
                salt,
                iterations,
                opt_out,
            } => {
                let opt_out = if *opt_out { ", opt-out" } else { "" };
                write!(f, "NSEC3 (salt {salt}, {iterations} iterations{opt_out})")
            }
        }
    }
}

/// A checked-in signed zone and a `delv` trust anchor for it, in a
/// temporary directory that lives as long as this value.
pub struct SignedZone {
    pub origin: String,
    /// The signed zone file.
    pub path: PathBuf,
    /// `delv`'s trust anchor: the KSK as a `trust-anchors` static key.
    pub anchor: PathBuf,
    _dir: TempDir,
}

impl SignedZone {
    /// The fixture `DIR/ORIGIN.TAG.zone` that `scripts/sign-test-zones.sh`
    /// signed from `source` with `chain`. Panics if the fixture is missing
    /// or was signed from another version of `source` (run the script).
    pub fn fixture(origin: &str, source: &Path, chain: Chain) -> SignedZone {
        let origin = origin.trim_end_matches('.').to_string();
        let dir = source.parent().expect("the source's folder").join("signed");
        let path = dir.join(format!("{origin}.{}.zone", chain.file_tag()));
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}; run scripts/sign-test-zones.sh", path.display()));
        let want = sha256_of(source);
        let first = text.lines().next().unwrap_or_default();
        assert_eq!(
            first.strip_prefix("; source sha256 "),
            Some(want.as_str()),
            "{} was not signed from {} as it is now: run scripts/sign-test-zones.sh",
            path.display(),
            source.display()
        );
        let tmp = TempDir::new("signed");
        let anchor = tmp.0.join("anchor.conf");
        write(&anchor, &trust_anchor(&text, &origin, &path));
        SignedZone {
            origin: format!("{origin}."),
            path,
            anchor,
            _dir: tmp,
        }
    }

    /// A zone as a server serves it signed: `zone_text` (an AXFR of it,
    /// one record a line) is kept as `path`, its KSK the trust anchor.
    pub fn from_text(origin: &str, zone_text: &str) -> SignedZone {
        let origin = origin.trim_end_matches('.').to_string();
        let tmp = TempDir::new("signed");
        let path = tmp.0.join(format!("{origin}.zone"));
        write(&path, zone_text);
        let anchor = tmp.0.join("anchor.conf");
        write(&anchor, &trust_anchor(zone_text, &origin, &path));
        SignedZone {
            origin: format!("{origin}."),
            path,
            anchor,
            _dir: tmp,
        }
    }

    /// Asserts that `dnssec-verify` (`-z` for a CSK: it counts only keys
    /// without the SEP flag as ZSKs) says the zone is fully signed and
    /// `ldns-verify-zone` accepts it; panics with what they said.
    pub fn verify_with_tools(&self, csk: bool) {
        let path = self.path.to_str().expect("a UTF-8 path");
        let said = |out: &std::process::Output| {
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr)
        };
        let mut verify = Command::new("/usr/bin/dnssec-verify");
        if csk {
            verify.arg("-z");
        }
        let origin = self.origin.trim_end_matches('.');
        let out = (verify.args(["-o", origin, path]).output()).expect("dnssec-verify runs");
        let text = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            out.status.success() && said(&out).contains("Zone fully signed"),
            "dnssec-verify: {}\n{text}",
            said(&out)
        );
        let out = (Command::new("/usr/bin/ldns-verify-zone").arg(path).output())
            .expect("ldns-verify-zone runs");
        assert!(out.status.success(), "ldns-verify-zone: {}", said(&out));
    }

    /// Validates the answer to `qname qtype` from the server at `addr`
    /// with `delv`, this zone's KSK the only trust anchor.
    pub fn delv(&self, addr: SocketAddr, qname: &str, qtype: &str) -> Validation {
        require_binary(DELV);
        let mut cmd = Command::new(DELV);
        cmd.arg(format!("@{}", addr.ip()))
            .args(["-p", &addr.port().to_string(), "-a"])
            .arg(&self.anchor)
            .arg(format!("+root={}", self.origin))
            .args(["+tcp", qname, qtype]);
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("cannot run {DELV}: {e}"));
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        Validation {
            command: format!("{cmd:?}"),
            output: text(&out.stdout) + &text(&out.stderr),
        }
    }
}

/// `sha256sum FILE`'s digest (coreutils).
fn sha256_of(path: &Path) -> String {
    let out = Command::new("sha256sum")
        .arg(path)
        .output()
        .unwrap_or_else(|e| panic!("cannot run sha256sum: {e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// What `delv` said about one answer.
#[derive(Debug)]
pub struct Validation {
    pub command: String,
    /// Its standard output and error.
    pub output: String,
}

impl Validation {
    /// A positive answer that validated (`; fully validated`).
    pub fn is_validated_answer(&self) -> bool {
        !self.is_negative() && self.verdict() == Some("; fully validated")
    }

    /// A negative answer whose proof validated: NXDOMAIN (`-$NXDOMAIN`)
    /// or NODATA (`-$NXRRSET`), `; negative response, fully validated`.
    pub fn is_validated_negative(&self, nxdomain: bool) -> bool {
        let marker = if nxdomain { "-$NXDOMAIN" } else { "-$NXRRSET" };
        self.is_negative()
            && self
                .output
                .lines()
                .any(|l| l == "; negative response, fully validated")
            && self.output.contains(marker)
    }

    /// A CNAME or DNAME that validated (`; fully validated`), to a name
    /// that does not exist (`-$NXDOMAIN`): delv validates the target's
    /// proof too, and fails with `no valid NSEC` when it does not hold.
    pub fn is_validated_chain_to_nxdomain(&self) -> bool {
        self.output.lines().any(|l| l == "; fully validated")
            && self.output.contains("-$NXDOMAIN")
            && !self.output.contains("no valid")
    }

    /// delv's first verdict line (`; fully validated`, `; unsigned
    /// answer`, ...): the one about the name asked, before any CNAME
    /// target's.
    pub fn verdict(&self) -> Option<&str> {
        self.verdicts().into_iter().next()
    }

    /// Every verdict line, one per name of a CNAME chain.
    pub fn verdicts(&self) -> Vec<&str> {
        let verdicts = self.output.lines().filter(|l| l.starts_with("; "));
        verdicts.collect()
    }

    /// An answer (validated or not), not a failure or a negative answer.
    pub fn is_answer(&self) -> bool {
        !self.is_negative() && !self.output.contains("resolution failed")
    }

    fn is_negative(&self) -> bool {
        self.output.contains(";; resolution failed: ncache")
    }
}

impl fmt::Display for Validation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "$ {}\n{}", self.command, self.output)
    }
}

/// The KSK (DNSKEY flags 257 at the apex) of a signed zone written one
/// record a line (`dnssec-signzone -O full`), as a `delv` anchor file.
fn trust_anchor(zone: &str, origin: &str, path: &Path) -> String {
    let apex = format!("{origin}.");
    for line in zone.lines().filter(|l| !l.starts_with(';')) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let Some(at) = fields.iter().position(|f| *f == "DNSKEY") else {
            continue;
        };
        if fields[0] != apex || fields.get(at + 1) != Some(&"257") {
            continue;
        }
        let (flags, protocol, algorithm) = (fields[at + 1], fields[at + 2], fields[at + 3]);
        let key = fields[at + 4..].concat();
        return format!(
            "trust-anchors {{\n  {apex} static-key {flags} {protocol} {algorithm} \"{key}\";\n}};\n"
        );
    }
    panic!("no KSK (DNSKEY 257) for {apex} in {}", path.display());
}
