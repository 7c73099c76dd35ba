//! The in-memory zone: nodes by owner name, RRsets in wire form.
//!
//! A zone is built once by [`ZoneBuilder`], checked, and then read-only.
//! Owners are keyed by their lower-cased wire form so that a lookup is a
//! hash of bytes the query path already holds; every ancestor between an
//! owner and the apex gets a node (an empty non-terminal if it holds no
//! data), so "does this name exist" is one lookup.

use std::collections::HashMap;

/// Owner name → node; foldhash, seeded per process, is several times
/// cheaper than SipHash on short keys.
type NodeMap<V> = hashbrown::HashMap<Box<[u8]>, V>;
use std::fmt;

use heron_proto::encoded::{AdditionalBlock, EncodedRRset};
use heron_proto::name::lowercase_wire;
use heron_proto::rdata;
use heron_proto::{Class, Name, RType};

use crate::zonefile::{Location, Record};

/// One RRset: records of one owner and type, with the signatures over it.
#[derive(Clone, Debug)]
pub struct RRset {
    pub rtype: RType,
    pub ttl: u32,
    /// Each record's uncompressed wire RDATA.
    pub rdatas: Vec<Box<[u8]>>,
    /// RRSIG RDATA covering this type.
    pub sigs: Vec<Box<[u8]>>,
    pub sig_ttl: u32,
    /// The records as a response carries them (filled when the zone is built).
    pub encoded: EncodedRRset,
    /// The RRSIG records over them, likewise.
    pub encoded_sigs: EncodedRRset,
    /// For NS, MX and SRV: the addresses of the targets this zone holds,
    /// for the additional section.
    pub additional: Option<Box<AdditionalBlock>>,
}

/// A name in the zone and its data.
#[derive(Clone, Debug)]
pub struct Node {
    /// The owner as written in the zone file (case preserved).
    pub owner: Name,
    /// Sorted by type; RRSIGs live with the RRset they cover.
    pub rrsets: Vec<RRset>,
    /// NS here and not at the apex: a delegation point.
    pub is_cut: bool,
}

impl Node {
    /// The RRset of `rtype`, if it holds records (signatures alone do not
    /// make an RRset).
    pub fn rrset(&self, rtype: RType) -> Option<&RRset> {
        self.rrsets
            .binary_search_by_key(&rtype, |r| r.rtype)
            .ok()
            .map(|i| &self.rrsets[i])
            .filter(|r| !r.rdatas.is_empty())
    }

    /// RRsets that hold records, in type order.
    pub fn data(&self) -> impl Iterator<Item = &RRset> {
        self.rrsets.iter().filter(|r| !r.rdatas.is_empty())
    }

    /// No data at all: an empty non-terminal.
    pub fn is_empty(&self) -> bool {
        self.data().next().is_none()
    }
}

/// A zone ready to answer from.
#[derive(Debug)]
pub struct Zone {
    origin: Name,
    class: Class,
    /// The apex, kept out of the table: every answer needs it, and a byte
    /// comparison is cheaper than a hash lookup.
    apex: Node,
    /// Every other node.
    nodes: NodeMap<Node>,
    /// The apex SOA with the negative-answer TTL (RFC 2308 5), and its
    /// signatures, encoded for the authority section.
    negative_soa: EncodedRRset,
    negative_soa_sigs: EncodedRRset,
    /// Record count as loaded (after de-duplication), for reporting.
    records: usize,
}

impl Zone {
    pub fn origin(&self) -> &Name {
        &self.origin
    }

    pub fn class(&self) -> Class {
        self.class
    }

    /// The node at a lower-cased wire name.
    pub fn node(&self, lower_wire: &[u8]) -> Option<&Node> {
        if lower_wire == self.origin.as_wire() {
            return Some(&self.apex);
        }
        self.nodes.get(lower_wire)
    }

    pub fn apex(&self) -> &Node {
        &self.apex
    }

    pub fn soa(&self) -> &RRset {
        self.apex().rrset(RType::SOA).expect("checked at build")
    }

    /// The SOA record for NXDOMAIN and NODATA answers.
    pub fn negative_soa(&self) -> &EncodedRRset {
        &self.negative_soa
    }

    pub fn negative_soa_sigs(&self) -> &EncodedRRset {
        &self.negative_soa_sigs
    }

    /// Serial from the apex SOA.
    pub fn serial(&self) -> u32 {
        let rdata = &self.soa().rdatas[0];
        soa_field(rdata, 0)
    }

    pub fn record_count(&self) -> usize {
        self.records
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len() + 1
    }

    /// Every node, the apex first, the others in no particular order.
    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        std::iter::once(&self.apex).chain(self.nodes.values())
    }
}

/// The `index`th 32-bit field after the two names of SOA RDATA.
fn soa_field(rdata: &[u8], index: usize) -> u32 {
    let names = skip_name(rdata, 0);
    let at = skip_name(rdata, names) + 4 * index;
    u32::from_be_bytes(rdata[at..at + 4].try_into().unwrap())
}

fn skip_name(wire: &[u8], mut i: usize) -> usize {
    while wire[i] != 0 {
        i += 1 + wire[i] as usize;
    }
    i + 1
}

/// How bad a zone problem is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// The zone is still served; the data concerned may be ignored.
    Warning,
    /// The zone cannot be served.
    Error,
}

/// A problem found while building a zone, with where it came from.
#[derive(Clone, Debug)]
pub struct Problem {
    pub severity: Severity,
    pub location: Option<Location>,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = match self.severity {
            Severity::Warning => "warning",
            Severity::Error => "error",
        };
        match &self.location {
            Some(loc) => write!(f, "{loc}: {level}: {}", self.message),
            None => write!(f, "{level}: {}", self.message),
        }
    }
}

/// Types whose first record's location is kept, because the zone checks
/// report problems with them; keeping every record's would double the
/// memory a large zone needs while it loads.
const LOCATED_TYPES: [RType; 4] = [RType::SOA, RType::NS, RType::CNAME, RType::DNAME];

/// Collects records and builds a checked [`Zone`].
pub struct ZoneBuilder {
    origin: Name,
    class: Class,
    nodes: NodeMap<Node>,
    /// Where each (owner, type) first appeared, for error messages.
    first_seen: HashMap<(Box<[u8]>, RType), Location>,
    problems: Vec<Problem>,
    records: usize,
}

impl ZoneBuilder {
    pub fn new(origin: Name, class: Class) -> ZoneBuilder {
        ZoneBuilder {
            origin,
            class,
            nodes: NodeMap::new(),
            first_seen: HashMap::new(),
            problems: Vec::new(),
            records: 0,
        }
    }

    fn problem(&mut self, severity: Severity, location: Option<&Location>, message: String) {
        self.problems.push(Problem {
            severity,
            location: location.cloned(),
            message,
        });
    }

    /// Adds one record; out-of-zone records are reported and ignored.
    pub fn add(&mut self, rec: Record) {
        if !rec.owner.is_subdomain_of(&self.origin) {
            let msg = format!(
                "{} {} is outside the zone {}; ignored",
                rec.owner, rec.rtype, self.origin
            );
            self.problem(Severity::Warning, Some(&rec.location), msg);
            return;
        }
        if rec.class != self.class {
            let msg = format!("class {} differs from the zone's {}", rec.class, self.class);
            self.problem(Severity::Error, Some(&rec.location), msg);
            return;
        }
        if rec.rtype.is_meta() {
            let msg = format!("{} is a meta type and cannot be zone data", rec.rtype);
            self.problem(Severity::Error, Some(&rec.location), msg);
            return;
        }
        let mut key: Box<[u8]> = rec.owner.as_wire().into();
        lowercase_wire(&mut key);
        let node = self.nodes.entry(key.clone()).or_insert_with(|| Node {
            owner: rec.owner.clone(),
            rrsets: Vec::new(),
            is_cut: false,
        });
        if node.owner.as_wire() != rec.owner.as_wire() && node.is_empty() {
            node.owner = rec.owner.clone();
        }
        let (rtype, covered) = match rec.rtype {
            RType::RRSIG if rec.rdata.len() >= 2 => (
                RType(u16::from_be_bytes([rec.rdata[0], rec.rdata[1]])),
                true,
            ),
            t => (t, false),
        };
        match add_to_node(node, rtype, covered, rec.ttl, rec.rdata) {
            Added::Duplicate => return,
            Added::New => {}
            Added::TtlDiffers(first_ttl) => {
                let msg = format!(
                    "TTL {} differs from the TTL {} of the {} RRset; using {}",
                    rec.ttl, first_ttl, rtype, first_ttl
                );
                self.problem(Severity::Warning, Some(&rec.location), msg);
            }
        }
        self.records += 1;
        if LOCATED_TYPES.contains(&rec.rtype) {
            self.first_seen
                .entry((key, rec.rtype))
                .or_insert(rec.location);
        }
    }

    /// Checks the zone and builds it. Errors make the zone unusable;
    /// warnings come back with the zone.
    pub fn build(mut self) -> Result<(Zone, Vec<Problem>), Vec<Problem>> {
        self.check_apex();
        self.check_cname_and_dname();
        self.mark_cuts();
        self.add_empty_non_terminals();
        self.check_glue();
        let records = self.records;
        if self.problems.iter().any(|p| p.severity == Severity::Error) {
            return Err(self.problems);
        }
        let origin = self.origin.to_lowercase();
        let mut nodes = self.nodes;
        for node in nodes.values_mut() {
            encode_node(node, origin.as_wire());
        }
        attach_additional_blocks(&mut nodes);
        let apex = nodes
            .remove(origin.as_wire())
            .expect("checked: the apex has an SOA");
        let (negative_soa, negative_soa_sigs) = encode_negative_soa(&apex, origin.as_wire());
        Ok((
            Zone {
                origin,
                class: self.class,
                apex,
                nodes,
                negative_soa,
                negative_soa_sigs,
                records,
            },
            self.problems,
        ))
    }

    fn location(&self, owner: &Name, rtype: RType) -> Option<Location> {
        let mut key: Box<[u8]> = owner.as_wire().into();
        lowercase_wire(&mut key);
        self.first_seen.get(&(key, rtype)).cloned()
    }

    fn check_apex(&mut self) {
        let key: Box<[u8]> = self.origin.to_lowercase().as_wire().into();
        let (soa_count, has_ns) = match self.nodes.get(&key) {
            Some(apex) => (
                apex.rrset(RType::SOA).map_or(0, |s| s.rdatas.len()),
                apex.rrset(RType::NS).is_some_and(|s| !s.rdatas.is_empty()),
            ),
            None => (0, false),
        };
        let origin = self.origin.clone();
        match soa_count {
            0 => self.problem(
                Severity::Error,
                None,
                format!("no SOA record at the zone apex {origin}"),
            ),
            1 => {}
            n => {
                let loc = self.location(&origin, RType::SOA);
                self.problem(
                    Severity::Error,
                    loc.as_ref(),
                    format!("{n} SOA records at the apex {origin}; exactly one is allowed"),
                )
            }
        }
        if !has_ns {
            self.problem(
                Severity::Error,
                None,
                format!("no NS records at the zone apex {origin}"),
            );
        }
        // SOA anywhere but the apex.
        let stray: Vec<Name> = self
            .nodes
            .iter()
            .filter(|(k, n)| **k != key && n.rrset(RType::SOA).is_some())
            .map(|(_, n)| n.owner.clone())
            .collect();
        for owner in stray {
            let loc = self.location(&owner, RType::SOA);
            let msg = format!("SOA record at {owner}, which is not the zone apex");
            self.problem(Severity::Error, loc.as_ref(), msg);
        }
    }

    fn check_cname_and_dname(&mut self) {
        let mut found = Vec::new();
        for node in self.nodes.values() {
            if let Some(cname) = node.rrset(RType::CNAME) {
                if cname.rdatas.len() > 1 {
                    found.push((node.owner.clone(), "more than one CNAME record".to_string()));
                }
                let others: Vec<String> = node
                    .rrsets
                    .iter()
                    .filter(|s| !s.rdatas.is_empty())
                    .map(|s| s.rtype)
                    .filter(|t| !matches!(*t, RType::CNAME | RType::NSEC | RType::RRSIG))
                    .map(|t| t.to_string())
                    .collect();
                if !others.is_empty() {
                    let msg = format!("CNAME beside other data ({})", others.join(", "));
                    found.push((node.owner.clone(), msg));
                }
            }
            if node.rrset(RType::DNAME).is_some_and(|d| d.rdatas.len() > 1) {
                found.push((node.owner.clone(), "more than one DNAME record".to_string()));
            }
        }
        for (owner, msg) in found {
            let rtype = if msg.contains("DNAME") {
                RType::DNAME
            } else {
                RType::CNAME
            };
            let loc = self.location(&owner, rtype);
            self.problem(Severity::Error, loc.as_ref(), format!("{owner}: {msg}"));
        }
    }

    fn mark_cuts(&mut self) {
        let apex: Box<[u8]> = self.origin.to_lowercase().as_wire().into();
        for (key, node) in self.nodes.iter_mut() {
            node.is_cut = *key != apex && node.rrset(RType::NS).is_some();
        }
    }

    fn add_empty_non_terminals(&mut self) {
        let origin_len = self.origin.wire_len();
        // Only a name two or more labels below the apex can need one.
        let deep = |n: &Node| n.owner.wire_len() - (1 + n.owner.as_wire()[0] as usize) > origin_len;
        let owners: Vec<Name> = self
            .nodes
            .values()
            .filter(|n| !n.owner.is_root() && deep(n))
            .map(|n| n.owner.clone())
            .collect();
        for owner in owners {
            let mut name = owner;
            while name.wire_len() > origin_len {
                let Some(parent) = name.parent() else { break };
                let mut key: Box<[u8]> = parent.as_wire().into();
                lowercase_wire(&mut key);
                if self.nodes.contains_key(&key) {
                    break;
                }
                self.nodes.insert(
                    key,
                    Node {
                        owner: parent.clone(),
                        rrsets: Vec::new(),
                        is_cut: false,
                    },
                );
                name = parent;
            }
        }
    }

    /// An NS target at or below a delegation of this zone needs an address
    /// here, or nobody can reach that name server.
    fn check_glue(&mut self) {
        let mut missing = Vec::new();
        for node in self.nodes.values().filter(|n| n.is_cut) {
            for target in node.rrset(RType::NS).map_or(&[][..], |s| &s.rdatas) {
                let Ok(target) = Name::from_wire(target) else {
                    continue;
                };
                if !target.is_subdomain_of(&node.owner) {
                    continue;
                }
                let mut key: Box<[u8]> = target.as_wire().into();
                lowercase_wire(&mut key);
                let has_address = self
                    .nodes
                    .get(&key)
                    .is_some_and(|n| n.rrset(RType::A).is_some() || n.rrset(RType::AAAA).is_some());
                if !has_address {
                    missing.push((node.owner.clone(), target));
                }
            }
        }
        for (cut, target) in missing {
            let loc = self.location(&cut, RType::NS);
            let msg = format!("delegation {cut} to {target} has no glue address (A/AAAA)");
            self.problem(Severity::Warning, loc.as_ref(), msg);
        }
    }
}

/// Encodes every RRset of a node for responses.
fn encode_node(node: &mut Node, apex: &[u8]) {
    for set in node.rrsets.iter_mut() {
        let rdatas: Vec<&[u8]> = set.rdatas.iter().map(|r| &r[..]).collect();
        set.encoded = EncodedRRset::new(set.rtype, set.ttl, &rdatas, apex);
        let sigs: Vec<&[u8]> = set.sigs.iter().map(|r| &r[..]).collect();
        set.encoded_sigs = EncodedRRset::new(RType::RRSIG, set.sig_ttl, &sigs, apex);
    }
}

/// Most targets whose addresses one RRset brings into the additional section.
const MAX_ADDITIONAL_TARGETS: usize = 16;

/// Gives every NS, MX and SRV RRset the addresses of its targets that the
/// zone holds (glue below a delegation included), encoded for responses.
fn attach_additional_blocks(nodes: &mut NodeMap<Node>) {
    let mut blocks = Vec::new();
    for (key, node) in nodes.iter() {
        for (i, set) in node.rrsets.iter().enumerate() {
            if matches!(set.rtype, RType::NS | RType::MX | RType::SRV) {
                let block = additional_block(node, set, nodes);
                if !block.is_empty() {
                    blocks.push((key.clone(), i, block));
                }
            }
        }
    }
    for (key, i, block) in blocks {
        let node = nodes.get_mut(&key).expect("collected from the map");
        node.rrsets[i].additional = Some(Box::new(block));
    }
}

fn additional_block(node: &Node, set: &RRset, nodes: &NodeMap<Node>) -> AdditionalBlock {
    // The target name's offset in a record: past TYPE CLASS TTL RDLENGTH
    // (10 octets) and the RDATA's leading numbers.
    let name_offset = 10
        + match set.rtype {
            RType::MX => 2,
            RType::SRV => 6,
            _ => 0,
        };
    let mut block = AdditionalBlock::default();
    let mut seen: Vec<Box<[u8]>> = Vec::new();
    for (k, rd) in set.rdatas.iter().enumerate() {
        let Some(target) = rdata::names_for_additional(set.rtype, rd) else {
            continue;
        };
        let mut lower: Box<[u8]> = target.into();
        lowercase_wire(&mut lower);
        if seen.contains(&lower) || seen.len() == MAX_ADDITIONAL_TARGETS {
            continue;
        }
        let Some(target_node) = nodes.get(&lower) else {
            continue;
        };
        // Glue for a name server inside the delegated zone is required
        // (RFC 9471): without it the referral cannot be followed.
        let required =
            node.is_cut && set.rtype == RType::NS && target_node.owner.is_subdomain_of(&node.owner);
        for rtype in [RType::A, RType::AAAA] {
            if let Some(addr) = target_node.rrset(rtype) {
                let rdatas: Vec<&[u8]> = addr.rdatas.iter().map(|r| &r[..]).collect();
                let target = set.encoded.name_position(k, name_offset);
                block.push(target, rtype, addr.ttl, &rdatas, required);
            }
        }
        seen.push(lower);
    }
    block
}

/// The SOA as negative answers carry it: TTL the lesser of the SOA's own
/// and its MINIMUM field (RFC 2308 5), signatures likewise.
fn encode_negative_soa(apex_node: &Node, apex: &[u8]) -> (EncodedRRset, EncodedRRset) {
    let soa = apex_node.rrset(RType::SOA).expect("checked at build");
    let ttl = soa.ttl.min(soa_field(&soa.rdatas[0], 4));
    let rdatas: Vec<&[u8]> = soa.rdatas.iter().map(|r| &r[..]).collect();
    let sigs: Vec<&[u8]> = soa.sigs.iter().map(|r| &r[..]).collect();
    (
        EncodedRRset::new(RType::SOA, ttl, &rdatas, apex),
        EncodedRRset::new(RType::RRSIG, ttl.min(soa.sig_ttl), &sigs, apex),
    )
}

/// What adding a record to its RRset did.
enum Added {
    New,
    /// The same record was already there (RFC 2181 5: it collapses).
    Duplicate,
    /// Added, but the RRset keeps its first TTL (RFC 2181 5.2).
    TtlDiffers(u32),
}

fn add_to_node(node: &mut Node, rtype: RType, is_sig: bool, ttl: u32, rdata: Vec<u8>) -> Added {
    let at = match node.rrsets.binary_search_by_key(&rtype, |r| r.rtype) {
        Ok(i) => i,
        Err(i) => {
            node.rrsets.insert(
                i,
                RRset {
                    rtype,
                    ttl,
                    rdatas: Vec::new(),
                    sigs: Vec::new(),
                    sig_ttl: ttl,
                    encoded: EncodedRRset::default(),
                    encoded_sigs: EncodedRRset::default(),
                    additional: None,
                },
            );
            i
        }
    };
    let set = &mut node.rrsets[at];
    let list = if is_sig {
        &mut set.sigs
    } else {
        if set.rdatas.is_empty() {
            set.ttl = ttl;
        }
        &mut set.rdatas
    };
    if list.iter().any(|r| rdata_equal(rtype, r, &rdata)) {
        return Added::Duplicate;
    }
    list.push(rdata.into_boxed_slice());
    if is_sig {
        set.sig_ttl = set.sig_ttl.min(ttl);
        return Added::New;
    }
    if set.ttl != ttl {
        return Added::TtlDiffers(set.ttl);
    }
    Added::New
}

/// RDATA equality: names in well-known types compare case-insensitively.
fn rdata_equal(rtype: RType, a: &[u8], b: &[u8]) -> bool {
    if rtype.rdata_names_compressible() || rtype == RType::SRV || rtype == RType::DNAME {
        a.eq_ignore_ascii_case(b)
    } else {
        a == b
    }
}

/// A zone loaded from a file, with its warnings.
pub struct Loaded {
    pub zone: Zone,
    pub warnings: Vec<Problem>,
}

/// Reads and checks a zone file. On failure, every problem found (syntax
/// and semantic) comes back, each naming the file and line.
pub fn load_zone_file(path: &std::path::Path, origin: &Name) -> Result<Loaded, Vec<Problem>> {
    let opts = crate::zonefile::ReadOptions::new(origin.clone());
    let mut builder = ZoneBuilder::new(origin.clone(), Class::IN);
    let errors = crate::zonefile::read_file(path, &opts, &mut |rec| builder.add(rec));
    finish_load(builder, errors)
}

fn finish_load(
    builder: ZoneBuilder,
    errors: Vec<crate::zonefile::ZoneFileError>,
) -> Result<Loaded, Vec<Problem>> {
    let mut syntax: Vec<Problem> = errors
        .into_iter()
        .map(|e| Problem {
            severity: Severity::Error,
            location: Some(e.location),
            message: e.message,
        })
        .collect();
    match builder.build() {
        Ok((zone, warnings)) if syntax.is_empty() => Ok(Loaded { zone, warnings }),
        Ok((_, warnings)) => {
            syntax.extend(warnings);
            Err(syntax)
        }
        Err(problems) => {
            syntax.extend(problems);
            Err(syntax)
        }
    }
}

/// Reads and checks a zone from text in memory (`name` is used as the file
/// name in messages).
pub fn load_zone_str(text: &str, name: &str, origin: &Name) -> Result<Loaded, Vec<Problem>> {
    let opts = crate::zonefile::ReadOptions::new(origin.clone());
    let mut builder = ZoneBuilder::new(origin.clone(), Class::IN);
    let path = std::path::Path::new(name);
    let errors =
        crate::zonefile::read_str(text, path, std::path::Path::new("."), &opts, &mut |rec| {
            builder.add(rec)
        });
    finish_load(builder, errors)
}
