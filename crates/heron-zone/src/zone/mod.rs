//! The in-memory zone: nodes by owner name, RRsets in wire form.
//!
//! A zone is built once by [`ZoneBuilder`], checked, and then read-only.
//! Its nodes live in shards ([`node`] has the layout): the hash of a
//! lower-cased wire owner picks a shard and a slot in the shard's table,
//! which holds the node's offset in the shard's arena. Every ancestor
//! between an owner and the apex has a node (an empty non-terminal if it
//! holds no data), so "does this name exist" is one lookup. Shards are
//! shared between versions (`Arc`), so that a later version that changes
//! a few names can copy only the shards they fall in.

mod apply;
mod build;
mod canonical;
pub(crate) mod chain;
pub mod diff;
mod lines;
mod node;
pub(crate) mod nsec3;
mod nsec3_owners;
mod reread;
mod table;
mod targets;
pub(crate) mod wildcard;

use std::fmt;
use std::hash::BuildHasher;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use hashbrown::{DefaultHashBuilder, HashMap};
use heron_proto::{Class, Name, RType};

use crate::prefetch::{prefetch, prefetch_lines, prefetch_next_line};
use crate::zonefile::{
    self, Location, ReadOptions, Record, ZoneFileError, ZoneFileText, read_file_text,
};
pub use build::{MAX_PROBLEMS, ZoneBuilder};
pub use canonical::CanonicalNodes;
use chain::DenialChain;
pub use lines::LineWriter;
use node::Shard;
pub use node::{Node, RRset};

/// A zone ready to answer from.
// In declaration order: what every query reads comes first, in one cache
// line, so that a query to one of 100,000 small zones misses less.
#[repr(C)]
pub struct Zone {
    /// Lower-cased.
    origin: Name,
    /// Seeds the owner hashes; kept for the zone's later versions.
    hasher: DefaultHashBuilder,
    /// A power of two of them.
    shards: Shards,
    /// Where the apex node is: (shard, offset).
    apex: (u32, u32),
    /// The apex holds a DNAME: every name below it is redirected. Kept
    /// here so that a lookup below the apex need not read the apex node.
    apex_dname: bool,
    /// Some owner is a wildcard: a name that does not exist needs the
    /// wildcard lookup of RFC 4592 only then (most zones have none).
    wildcards: bool,
    /// The origin's labels, the root not counted: where the apex sits
    /// among a query name's label starts. A byte, next to the flags, so
    /// that 100,000 zones do not pay 8 bytes each (at most 127 labels).
    origin_labels: u8,
    class: Class,
    /// Where the SOA's RRset is in the apex node ([`Node::rrset_offset`]),
    /// so that a negative answer need not look for it; `SOA_FAR` past 64
    /// KiB, where it is looked up.
    soa_at: u16,
    /// The TTL of the SOA in negative answers, the lesser of its own and
    /// its MINIMUM (RFC 2308 section 5): they write the apex's SOA and
    /// signatures capped at it, not a copy kept for them (75 octets and an
    /// allocation for each of 100,000 small zones).
    negative_ttl: u32,
    /// When this copy expires, as a secondary's (Unix seconds; 0: not
    /// known), for EDNS EXPIRE (RFC 7314): the refresh driver moves it on
    /// after each successful check. Held here, in what was padding, not
    /// in a table by origin (3 MB for 100,000 zones).
    expires_at: AtomicU32,
    /// Record count as loaded (after de-duplication), for reporting.
    records: u32,
    nodes: u32,
    /// What `apply` needs to find the nodes a change reaches; None when
    /// empty, as for most small zones, so 100,000 of them pay 8 bytes each.
    links: Option<Box<Links>>,
    /// A signed zone's NSEC or NSEC3 chain in canonical order, for the
    /// proofs that names or types do not exist; None for unsigned zones.
    chain: Option<Box<DenialChain>>,
}

/// A zone's shards. A small zone's one shard is held in place: a lookup
/// reads where its table is from the zone's own fields, one trip to
/// memory fewer, and 100,000 small zones pay for no shard allocation.
/// A larger zone's shards are shared with its next versions, which copy
/// only the shards a change touches.
enum Shards {
    One(Shard),
    Many(Box<[Arc<Shard>]>),
}

impl Shards {
    fn len(&self) -> usize {
        match self {
            Shards::One(_) => 1,
            Shards::Many(many) => many.len(),
        }
    }

    fn iter(&self) -> impl Iterator<Item = &Shard> {
        (0..self.len()).map(|i| &self[i])
    }

    /// Whether shard `i` is the very same in both (shared, not equal).
    fn shares(&self, other: &Shards, i: usize) -> bool {
        match (self, other) {
            (Shards::Many(mine), Shards::Many(theirs)) => {
                theirs.get(i).is_some_and(|t| Arc::ptr_eq(t, &mine[i]))
            }
            _ => false,
        }
    }

    /// Shard `i` to share with a new version: a copy for the one held in
    /// place (small, and a change to a one-shard zone replaces it anyway).
    fn shared(&self, i: usize) -> Arc<Shard> {
        match self {
            Shards::One(one) => Arc::new(one.clone()),
            Shards::Many(many) => many[i].clone(),
        }
    }
}

impl std::ops::Index<usize> for Shards {
    type Output = Shard;

    fn index(&self, i: usize) -> &Shard {
        match self {
            Shards::One(one) => {
                assert_eq!(i, 0, "a zone with one shard");
                one
            }
            Shards::Many(many) => &many[i],
        }
    }
}

impl From<Vec<Arc<Shard>>> for Shards {
    fn from(mut shards: Vec<Arc<Shard>>) -> Shards {
        match shards.len() {
            1 => {
                let one = shards.pop().expect("one");
                Shards::One(Arc::unwrap_or_clone(one))
            }
            _ => Shards::Many(shards.into()),
        }
    }
}

/// How a zone's nodes depend on each other beyond their own records.
#[derive(Clone, Default)]
pub(crate) struct Links {
    /// How many child nodes each node below the apex with any has: when a
    /// change empties a name, whether it stays (an empty non-terminal) or
    /// goes. Flat zones have none.
    pub(crate) children: HashMap<Box<[u8]>, u32>,
    /// For each name in the zone (existing or not) that NS, MX or SRV
    /// records point at, the nodes whose additional sections carry its
    /// addresses: who to pack again when its addresses change.
    pub(crate) referrers: HashMap<Box<[u8]>, Vec<Box<[u8]>>>,
}

impl Links {
    pub(crate) fn boxed(self) -> Option<Box<Links>> {
        let empty = self.children.is_empty() && self.referrers.is_empty();
        (!empty).then(|| Box::new(self))
    }
}

/// Where a node is, (shard, offset), as a zone keeps it: 4 GiB of arena
/// per shard is more than any zone this process could hold.
pub(crate) fn node_place(shard: usize, at: usize) -> (u32, u32) {
    let fits = |n: usize| u32::try_from(n).expect("shards and arenas fit 32 bits");
    (fits(shard), fits(at))
}

/// A count as a zone keeps it (a record takes at least 11 octets: 2^32 of
/// them would not fit in memory).
pub(crate) fn count(n: usize) -> u32 {
    u32::try_from(n).expect("fewer than 2^32 records")
}

/// [`Zone::soa_at`] for an SOA too far into its node to say where.
const SOA_FAR: u16 = u16::MAX;

/// Cache lines of a node a batch loads ahead ([`crate::lookahead`]).
const NODE_LINES_AHEAD: usize = 4;

/// Whether a lower-cased wire name is a wildcard: `*` its first label.
fn is_wildcard(key: &[u8]) -> bool {
    key.starts_with(b"\x01*")
}

/// The shard a hash falls in. The table inside a shard takes its slot from
/// the low bits and keeps the top 32 as a tag (`table.rs`); the shard takes
/// bits from 32 up, so within a shard those few tag bits are all alike and
/// the rest of the tag tells names apart.
fn shard_of(hash: u64, shards: usize) -> usize {
    (hash >> 32) as usize & (shards - 1)
}

impl Zone {
    pub fn origin(&self) -> &Name {
        &self.origin
    }

    pub fn class(&self) -> Class {
        self.class
    }

    fn node_at(&self, (shard, at): (usize, usize)) -> Node<'_> {
        Node::new(&self.shards[shard].arena[at..], self.origin.as_wire())
    }

    /// The node at a lower-cased wire name.
    pub fn node(&self, lower_wire: &[u8]) -> Option<Node<'_>> {
        if lower_wire == self.origin.as_wire() {
            return Some(self.apex());
        }
        self.node_below_apex(lower_wire, self.hash(lower_wire))
    }

    /// The hash that places a lower-cased wire owner in this zone.
    #[inline]
    pub(crate) fn hash(&self, lower_wire: &[u8]) -> u64 {
        self.hasher.hash_one(lower_wire)
    }

    /// [`Zone::node`] for a name known to be below the apex (the walk
    /// down from it): no comparison with the origin.
    #[inline]
    pub(crate) fn node_below_apex(&self, lower_wire: &[u8], hash: u64) -> Option<Node<'_>> {
        debug_assert_eq!(hash, self.hash(lower_wire), "the hash of another name");
        let shard = shard_of(hash, self.shards.len());
        let at = self.shards[shard].find(hash, lower_wire)?;
        Some(self.node_at((shard, at)))
    }

    /// Starts loading the fields every query reads (the first two cache
    /// lines: the struct need not start at a line's start).
    pub(crate) fn prefetch_fields(&self) {
        let fields = std::slice::from_ref(self);
        prefetch(fields);
        prefetch_next_line(fields);
    }

    /// Starts loading the origin, to compare with a query name. Reads
    /// only the fields [`Zone::prefetch_fields`] loads.
    pub(crate) fn prefetch_origin(&self) {
        prefetch(self.origin.as_wire());
    }

    // Loading ahead what a lookup reads, one step per call and a batch's
    // worth of queries between steps (see `crate::lookahead`): the shard,
    // its table slot, the node. A zone whose one shard is held in place is
    // a step ahead: its table's address is among its own fields.

    /// Starts loading the shard that a lookup of `first` (a name below
    /// the apex) reads, or for a one-shard zone its table slot; returns
    /// the name's hash for the next steps. Reads only the fields
    /// [`Zone::prefetch_fields`] loads.
    pub(crate) fn prefetch_shard(&self, first: &[u8]) -> u64 {
        let hash = self.hasher.hash_one(first);
        match &self.shards {
            Shards::One(one) => one.table.prefetch(hash),
            Shards::Many(many) => {
                let shard: &Shard = &many[shard_of(hash, many.len())];
                prefetch(std::slice::from_ref(shard));
            }
        }
        hash
    }

    /// Starts loading the table slot where a lookup for `hash` (from
    /// [`Zone::prefetch_shard`]) begins, or for a one-shard zone the node
    /// it points to.
    pub(crate) fn prefetch_slot(&self, hash: u64) {
        match &self.shards {
            Shards::One(_) => self.prefetch_likely_node(hash),
            Shards::Many(many) => many[shard_of(hash, many.len())].table.prefetch(hash),
        }
    }

    /// Starts loading the node a lookup for `hash` most likely reads (a
    /// one-shard zone did in [`Zone::prefetch_slot`]).
    pub(crate) fn prefetch_node(&self, hash: u64) {
        if let Shards::Many(_) = self.shards {
            self.prefetch_likely_node(hash);
        }
    }

    fn prefetch_likely_node(&self, hash: u64) {
        if let Some(node) = self.likely_node(hash) {
            // The key, the flags and the first RRsets: a referral's NS
            // RRset and its glue, or most nodes whole.
            prefetch_lines(node, NODE_LINES_AHEAD);
        }
    }

    /// The bytes from the first node whose tag matches `hash` on, without
    /// comparing names.
    pub(crate) fn likely_node(&self, hash: u64) -> Option<&[u8]> {
        let shard = &self.shards[shard_of(hash, self.shards.len())];
        let at = shard.table.likely(hash)?;
        Some(&shard.arena[at as usize..])
    }

    pub fn apex(&self) -> Node<'_> {
        let (shard, at) = self.apex;
        self.node_at((shard as usize, at as usize))
    }

    /// Labels of the origin, the root not counted.
    pub fn origin_labels(&self) -> usize {
        self.origin_labels as usize
    }

    /// Whether a node lies below the name `lower` (lower-cased, in wire
    /// form) other than the apex.
    pub fn has_children(&self, lower: &[u8]) -> bool {
        (self.links.as_ref()).is_some_and(|links| links.children.contains_key(lower))
    }

    /// Whether the apex holds a DNAME (read without the apex node).
    pub fn apex_has_dname(&self) -> bool {
        self.apex_dname
    }

    /// Whether any name in the zone may be a wildcard (`*` first). False
    /// means none is; true may outlive the last one an IXFR removed.
    pub fn may_have_wildcards(&self) -> bool {
        self.wildcards
    }

    pub fn soa(&self) -> RRset<'_> {
        let apex = self.apex();
        match self.soa_at {
            SOA_FAR => apex.rrset(RType::SOA).expect("checked at build"),
            at => apex.rrset_at(at as usize),
        }
    }

    /// Notes where the SOA is in the apex node, once the zone is built.
    fn find_soa(mut self) -> Zone {
        let at = self
            .apex()
            .rrset_offset(RType::SOA)
            .expect("checked at build");
        self.soa_at = u16::try_from(at).unwrap_or(SOA_FAR);
        self
    }

    /// The TTL of the SOA and its signatures in NXDOMAIN and NODATA
    /// answers: written as [`Zone::soa`] with every TTL capped at this.
    pub fn negative_ttl(&self) -> u32 {
        self.negative_ttl
    }

    /// A signed zone's NSEC or NSEC3 chain (None: the zone is unsigned).
    pub(crate) fn denial_chain(&self) -> Option<&DenialChain> {
        self.chain.as_deref()
    }

    /// Drops the NSEC3 owner digests, so that proofs hash every name at
    /// query time: the reference they are tested against.
    #[cfg(test)]
    pub(crate) fn forget_nsec3_owner_digests(&mut self) {
        if let Some(chain) = self.chain.as_mut() {
            chain.forget_owner_digests();
        }
    }

    /// Whether the zone proves denial of existence (it has NSEC, or
    /// NSEC3PARAM with SHA-1, at the apex), and how many links the chain
    /// has that proves it.
    pub fn signed_chain_len(&self) -> Option<usize> {
        self.chain.as_ref().map(|c| c.len())
    }

    /// The NSEC or NSEC3 link whose owner is the last strictly before
    /// `lower_wire` in canonical order, wrapping to the last link (None:
    /// the zone is unsigned). For an NSEC3 chain, `lower_wire` is a
    /// hashed owner name. What an incremental signer re-links around.
    pub fn denial_before(&self, lower_wire: &[u8]) -> Option<Node<'_>> {
        self.chain.as_ref()?.before(self, lower_wire)
    }

    /// Heap bytes of the NSEC or NSEC3 chain's index (0 if unsigned).
    pub fn chain_heap_bytes(&self) -> usize {
        self.chain.as_ref().map_or(0, |c| c.heap_bytes())
    }

    /// Serial from the apex SOA.
    pub fn serial(&self) -> u32 {
        soa_field(&self.soa().first_rdata(), 0)
    }

    /// Expire interval from the apex SOA, in seconds (what a primary
    /// tells an EDNS EXPIRE query, RFC 7314 3).
    pub fn soa_expire(&self) -> u32 {
        soa_field(&self.soa().first_rdata(), 3)
    }

    /// Records that this copy, served as a secondary's, expires at
    /// `deadline` unless refreshed first.
    pub fn set_expires_at(&self, deadline: SystemTime) {
        let secs = deadline.duration_since(UNIX_EPOCH).unwrap_or_default();
        let secs = u32::try_from(secs.as_secs()).unwrap_or(u32::MAX).max(1);
        self.expires_at.store(secs, Ordering::Relaxed);
    }

    /// Seconds left at `now` (Unix seconds) before this secondary's copy
    /// expires; None when no deadline was set.
    pub fn expire_left(&self, now: u64) -> Option<u32> {
        match self.expires_at.load(Ordering::Relaxed) {
            0 => None,
            at => Some(u64::from(at).saturating_sub(now) as u32),
        }
    }

    pub fn record_count(&self) -> usize {
        self.records as usize
    }

    pub fn node_count(&self) -> usize {
        self.nodes as usize
    }

    /// Heap bytes the zone's nodes take (arenas and tables).
    pub fn heap_bytes(&self) -> usize {
        self.shards.iter().map(|s| s.heap_bytes()).sum()
    }

    /// Calls `visit` with each block of memory that answers read, as
    /// (address, length): the zone itself, its origin, its negative SOA,
    /// its shards' arenas and tables. For placing that memory (in huge
    /// pages), not for reading it.
    pub fn for_each_block(&self, visit: &mut impl FnMut(usize, usize)) {
        let mut visit_slice = |bytes: &[u8]| visit(bytes.as_ptr() as usize, bytes.len());
        visit_slice(self.origin.as_wire());
        visit(self as *const Zone as usize, std::mem::size_of::<Zone>());
        if let Shards::Many(many) = &self.shards {
            visit(many.as_ptr() as usize, std::mem::size_of_val(&**many));
        }
        self.shards.iter().for_each(|s| s.for_each_block(visit));
    }

    /// Heap bytes of this version's nodes that `previous` does not share:
    /// what a change applied to `previous` cost in memory.
    pub fn unshared_bytes(&self, previous: &Zone) -> usize {
        self.unshared_shards(previous)
            .map(|i| self.shards[i].heap_bytes())
            .sum()
    }

    /// The shards of this version that `other` does not share. A version
    /// made by `apply` keeps its shards in place, so a shared shard sits
    /// at the same index in both.
    fn unshared_shards(&self, other: &Zone) -> impl Iterator<Item = usize> {
        (0..self.shards.len()).filter(move |&i| !self.shards.shares(&other.shards, i))
    }

    /// Every node outside the shards `other` shares: a superset of the
    /// nodes that differ between the two versions.
    pub(crate) fn nodes_not_shared_with<'a>(
        &'a self,
        other: &'a Zone,
    ) -> impl Iterator<Item = Node<'a>> {
        self.unshared_shards(other).flat_map(move |i| {
            self.shards[i]
                .offsets()
                .map(move |at| self.node_at((i, at)))
        })
    }

    /// Every node, the apex first, the others in no particular order.
    pub fn nodes(&self) -> impl Iterator<Item = Node<'_>> {
        let apex = self.apex;
        let others = self.shards.iter().enumerate().flat_map(move |(i, shard)| {
            shard
                .offsets()
                .filter(move |&at| node_place(i, at) != apex)
                .map(move |at| self.node_at((i, at)))
        });
        std::iter::once(self.apex()).chain(others)
    }
}

impl fmt::Debug for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Zone")
            .field("origin", &self.origin)
            .field("serial", &self.serial())
            .field("records", &self.records)
            .field("nodes", &self.nodes)
            .finish()
    }
}

/// The `index`th 32-bit field after the two names of SOA RDATA.
pub(crate) fn soa_field(rdata: &[u8], index: usize) -> u32 {
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

/// A zone loaded from a file, with its warnings.
pub struct Loaded {
    pub zone: Zone,
    pub warnings: Vec<Problem>,
}

/// Reads and checks a zone file. On failure, every problem found (syntax
/// and semantic) comes back, each naming the file and line.
pub fn load_zone_file(path: &Path, origin: &Name) -> Result<Loaded, Vec<Problem>> {
    let file = ZoneFileText::read(path).map_err(|e| vec![syntax_problem(e)])?;
    load_zone_text(&file.text, path, origin, None)
}

/// [`load_zone_file`] of a zone read only to be signed, never served (see
/// [`ZoneBuilder::only_to_sign`]).
pub fn load_zone_file_to_sign(path: &Path, origin: &Name) -> Result<Loaded, Vec<Problem>> {
    let file = ZoneFileText::read(path).map_err(|e| vec![syntax_problem(e)])?;
    load_zone_text_to_sign(&file.text, path, origin, None)
}

/// [`load_zone_file`] from the text of the file at `path`, already read
/// (see [`ZoneFileText`]).
/// `progress`, if given, counts the octets read (see
/// [`ReadOptions::progress`]).
pub fn load_zone_text(
    text: &[u8],
    path: &Path,
    origin: &Name,
    progress: Option<&Arc<AtomicU64>>,
) -> Result<Loaded, Vec<Problem>> {
    let builder = ZoneBuilder::new(origin.clone(), Class::IN);
    load_text_into(builder, text, path, origin, progress)
}

/// [`load_zone_text`] of a zone read only to be signed, never served (see
/// [`ZoneBuilder::only_to_sign`]).
pub fn load_zone_text_to_sign(
    text: &[u8],
    path: &Path,
    origin: &Name,
    progress: Option<&Arc<AtomicU64>>,
) -> Result<Loaded, Vec<Problem>> {
    let builder = ZoneBuilder::new(origin.clone(), Class::IN).only_to_sign();
    load_text_into(builder, text, path, origin, progress)
}

/// [`load_zone_text`] into `builder`, new.
fn load_text_into(
    mut builder: ZoneBuilder,
    text: &[u8],
    path: &Path,
    origin: &Name,
    progress: Option<&Arc<AtomicU64>>,
) -> Result<Loaded, Vec<Problem>> {
    let mut opts = ReadOptions::new(origin.clone());
    opts.progress = progress.cloned();
    opts.notes = Some(Arc::default());
    let threads = crate::cores();
    if text.len() >= PARALLEL_TEXT && read_in_pieces(text, path, &opts, threads, &mut builder) {
        return in_file(with_notes(finish_load(builder, Vec::new()), &opts), path);
    }
    builder.reserve_for_text(text.len());
    let errors = read_file_text(text, path, &opts, &mut |rec| builder.add(rec));
    in_file(with_notes(finish_load(builder, errors), &opts), path)
}

/// `loaded` with the notes of the read by `opts` among its warnings.
fn with_notes(
    mut loaded: Result<Loaded, Vec<Problem>>,
    opts: &ReadOptions,
) -> Result<Loaded, Vec<Problem>> {
    let Some(notes) = &opts.notes else {
        return loaded;
    };
    let notes = std::mem::take(&mut *notes.lock().unwrap_or_else(|e| e.into_inner()));
    let problems = match &mut loaded {
        Ok(loaded) => &mut loaded.warnings,
        Err(problems) => problems,
    };
    let warnings = notes.into_iter().map(|note| Problem {
        severity: Severity::Warning,
        ..syntax_problem(note)
    });
    problems.splice(0..0, warnings);
    loaded
}

/// `loaded` with its problems of the zone as a whole (no SOA, say) placed
/// in the file at `path`, so that every message names the file.
fn in_file(mut loaded: Result<Loaded, Vec<Problem>>, path: &Path) -> Result<Loaded, Vec<Problem>> {
    let problems = match &mut loaded {
        Ok(loaded) => &mut loaded.warnings,
        Err(problems) => problems,
    };
    let file: Arc<Path> = Arc::from(path);
    for problem in problems.iter_mut().filter(|p| p.location.is_none()) {
        problem.location = Some(Location {
            file: file.clone(),
            line: 0,
        });
    }
    loaded
}

/// Zone files from this size on are read on every core.
const PARALLEL_TEXT: usize = 4 << 20;

/// Reads a zone file's text in pieces into `builder`: the first on this
/// thread, straight into `builder`, each other on a thread of its own
/// and appended after. False (and `builder` as new) when the text cannot
/// be cut (see `zonefile::split`), or a piece has errors, which a reading
/// of the whole file then reports as they are.
fn read_in_pieces(
    text: &[u8],
    path: &Path,
    opts: &ReadOptions,
    threads: usize,
    builder: &mut ZoneBuilder,
) -> bool {
    let Some(pieces) = zonefile::split(text, &opts.origin, opts.default_ttl, threads) else {
        return false;
    };
    let ends: Vec<usize> = pieces
        .iter()
        .skip(1)
        .map(|p| p.start)
        .chain([text.len()])
        .collect();
    let (first_errors, others) = std::thread::scope(|scope| {
        let handles: Vec<_> = (pieces.iter().zip(&ends))
            .skip(1)
            .map(|(piece, &end)| {
                let mut part = builder.sibling();
                scope.spawn(move || {
                    part.reserve_for_text(end - piece.start);
                    let errors = zonefile::read_piece(text, (piece, end), path, opts, &mut |rec| {
                        part.add(rec)
                    });
                    (part, errors)
                })
            })
            .collect();
        builder.reserve_for_text(ends[0]);
        let first = (&pieces[0], ends[0]);
        let errors = zonefile::read_piece(text, first, path, opts, &mut |rec| builder.add(rec));
        let others: Vec<_> = (handles.into_iter())
            .map(|h| h.join().expect("a piece reader"))
            .collect();
        (errors, others)
    });
    if !first_errors.is_empty() || others.iter().any(|(_, errors)| !errors.is_empty()) {
        *builder = builder.sibling();
        return false;
    }
    others
        .into_iter()
        .for_each(|(part, _)| builder.append(part));
    true
}

/// Reads a zone file again into the next version of `old`, the zone loaded
/// from it before. A small change is applied to `old` (see [`reread`]), so
/// the new version shares what did not change and the reload needs little
/// more memory than the zone already takes; a large one is loaded in full.
/// Problems come back as from [`load_zone_file`].
pub fn reload_zone_file(old: &Zone, path: &Path) -> Result<Loaded, Vec<Problem>> {
    let file = ZoneFileText::read(path).map_err(|e| vec![syntax_problem(e)])?;
    reload_zone_text(old, &file.text, path, None)
}

/// [`reload_zone_file`] from the text of the file at `path`, already read;
/// `progress` as for [`load_zone_text`].
pub fn reload_zone_text(
    old: &Zone,
    text: &[u8],
    path: &Path,
    progress: Option<&Arc<AtomicU64>>,
) -> Result<Loaded, Vec<Problem>> {
    let mut opts = ReadOptions::new(old.origin.clone());
    opts.progress = progress.cloned();
    opts.notes = Some(Arc::default());
    let read = |sink: &mut dyn FnMut(&Record)| read_file_text(text, path, &opts, sink);
    let reread = reread::reread(old, read);
    // Loaded in full, the load says its own notes.
    let in_full = matches!(reread, reread::Reread::LoadInFull);
    let settled = settle_reread(reread, || load_zone_text(text, path, &old.origin, progress));
    match in_full {
        true => settled,
        false => in_file(with_notes(settled, &opts), path),
    }
}

/// [`reload_zone_file`] from text in memory.
pub fn reload_zone_str(old: &Zone, text: &str, name: &str) -> Result<Loaded, Vec<Problem>> {
    let opts = ReadOptions::new(old.origin.clone());
    let (path, base) = (Path::new(name), Path::new("."));
    let read =
        |sink: &mut dyn FnMut(&Record)| crate::zonefile::read_str(text, path, base, &opts, sink);
    settle_reread(reread::reread(old, read), || {
        load_zone_str(text, name, &old.origin)
    })
}

fn settle_reread(
    reread: reread::Reread,
    load_in_full: impl FnOnce() -> Result<Loaded, Vec<Problem>>,
) -> Result<Loaded, Vec<Problem>> {
    match reread {
        reread::Reread::Changed(loaded) => Ok(loaded),
        reread::Reread::Broken(errors) => Err(errors.into_iter().map(syntax_problem).collect()),
        reread::Reread::LoadInFull => load_in_full(),
    }
}

fn syntax_problem(e: ZoneFileError) -> Problem {
    Problem {
        severity: Severity::Error,
        location: Some(e.location),
        message: e.message,
    }
}

fn finish_load(builder: ZoneBuilder, errors: Vec<ZoneFileError>) -> Result<Loaded, Vec<Problem>> {
    let mut syntax: Vec<Problem> = errors.into_iter().map(syntax_problem).collect();
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
    let mut opts = ReadOptions::new(origin.clone());
    opts.notes = Some(Arc::default());
    let mut builder = ZoneBuilder::new(origin.clone(), Class::IN);
    let path = Path::new(name);
    let errors = crate::zonefile::read_str(text, path, Path::new("."), &opts, &mut |rec| {
        builder.add(rec)
    });
    with_notes(finish_load(builder, errors), &opts)
}

#[cfg(test)]
mod tests {
    use super::diff::diff;
    use super::*;

    #[test]
    fn a_secondary_copy_counts_down_to_its_deadline() {
        let text = "$ORIGIN e.test.\n@ 60 SOA ns h 1 2 3 4 5\n@ 60 NS ns\n";
        let zone = load_zone_str(text, "e.zone", &Name::parse("e.test").unwrap())
            .unwrap_or_else(|p| panic!("{p:?}"))
            .zone;
        assert_eq!(zone.expire_left(1_000), None, "not told: no EXPIRE");
        zone.set_expires_at(UNIX_EPOCH + std::time::Duration::from_secs(5_000));
        assert_eq!(zone.expire_left(1_000), Some(4_000));
        assert_eq!(
            zone.expire_left(9_000),
            Some(0),
            "past it: zero, not a wrap"
        );
        zone.set_expires_at(UNIX_EPOCH + std::time::Duration::from_secs(u64::MAX / 2));
        assert_eq!(
            zone.expire_left(0),
            Some(u32::MAX),
            "past 2106: the most u32 holds"
        );
    }

    /// The TTL `zone` serves `name`'s `rtype` RRset with.
    fn ttl_of(zone: &Zone, name: &str, rtype: RType) -> u32 {
        let owner = Name::parse(name).unwrap().to_lowercase();
        let node = zone.node(owner.as_wire()).unwrap();
        node.rrset(rtype).unwrap().ttl()
    }

    /// A BIND-era zone file with no `$TTL` and no TTLs loads as BIND
    /// loads it: the SOA MINIMUM acts as `$TTL` from the SOA on (so an
    /// explicit TTL does not carry on to the records after it), with one
    /// warning; a record before the SOA has none to take; a MINIMUM past
    /// 2^31-1 is 0.
    #[test]
    fn a_file_with_no_ttl_takes_the_soa_minimum_as_bind_does() {
        let origin = Name::parse("t.test").unwrap();
        let text = "@ IN SOA ns h 1 2 3 4 300\n@ IN NS ns\nns IN A 192.0.2.1\n\
                    www 60 IN A 192.0.2.2\nmail IN A 192.0.2.3\n";
        let loaded = load_zone_str(text, "t.zone", &origin).unwrap_or_else(|p| panic!("{p:?}"));
        let ttl = |name: &str, rtype: RType| ttl_of(&loaded.zone, name, rtype);
        assert_eq!(ttl("t.test", RType::SOA), 300);
        assert_eq!(ttl("t.test", RType::NS), 300);
        assert_eq!(ttl("ns.t.test", RType::A), 300);
        assert_eq!(ttl("www.t.test", RType::A), 60);
        assert_eq!(ttl("mail.t.test", RType::A), 300, "the MINIMUM, as a $TTL");
        let warnings: Vec<String> = loaded.warnings.iter().map(|w| w.to_string()).collect();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("t.zone:1: warning: no TTL given and no $TTL")
                && warnings[0].contains("SOA MINIMUM, 300, acts as $TTL"),
            "{warnings:?}"
        );
        let huge = "@ IN SOA ns h 1 2 3 4 4294967295\n@ IN NS ns\n";
        let loaded = load_zone_str(huge, "h.zone", &origin).unwrap_or_else(|p| panic!("{p:?}"));
        assert_eq!(ttl_of(&loaded.zone, "t.test", RType::NS), 0);
        let before = "ns IN A 192.0.2.1\n@ IN SOA ns h 1 2 3 4 300\n@ IN NS ns\n";
        let Err(problems) = load_zone_str(before, "b.zone", &origin) else {
            panic!("loaded with a record before the SOA and no TTL");
        };
        let said: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        assert!(
            said.contains(&"b.zone:1: error: no TTL given and no $TTL".to_string()),
            "{said:?}"
        );
    }

    /// TTLs past 2^31-1 (up to 2^32-1) load, served as 0 as BIND serves
    /// them (RFC 2181 8), with one warning for the file; past 2^32-1 is
    /// an error.
    #[test]
    fn ttls_with_the_top_bit_set_are_served_as_zero() {
        let origin = Name::parse("t.test").unwrap();
        let text = "$TTL 2147483648\n@ SOA ns h 1 2 3 4 300\n@ NS ns\n\
                    ns 4294967295 A 192.0.2.1\nwww 2147483647 A 192.0.2.2\n";
        let loaded = load_zone_str(text, "t.zone", &origin).unwrap_or_else(|p| panic!("{p:?}"));
        let ttl = |name: &str, rtype: RType| ttl_of(&loaded.zone, name, rtype);
        assert_eq!(ttl("t.test", RType::SOA), 0);
        assert_eq!(ttl("ns.t.test", RType::A), 0);
        assert_eq!(ttl("www.t.test", RType::A), 2_147_483_647);
        let warnings: Vec<String> = loaded.warnings.iter().map(|w| w.to_string()).collect();
        assert_eq!(
            warnings,
            [
                "t.zone:1: warning: TTL 2147483648 is past 2^31-1: served as 0 (RFC 2181 8), as BIND loads it; so is every such TTL after it"
            ]
        );
        let past = "$TTL 60\n@ SOA ns h 1 2 3 4 300\n@ NS ns\nns 4294967296 A 192.0.2.1\n";
        assert!(load_zone_str(past, "p.zone", &origin).is_err());
        // Read in pieces on every core, or again at a reload: said too.
        let mut big = String::from("$TTL 2147483648\n@ SOA ns h 1 2 3 4 300\n@ NS ns\n");
        let mut i = 0;
        while big.len() < PARALLEL_TEXT + 4096 {
            big.push_str(&format!("h{i} A 192.0.2.{}\n", i % 250));
            i += 1;
        }
        let path = Path::new("big.zone");
        let said = |loaded: &Loaded| {
            loaded
                .warnings
                .iter()
                .filter(|w| w.message.contains("past 2^31-1"))
                .count()
        };
        let loaded = load_zone_text(big.as_bytes(), path, &origin, None).unwrap();
        assert_eq!(said(&loaded), 1);
        big.push_str("new A 192.0.2.1\n");
        let again = reload_zone_text(&loaded.zone, big.as_bytes(), path, None).unwrap();
        assert_eq!(said(&again), 1);
    }

    /// A quoted `$GENERATE` rhs with `\"` in it makes what BIND makes: the
    /// escaped quotes become quote marks, so the TXT is one string.
    #[test]
    fn a_generated_txt_with_escaped_quotes_is_one_string_as_in_bind() {
        let origin = Name::parse("t.test").unwrap();
        let text = "$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\n\
                    $GENERATE 1-2 host$ TXT \"\\\"v=spf1 ip4:10.0.0.$ -all\\\"\"\n\
                    $GENERATE 1-1 esc$ TXT \"a\\\\b\\$\"\n";
        let loaded = load_zone_str(text, "t.zone", &origin).unwrap_or_else(|p| panic!("{p:?}"));
        let txt = |name: &str| {
            let owner = Name::parse(name).unwrap().to_lowercase();
            let node = loaded.zone.node(owner.as_wire()).unwrap();
            node.rrset(RType::TXT)
                .unwrap()
                .rdatas()
                .next()
                .unwrap()
                .to_vec()
        };
        let one = b"v=spf1 ip4:10.0.0.2 -all";
        let wire: Vec<u8> = [one.len() as u8]
            .into_iter()
            .chain(one.iter().copied())
            .collect();
        assert_eq!(txt("host2.t.test"), wire);
        // Other escapes stay escapes: a backslash, a dollar.
        assert_eq!(txt("esc1.t.test"), b"\x04a\\b$");
    }

    #[test]
    fn a_zone_with_its_reference_count_fits_128_octets() {
        // An `Arc<Zone>` is one allocation per zone: 100,000 small zones
        // pay this each, and jemalloc's next size class is 160.
        assert!(size_of::<Zone>() + 2 * size_of::<usize>() <= 128);
    }

    /// A zone file of at least `size` octets using what cutting must
    /// respect: `$TTL` and `$ORIGIN` changes, entries over several lines,
    /// parentheses in quotes and comments, blank-led lines, `$GENERATE`.
    fn zone_text(size: usize, broken_line: Option<usize>) -> String {
        let mut text = String::from("$TTL 300\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n");
        let mut i = 0;
        while text.len() < size {
            if Some(i) == broken_line {
                text += "broken A 192.0.2.300\n";
            }
            text += &match i % 9 {
                0 => format!("$ORIGIN o{i}.z.test.\n"),
                1 => format!("$TTL {}\n", 60 + i % 1000),
                2 => format!("m{i} MX (\n  10 ; a comment (\n  mail{i} )\n"),
                3 => format!("t{i} TXT \"(\" \"a;b\" ; )\n  TXT \"\\\"(\"\n"),
                // (A file with $GENERATE is read whole: its limits are the
                // file's.)
                4 => format!("_s{i}._tcp SRV 1 2 3 h{i}\n"),
                5 => format!(
                    "$ORIGIN p{i}.z.test.\nback{i} 120 AAAA 2001:db8::{:x}\n",
                    i % 65536
                ),
                _ => format!("h{i} A 192.0.{}.{}\n", i / 256 % 256, i % 256),
            };
            i += 1;
        }
        text
    }

    fn sequential(text: &str) -> Result<Loaded, Vec<Problem>> {
        let origin = Name::parse("z.test.").unwrap();
        let opts = ReadOptions::new(origin.clone());
        let mut builder = ZoneBuilder::new(origin, Class::IN);
        let path = Path::new("z.zone");
        let errors = read_file_text(text.as_bytes(), path, &opts, &mut |r| builder.add(r));
        finish_load(builder, errors)
    }

    fn in_pieces(text: &str) -> Result<Loaded, Vec<Problem>> {
        let origin = Name::parse("z.test.").unwrap();
        load_zone_text(text.as_bytes(), Path::new("z.zone"), &origin, None)
    }

    #[test]
    fn a_file_read_in_pieces_is_the_zone_read_whole() {
        let text = zone_text(1 << 20, None);
        let whole = sequential(&text).unwrap();
        let origin = Name::parse("z.test.").unwrap();
        let opts = ReadOptions::new(origin.clone());
        for threads in [2, 3, 7] {
            let mut builder = ZoneBuilder::new(origin.clone(), Class::IN);
            let path = Path::new("z.zone");
            assert!(read_in_pieces(
                text.as_bytes(),
                path,
                &opts,
                threads,
                &mut builder
            ));
            let pieces = finish_load(builder, Vec::new()).unwrap();
            assert_eq!(pieces.zone.record_count(), whole.zone.record_count());
            let d = diff(&whole.zone, &pieces.zone);
            assert!(
                d.added.is_empty() && d.deleted.is_empty(),
                "{threads}: {d:?}"
            );
            assert_eq!(pieces.warnings.len(), whole.warnings.len());
        }
    }

    #[test]
    fn a_file_with_errors_is_not_read_in_pieces() {
        let text = zone_text(1 << 20, Some(10_000));
        let origin = Name::parse("z.test.").unwrap();
        let mut builder = ZoneBuilder::new(origin.clone(), Class::IN);
        let opts = ReadOptions::new(origin);
        let path = Path::new("z.zone");
        assert!(!read_in_pieces(
            text.as_bytes(),
            path,
            &opts,
            2,
            &mut builder
        ));
        assert!(builder.is_empty(), "left for the reading of the whole file");
    }

    /// Where there is more than one core, a large file goes through the
    /// pieces and loads as read whole; with errors, they are reported as
    /// read whole (file and line).
    #[test]
    fn large_files_load_the_same_on_every_core() {
        let text = zone_text(PARALLEL_TEXT, None);
        let d = diff(
            &sequential(&text).unwrap().zone,
            &in_pieces(&text).unwrap().zone,
        );
        assert!(d.added.is_empty() && d.deleted.is_empty());
        let broken = zone_text(PARALLEL_TEXT, Some(100_000));
        let (Err(whole), Err(pieces)) = (sequential(&broken), in_pieces(&broken)) else {
            panic!("the broken record is an error");
        };
        let shown = |p: &[Problem]| p.iter().map(|p| p.to_string()).collect::<Vec<_>>();
        assert_eq!(shown(&pieces), shown(&whole));
        assert!(
            shown(&pieces)[0].starts_with("z.zone:"),
            "{:?}",
            shown(&pieces)
        );
    }

    #[test]
    fn progress_counts_every_octet_read_whole_or_in_pieces() {
        let origin = Name::parse("z.test.").unwrap();
        let text = zone_text(200_000, None);
        let read = Arc::new(AtomicU64::new(0));
        let counted = || read.swap(0, std::sync::atomic::Ordering::Relaxed);
        load_zone_text(text.as_bytes(), Path::new("z.zone"), &origin, Some(&read)).unwrap();
        assert_eq!(counted(), text.len() as u64);
        let mut opts = ReadOptions::new(origin.clone());
        opts.progress = Some(read.clone());
        let mut builder = ZoneBuilder::new(origin, Class::IN);
        assert!(read_in_pieces(
            text.as_bytes(),
            Path::new("z.zone"),
            &opts,
            3,
            &mut builder
        ));
        assert_eq!(counted(), text.len() as u64);
    }
}
