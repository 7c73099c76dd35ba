//! Signed zones for DNSSEC tests: a zone file signed at test time with
//! BIND's `dnssec-keygen` and `dnssec-signzone` (Debian bind9-utils), and
//! `delv` (bind9-dnsutils) to validate a server's answers against the
//! zone's key-signing key.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::process::{TempDir, require_binary, write};

pub const DNSSEC_KEYGEN: &str = "/usr/bin/dnssec-keygen";
pub const DNSSEC_SIGNZONE: &str = "/usr/bin/dnssec-signzone";
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

/// A zone signed with a fresh key pair (a KSK and a ZSK, ECDSA P-256),
/// in a temporary directory that lives as long as this value.
pub struct SignedZone {
    pub origin: String,
    /// The signed zone file.
    pub path: PathBuf,
    /// `delv`'s trust anchor: the KSK as a `trust-anchors` static key.
    pub anchor: PathBuf,
    _dir: TempDir,
}

impl SignedZone {
    /// Signs the zone file `source` for `origin` with `chain`. Signatures
    /// are valid from an hour ago for 30 days (`dnssec-signzone`'s
    /// defaults). Panics, showing the tool's output, if signing fails.
    pub fn sign(origin: &str, source: &Path, chain: Chain) -> SignedZone {
        require_binary(DNSSEC_KEYGEN);
        require_binary(DNSSEC_SIGNZONE);
        let dir = TempDir::new("signed");
        let origin = origin.trim_end_matches('.').to_string();
        for extra in [&[][..], &["-f", "KSK"]] {
            let mut keygen = Command::new(DNSSEC_KEYGEN);
            keygen.args(["-q", "-a", "ECDSAP256SHA256", "-n", "ZONE"]);
            run(keygen.args(extra).arg(&origin).current_dir(&dir.0));
        }
        let path = dir.0.join(format!("{origin}.signed"));
        let mut sign = Command::new(DNSSEC_SIGNZONE);
        sign.args(["-q", "-S", "-K", "."]);
        if let Chain::Nsec3 {
            salt,
            iterations,
            opt_out,
        } = chain
        {
            sign.args(["-3", salt, "-H", &iterations.to_string()]);
            if opt_out {
                sign.arg("-A");
            }
        }
        sign.arg("-o").arg(&origin).arg("-f").arg(&path).arg(source);
        run(sign.current_dir(&dir.0));
        let anchor = dir.0.join("anchor.conf");
        write(&anchor, &trust_anchor(&dir.0, &origin));
        SignedZone {
            origin: format!("{origin}."),
            path,
            anchor,
            _dir: dir,
        }
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
        !self.is_negative() && self.output.lines().any(|l| l == "; fully validated")
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

    fn is_negative(&self) -> bool {
        self.output.contains(";; resolution failed: ncache")
    }
}

impl fmt::Display for Validation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "$ {}\n{}", self.command, self.output)
    }
}

fn run(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The KSK in `dir` (`K<origin>+*.key`, flags 257) as a `delv` anchor file.
fn trust_anchor(dir: &Path, origin: &str) -> String {
    let keys = std::fs::read_dir(dir).expect("the key directory");
    for entry in keys.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !(name.starts_with(&format!("K{origin}.+")) && name.ends_with(".key")) {
            continue;
        }
        let text = std::fs::read_to_string(entry.path()).expect("a key file");
        let Some(line) = text.lines().find(|l| !l.starts_with(';') && l.contains("DNSKEY")) else {
            continue;
        };
        let fields: Vec<&str> = line.split_whitespace().collect();
        let at = fields.iter().position(|f| *f == "DNSKEY").expect("DNSKEY");
        let (flags, protocol, algorithm) = (fields[at + 1], fields[at + 2], fields[at + 3]);
        if flags == "257" {
            let key = fields[at + 4..].concat();
            return format!(
                "trust-anchors {{\n  {origin}. static-key {flags} {protocol} {algorithm} \"{key}\";\n}};\n"
            );
        }
    }
    panic!("no KSK for {origin} in {}", dir.display());
}
