//! How a zone's nodes lie in memory, and the views that read them.
//!
//! A zone keeps no object per record or per name: each node is a run of
//! bytes in its shard's arena, found through the shard's table of 32-bit
//! offsets tagged with part of the owner's hash (`table.rs`).
//! A node is
//!
//! ```text
//! u8 key length, key (lower-cased owner, wire form)
//! u8 flags (CUT, CASED, HAS_CNAME, HAS_DNAME, NSEC3_ONLY), [the owner as written, if CASED]
//! u8 RRset count, then per RRset, in type order:
//!     u16 type, u16 records length, u16 signatures length,
//!     u16 additional length, then those three packed blobs
//! ```
//!
//! The records and signatures are packed RRsets (`heron_proto::encoded`,
//! already in response form) and the additional block is the glue that
//! goes with an NS, MX or SRV RRset. A one-record A node takes about
//! 50 bytes plus its name.

use std::borrow::Cow;
use std::fmt;

use heron_proto::encoded::{AdditionalRef, EncodedRef, MAX_PACKED, Names};
use heron_proto::{Name, RType};

use super::table::NodeTable;

/// The node has NS and is not the apex: a delegation point.
const CUT: u8 = 1;
/// The owner as written differs from the key in case and follows it.
const CASED: u8 = 2;
/// The node holds a CNAME, or a DNAME: asked on every step of a lookup,
/// so answered without walking the RRsets.
const HAS_CNAME: u8 = 4;
const HAS_DNAME: u8 = 8;
/// The node holds an NSEC3 RRset and nothing else: a hashed owner, which
/// a query must find as if it did not exist (RFC 5155 7.2.8).
const NSEC3_ONLY: u8 = 16;
/// Octets of an RRset's header: type and three lengths.
const SET_HEADER: usize = 8;

fn u16_at(bytes: &[u8], at: usize) -> usize {
    u16::from_be_bytes([bytes[at], bytes[at + 1]]) as usize
}

/// Part of a zone: nodes back to back, and a table from owner hash to the
/// offset of each node.
#[derive(Clone)]
pub(crate) struct Shard {
    pub(crate) arena: Box<[u8]>,
    pub(crate) table: NodeTable,
}

impl Shard {
    /// The offset of the node with this key (lower-cased wire owner).
    pub(crate) fn find(&self, hash: u64, key: &[u8]) -> Option<usize> {
        let arena = &self.arena[..];
        self.table
            .find(hash, |at| node_key(arena, at as usize) == key)
            .map(|at| at as usize)
    }

    /// The table slot of the node with this key: a number below `slots()`
    /// that names the node for as long as the shard lives.
    pub(crate) fn find_slot(&self, hash: u64, key: &[u8]) -> Option<usize> {
        let arena = &self.arena[..];
        self.table
            .find_slot(hash, |at| node_key(arena, at as usize) == key)
    }

    pub(crate) fn slots(&self) -> usize {
        self.table.slots()
    }

    /// The offset of the node in `slot`, if one is there.
    pub(crate) fn node_in_slot(&self, slot: usize) -> Option<usize> {
        self.table.get(slot).map(|at| at as usize)
    }

    /// Offsets of every node, in arena order.
    pub(crate) fn offsets(&self) -> impl Iterator<Item = usize> + '_ {
        self.offsets_from(0)
    }

    /// The offsets of the nodes from the one at `start` on.
    pub(crate) fn offsets_from(&self, start: usize) -> impl Iterator<Item = usize> + '_ {
        let mut at = start;
        std::iter::from_fn(move || {
            if at >= self.arena.len() {
                return None;
            }
            let here = at;
            at += node_len(&self.arena[here..]);
            Some(here)
        })
    }

    /// Heap bytes this shard holds.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.arena.len() + self.table.allocation_size()
    }

    /// Calls `visit` with where the arena and the table lie.
    pub(crate) fn for_each_block(&self, visit: &mut impl FnMut(usize, usize)) {
        visit(self.arena.as_ptr() as usize, self.arena.len());
        let (at, len) = self.table.block();
        visit(at, len);
    }
}

fn node_key(arena: &[u8], at: usize) -> &[u8] {
    &arena[at + 1..at + 1 + arena[at] as usize]
}

/// Length of the node at the start of `bytes`.
pub(super) fn node_len(bytes: &[u8]) -> usize {
    let node = Node::new(bytes, &[]);
    let mut at = node.sets_at() + 1;
    for _ in 0..bytes[node.sets_at()] {
        at = set_end(bytes, at);
    }
    at
}

/// The lengths of the records, signatures and additional blobs of the
/// RRset whose header is at `at`.
#[inline]
fn set_lens(bytes: &[u8], at: usize) -> [usize; 3] {
    [
        u16_at(bytes, at + 2),
        u16_at(bytes, at + 4),
        u16_at(bytes, at + 6),
    ]
}

/// Where the RRset whose header is at `at` ends (the next one starts).
#[inline]
fn set_end(bytes: &[u8], at: usize) -> usize {
    at + SET_HEADER + set_lens(bytes, at).iter().sum::<usize>()
}

/// A view of the RRset whose header is at `at`, and where it ends.
#[inline]
fn set_at<'a>(bytes: &'a [u8], at: usize, node: Node<'a>) -> (RRset<'a>, usize) {
    let [records, sigs, additional] = set_lens(bytes, at);
    let start = at + SET_HEADER;
    let (sig_at, add_at) = (start + records, start + records + sigs);
    let end = add_at + additional;
    let set = RRset {
        rtype: RType(u16_at(bytes, at) as u16),
        records: &bytes[start..sig_at],
        sigs: &bytes[sig_at..add_at],
        additional: &bytes[add_at..end],
        node,
    };
    (set, end)
}

/// Appends one packed blob to a node being written.
pub(crate) type Fill<'f> = &'f mut dyn FnMut(&mut Vec<u8>);

/// An RRset too large to store (its packed form passes 64 KiB).
#[derive(Debug)]
pub(crate) struct TooLarge;

/// Why an RRset is refused as [`TooLarge`], for any type (black-box
/// finding BI-2: a TXT RRset was told of A records).
pub(crate) const RRSET_TOO_LARGE: &str = "the RRset is too large to store: its records take more than 64 KiB as kept (each its RDATA and 16 octets more: at most 3,276 A records, or 240 TXT records of one 255-octet string)";

/// Appends one node to an arena.
pub(crate) struct NodeWriter<'a> {
    out: &'a mut Vec<u8>,
    flags_at: usize,
    count_at: usize,
}

impl<'a> NodeWriter<'a> {
    /// Starts a node: `key` lower-cased, `owner` as written.
    pub(crate) fn begin(out: &'a mut Vec<u8>, key: &[u8], owner: &[u8], cut: bool) -> Self {
        out.push(key.len() as u8);
        out.extend_from_slice(key);
        let cased = owner != key;
        out.push(if cut { CUT } else { 0 } | if cased { CASED } else { 0 });
        let flags_at = out.len() - 1;
        if cased {
            out.extend_from_slice(owner);
        }
        let count_at = out.len();
        out.push(0);
        NodeWriter {
            out,
            flags_at,
            count_at,
        }
    }

    /// Adds an RRset; each closure appends one packed blob (or nothing).
    /// RRsets must come in type order.
    pub(crate) fn rrset(&mut self, rtype: RType, blobs: [Fill; 3]) -> Result<(), TooLarge> {
        let header = self.out.len();
        self.out.extend_from_slice(&rtype.0.to_be_bytes());
        self.out.extend_from_slice(&[0; 6]);
        for (i, fill) in blobs.into_iter().enumerate() {
            let start = self.out.len();
            fill(self.out);
            let len = self.out.len() - start;
            if len > MAX_PACKED {
                return Err(TooLarge);
            }
            let at = header + 2 + 2 * i;
            self.out[at..at + 2].copy_from_slice(&(len as u16).to_be_bytes());
        }
        self.out[self.count_at] += 1;
        let has_records = self.out[header + 2..header + 4] != [0, 0];
        self.out[self.flags_at] |= match rtype {
            RType::CNAME if has_records => HAS_CNAME,
            RType::DNAME if has_records => HAS_DNAME,
            _ => 0,
        };
        match rtype == RType::NSEC3 && self.out[self.count_at] == 1 {
            true => self.out[self.flags_at] |= NSEC3_ONLY,
            false => self.out[self.flags_at] &= !NSEC3_ONLY,
        }
        Ok(())
    }
}

/// A name in a zone and its data: a view into the zone's memory.
#[derive(Clone, Copy)]
pub struct Node<'a> {
    /// From the node's first byte to the end of its arena.
    bytes: &'a [u8],
    /// The zone's apex, lower-cased (RDATA names are stored relative to it).
    apex: &'a [u8],
}

impl<'a> Node<'a> {
    pub(crate) fn new(bytes: &'a [u8], apex: &'a [u8]) -> Node<'a> {
        Node { bytes, apex }
    }

    fn key_len(&self) -> usize {
        self.bytes[0] as usize
    }

    fn flags(&self) -> u8 {
        self.bytes[1 + self.key_len()]
    }

    fn sets_at(&self) -> usize {
        let cased = self.flags() & CASED != 0;
        2 + self.key_len() * if cased { 2 } else { 1 }
    }

    /// The owner, lower-cased wire form (what lookups compare).
    pub fn key(&self) -> &'a [u8] {
        &self.bytes[1..1 + self.key_len()]
    }

    /// What the names in this node's RDATA are stored relative to.
    fn names(&self) -> Names<'a> {
        Names {
            apex: self.apex,
            owner: self.key(),
        }
    }

    /// The owner in wire form as the zone wrote it (case preserved).
    pub fn owner_wire(&self) -> &'a [u8] {
        if self.flags() & CASED == 0 {
            return self.key();
        }
        let at = 2 + self.key_len();
        &self.bytes[at..at + self.key_len()]
    }

    /// The owner as the zone wrote it.
    pub fn owner(&self) -> Name {
        Name::from_wire(self.owner_wire()).expect("stored from a valid name")
    }

    /// NS here and not at the apex: a delegation point.
    pub fn is_cut(&self) -> bool {
        self.flags() & CUT != 0
    }

    /// Identifies the node within its zone version (e.g. to notice a loop).
    pub fn id(&self) -> usize {
        self.bytes.as_ptr() as usize
    }

    /// Every RRset, in type order, including those that hold only
    /// signatures.
    pub fn rrsets(&self) -> impl Iterator<Item = RRset<'a>> + use<'a> {
        let bytes = self.bytes;
        let node = *self;
        let count = bytes[self.sets_at()];
        let mut at = self.sets_at() + 1;
        (0..count).map(move |_| {
            let (set, end) = set_at(bytes, at, node);
            at = end;
            set
        })
    }

    /// Whether the node holds a CNAME (from its flags: asked at every
    /// node an answer reaches, so without a call or a walk).
    #[inline]
    pub fn has_cname(&self) -> bool {
        self.flags() & HAS_CNAME != 0
    }

    /// Whether the node holds an NSEC3 RRset and nothing else: a lookup
    /// passes over it as over a name that does not exist.
    #[inline]
    pub fn is_nsec3_only(&self) -> bool {
        self.flags() & NSEC3_ONLY != 0
    }

    /// Whether the node holds a DNAME, as [`Node::has_cname`].
    #[inline]
    pub fn has_dname(&self) -> bool {
        self.flags() & HAS_DNAME != 0
    }

    /// The RRset of `rtype`, if it holds records (signatures alone do not
    /// make an RRset).
    pub fn rrset(&self, rtype: RType) -> Option<RRset<'a>> {
        let absent = match rtype {
            RType::CNAME => !self.has_cname(),
            RType::DNAME => !self.has_dname(),
            _ => false,
        };
        if absent {
            return None;
        }
        // On every query: skip by the lengths, build only the one found.
        // Written out rather than with `set_at`: this form compiles to
        // ~90 fewer instructions per referral (callgrind, answer_loop).
        // Each RRset header read as one array: one bounds test, not eight.
        let bytes = self.bytes;
        let sets_at = self.sets_at();
        let mut at = sets_at + 1;
        for _ in 0..bytes[sets_at] {
            let header: &[u8; SET_HEADER] = bytes[at..at + SET_HEADER]
                .try_into()
                .expect("an RRset header");
            let field = |i: usize| u16::from_be_bytes([header[2 * i], header[2 * i + 1]]) as usize;
            let (records, sigs, additional) = (field(1), field(2), field(3));
            if field(0) == rtype.0 as usize {
                if records == 0 {
                    return None;
                }
                let start = at + SET_HEADER;
                let (sig_at, add_at) = (start + records, start + records + sigs);
                return Some(RRset {
                    rtype,
                    records: &bytes[start..sig_at],
                    sigs: &bytes[sig_at..add_at],
                    additional: &bytes[add_at..add_at + additional],
                    node: *self,
                });
            }
            at += SET_HEADER + records + sigs + additional;
        }
        None
    }

    /// Where the RRset of `rtype` starts, from the node's first byte, if
    /// it holds records: for [`Node::rrset_at`] to find it without a walk.
    pub(crate) fn rrset_offset(&self, rtype: RType) -> Option<usize> {
        let found = self.rrset(rtype)?;
        let header = found.records.as_ptr() as usize - SET_HEADER;
        Some(header - self.bytes.as_ptr() as usize)
    }

    /// The RRset at `at`, as [`Node::rrset_offset`] gave it. Its header
    /// read as one array, as in [`Node::rrset`]: on every negative answer.
    #[inline]
    pub(crate) fn rrset_at(&self, at: usize) -> RRset<'a> {
        let bytes = self.bytes;
        let header: &[u8; SET_HEADER] = bytes[at..at + SET_HEADER]
            .try_into()
            .expect("an RRset header");
        let field = |i: usize| u16::from_be_bytes([header[2 * i], header[2 * i + 1]]) as usize;
        let (records, sigs, additional) = (field(1), field(2), field(3));
        let start = at + SET_HEADER;
        let (sig_at, add_at) = (start + records, start + records + sigs);
        RRset {
            rtype: RType(field(0) as u16),
            records: &bytes[start..sig_at],
            sigs: &bytes[sig_at..add_at],
            additional: &bytes[add_at..add_at + additional],
            node: *self,
        }
    }

    /// RRsets that hold records, in type order.
    pub fn data(&self) -> impl Iterator<Item = RRset<'a>> + use<'a> {
        self.rrsets().filter(|s| s.has_records())
    }

    /// No data at all: an empty non-terminal.
    pub fn is_empty(&self) -> bool {
        self.data().next().is_none()
    }
}

impl fmt::Debug for Node<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let types: Vec<RType> = self.rrsets().map(|s| s.rtype).collect();
        f.debug_struct("Node")
            .field("owner", &self.owner())
            .field("types", &types)
            .field("cut", &self.is_cut())
            .finish()
    }
}

/// One RRset of a node: records of one owner and type, with the
/// signatures over it, in response form.
#[derive(Clone, Copy)]
pub struct RRset<'a> {
    pub rtype: RType,
    records: &'a [u8],
    sigs: &'a [u8],
    additional: &'a [u8],
    /// Its node, whose owner and apex RDATA names may point to (read
    /// only when RDATA is: a copy of two slices on every lookup).
    node: Node<'a>,
}

impl<'a> RRset<'a> {
    pub fn has_records(&self) -> bool {
        !self.records.is_empty()
    }

    pub fn ttl(&self) -> u32 {
        self.encoded().ttl()
    }

    pub fn sig_ttl(&self) -> u32 {
        self.encoded_sigs().ttl()
    }

    /// The records as a response carries them.
    pub fn encoded(&self) -> EncodedRef<'a> {
        EncodedRef::new(self.records)
    }

    /// The RRSIG records over them, likewise.
    pub fn encoded_sigs(&self) -> EncodedRef<'a> {
        EncodedRef::new(self.sigs)
    }

    /// For NS, MX and SRV: the addresses of the targets this zone holds.
    pub fn additional(&self) -> Option<AdditionalRef<'a>> {
        AdditionalRef::new(self.additional)
    }

    /// Each record's RDATA in uncompressed wire form.
    pub fn rdatas(&self) -> impl Iterator<Item = Cow<'a, [u8]>> + use<'a> {
        self.encoded().rdatas(self.node.names())
    }

    /// The first record's RDATA, a name (CNAME), uncompressed into `out`
    /// without allocating.
    pub fn first_name(&self, out: &mut heron_proto::name::NameBuf) {
        self.encoded().first_name(self.node.names(), out)
    }

    /// The first record's RDATA (an RRset with records has one).
    pub fn first_rdata(&self) -> Cow<'a, [u8]> {
        self.rdatas().next().unwrap_or_default()
    }

    pub fn rdata_count(&self) -> usize {
        self.encoded().len()
    }

    /// Each RRSIG's RDATA.
    pub fn sigs(&self) -> impl Iterator<Item = Cow<'a, [u8]>> + use<'a> {
        self.encoded_sigs().rdatas(self.node.names())
    }

    pub fn has_sigs(&self) -> bool {
        !self.sigs.is_empty()
    }
}

impl fmt::Debug for RRset<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RRset")
            .field("rtype", &self.rtype)
            .field("ttl", &self.ttl())
            .field("records", &self.rdata_count())
            .field("sigs", &self.encoded_sigs().len())
            .finish()
    }
}

/// Where the nodes a shard's copy kept moved: (old offset, new offset),
/// in the order of the old offsets (the copy keeps their order); the
/// nodes written follow them, from `written_from`.
#[derive(Clone, Default)]
pub(crate) struct Moves {
    kept: Vec<(u32, u32)>,
    pub(crate) written_from: usize,
}

impl Moves {
    pub(crate) fn new(kept: Vec<(u32, u32)>, written_from: usize) -> Moves {
        Moves { kept, written_from }
    }

    /// The new offset of the node at `old`; None if it was not kept.
    pub(crate) fn of(&self, old: u32) -> Option<u32> {
        let at = self
            .kept
            .binary_search_by_key(&old, |(from, _)| *from)
            .ok()?;
        Some(self.kept[at].1)
    }
}
