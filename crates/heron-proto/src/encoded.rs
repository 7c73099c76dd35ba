//! RRsets encoded once, at zone load, in the form they take in a response.
//!
//! Every name a zone serves ends in the zone's apex, and every query the
//! zone answers has a question name that ends in the apex too, so the apex
//! always sits in the question, at `12 + qname length - apex length`. An
//! [`EncodedRRset`] holds its records with each RDATA name that may be
//! compressed already compressed, the pointers left to patch: against the
//! apex (or a suffix of it), the RRset's owner, or a name earlier in the
//! same RRset, whichever shares the longest suffix (as NSD and Knot
//! compress a referral's NS targets). Answering is then a copy of the
//! records, an owner per record, and a few two-byte patches: no
//! compression search.
//!
//! Owner names are written per response ([`Owner`]), because the same RRset
//! is owned by the query name (a pointer to offset 12), a wildcard's
//! expansion, or a name elsewhere in the message.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::ops::Range;

use crate::rdata::{self, RdataPiece};
use crate::types::{Class, RType};
use crate::writer::{Full, MAX_POINTER, Writer, put_pointer};

/// A pointer to patch: at `at` (offset in the record bytes), point to
/// what `to` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Patch {
    at: u16,
    to: PatchTo,
}

/// Where a patched pointer points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PatchTo {
    /// The owner of the records (every record after the first has one).
    Owner,
    /// The apex position plus `delta`: the start of a suffix of the apex
    /// (a name in RDATA).
    Apex(u8),
    /// The owner as written: a name in RDATA that ends in the owner.
    OwnerName,
    /// A suffix of a name earlier in the RRset, at this offset of the
    /// record bytes (below [`MAX_EARLIER`]).
    Earlier(u16),
}

/// Octets a patch takes in a packed RRset: `at` (little-endian, so one
/// load), the kind in the low two bits of the third octet, and an argument
/// in the rest: 14 bits, the high six above the kind.
const PATCH_LEN: usize = 4;
/// Patch kinds as packed: the index into `[owner, apex, owner, first
/// record]` at write time, the argument added to it.
const TO_OWNER: u8 = 0;
const TO_APEX: u8 = 1;
const TO_OWNER_NAME: u8 = 2;
const TO_EARLIER: u8 = 3;
/// Earlier names are pointed to only in the first 16 KiB of an RRset's
/// record bytes (the argument's 14 bits).
const MAX_EARLIER: usize = 1 << 14;

impl Patch {
    fn pack(self, out: &mut Vec<u8>) {
        let (kind, arg) = match self.to {
            PatchTo::Owner => (TO_OWNER, 0),
            PatchTo::Apex(delta) => (TO_APEX, delta as u16),
            PatchTo::OwnerName => (TO_OWNER_NAME, 0),
            PatchTo::Earlier(at) => (TO_EARLIER, at),
        };
        out.extend_from_slice(&self.at.to_le_bytes());
        out.extend_from_slice(&[kind | ((arg >> 8) << 2) as u8, arg as u8]);
    }

    fn unpack(p: &[u8]) -> Patch {
        let at = u16::from_le_bytes([p[0], p[1]]);
        let arg = ((p[2] >> 2) as u16) << 8 | p[3] as u16;
        let to = match p[2] & 3 {
            TO_OWNER => PatchTo::Owner,
            TO_APEX => PatchTo::Apex(arg as u8),
            TO_OWNER_NAME => PatchTo::OwnerName,
            _ => PatchTo::Earlier(arg),
        };
        Patch { at, to }
    }

    /// How a name in RDATA ends here; None for a record's owner.
    fn tail(self) -> Option<Tail> {
        match self.to {
            PatchTo::Owner => None,
            PatchTo::Apex(delta) => Some(Tail::Apex(delta)),
            PatchTo::OwnerName => Some(Tail::Owner),
            PatchTo::Earlier(at) => Some(Tail::Earlier(at as usize)),
        }
    }
}

/// What the pointer that ends a name in RDATA stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tail {
    /// The apex from this octet of it on.
    Apex(u8),
    /// The RRset's owner.
    Owner,
    /// The name at this offset of the record bytes (which may itself end
    /// in a pointer).
    Earlier(usize),
}

/// How a name in RDATA ends once earlier names are followed.
enum End {
    Root,
    Apex(u8),
    Owner,
}

/// Where names read back from packed records go.
trait Sink {
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Names read back into a message being written.
struct WriterSink<'w, 'b> {
    w: &'w mut Writer<'b>,
    /// Something did not fit.
    full: bool,
}

impl WriterSink<'_, '_> {
    fn pointer(&mut self, target: u16) {
        self.put(&(0xC000 | target).to_be_bytes());
    }
}

impl Sink for WriterSink<'_, '_> {
    fn put(&mut self, bytes: &[u8]) {
        self.full = self.full || self.w.raw_bytes(bytes).is_err();
    }
}

/// A name read back on the stack (what does not fit a name is dropped).
struct StackName {
    buf: [u8; crate::name::MAX_NAME_LEN + 2],
    len: usize,
}

impl Default for StackName {
    fn default() -> Self {
        StackName {
            buf: [0; crate::name::MAX_NAME_LEN + 2],
            len: 0,
        }
    }
}

impl StackName {
    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Sink for StackName {
    fn put(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
    }
}

/// The names an RRset's RDATA names were compressed against, to read them
/// back: the lower-cased apex and owner.
#[derive(Clone, Copy, Debug)]
pub struct Names<'a> {
    pub apex: &'a [u8],
    pub owner: &'a [u8],
}

impl Names<'_> {
    fn end(&self, end: End) -> &[u8] {
        match end {
            End::Root => &[0],
            End::Apex(delta) => &self.apex[delta as usize..],
            End::Owner => self.owner,
        }
    }
}

/// Largest packed RRset or additional block: positions inside are 16-bit,
/// and nothing larger fits in a DNS message anyway.
pub const MAX_PACKED: usize = u16::MAX as usize;

/// Records of one RRset, ready to copy into a response after the first
/// record's owner, packed in one allocation (see [`EncodedRef`] for the
/// layout, which a zone stores inline in its arena).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EncodedRRset {
    packed: Box<[u8]>,
}

impl EncodedRRset {
    /// Encodes records of one type and TTL, owned by `names.owner` in the
    /// zone whose apex is `names.apex`. RDATA is uncompressed wire form.
    pub fn new(rtype: RType, ttl: u32, rdatas: &[&[u8]], names: Names) -> EncodedRRset {
        let mut packed = Vec::new();
        pack_rrset(rtype, ttl, rdatas, names, &mut packed);
        EncodedRRset {
            packed: packed.into(),
        }
    }

    /// The packed form as stored, for where it lies in memory.
    pub fn packed(&self) -> &[u8] {
        &self.packed
    }

    pub fn view(&self) -> EncodedRef<'_> {
        EncodedRef::new(&self.packed)
    }

    pub fn len(&self) -> usize {
        self.view().len()
    }

    pub fn is_empty(&self) -> bool {
        self.packed.is_empty()
    }

    pub fn write(&self, w: &mut Writer, owner: Owner, apex_pos: u16) -> Result<Written, Full> {
        self.view().write(w, owner, apex_pos)
    }

    pub fn name_position(&self, k: usize, offset: usize) -> usize {
        self.view().name_position(k, offset)
    }
}

/// Appends the packed form of an RRset to `out`: a 16-bit patch count, the
/// patches ([`PATCH_LEN`] octets each, in order of position), then each
/// record as TYPE CLASS TTL RDLENGTH RDATA back to back, every record
/// after the first preceded by a two-octet owner pointer to patch (to the
/// first record's owner), so the whole RRset is one copy and one loop
/// over the patches. No records: nothing is appended.
pub fn pack_rrset(rtype: RType, ttl: u32, rdatas: &[&[u8]], names: Names, out: &mut Vec<u8>) {
    if rdatas.is_empty() {
        return;
    }
    // Names are remembered for later ones only where there are any.
    let two_names = matches!(rtype, RType::SOA | RType::MINFO);
    let mut packer = NamePacker::new(names, rdatas.len() > 1 || two_names);
    // Compression only shortens names, so this is enough for every record
    // (fixed fields, RDATA, and an owner pointer after the first).
    const FIXED: usize = 2 + 2 + 4 + 2 + 2;
    PACK_SCRATCH.with_borrow_mut(|(bytes, patches)| {
        bytes.clear();
        patches.clear();
        bytes.reserve(rdatas.iter().map(|rd| FIXED + rd.len()).sum());
        pack_records(rtype, ttl, rdatas, &mut packer, bytes, patches);
        out.reserve(2 + PATCH_LEN * patches.len() + bytes.len());
        out.extend_from_slice(&(patches.len() as u16).to_be_bytes());
        for p in patches.iter() {
            p.pack(out);
        }
        out.extend_from_slice(bytes);
        // An RRset too large to keep (a zone may hold one before it is
        // refused) leaves no buffer of its size behind.
        if bytes.capacity() > SCRATCH_KEPT {
            *bytes = Vec::new();
            *patches = Vec::new();
        }
    });
}

thread_local! {
    /// [`pack_rrset`]'s buffers, reused from RRset to RRset: two new ones
    /// each were about a twentieth of building a zone.
    static PACK_SCRATCH: std::cell::RefCell<(Vec<u8>, Vec<Patch>)> = Default::default();
}

/// Most octets of [`PACK_SCRATCH`] kept between RRsets: the largest RRset
/// a zone stores.
const SCRATCH_KEPT: usize = MAX_PACKED + 1;

/// The records of [`pack_rrset`] into `bytes`, the pointers to patch into
/// `patches`.
fn pack_records<'a>(
    rtype: RType,
    ttl: u32,
    rdatas: &[&'a [u8]],
    packer: &mut NamePacker<'a>,
    bytes: &mut Vec<u8>,
    patches: &mut Vec<Patch>,
) {
    for (k, rd) in rdatas.iter().enumerate() {
        if k > 0 {
            patches.push(Patch {
                at: bytes.len() as u16,
                to: PatchTo::Owner,
            });
            bytes.extend_from_slice(&[0xC0, 0]);
        }
        bytes.extend_from_slice(&rtype.0.to_be_bytes());
        bytes.extend_from_slice(&Class::IN.0.to_be_bytes());
        bytes.extend_from_slice(&ttl.to_be_bytes());
        let len_at = bytes.len();
        bytes.extend_from_slice(&[0, 0]);
        packer.rdata(rtype, rd, bytes, patches);
        let rdlen = (bytes.len() - len_at - 2) as u16;
        bytes[len_at..len_at + 2].copy_from_slice(&rdlen.to_be_bytes());
    }
}

/// A packed RRset, borrowed (from an [`EncodedRRset`] or a zone's arena).
#[derive(Clone, Copy, Debug, Default)]
pub struct EncodedRef<'a> {
    /// The patches, [`PATCH_LEN`] octets each.
    patches: &'a [u8],
    /// The records.
    bytes: &'a [u8],
}

/// Where [`EncodedRef::write`] put things, for later names to point to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// The owner of the records.
    pub owner: u16,
    /// The first record's RDATA (e.g. a CNAME's target).
    pub first_rdata: usize,
    /// The first record's TYPE field; later names are relative to it.
    pub first_bytes: usize,
}

impl Written {
    /// How the next RRset of the same owner writes it: a pointer to this
    /// one's, if a pointer reaches it, or `owner` again.
    pub fn next_owner<'n>(&self, owner: Owner<'n>) -> Owner<'n> {
        if self.owner as usize <= MAX_POINTER {
            Owner::At(self.owner)
        } else {
            owner
        }
    }
}

/// How a record's owner is written.
#[derive(Clone, Copy, Debug)]
pub enum Owner<'a> {
    /// A pointer to a name already in the message (e.g. 12, the question).
    At(u16),
    /// The labels of an uncompressed wire name that ends in the apex: the
    /// labels before the apex are written out, the apex is a pointer.
    BelowApex(&'a [u8], usize),
}

/// Reads a big-endian u16 at `at`.
/// Sets the TTL of every record in `out`, records just written (the
/// first from its TYPE field on, each later one after its owner, a
/// pointer or, past 16 KiB, a name), to `ttl`.
fn cap_ttls(out: &mut [u8], ttl: u32) {
    let mut at = 0;
    loop {
        out[at + 4..at + 8].copy_from_slice(&ttl.to_be_bytes());
        at += 10 + u16_at(out, at + 8) as usize;
        if at >= out.len() {
            return;
        }
        at = skip_written_owner(out, at);
    }
}

/// Where the owner name written at `at` ends: its labels up to the root
/// or a compression pointer, which is not followed.
fn skip_written_owner(out: &[u8], mut at: usize) -> usize {
    loop {
        match out[at] {
            0 => return at + 1,
            len if len & 0xC0 == 0xC0 => return at + 2,
            len => at += 1 + len as usize,
        }
    }
}

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([bytes[at], bytes[at + 1]])
}

impl<'a> EncodedRef<'a> {
    /// Views a packed RRset (as [`pack_rrset`] wrote it; empty for none).
    pub fn new(packed: &'a [u8]) -> EncodedRef<'a> {
        if packed.is_empty() {
            return EncodedRef::default();
        }
        let split = 2 + PATCH_LEN * u16_at(packed, 0) as usize;
        EncodedRef {
            patches: &packed[2..split],
            bytes: &packed[split..],
        }
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.starts().count()
    }

    /// The TTL of the records (0 for none).
    pub fn ttl(&self) -> u32 {
        match self.bytes.get(4..8) {
            Some(b) => u32::from_be_bytes(b.try_into().expect("4 octets")),
            None => 0,
        }
    }

    fn patches(self) -> impl Iterator<Item = Patch> + 'a {
        self.patches.chunks_exact(PATCH_LEN).map(Patch::unpack)
    }

    /// The pointers that end names in RDATA, with what they stand for.
    fn name_tails(self) -> impl Iterator<Item = (usize, Tail)> + 'a {
        self.patches()
            .filter_map(|p| p.tail().map(|t| (p.at as usize, t)))
    }

    /// Names in RDATA compressed (each ends in one pointer).
    pub fn patch_count(&self) -> usize {
        self.name_tails().count()
    }

    /// Whether some name in RDATA points to a name earlier in the RRset.
    fn points_to_earlier(self) -> bool {
        self.name_tails()
            .any(|(_, t)| matches!(t, Tail::Earlier(_)))
    }

    /// The patch at `at` of the record bytes (patches are in order).
    fn patch_at(self, at: usize) -> Option<Patch> {
        let (mut low, mut high) = (0, self.patches.len() / PATCH_LEN);
        while low < high {
            let mid = (low + high) / 2;
            let patch = Patch::unpack(&self.patches[mid * PATCH_LEN..]);
            match (patch.at as usize).cmp(&at) {
                Ordering::Less => low = mid + 1,
                Ordering::Greater => high = mid,
                Ordering::Equal => return Some(patch),
            }
        }
        None
    }

    /// Where each record's TYPE field is in the record bytes.
    fn starts(self) -> impl Iterator<Item = usize> + 'a {
        let bytes = self.bytes;
        let mut next = if bytes.is_empty() { None } else { Some(0) };
        std::iter::from_fn(move || {
            let start = next?;
            let end = start + 10 + u16_at(bytes, start + 8) as usize;
            next = (end < bytes.len()).then_some(end + 2);
            Some(start)
        })
    }

    /// The RDATA of the record whose TYPE field is at `start`.
    fn rdata_range(self, start: usize) -> Range<usize> {
        let rdata_at = start + 10;
        rdata_at..rdata_at + u16_at(self.bytes, start + 8) as usize
    }

    /// Whether the RDATA in `range` holds a pointer to patch.
    fn has_tails_in(self, range: &Range<usize>) -> bool {
        self.name_tails().any(|(at, _)| range.contains(&at))
    }

    /// Each record's RDATA, uncompressed (the pointers' names written out
    /// from `names`, the lower-cased apex and owner the RRset was encoded
    /// for).
    pub fn rdatas(self, names: Names<'a>) -> impl Iterator<Item = Cow<'a, [u8]>> + 'a {
        self.starts().map(move |start| {
            let range = self.rdata_range(start);
            if !self.has_tails_in(&range) {
                return Cow::Borrowed(&self.bytes[range]);
            }
            let mut out = Vec::with_capacity(range.len() + names.apex.len() + names.owner.len());
            self.expand_rdata(range, &mut out, &|end, out: &mut Vec<u8>| {
                out.put(names.end(end))
            });
            Cow::Owned(out)
        })
    }

    /// The first record's RDATA, a name (CNAME), uncompressed into `out`
    /// without allocating.
    pub fn first_name(self, names: Names, out: &mut crate::name::NameBuf) {
        let Some(start) = self.starts().next() else {
            return;
        };
        let mut name = StackName::default();
        self.expand_rdata(
            self.rdata_range(start),
            &mut name,
            &|end, out: &mut StackName| out.put(names.end(end)),
        );
        out.set(name.bytes());
    }

    /// Puts the RDATA in `range` into `out` with each pointer that ends a
    /// name replaced: names earlier in the RRset by their labels (followed
    /// to their own ends), and each end by what `end` puts for it.
    fn expand_rdata<S: Sink>(self, range: Range<usize>, out: &mut S, end: &impl Fn(End, &mut S)) {
        let mut done = range.start;
        for (at, tail) in self.name_tails().filter(|(at, _)| range.contains(at)) {
            out.put(&self.bytes[done..at]);
            let last = match tail {
                Tail::Apex(delta) => End::Apex(delta),
                Tail::Owner => End::Owner,
                Tail::Earlier(earlier) => self.follow(earlier, at, out),
            };
            end(last, out);
            done = at + 2;
        }
        out.put(&self.bytes[done..range.end]);
    }

    /// Puts the labels of the name at `at` (before `from`, where it is
    /// pointed to) into `out`, following its pointers to names still
    /// earlier; how it ends.
    fn follow(self, mut at: usize, mut from: usize, out: &mut impl Sink) -> End {
        while at < from {
            let start = at;
            while self.bytes[at] != 0 && self.bytes[at] & 0xC0 != 0xC0 {
                at += 1 + self.bytes[at] as usize;
            }
            out.put(&self.bytes[start..at]);
            if self.bytes[at] == 0 {
                return End::Root;
            }
            match self.patch_at(at).and_then(Patch::tail) {
                Some(Tail::Apex(delta)) => return End::Apex(delta),
                Some(Tail::Owner) => return End::Owner,
                Some(Tail::Earlier(earlier)) => (at, from) = (earlier, at),
                None => break,
            }
        }
        End::Root // not as `pack_rrset` writes: end the name
    }

    /// Writes the RRset into the current section of `w` whole, or nothing.
    /// `apex_pos` is where the apex sits in the message.
    pub fn write(&self, w: &mut Writer, owner: Owner, apex_pos: u16) -> Result<Written, Full> {
        let mark = w.mark();
        let result = self.write_records(w, owner, apex_pos);
        if result.is_err() {
            w.rollback(mark);
        }
        result
    }

    /// Writes the records as [`EncodedRef::write`] does, with a TTL of at
    /// most `cap`: the SOA of a negative answer (RFC 2308 section 5) taken
    /// from the apex's own, so that a zone keeps no second copy of it.
    pub fn write_ttl_capped(
        &self,
        w: &mut Writer,
        owner: Owner,
        apex_pos: u16,
        cap: u32,
    ) -> Result<Written, Full> {
        let written = self.write(w, owner, apex_pos)?;
        // An RRset's records share one TTL: most SOAs need no change.
        if self.ttl() > cap {
            cap_ttls(w.written_mut(written.first_bytes), cap);
        }
        Ok(written)
    }

    fn write_records(&self, w: &mut Writer, owner: Owner, apex_pos: u16) -> Result<Written, Full> {
        if self.bytes.is_empty() {
            return Ok(Written::default());
        }
        let owner_at = write_owner(w, owner, apex_pos)?;
        let base = w.len();
        let beyond = base + self.bytes.len() > MAX_POINTER + 1;
        if owner_at as usize > MAX_POINTER || (beyond && self.points_to_earlier()) {
            // Past 16 KiB (a large TCP or transfer message): later records
            // cannot point to the owner, nor names to names in the records,
            // so each record writes its owner and those names again.
            return self.write_each(w, owner, apex_pos, owner_at);
        }
        w.raw_bytes(self.bytes)?;
        // One pass over the packed patches: the kind indexes the target,
        // the argument is added to it.
        let targets = [owner_at, apex_pos, owner_at, base as u16];
        let mut records = 1;
        let written = w.written_mut(base);
        for p in self.patches.chunks_exact(PATCH_LEN) {
            let at = u16::from_le_bytes([p[0], p[1]]) as usize;
            let arg = ((p[2] >> 2) as u16) << 8 | p[3] as u16;
            put_pointer(written, at, targets[(p[2] & 3) as usize] + arg);
            records += (p[2] == TO_OWNER) as u16;
        }
        w.count_records(records);
        Ok(Written {
            owner: owner_at,
            first_rdata: base + 10,
            first_bytes: base,
        })
    }

    /// Writes record by record, each with its own owner (the first one's
    /// is written already).
    fn write_each(
        &self,
        w: &mut Writer,
        owner: Owner,
        apex_pos: u16,
        owner_at: u16,
    ) -> Result<Written, Full> {
        let first_bytes = w.len();
        let mut records = 0;
        for start in self.starts() {
            if start > 0 {
                write_owner(w, owner, apex_pos)?;
            }
            let range = self.rdata_range(start);
            let apex_only = !self
                .name_tails()
                .any(|(at, t)| range.contains(&at) && !matches!(t, Tail::Apex(_)));
            match apex_only {
                true => self.copy_record(w, start..range.end, apex_pos)?,
                false => self.write_expanded(w, start, (owner, owner_at), apex_pos)?,
            }
            records += 1;
        }
        w.count_records(records);
        Ok(Written {
            owner: owner_at,
            first_rdata: first_bytes + 10,
            first_bytes,
        })
    }

    /// Copies the record in `range` whose names point only to the apex.
    fn copy_record(&self, w: &mut Writer, range: Range<usize>, apex_pos: u16) -> Result<(), Full> {
        let base = w.len();
        w.raw_bytes(&self.bytes[range.clone()])?;
        for (at, tail) in self.name_tails().filter(|(at, _)| range.contains(at)) {
            if let Tail::Apex(delta) = tail {
                w.patch_pointer(base + at - range.start, apex_pos + delta as u16);
            }
        }
        Ok(())
    }

    /// Writes the record whose TYPE field is at `start` with the names in
    /// its RDATA that point to the owner or to earlier names written out:
    /// the owner's labels when no pointer reaches it, the earlier names'
    /// labels always (this record's layout is not the packed one).
    fn write_expanded(
        &self,
        w: &mut Writer,
        start: usize,
        (owner, owner_at): (Owner, u16),
        apex_pos: u16,
    ) -> Result<(), Full> {
        w.raw_bytes(&self.bytes[start..start + 8])?;
        let len_at = w.len();
        w.raw_bytes(&[0, 0])?;
        let end = |last: End, out: &mut WriterSink| match (last, owner) {
            (End::Root, _) => out.put(&[0]),
            (End::Apex(delta), _) => out.pointer(apex_pos + delta as u16),
            (End::Owner, Owner::BelowApex(name, apex_len)) if owner_at as usize > MAX_POINTER => {
                out.put(&name[..name.len() - apex_len]);
                out.pointer(apex_pos);
            }
            (End::Owner, _) => out.pointer(owner_at),
        };
        let mut sink = WriterSink { w, full: false };
        self.expand_rdata(self.rdata_range(start), &mut sink, &end);
        if sink.full {
            return Err(Full);
        }
        let rdlen = (w.len() - len_at - 2) as u16;
        w.written_mut(len_at)[..2].copy_from_slice(&rdlen.to_be_bytes());
        Ok(())
    }

    /// Where a name at byte `offset` of record `k` lands relative to the
    /// first record's TYPE field when the RRset is written (10 is the start
    /// of RDATA).
    pub fn name_position(&self, k: usize, offset: usize) -> usize {
        self.starts().nth(k).expect("record k exists") + offset
    }
}

/// The additional-section records that go with an NS, MX or SRV RRset: the
/// addresses of its targets, encoded once with each owner a pointer to the
/// target's name inside the RRset as written. NSD and Knot precompute glue
/// the same way; doing it per query was most of a referral's cost.
///
/// An authoritative address RRset of a signed zone brings its RRSIGs,
/// kept apart from the addresses so that an answer without DO copies the
/// addresses alone, as before; with DO each address RRset is written with
/// its RRSIGs, and the two fit together or are both left out.
///
/// This is the builder; [`AdditionalRef`] reads the packed form.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AdditionalBlock {
    /// Records with their owner pointers (placeholders), back to back.
    bytes: Vec<u8>,
    groups: Vec<Group>,
    /// Owner pointers to patch: (offset in `bytes`, where the target name
    /// is relative to the parent RRset's first record as written).
    owners: Vec<(u16, u16)>,
    /// The RRSIG records over the groups, likewise, and their owners.
    sig_bytes: Vec<u8>,
    sig_owners: Vec<(u16, u16)>,
    /// Required RRsets left out for want of room (not packed).
    required_left_out: usize,
}

/// One target RRset (A or AAAA) in a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Group {
    end: u16,
    records: u16,
    /// Glue the response cannot do without (RFC 9471): if it does not
    /// fit, the response is truncated.
    required: bool,
    /// Where the group's RRSIGs end in the signatures, and how many.
    sig_end: u16,
    sigs: u16,
}

/// Octets a group and an owner take in a packed block.
const GROUP_LEN: usize = 9;
const OWNER_LEN: usize = 4;
/// Octets of a packed block's header: group and owner counts, and the
/// length of its signature part.
const BLOCK_HEADER: usize = 6;

/// The RRSIG records over an address RRset: their TTL and RDATAs (none
/// for an unsigned RRset, or glue, which is not signed).
pub type Signatures<'s> = (u32, &'s [&'s [u8]]);

impl AdditionalBlock {
    /// A block with room for the addresses of `targets` names (an A and an
    /// AAAA record each), so that filling it does not grow each vector
    /// four or five times (a tenth of a referral zone's build).
    pub fn for_targets(targets: usize) -> AdditionalBlock {
        // An A record with its owner pointer is 18 octets, an AAAA 30.
        AdditionalBlock {
            bytes: Vec::with_capacity(targets * 48),
            groups: Vec::with_capacity(targets * 2),
            owners: Vec::with_capacity(targets * 2),
            ..AdditionalBlock::default()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Required (glue) RRsets [`AdditionalBlock::push`] left out because
    /// the block was full: referrals then carry only part of their glue.
    pub fn required_left_out(&self) -> usize {
        self.required_left_out
    }

    /// Adds an RRset (A or AAAA, no names in RDATA) owned by the target name
    /// at `target` in the parent RRset as written (see
    /// [`EncodedRef::name_position`]), with the RRSIGs over it.
    pub fn push(
        &mut self,
        target: usize,
        (rtype, ttl, rdatas): (RType, u32, &[&[u8]]),
        (sig_ttl, sigs): Signatures,
        required: bool,
    ) {
        // A packed block is at most MAX_PACKED octets (its offsets are 16
        // bits): an RRset that would take it past that is left out (no
        // response could carry it anyway), so that the RRset carrying the
        // block is always stored.
        let size = |rdatas: &[&[u8]]| rdatas.iter().map(|rd| 12 + rd.len()).sum::<usize>();
        let records = rdatas.len() + sigs.len();
        let grown = self.packed_len() + GROUP_LEN + OWNER_LEN * records + 2;
        if grown + size(rdatas) + size(sigs) > MAX_PACKED {
            self.required_left_out += usize::from(required);
            return;
        }
        push_records(
            &mut self.bytes,
            &mut self.owners,
            target,
            (rtype, ttl, rdatas),
        );
        push_records(
            &mut self.sig_bytes,
            &mut self.sig_owners,
            target,
            (RType::RRSIG, sig_ttl, sigs),
        );
        self.groups.push(Group {
            end: self.bytes.len() as u16,
            records: rdatas.len() as u16,
            required,
            sig_end: self.sig_bytes.len() as u16,
            sigs: sigs.len() as u16,
        });
    }

    /// Octets of the packed form ([`AdditionalBlock::pack`]).
    fn packed_len(&self) -> usize {
        let sig_part = match self.sig_bytes.is_empty() {
            true => 0,
            false => 2 + OWNER_LEN * self.sig_owners.len() + self.sig_bytes.len(),
        };
        BLOCK_HEADER
            + GROUP_LEN * self.groups.len()
            + OWNER_LEN * self.owners.len()
            + sig_part
            + self.bytes.len()
    }

    /// Appends the packed form: group and owner counts and the signature
    /// part's length, the groups (end, records, required, signatures' end
    /// and count), the owners (offset, target), the signature part (its
    /// owner count, owners, records; absent when nothing is signed), then
    /// the records. An empty block appends nothing.
    pub fn pack(&self, out: &mut Vec<u8>) {
        if self.groups.is_empty() {
            return;
        }
        let sig_len = match self.sig_bytes.is_empty() {
            true => 0,
            false => 2 + OWNER_LEN * self.sig_owners.len() + self.sig_bytes.len(),
        };
        out.extend_from_slice(&(self.groups.len() as u16).to_be_bytes());
        out.extend_from_slice(&(self.owners.len() as u16).to_be_bytes());
        out.extend_from_slice(&(sig_len as u16).to_be_bytes());
        for g in &self.groups {
            out.extend_from_slice(&g.end.to_be_bytes());
            out.extend_from_slice(&g.records.to_be_bytes());
            out.push(g.required as u8);
            out.extend_from_slice(&g.sig_end.to_be_bytes());
            out.extend_from_slice(&g.sigs.to_be_bytes());
        }
        pack_owners(&self.owners, out);
        if sig_len > 0 {
            out.extend_from_slice(&(self.sig_owners.len() as u16).to_be_bytes());
            pack_owners(&self.sig_owners, out);
            out.extend_from_slice(&self.sig_bytes);
        }
        out.extend_from_slice(&self.bytes);
    }
}

/// Appends records of one type owned by the target at `target`, each with
/// an owner pointer to patch.
fn push_records(
    bytes: &mut Vec<u8>,
    owners: &mut Vec<(u16, u16)>,
    target: usize,
    (rtype, ttl, rdatas): (RType, u32, &[&[u8]]),
) {
    for rd in rdatas {
        owners.push((bytes.len() as u16, target as u16));
        bytes.extend_from_slice(&[0xC0, 0]);
        bytes.extend_from_slice(&rtype.0.to_be_bytes());
        bytes.extend_from_slice(&Class::IN.0.to_be_bytes());
        bytes.extend_from_slice(&ttl.to_be_bytes());
        bytes.extend_from_slice(&(rd.len() as u16).to_be_bytes());
        bytes.extend_from_slice(rd);
    }
}

/// Little-endian: the write loop reads each with one load.
fn pack_owners(owners: &[(u16, u16)], out: &mut Vec<u8>) {
    for (off, target) in owners {
        out.extend_from_slice(&off.to_le_bytes());
        out.extend_from_slice(&target.to_le_bytes());
    }
}

/// Packed owners (offset, target) as [`pack_owners`] wrote them.
fn owners_of(packed: &[u8]) -> impl Iterator<Item = (u16, u16)> + '_ {
    packed.chunks_exact(OWNER_LEN).map(|o| {
        (
            u16::from_le_bytes([o[0], o[1]]),
            u16::from_le_bytes([o[2], o[3]]),
        )
    })
}

/// A packed additional block, borrowed.
#[derive(Clone, Copy, Debug)]
pub struct AdditionalRef<'a> {
    groups: &'a [u8],
    owners: &'a [u8],
    /// The signature part: empty when no group is signed.
    sigs: &'a [u8],
    bytes: &'a [u8],
}

impl<'a> AdditionalRef<'a> {
    /// Views a packed block; None for an empty one.
    pub fn new(packed: &'a [u8]) -> Option<AdditionalRef<'a>> {
        if packed.is_empty() {
            return None;
        }
        let groups_end = BLOCK_HEADER + GROUP_LEN * u16_at(packed, 0) as usize;
        let owners_end = groups_end + OWNER_LEN * u16_at(packed, 2) as usize;
        let sigs_end = owners_end + u16_at(packed, 4) as usize;
        Some(AdditionalRef {
            groups: &packed[BLOCK_HEADER..groups_end],
            owners: &packed[groups_end..owners_end],
            sigs: &packed[owners_end..sigs_end],
            bytes: &packed[sigs_end..],
        })
    }

    /// Whether some address RRset in the block has RRSIGs.
    pub fn has_sigs(&self) -> bool {
        !self.sigs.is_empty()
    }

    fn groups(&self) -> impl Iterator<Item = Group> + 'a {
        self.groups.chunks_exact(GROUP_LEN).map(|g| Group {
            end: u16_at(g, 0),
            records: u16_at(g, 2),
            required: g[4] != 0,
            sig_end: u16_at(g, 5),
            sigs: u16_at(g, 7),
        })
    }

    /// Writes the groups that fit into the current section, each whole or
    /// not at all, in order (a group that does not fit is skipped, and a
    /// later smaller one may fit). Err if a required group did not fit
    /// (the caller sets TC).
    pub fn write(&self, w: &mut Writer, at: &Written) -> Result<(), Full> {
        let reachable = self.reaches(at);
        if reachable && w.raw_bytes(self.bytes).is_ok() {
            // All of it fits (the usual case): one copy, then the owners.
            let base = w.len() - self.bytes.len();
            let written = w.written_mut(base);
            for (off, target) in owners_of(self.owners) {
                let target = at.first_bytes + target as usize;
                put_pointer(written, off as usize, target as u16);
            }
            w.count_records(self.owners.len() as u16 / OWNER_LEN as u16);
            return Ok(());
        }
        let mut start = 0;
        let mut owners = owners_of(self.owners).peekable();
        for group in self.groups() {
            let end = group.end as usize;
            match copy_owned(
                w,
                &self.bytes[start..end],
                start,
                &mut owners,
                (at, reachable),
            ) {
                Ok(()) => w.count_records(group.records),
                Err(Full) if group.required => return Err(Full),
                Err(Full) => {}
            }
            start = end;
        }
        Ok(())
    }

    /// [`AdditionalRef::write`] for a query with DO set: each address
    /// RRset followed by its RRSIGs (RFC 4035 3.1.1), the two written
    /// whole or not at all (RFC 4035 3.1.1 and RFC 9471 drop what does
    /// not fit rather than truncate; an address without its signatures
    /// would only make a validator ask again).
    pub fn write_signed(&self, w: &mut Writer, at: &Written) -> Result<(), Full> {
        let sig_owners = match self.sigs.len() {
            0 => 0,
            _ => OWNER_LEN * u16_at(self.sigs, 0) as usize,
        };
        let (sig_owner_bytes, sig_bytes) = match self.sigs.len() {
            0 => (&[][..], &[][..]),
            _ => self.sigs[2..].split_at(sig_owners),
        };
        let mut owners = owners_of(self.owners).peekable();
        let mut sig_owners = owners_of(sig_owner_bytes).peekable();
        let reachable = self.reaches(at);
        let (mut start, mut sig_start) = (0, 0);
        for group in self.groups() {
            let (end, sig_end) = (group.end as usize, group.sig_end as usize);
            let mark = w.mark();
            let records = &self.bytes[start..end];
            let sigs = &sig_bytes[sig_start..sig_end];
            // Both copies are tried, so that each consumes its owners.
            let fits = copy_owned(w, records, start, &mut owners, (at, reachable));
            let sigs_fit = copy_owned(w, sigs, sig_start, &mut sig_owners, (at, reachable));
            match fits.and(sigs_fit) {
                Ok(()) => w.count_records(group.records + group.sigs),
                Err(Full) => {
                    // Its records without their signatures (or the reverse)
                    // would be half a group: taken out either way.
                    w.rollback(mark);
                    if group.required {
                        return Err(Full);
                    }
                }
            }
            (start, sig_start) = (end, sig_end);
        }
        Ok(())
    }

    /// Whether every owner pointer can reach its target when the parent
    /// was written at `at` (pointers reach only the first 16 KiB).
    fn reaches(&self, at: &Written) -> bool {
        owners_of(self.owners).all(|(_, target)| at.first_bytes + target as usize <= MAX_POINTER)
    }
}

/// [`copy_patched`], or, when some owner's target lies past where a
/// pointer reaches (`reachable` false, see `AdditionalRef::reaches`: a parent RRset past 16 KiB, a
/// delegation to hundreds of name servers), [`copy_spelled`].
fn copy_owned(
    w: &mut Writer,
    bytes: &[u8],
    start: usize,
    owners: &mut std::iter::Peekable<impl Iterator<Item = (u16, u16)>>,
    (at, reachable): (&Written, bool),
) -> Result<(), Full> {
    match reachable {
        true => copy_patched(w, bytes, start, owners, at),
        false => copy_spelled(w, bytes, start, owners, at),
    }
}

/// Copies `bytes` record by record, each owner written as a pointer where
/// one reaches its target, else spelled out from the target name as the
/// message holds it (black-box finding BK-2: a referral whose NS records
/// passed 16 KiB was sent with none of its required glue, and no TC).
fn copy_spelled(
    w: &mut Writer,
    bytes: &[u8],
    start: usize,
    owners: &mut std::iter::Peekable<impl Iterator<Item = (u16, u16)>>,
    at: &Written,
) -> Result<(), Full> {
    let end = start + bytes.len();
    let mark = w.mark();
    let records: Vec<(u16, u16)> =
        std::iter::from_fn(|| owners.next_if(|o| (o.0 as usize) < end)).collect();
    let mut copy = || -> Result<(), Full> {
        for (k, &(off, target)) in records.iter().enumerate() {
            let next = records.get(k + 1).map_or(end, |r| r.0 as usize);
            let target = at.first_bytes + target as usize;
            let owner = spelled_owner(w.written_mut(0), target).ok_or(Full)?;
            w.raw_bytes(&owner)?;
            w.raw_bytes(&bytes[off as usize + 2 - start..next - start])?;
        }
        Ok(())
    };
    // Whole or not at all: a record begun and cut off made the message
    // unreadable (black-box finding BM-1).
    let copied = copy();
    if copied.is_err() {
        w.rollback(mark);
    }
    copied
}

/// The name at `pos` in `msg`, as an owner written later in the message:
/// its labels until a pointer can reach the rest. None if `msg` holds no
/// name there (a bound on the labels and pointers followed).
fn spelled_owner(msg: &[u8], mut pos: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(64);
    for _ in 0..256 {
        if pos <= MAX_POINTER {
            out.extend_from_slice(&(0xC000 | pos as u16).to_be_bytes());
            return Some(out);
        }
        match *msg.get(pos)? {
            0 => {
                out.push(0);
                return Some(out);
            }
            len if len & 0xC0 == 0xC0 => {
                // Earlier in the message: followed, never forward.
                let to = (usize::from(len & 0x3F) << 8) | usize::from(*msg.get(pos + 1)?);
                (to < pos).then_some(())?;
                pos = to;
            }
            len if len < 64 => {
                out.extend_from_slice(msg.get(pos..pos + 1 + usize::from(len))?);
                pos += 1 + usize::from(len);
            }
            _ => return None,
        }
    }
    None
}

/// Copies `bytes`, which start at `start` in their block, and patches the
/// owner pointers among `owners` that lie in them.
fn copy_patched(
    w: &mut Writer,
    bytes: &[u8],
    start: usize,
    owners: &mut std::iter::Peekable<impl Iterator<Item = (u16, u16)>>,
    at: &Written,
) -> Result<(), Full> {
    let base = w.len();
    let copied = w.raw_bytes(bytes);
    let end = start + bytes.len();
    while let Some((off, target)) = owners.next_if(|o| (o.0 as usize) < end) {
        if copied.is_ok() {
            let target = at.first_bytes + target as usize;
            w.patch_pointer(base + (off as usize - start), target as u16);
        }
    }
    copied
}

/// Writes an owner; returns a position that later records may point to.
fn write_owner(w: &mut Writer, owner: Owner, apex_pos: u16) -> Result<u16, Full> {
    match owner {
        Owner::At(at) => {
            w.raw_pointer(at)?;
            Ok(at)
        }
        Owner::BelowApex(name, apex_len) => {
            let at = w.len() as u16;
            let relative = &name[..name.len() - apex_len];
            w.raw_bytes(relative)?;
            w.raw_pointer(apex_pos)?;
            Ok(at)
        }
    }
}

/// Compresses the names in an RRset's RDATA as [`pack_rrset`] writes it.
struct NamePacker<'a> {
    apex: &'a [u8],
    /// None for a wildcard: its records are written under the query name.
    owner: Option<&'a [u8]>,
    /// Names written so far: (name, where it starts in the record bytes,
    /// octets of it written as labels before its pointer).
    earlier: Vec<(&'a [u8], usize, usize)>,
    /// How many names to remember: none for an RRset of one name.
    remember: usize,
}

/// Names an RRset's later names are compared with, at most: enough for
/// the NS RRsets of real zones (13 root servers share one suffix), and a
/// bound on the work of a large RRset (each name against each remembered).
const MAX_EARLIER_NAMES: usize = 16;

impl<'a> NamePacker<'a> {
    fn new(names: Names<'a>, more_names: bool) -> NamePacker<'a> {
        let wildcard = names.owner.starts_with(&[1, b'*']);
        NamePacker {
            apex: names.apex,
            owner: (!wildcard).then_some(names.owner),
            earlier: Vec::new(),
            remember: if more_names { MAX_EARLIER_NAMES } else { 0 },
        }
    }

    fn remember(&mut self, name: &'a [u8], at: usize, literal: usize) {
        if self.earlier.len() < self.remember {
            self.earlier.push((name, at, literal));
        }
    }

    /// Appends RDATA, compressing the names that may be compressed and
    /// recording the pointers to patch.
    fn rdata(&mut self, rtype: RType, rd: &'a [u8], out: &mut Vec<u8>, patches: &mut Vec<Patch>) {
        if !rtype.rdata_names_compressible() {
            out.extend_from_slice(rd);
            return;
        }
        for piece in rdata::compressible_pieces(rtype, rd) {
            match piece {
                RdataPiece::Octets(octets) => out.extend_from_slice(octets),
                RdataPiece::Name(name) => self.name(name, out, patches),
            }
        }
    }

    /// Writes a name as its labels up to the longest suffix it shares with
    /// the apex, the owner or a name before it, then a pointer (patched
    /// per response) to that suffix.
    fn name(&mut self, name: &'a [u8], out: &mut Vec<u8>, patches: &mut Vec<Patch>) {
        let at = out.len();
        let Some((literal, to)) = self.longest_suffix(name) else {
            out.extend_from_slice(name);
            self.remember(name, at, name.len() - 1);
            return;
        };
        out.extend_from_slice(&name[..literal]);
        patches.push(Patch {
            at: out.len() as u16,
            to,
        });
        out.extend_from_slice(&[0xC0, 0]);
        self.remember(name, at, literal);
    }

    /// Where the longest suffix of `name` that can be pointed to starts,
    /// and where it points. On a tie the apex, then the owner: they need
    /// nothing else in the RRset to read back.
    fn longest_suffix(&self, name: &[u8]) -> Option<(usize, PatchTo)> {
        let apex = shared_suffix(name, self.apex).map(|(n, a)| (n, PatchTo::Apex(a as u8)));
        // The owner only whole: where it is written (labels, or a pointer
        // to a name that may itself end in one) only its start is sure.
        let owner = (self.owner)
            .and_then(|owner| shared_suffix(name, owner))
            .filter(|&(_, m)| m == 0)
            .map(|(n, _)| (n, PatchTo::OwnerName));
        let earlier = self.earlier.iter().filter_map(|&(prior, at, literal)| {
            let (n, m) = shared_suffix(name, prior)?;
            (m < literal && at + m < MAX_EARLIER).then_some((n, PatchTo::Earlier((at + m) as u16)))
        });
        // min_by_key keeps the first of equals.
        apex.into_iter()
            .chain(owner)
            .chain(earlier)
            .min_by_key(|&(n, _)| n)
    }
}

/// The longest non-root label-aligned suffix shared by `name` and `apex`
/// (ASCII case ignored): where it starts in each. Only suffixes of the same
/// length can match, and if one does every shorter one does too, so the
/// first match walking from the left is the longest.
fn shared_suffix(name: &[u8], apex: &[u8]) -> Option<(usize, usize)> {
    let mut a = 0;
    let mut n = 0;
    while n < name.len() && name[n] != 0 {
        let len = name.len() - n;
        while a < apex.len() && apex[a] != 0 && apex.len() - a > len {
            a += 1 + apex[a] as usize;
        }
        let aligned = a < apex.len() && apex[a] != 0 && apex.len() - a == len;
        if aligned && name[n..].eq_ignore_ascii_case(&apex[a..]) {
            return Some((n, a));
        }
        n += 1 + name[n] as usize;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;
    use crate::name::Name;

    /// A block's offsets are 16 bits: an address RRset that would take its
    /// records or signatures past them is left out, the block kept as it
    /// was (a delegation's glue is no longer cut at 16 names, so a zone's
    /// addresses could make one that large).
    #[test]
    fn an_address_rrset_past_a_blocks_offsets_is_left_out() {
        let address = [192u8, 0, 2, 1];
        let fits: Vec<&[u8]> = vec![&address; 3200]; // 64,000 octets packed
        let past: Vec<&[u8]> = vec![&address; 200];
        let mut block = AdditionalBlock::default();
        block.push(0, (RType::A, 60, &fits), (0, &[]), true);
        assert_eq!(block.groups.len(), 1);
        let before = block.bytes.len();
        block.push(0, (RType::A, 60, &past), (0, &[]), true);
        assert_eq!((block.groups.len(), block.bytes.len()), (1, before));
        let mut packed = Vec::new();
        block.pack(&mut packed);
        assert_eq!(packed.len(), block.packed_len());
        assert!(packed.len() <= MAX_PACKED);
        let signature = [0u8; 300];
        let sigs: Vec<&[u8]> = vec![&signature; 300]; // 93,600 octets
        assert_eq!(block.required_left_out(), 1);
        let mut signed = AdditionalBlock::default();
        signed.push(0, (RType::A, 60, &past[..1]), (60, &sigs), false);
        assert!(signed.is_empty());
        assert_eq!(signed.required_left_out(), 0, "optional");
    }

    fn wire(s: &str) -> Vec<u8> {
        Name::parse(s).unwrap().as_wire().to_vec()
    }

    /// An RRset owned by the apex.
    fn at_apex(apex: &[u8]) -> Names<'_> {
        Names { apex, owner: apex }
    }

    /// A response to `qname` with `set` written under `owner`.
    fn respond(qname: &str, apex: &str, set: &EncodedRRset, owner: Owner) -> Message {
        let mut buf = Vec::new();
        let mut w = Writer::new(&mut buf, 512);
        let q = wire(qname);
        w.question(&q, RType::A, Class::IN);
        let apex_pos = (12 + q.len() - wire(apex).len()) as u16;
        set.write(&mut w, owner, apex_pos).unwrap();
        let len = w.finish(1, 0x8400, 1);
        Message::parse(&buf[..len]).unwrap()
    }

    #[test]
    fn ns_targets_point_into_the_question() {
        let apex = wire("example.test");
        let ns1 = wire("ns1.example.test");
        let ext = wire("ns.other.net");
        let set = EncodedRRset::new(RType::NS, 300, &[&ns1, &ext], at_apex(&apex));
        assert_eq!(
            set.view().patch_count(),
            1,
            "only the in-zone name is compressed"
        );
        let m = respond("Example.TEST", "example.test", &set, Owner::At(12));
        let text: Vec<String> = m.answers.iter().map(|r| r.to_string()).collect();
        assert_eq!(
            text,
            [
                "Example.TEST. 300 IN NS ns1.Example.TEST.",
                "Example.TEST. 300 IN NS ns.other.net.",
            ]
        );
    }

    #[test]
    fn soa_names_and_owners_below_the_apex() {
        let apex = wire("example.test");
        let soa = [
            wire("ns.example.test"),
            wire("hostmaster.example.test"),
            vec![0; 20],
        ]
        .concat();
        let set = EncodedRRset::new(RType::SOA, 60, &[&soa], at_apex(&apex));
        assert_eq!(set.view().patch_count(), 2);
        let owner = wire("a.b.example.test");
        let m = respond(
            "x.example.test",
            "example.test",
            &set,
            Owner::BelowApex(&owner, apex.len()),
        );
        let r = &m.answers[0];
        assert_eq!(r.name, Name::parse("a.b.example.test").unwrap());
        assert_eq!(r.rdata, soa, "decompresses to the original RDATA");
    }

    #[test]
    fn names_sharing_only_part_of_the_apex() {
        let apex = wire("example.test");
        let mx = [vec![0, 10], wire("mail.other.test")].concat();
        let set = EncodedRRset::new(RType::MX, 60, &[&mx], at_apex(&apex));
        assert_eq!(
            set.view().name_tails().next().unwrap().1,
            Tail::Apex(8),
            "points at 'test' inside the apex"
        );
        let m = respond("example.test", "example.test", &set, Owner::At(12));
        assert_eq!(m.answers[0].rdata, mx);
    }

    #[test]
    fn shared_suffixes_start_at_labels_of_both_names() {
        let (a, b) = (wire("x.Example.TEST"), wire("example.test"));
        assert_eq!(shared_suffix(&a, &b), Some((2, 0)), "case is ignored");
        assert_eq!(shared_suffix(&wire("test"), &b), Some((0, 8)));
        assert_eq!(shared_suffix(&wire("other.org"), &b), None);
        assert_eq!(shared_suffix(&wire("."), &b), None, "never the root alone");
        // The bytes 01 'x' 00 end the one-label apex "\001x." but do not
        // start a label of it.
        let apex = vec![2, 1, b'x', 0];
        assert_eq!(shared_suffix(&wire("x"), &apex), None);
    }

    #[test]
    fn uncompressible_types_are_copied() {
        let apex = wire("example.test");
        let srv = [vec![0, 1, 0, 2, 0, 3], wire("sip.example.test")].concat();
        let set = EncodedRRset::new(RType::SRV, 60, &[&srv], at_apex(&apex));
        assert!(set.view().patch_count() == 0);
        let m = respond("_sip.example.test", "example.test", &set, Owner::At(12));
        assert_eq!(m.answers[0].rdata, srv);
    }

    /// An NS RRset for `cut` with two in-zone targets, and a block holding
    /// an A record for each (the first required, the second not).
    fn referral_parts() -> (EncodedRRset, AdditionalBlock) {
        let apex = wire("example.test");
        let (ns1, ns2) = (wire("ns1.sub.example.test"), wire("ns2.example.test"));
        let ns = EncodedRRset::new(RType::NS, 300, &[&ns1, &ns2], at_apex(&apex));
        let mut block = AdditionalBlock::default();
        let (a1, a2): (&[u8], &[u8]) = (&[192, 0, 2, 1], &[192, 0, 2, 2]);
        block.push(
            ns.name_position(0, 10),
            (RType::A, 60, &[a1]),
            (0, &[]),
            true,
        );
        block.push(
            ns.name_position(1, 10),
            (RType::A, 60, &[a2]),
            (0, &[]),
            false,
        );
        (ns, block)
    }

    /// Writes the referral for `qname` within `limit` octets.
    fn referral(limit: usize) -> (Vec<u8>, Result<(), Full>) {
        let (ns, block) = referral_parts();
        let mut packed = Vec::new();
        block.pack(&mut packed);
        let block = AdditionalRef::new(&packed).unwrap();
        let mut buf = Vec::new();
        let mut w = Writer::new(&mut buf, limit);
        let q = wire("www.sub.example.test");
        w.question(&q, RType::A, Class::IN);
        let apex_pos = (12 + q.len() - wire("example.test").len()) as u16;
        w.section(crate::writer::Section::Authority);
        let cut_pos = (12 + q.len() - wire("sub.example.test").len()) as u16;
        let written = ns.write(&mut w, Owner::At(cut_pos), apex_pos).unwrap();
        assert!(block.reaches(&written));
        w.section(crate::writer::Section::Additional);
        let result = block.write(&mut w, &written);
        let len = w.finish(1, 0x8000, 1);
        buf.truncate(len);
        (buf, result)
    }

    #[test]
    fn glue_owners_point_at_the_targets_in_the_ns_records() {
        let (bytes, result) = referral(512);
        assert_eq!(result, Ok(()));
        let m = Message::parse(&bytes).unwrap();
        let glue: Vec<String> = m.additional.iter().map(|r| r.to_string()).collect();
        assert_eq!(
            glue,
            [
                "ns1.sub.example.test. 60 IN A 192.0.2.1",
                "ns2.example.test. 60 IN A 192.0.2.2",
            ]
        );
        assert_eq!(m.authority.len(), 2);
    }

    #[test]
    fn glue_that_does_not_fit_is_left_out_unless_required() {
        let full = referral(512).0.len();
        // Room for exactly the required group: the optional one is dropped.
        let (bytes, result) = referral(full - 1);
        assert_eq!(result, Ok(()));
        assert_eq!(Message::parse(&bytes).unwrap().additional.len(), 1);
        // At the limit everything fits.
        let (bytes, _) = referral(full);
        assert_eq!(Message::parse(&bytes).unwrap().additional.len(), 2);
        // No room for the required glue: the caller must set TC.
        let (bytes, result) = referral(full - 17);
        assert_eq!(result, Err(Full));
        assert!(Message::parse(&bytes).unwrap().additional.is_empty());
    }

    /// An RRSIG's RDATA over `covered` by example.test, with a 64-octet
    /// signature.
    fn rrsig(covered: RType) -> Vec<u8> {
        let mut rd = covered.0.to_be_bytes().to_vec();
        rd.extend_from_slice(&[13, 3, 0, 0, 0, 60, 0x70, 0, 0, 0, 0x60, 0, 0, 0, 0, 1]);
        rd.extend_from_slice(&wire("example.test"));
        rd.extend_from_slice(&[0xAA; 64]);
        rd
    }

    /// An MX RRset with two in-zone targets, the first with a signed A
    /// and a signed AAAA, the second with an unsigned A; written into
    /// `limit` octets with DO set (`signed`) or not.
    fn signed_mx(limit: usize, signed: bool) -> (Message, Result<(), Full>, usize) {
        let apex = wire("example.test");
        let mx1 = [vec![0, 10], wire("mail.example.test")].concat();
        let mx2 = [vec![0, 20], wire("bare.example.test")].concat();
        let mx = EncodedRRset::new(RType::MX, 300, &[&mx1, &mx2], at_apex(&apex));
        let (a, aaaa, a2): (&[u8], &[u8], &[u8]) = (&[192, 0, 2, 1], &[0x20; 16], &[192, 0, 2, 2]);
        let (sig_a, sig_aaaa) = (rrsig(RType::A), rrsig(RType::AAAA));
        let mut block = AdditionalBlock::default();
        let at = mx.name_position(0, 12);
        block.push(at, (RType::A, 60, &[a]), (60, &[&sig_a]), false);
        block.push(at, (RType::AAAA, 60, &[aaaa]), (60, &[&sig_aaaa]), false);
        block.push(
            mx.name_position(1, 12),
            (RType::A, 60, &[a2]),
            (0, &[]),
            false,
        );
        let mut packed = Vec::new();
        block.pack(&mut packed);
        let block = AdditionalRef::new(&packed).unwrap();
        assert!(block.has_sigs());
        let mut buf = Vec::new();
        let mut w = Writer::new(&mut buf, limit);
        w.question(&apex, RType::MX, Class::IN);
        w.section(crate::writer::Section::Answer);
        let written = mx.write(&mut w, Owner::At(12), 12).unwrap();
        w.section(crate::writer::Section::Additional);
        let result = match signed {
            true => block.write_signed(&mut w, &written),
            false => block.write(&mut w, &written),
        };
        let len = w.finish(1, 0x8000, 1);
        buf.truncate(len);
        (Message::parse(&buf).unwrap(), result, len)
    }

    /// The additional section as "owner type" (an RRSIG's covered type
    /// after it).
    fn additional_types(m: &Message) -> Vec<String> {
        m.additional
            .iter()
            .map(|r| match r.rtype {
                RType::RRSIG => format!("{} RRSIG {}", r.name, RType(u16_at(&r.rdata, 0))),
                t => format!("{} {t}", r.name),
            })
            .collect()
    }

    #[test]
    fn with_do_each_address_rrset_is_followed_by_its_rrsigs() {
        let (m, result, _) = signed_mx(4096, true);
        assert_eq!(result, Ok(()));
        assert_eq!(
            additional_types(&m),
            [
                "mail.example.test. A",
                "mail.example.test. RRSIG A",
                "mail.example.test. AAAA",
                "mail.example.test. RRSIG AAAA",
                "bare.example.test. A",
            ]
        );
        // The RRSIG's RDATA is copied whole (its signer is not compressed).
        assert_eq!(m.additional[1].rdata, rrsig(RType::A));
        // Without DO the same block gives the addresses alone.
        let (m, result, _) = signed_mx(4096, false);
        assert_eq!(result, Ok(()));
        let plain = [
            "mail.example.test. A",
            "mail.example.test. AAAA",
            "bare.example.test. A",
        ];
        assert_eq!(additional_types(&m), plain);
    }

    #[test]
    fn an_address_rrset_and_its_rrsigs_fit_together_or_are_both_left_out() {
        let full = signed_mx(4096, true).2;
        assert_eq!(signed_mx(full, true).0.additional.len(), 5);
        // One octet short: the last group (the unsigned A) goes.
        assert_eq!(signed_mx(full - 1, true).0.additional.len(), 4);
        // Every limit down to none: a signed address RRset always right
        // before its RRSIG, never one without the other, never TC (none is
        // required); a smaller group after one left out may still fit.
        let mut seen = std::collections::BTreeSet::new();
        for limit in (12..full).rev() {
            let (m, result, _) = signed_mx(limit, true);
            assert_eq!(result, Ok(()), "at {limit}");
            let types = additional_types(&m);
            let mut k = 0;
            while k < types.len() {
                let t = &types[k];
                if t.starts_with("mail.") {
                    let (owner, rtype) = t.split_once(' ').unwrap();
                    assert_eq!(
                        types.get(k + 1),
                        Some(&format!("{owner} RRSIG {rtype}")),
                        "at {limit}: {types:?}"
                    );
                    k += 1;
                } else {
                    assert_eq!(t, "bare.example.test. A", "at {limit}: {types:?}");
                }
                k += 1;
            }
            seen.insert(types.len());
            if types.is_empty() {
                break; // below this the answer itself does not fit
            }
        }
        assert_eq!(seen, [0, 1, 2, 3, 4].into());
    }
    /// Writes `set`, owned by `owner`, after `padding` octets of records
    /// into a message for `qname` (apex example.test), the owner a pointer
    /// into the question when `qname` ends in it; parses it back.
    fn written_at(
        set: &EncodedRRset,
        qname: &str,
        owner: &str,
        padding: usize,
    ) -> (Message, usize) {
        let apex = wire("example.test");
        let (q, owner) = (wire(qname), wire(owner));
        let mut buf = Vec::new();
        let mut w = Writer::new(&mut buf, 65535);
        w.question(&q, RType::NS, Class::IN);
        let apex_pos = (12 + q.len() - apex.len()) as u16;
        // Records of 100 octets of RDATA and one of the rest: each takes
        // 12 octets more.
        let (pad, rest) = (vec![0u8; 100], vec![0u8; padding % 100]);
        let mut pads = vec![&pad[..]; padding / 100];
        if !rest.is_empty() {
            pads.push(&rest);
        }
        let before = EncodedRRset::new(RType::NULL, 0, &pads, at_apex(&apex));
        before.write(&mut w, Owner::At(12), apex_pos).unwrap();
        let at = w.len();
        let in_question = q.ends_with(&owner) && padding == 0;
        let written_owner = match in_question {
            true => Owner::At((12 + q.len() - owner.len()) as u16),
            false => Owner::BelowApex(&owner, apex.len()),
        };
        set.write(&mut w, written_owner, apex_pos).unwrap();
        let len = w.finish(1, 0x8400, 1);
        (Message::parse(&buf[..len]).unwrap(), len - at)
    }

    /// A huge RRset packs whole and leaves no buffer of its size behind
    /// on the thread; the next RRset packs as before.
    #[test]
    fn a_huge_rrset_leaves_no_large_buffer_behind() {
        let names = Names {
            apex: b"\x01t\x00",
            owner: b"\x01a\x01t\x00",
        };
        let rdatas: Vec<[u8; 4]> = (0..20_000u32).map(|i| i.to_be_bytes()).collect();
        let rdatas: Vec<&[u8]> = rdatas.iter().map(|r| &r[..]).collect();
        let mut out = Vec::new();
        pack_rrset(RType::A, 60, &rdatas, names, &mut out);
        assert_eq!(EncodedRef::new(&out).len(), 20_000);
        let kept = PACK_SCRATCH.with_borrow(|(bytes, _)| bytes.capacity());
        assert!(kept <= SCRATCH_KEPT, "{kept}");
        let mut small = Vec::new();
        pack_rrset(RType::A, 60, &rdatas[..2], names, &mut small);
        assert_eq!(EncodedRef::new(&small).len(), 2);
    }

    #[test]
    fn referral_targets_point_to_the_owner_and_to_earlier_targets() {
        let apex = wire("example.test");
        let owner = wire("sub.example.test");
        let targets = [
            wire("ns1.sub.example.test"),
            wire("ns2.SUB.example.test"),
            wire("ns.other.net"),
            wire("ns2.Other.NET"),
        ];
        let rdatas: Vec<&[u8]> = targets.iter().map(|t| &t[..]).collect();
        let names = Names {
            apex: &apex,
            owner: &owner,
        };
        let set = EncodedRRset::new(RType::NS, 300, &rdatas, names);
        let tails: Vec<Tail> = set.view().name_tails().map(|(_, t)| t).collect();
        assert_eq!(tails[..3], [Tail::Owner, Tail::Owner, Tail::Earlier(49)]);
        let (m, octets) = written_at(&set, "www.sub.example.test", "sub.example.test", 0);
        let text: Vec<String> = m.answers.iter().map(|r| r.to_string()).collect();
        assert_eq!(
            text,
            [
                "sub.example.test. 300 IN NS ns1.sub.example.test.",
                "sub.example.test. 300 IN NS ns2.sub.example.test.",
                "sub.example.test. 300 IN NS ns.other.net.",
                "sub.example.test. 300 IN NS ns2.other.net.",
            ]
        );
        // Owner pointer, then per record 10 octets and the RDATA:
        // ns1+pointer, ns2+pointer, ns.other.net, ns2+pointer; 3 owner
        // pointers.
        assert_eq!(octets, 2 + 4 * 10 + 6 + 6 + 14 + 6 + 3 * 2);
        // Read back as stored, each name whole (lower-cased where a
        // pointer stood).
        let back: Vec<Vec<u8>> = set.view().rdatas(names).map(|r| r.into_owned()).collect();
        let lower = |t: &Vec<u8>| t.to_ascii_lowercase();
        assert_eq!(
            back.iter().map(lower).collect::<Vec<_>>(),
            targets.iter().map(lower).collect::<Vec<_>>()
        );
    }

    #[test]
    fn names_round_trip_near_and_past_the_reach_of_pointers() {
        let apex = wire("example.test");
        let owner = wire("a.sub.example.test");
        let names = Names {
            apex: &apex,
            owner: &owner,
        };
        let soa = [
            wire("ns.other.net"),
            wire("hostmaster.ns.other.net"),
            vec![0; 20],
        ]
        .concat();
        let cases: [(RType, Vec<Vec<u8>>); 3] = [
            (
                RType::NS,
                [
                    "x.a.sub.example.test",
                    "ns.far.org",
                    "y.ns.far.org",
                    "ns.far.org",
                    "b.sub.example.test",
                ]
                .map(wire)
                .to_vec(),
            ),
            (
                RType::MX,
                ["mail.a.sub.example.test", "mx.far.org", "mx2.far.org"]
                    .map(|n| [vec![0, 10], wire(n)].concat())
                    .to_vec(),
            ),
            (RType::SOA, vec![soa]),
        ];
        for (rtype, rdatas) in &cases {
            let refs: Vec<&[u8]> = rdatas.iter().map(|r| &r[..]).collect();
            let set = EncodedRRset::new(*rtype, 300, &refs, names);
            let back: Vec<Vec<u8>> = set.view().rdatas(names).map(|r| r.into_owned()).collect();
            assert_eq!(&back, rdatas, "{rtype} read back");
            // In the question's reach, straddling 16 KiB at every offset,
            // and past it.
            let straddling = (14_400..14_700).step_by(3);
            for padding in [0, 100, 20_000].into_iter().chain(straddling) {
                let (m, _) =
                    written_at(&set, "q.a.sub.example.test", "a.sub.example.test", padding);
                let got: Vec<&Vec<u8>> = m
                    .answers
                    .iter()
                    .filter(|r| r.rtype == *rtype)
                    .map(|r| &r.rdata)
                    .collect();
                assert_eq!(
                    got,
                    rdatas.iter().collect::<Vec<_>>(),
                    "{rtype} after {padding}"
                );
            }
        }
    }

    #[test]
    fn an_rrset_of_more_names_than_are_remembered_reads_back_whole() {
        let apex = wire("example.test");
        let mut targets: Vec<Vec<u8>> = (0..40).map(|k| wire(&format!("ns.p{k}.net"))).collect();
        targets.extend((0..40).map(|k| wire(&format!("x.p{k}.net"))));
        let rdatas: Vec<&[u8]> = targets.iter().map(|t| &t[..]).collect();
        let set = EncodedRRset::new(RType::NS, 60, &rdatas, at_apex(&apex));
        let earlier = set
            .view()
            .name_tails()
            .filter(|(_, t)| matches!(t, Tail::Earlier(_)));
        // Every later name shares at least "net" with the first; past the
        // 16 names remembered, "x.pK.net" finds only that.
        assert_eq!(earlier.count(), 79);
        let back: Vec<Vec<u8>> = set
            .view()
            .rdatas(at_apex(&apex))
            .map(|r| r.into_owned())
            .collect();
        assert_eq!(back, targets);
        let (m, _) = written_at(&set, "example.test", "example.test", 0);
        let got: Vec<&Vec<u8>> = m.answers.iter().map(|r| &r.rdata).collect();
        assert_eq!(got, targets.iter().collect::<Vec<_>>());
    }

    /// A CNAME at `owner` to `target`, answered for `qname`: how its
    /// target is compressed; the target reads back whole either way.
    fn cname_tail(owner: &str, target: &str, qname: &str) -> Tail {
        let (apex, owner, target) = (wire("example.test"), wire(owner), wire(target));
        let names = Names {
            apex: &apex,
            owner: &owner,
        };
        let set = EncodedRRset::new(RType::CNAME, 60, &[&target], names);
        let m = respond(qname, "example.test", &set, Owner::At(12));
        assert_eq!(m.answers[0].rdata, target);
        let mut first = crate::name::NameBuf::new();
        set.view().first_name(names, &mut first);
        assert_eq!(first.as_wire(), &target[..]);
        set.view().name_tails().next().unwrap().1
    }

    #[test]
    fn a_name_below_the_owner_points_to_it_unless_a_wildcard_owns_it() {
        let below = cname_tail(
            "www.sub.example.test",
            "web.www.sub.example.test",
            "www.sub.example.test",
        );
        assert_eq!(below, Tail::Owner);
        // A wildcard's records are written under the query name.
        let wildcard = cname_tail(
            "*.w.example.test",
            "host.*.w.example.test",
            "foo.w.example.test",
        );
        assert_eq!(wildcard, Tail::Apex(0));
    }

    #[test]
    fn owners_past_the_reach_of_pointers_are_written_per_record() {
        let apex = wire("example.test");
        let (ns1, ns2) = (wire("ns1.example.test"), wire("ns.other.net"));
        let set = EncodedRRset::new(RType::NS, 300, &[&ns1, &ns2, &ns1], at_apex(&apex));
        let mut buf = Vec::new();
        let mut w = Writer::new(&mut buf, 65535);
        w.question(&apex, RType::AXFR, Class::IN);
        // 20 KB of padding records first.
        let pad = [0u8; 1000];
        let pad = EncodedRRset::new(RType::NULL, 0, &[&pad[..]; 20], at_apex(&apex));
        pad.write(&mut w, Owner::At(12), 12).unwrap();
        let owner = wire("a.B.example.test");
        let written = set
            .write(&mut w, Owner::BelowApex(&owner, apex.len()), 12)
            .unwrap();
        assert!(written.owner as usize > MAX_POINTER);
        let next = written.next_owner(Owner::BelowApex(&owner, apex.len()));
        assert!(
            matches!(next, Owner::BelowApex(..)),
            "no pointer past 16 KiB"
        );
        let len = w.finish(1, 0x8400, 1);
        let m = Message::parse(&buf[..len]).unwrap();
        let ns: Vec<String> = m.answers[20..].iter().map(|r| r.to_string()).collect();
        assert_eq!(
            ns,
            [
                "a.B.example.test. 300 IN NS ns1.example.test.",
                "a.B.example.test. 300 IN NS ns.other.net.",
                "a.B.example.test. 300 IN NS ns1.example.test.",
            ]
        );
    }

    /// The TTLs of what `set` wrote, capped at `cap`, with `padding`
    /// octets of records before it (past 16 KiB owners are names).
    fn ttls_capped(set: &EncodedRRset, cap: u32, padding: usize) -> Vec<String> {
        let apex = wire("example.test");
        let mut buf = Vec::new();
        let mut w = Writer::new(&mut buf, 65535);
        w.question(&apex, RType::SOA, Class::IN);
        let pad = vec![0u8; 1000];
        let pads = vec![&pad[..]; padding / 1000];
        let before = EncodedRRset::new(RType::NULL, 0, &pads, at_apex(&apex));
        before.write(&mut w, Owner::At(12), 12).unwrap();
        let owner = wire("a.B.example.test");
        set.view()
            .write_ttl_capped(&mut w, Owner::BelowApex(&owner, apex.len()), 12, cap)
            .unwrap();
        let len = w.finish(1, 0x8400, 1);
        let m = Message::parse(&buf[..len]).unwrap();
        (m.answers[pads.len()..].iter())
            .map(|r| r.to_string())
            .collect()
    }

    #[test]
    fn a_capped_ttl_is_written_on_every_record_near_and_far() {
        let apex = wire("example.test");
        let (ns1, ns2) = (wire("ns1.example.test"), wire("ns.other.net"));
        let set = EncodedRRset::new(RType::NS, 300, &[&ns1, &ns2, &ns1], at_apex(&apex));
        let want = |ttl: u32| {
            [
                format!("a.B.example.test. {ttl} IN NS ns1.example.test."),
                format!("a.B.example.test. {ttl} IN NS ns.other.net."),
                format!("a.B.example.test. {ttl} IN NS ns1.example.test."),
            ]
        };
        for padding in [0, 20_000] {
            assert_eq!(ttls_capped(&set, 60, padding), want(60), "{padding}");
            assert_eq!(ttls_capped(&set, 300, padding), want(300), "{padding}");
            assert_eq!(ttls_capped(&set, 9000, padding), want(300), "{padding}");
        }
    }

    #[test]
    fn an_rrset_that_does_not_fit_is_not_written() {
        let apex = wire("example.test");
        let big = vec![200u8; 201];
        let set = EncodedRRset::new(RType::TXT, 60, &[&big, &big, &big], at_apex(&apex));
        let mut buf = Vec::new();
        let mut w = Writer::new(&mut buf, 512);
        w.question(&apex, RType::TXT, Class::IN);
        let before = w.len();
        assert_eq!(set.write(&mut w, Owner::At(12), 12), Err(Full));
        assert_eq!(w.len(), before);
    }
}
