//! What the three parsers produce and the one writer reads: a server's
//! configuration in Heron's terms, with every setting that has no such
//! term kept as a [`Note`] saying where it was and what to do.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use super::source::{Loc, Sources};

/// What to do about a zone the old server updates dynamically: Heron
/// takes updates, but its rules are written by hand.
pub const UPDATE_ADVICE: &str = "Heron takes dynamic updates (allow-update rules in \
     heron.toml: a key or an address, name/subdomain/wildcard/zonesub/self/selfsub, types), \
     but these rules are not translated: write them by hand. First have the old server write \
     its updates into the zone file (rndc sync -clean, knotc zone-flush): Heron's journal is \
     FILE.jnl too, and it does not read the old server's";

/// What to do about a zone the old server signs as it serves it (`NAME`
/// the old server) when its signing could not be translated into a
/// `[[dnssec-policy]]`: Heron signs, and can take the old keys.
pub fn signing_advice(name: &str) -> String {
    format!(
        "{name} signs this zone as it serves it; Heron signs too ([[dnssec-policy]]), and takes \
         {name}'s keys with `heron keymgr -d KEYDIR ZONE import --from {} DIR`, so the DS at the \
         parent stays valid. This setting was not translated: write the zone's dnssec-policy by \
         hand, import the keys before Heron first loads the zone, or keep {name} as a hidden \
         signer and make Heron its secondary",
        name.to_ascii_lowercase()
    )
}

/// The note for a signed zone whose policy was translated: the command
/// that brings its keys (`source`: `bind` or `knot`; `dir`: where they are).
pub fn key_import_advice(origin: &str, policy: &str, source: &str, dir: &str) -> String {
    format!(
        "translated as dnssec-policy = \"{policy}\"; before Heron first loads the zone, import \
         the old keys so that the DS at the parent stays valid (no rollover): in heron.toml's \
         folder run `heron keymgr -d keys {origin} import --from {source} {dir}`; without them \
         Heron makes new keys, which validate only once the parent has their DS"
    )
}

/// A `[[dnssec-policy]]` translated from the old server's: its settings
/// as heron.toml writes them (`key`, TOML value).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SigningPolicy {
    pub name: String,
    pub settings: Vec<(String, String)>,
}

/// A setting the import could not carry over, or did not need to.
#[derive(Clone, Debug)]
pub struct Note {
    pub loc: Loc,
    pub kind: NoteKind,
    /// The setting as the source wrote it (never a secret's value).
    pub setting: String,
    /// What Heron does instead, and what the operator may do about it.
    pub advice: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NoteKind {
    /// Behaviour may differ: read the advice.
    Untranslated,
    /// Translated, but a step remains before Heron takes over (the
    /// command that imports a signed zone's keys).
    ToDo,
    /// No equivalent is needed (a pid file, a log target, a tuning knob
    /// Heron sizes itself); listed so that nothing goes unmentioned.
    NotNeeded,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TsigKey {
    pub name: String,
    pub algorithm: String,
    pub secret: String,
    pub loc: Loc,
}

/// A peer: a primary to pull from or a secondary to NOTIFY.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    pub addr: SocketAddr,
    pub key: Option<String>,
    /// `Some(None)`: TLS without checking the certificate; `Some(name)`:
    /// checked for that name.
    pub tls: Option<Option<String>>,
}

impl Peer {
    pub fn plain(addr: SocketAddr, key: Option<String>) -> Peer {
        Peer {
            addr,
            key,
            tls: None,
        }
    }

    /// "ADDRESS[:PORT] [key NAME] [tls [NAME]]" as heron.toml spells it.
    pub fn heron(&self) -> String {
        let mut text = if self.addr.port() == 53 {
            self.addr.ip().to_string()
        } else {
            self.addr.to_string()
        };
        if let Some(key) = &self.key {
            text.push_str(&format!(" key {key}"));
        }
        match &self.tls {
            Some(Some(name)) => text.push_str(&format!(" tls {name}")),
            Some(None) => text.push_str(" tls"),
            None => {}
        }
        text
    }
}

/// One allow rule: a prefix and, optionally, the TSIG key required.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub prefix: Prefix,
    pub key: Option<String>,
}

impl Rule {
    pub fn heron(&self) -> String {
        match &self.key {
            Some(key) => format!("{} key {key}", self.prefix),
            None => self.prefix.to_string(),
        }
    }
}

/// An address and a prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefix {
    pub addr: IpAddr,
    pub len: u8,
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let full = if self.addr.is_ipv4() { 32 } else { 128 };
        if self.len == full {
            write!(f, "{}", self.addr)
        } else {
            write!(f, "{}/{}", self.addr, self.len)
        }
    }
}

impl std::str::FromStr for Prefix {
    type Err = String;

    /// `ADDRESS` or `ADDRESS/LEN`; host bits are cleared.
    fn from_str(text: &str) -> Result<Prefix, String> {
        let (addr, len) = match text.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (text, None),
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| format!("'{text}' is not an address or prefix"))?;
        let full = if addr.is_ipv4() { 32 } else { 128 };
        let len = match len {
            Some(l) => l
                .parse::<u8>()
                .ok()
                .filter(|&l| l <= full)
                .ok_or_else(|| format!("'{text}': bad prefix length"))?,
            None => full,
        };
        Ok(Prefix {
            addr: mask(addr, len),
            len,
        })
    }
}

impl Prefix {
    /// Whether `addr` is in it.
    pub fn contains(&self, addr: IpAddr) -> bool {
        self.addr.is_ipv4() == addr.is_ipv4() && mask(addr, self.len) == self.addr
    }

    /// Whether some address is in both.
    pub fn overlaps(&self, other: &Prefix) -> bool {
        let len = self.len.min(other.len);
        self.addr.is_ipv4() == other.addr.is_ipv4() && mask(self.addr, len) == mask(other.addr, len)
    }

    /// Its addresses that are not in `other`, as the fewest prefixes:
    /// itself when the two do not overlap, none when `other` holds it,
    /// else, at each length from its own to `other`'s, the half beside
    /// `other`'s (one prefix a bit: at most 128).
    pub fn without(&self, other: &Prefix) -> Vec<Prefix> {
        if !self.overlaps(other) {
            return vec![*self];
        }
        (self.len + 1..=other.len)
            .map(|len| Prefix {
                addr: flip(mask(other.addr, len), len - 1),
                len,
            })
            .collect()
    }
}

/// `prefix` without every one of `excepted`.
pub fn without_all(prefix: Prefix, excepted: &[Prefix]) -> Vec<Prefix> {
    let mut left = vec![prefix];
    for e in excepted {
        left = left.iter().flat_map(|p| p.without(e)).collect();
    }
    left
}

/// `addr` with bit `bit` (0: the first) flipped.
fn flip(addr: IpAddr, bit: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => IpAddr::V4((u32::from(a) ^ (1 << (31 - bit))).into()),
        IpAddr::V6(a) => IpAddr::V6((u128::from(a) ^ (1 << (127 - bit))).into()),
    }
}

fn mask(addr: IpAddr, len: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let bits = u32::from(a);
            let m = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            IpAddr::V4((bits & m).into())
        }
        IpAddr::V6(a) => {
            let bits = u128::from(a);
            let m = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len)
            };
            IpAddr::V6((bits & m).into())
        }
    }
}

/// The fewest prefixes that cover exactly `first..=last` (NSD's and
/// Knot's address ranges); None when the two differ in family or are
/// out of order. At most 2 × 128 prefixes.
pub fn range_prefixes(first: IpAddr, last: IpAddr) -> Option<Vec<Prefix>> {
    let (lo, hi, bits, v4) = match (first, last) {
        (IpAddr::V4(a), IpAddr::V4(b)) => (u32::from(a) as u128, u32::from(b) as u128, 32u32, true),
        (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b), 128u32, false),
        _ => return None,
    };
    if lo > hi {
        return None;
    }
    let mut out = Vec::new();
    let mut start = lo;
    loop {
        // The largest block that starts at `start` and stays within `hi`.
        let mut size_log = if start == 0 {
            bits
        } else {
            start.trailing_zeros().min(bits)
        };
        while size_log > 0 && block_end(start, size_log).is_none_or(|end| end > hi) {
            size_log -= 1;
        }
        let addr = if v4 {
            IpAddr::V4((start as u32).into())
        } else {
            IpAddr::V6(start.into())
        };
        out.push(Prefix {
            addr,
            len: (bits - size_log) as u8,
        });
        match block_end(start, size_log) {
            Some(end) if end < hi => start = end + 1,
            _ => return Some(out),
        }
    }
}

fn block_end(start: u128, size_log: u32) -> Option<u128> {
    if size_log >= 128 {
        return (start == 0).then_some(u128::MAX);
    }
    start.checked_add((1u128 << size_log) - 1)
}

/// `[rrl]`: unset fields keep Heron's defaults.
#[derive(Clone, Debug, Default)]
pub struct Rrl {
    pub responses_per_second: Option<u32>,
    pub nxdomains_per_second: Option<u32>,
    pub errors_per_second: Option<u32>,
    pub window: Option<u32>,
    pub slip: Option<u32>,
    pub ipv4_prefix_length: Option<u8>,
    pub ipv6_prefix_length: Option<u8>,
    pub exempt: Vec<Prefix>,
    pub log_only: bool,
    pub table_size: Option<usize>,
}

#[derive(Clone, Debug)]
pub struct TlsListener {
    pub listen: Vec<SocketAddr>,
    pub certificate: PathBuf,
    pub key: PathBuf,
}

/// A catalog Heron consumes: its members become secondaries.
#[derive(Clone, Debug)]
pub struct CatalogConsumer {
    pub zone: String,
    pub primaries: Vec<Peer>,
    pub allow_transfer: Vec<Rule>,
    /// Told of each new version of the catalog zone itself.
    pub notify: Vec<Peer>,
    /// The members' primaries when not the catalog's.
    pub member_primaries: Vec<Peer>,
    pub member_allow_transfer: Vec<Rule>,
    /// Empty: the members' primaries (Heron's default).
    pub member_allow_notify: Vec<Rule>,
    pub member_notify: Vec<Peer>,
    /// `[catalog.group.NAME]`: the templates of members whose `group`
    /// property names them (Knot's further `catalog-template`s).
    pub groups: Vec<MemberGroup>,
}

/// A consumed catalog's template for the members of one group.
#[derive(Clone, Debug, Default)]
pub struct MemberGroup {
    pub name: String,
    /// Empty: the catalog's.
    pub primaries: Vec<Peer>,
    pub allow_transfer: Vec<Rule>,
    pub allow_notify: Vec<Rule>,
    pub notify: Vec<Peer>,
}

#[derive(Clone, Debug, Default)]
pub struct Zone {
    /// Where the zone was configured.
    pub loc: Option<Loc>,
    /// As written, without the final dot ("." for the root).
    pub origin: String,
    /// A primary zone's file; None for a secondary (Heron keeps its own
    /// copy, so that the old server's files are never written to).
    pub file: Option<PathBuf>,
    pub primaries: Vec<Peer>,
    pub allow_transfer: Vec<Rule>,
    pub allow_notify: Vec<Rule>,
    pub allow_query: Option<Vec<Rule>>,
    /// `allow-update` rules, as heron.toml writes them.
    pub allow_update: Vec<String>,
    pub notify: Vec<Peer>,
    /// Keep the journal in memory: the file's `.jnl` belongs to the old
    /// server.
    pub journal_off: bool,
    /// A catalog Heron writes.
    pub catalog_generate: bool,
    pub catalog_member: Option<String>,
    pub catalog_group: Option<String>,
    /// The `[[dnssec-policy]]` Heron signs the zone with (keys in the
    /// default key-directory, `keys` next to heron.toml).
    pub dnssec_policy: Option<String>,
}

/// A whole configuration in Heron's terms.
#[derive(Clone, Debug, Default)]
pub struct Imported {
    /// Every address and port the server answers on (at least one).
    pub listen: Vec<SocketAddr>,
    pub tls: Option<TlsListener>,
    pub keys: Vec<TsigKey>,
    pub zones: Vec<Zone>,
    pub catalogs: Vec<CatalogConsumer>,
    pub rrl: Option<Rrl>,
    pub version: Option<String>,
    pub identity: Option<String>,
    pub nsid_hex: Option<String>,
    pub allow_query: Option<Vec<Rule>>,
    pub blackhole: Vec<Prefix>,
    /// `[secondary] tls-ca`.
    pub tls_ca: Option<PathBuf>,
    /// `[xdp] listen`, `INTERFACE@PORT` entries.
    pub xdp_listen: Vec<String>,
    /// Signing policies the zones name (Heron's built-in `default` is not here).
    pub policies: Vec<SigningPolicy>,
    pub notes: Vec<Note>,
    /// Every file of the old server's configuration that was read (its
    /// includes too): never written over.
    pub sources: Sources,
    /// The old server's zone data besides the zone files Heron serves:
    /// what those files `$INCLUDE` (where the old server finds it and
    /// where Heron does), and secondary zones' files, which the old
    /// server writes. Never written over either.
    pub zone_data: Vec<PathBuf>,
}

impl Imported {
    pub fn untranslated(
        &mut self,
        loc: &Loc,
        setting: impl Into<String>,
        advice: impl Into<String>,
    ) {
        self.notes.push(Note {
            loc: loc.clone(),
            kind: NoteKind::Untranslated,
            setting: setting.into(),
            advice: advice.into(),
        });
    }

    pub fn step_to_do(&mut self, loc: &Loc, setting: impl Into<String>, advice: impl Into<String>) {
        self.notes.push(Note {
            loc: loc.clone(),
            kind: NoteKind::ToDo,
            setting: setting.into(),
            advice: advice.into(),
        });
    }

    pub fn not_needed(&mut self, loc: &Loc, setting: impl Into<String>, advice: impl Into<String>) {
        self.notes.push(Note {
            loc: loc.clone(),
            kind: NoteKind::NotNeeded,
            setting: setting.into(),
            advice: advice.into(),
        });
    }
}

/// "ADDR", "ADDR@PORT" (NSD, Knot) or "ADDR#PORT" (NSD too), with
/// `default_port`.
pub fn parse_at_port(text: &str, default_port: u16) -> Option<SocketAddr> {
    let (addr, port) = match text.split_once(['@', '#']) {
        Some((a, p)) => (a, p.parse().ok()?),
        None => (text, default_port),
    };
    Some(SocketAddr::new(addr.parse().ok()?, port))
}

/// Allow rules less those a deny could reach: NSD's BLOCKED and Knot's
/// `deny` entries outrank allows, and heron.toml has no deny, so an
/// allow that overlaps a deny is left out (narrower, never wider).
/// Returns the rules kept and how many were left out.
pub fn without_denied(allows: Vec<Rule>, denied: &[Prefix]) -> (Vec<Rule>, usize) {
    let before = allows.len();
    let kept: Vec<Rule> = allows
        .into_iter()
        .filter(|r| !denied.iter().any(|d| d.overlaps(&r.prefix)))
        .collect();
    let dropped = before - kept.len();
    (kept, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Prefix {
        text.parse().unwrap()
    }

    #[test]
    fn ranges_become_the_fewest_covering_prefixes() {
        let ip = |t: &str| t.parse::<IpAddr>().unwrap();
        let r = range_prefixes(ip("192.0.2.0"), ip("192.0.2.255")).unwrap();
        assert_eq!(r, [p("192.0.2.0/24")]);
        let r = range_prefixes(ip("192.0.2.1"), ip("192.0.2.6")).unwrap();
        assert_eq!(
            r,
            [
                p("192.0.2.1"),
                p("192.0.2.2/31"),
                p("192.0.2.4/31"),
                p("192.0.2.6")
            ]
        );
        let r = range_prefixes(ip("0.0.0.0"), ip("255.255.255.255")).unwrap();
        assert_eq!(r, [p("0.0.0.0/0")]);
        let r = range_prefixes(ip("::"), ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")).unwrap();
        assert_eq!(r, [p("::/0")]);
        let r = range_prefixes(ip("::1"), ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe")).unwrap();
        assert!(r.len() <= 256);
        assert!(range_prefixes(ip("192.0.2.9"), ip("192.0.2.1")).is_none());
        assert!(range_prefixes(ip("192.0.2.1"), ip("::1")).is_none());
    }

    #[test]
    fn prefixes_clear_host_bits_and_print_as_heron_reads_them() {
        assert_eq!(p("192.0.2.77/24").to_string(), "192.0.2.0/24");
        assert_eq!(p("2001:db8::1").to_string(), "2001:db8::1");
        assert!("192.0.2.1/33".parse::<Prefix>().is_err());
        assert!("nonsense".parse::<Prefix>().is_err());
    }

    #[test]
    fn peers_print_with_port_key_and_tls() {
        let peer = Peer {
            addr: "[2001:db8::1]:5300".parse().unwrap(),
            key: Some("k".into()),
            tls: Some(None),
        };
        assert_eq!(peer.heron(), "[2001:db8::1]:5300 key k tls");
        assert_eq!(
            Peer::plain("192.0.2.1:53".parse().unwrap(), None).heron(),
            "192.0.2.1"
        );
        assert_eq!(
            parse_at_port("192.0.2.1@5300", 53),
            "192.0.2.1:5300".parse().ok()
        );
        assert_eq!(parse_at_port("::1", 53), "[::1]:53".parse().ok());
        assert_eq!(parse_at_port("::1@x", 53), None);
    }
}
