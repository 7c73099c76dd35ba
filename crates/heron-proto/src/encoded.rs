//! RRsets encoded once, at zone load, in the form they take in a response.
//!
//! Every name a zone serves ends in the zone's apex, and every query the
//! zone answers has a question name that ends in the apex too, so the apex
//! always sits in the question, at `12 + qname length - apex length`. An
//! [`EncodedRRset`] holds its records with each RDATA name that may be
//! compressed already compressed against the apex (or a suffix of it), the
//! pointers left to patch. Answering is then a copy of the records, an
//! owner per record, and a few two-byte patches: no compression search.
//!
//! Owner names are written per response ([`Owner`]), because the same RRset
//! is owned by the query name (a pointer to offset 12), a wildcard's
//! expansion, or a name elsewhere in the message.

use crate::rdata;
use crate::types::{Class, RType};
use crate::writer::{Full, Writer};

/// A pointer to patch: at `at` (offset in the record bytes), point to the
/// apex position plus `delta` (the start of a suffix of the apex).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Patch {
    pub at: u16,
    pub delta: u8,
}

/// Records of one RRset, ready to copy into a response after the first
/// record's owner.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EncodedRRset {
    /// Each record as TYPE CLASS TTL RDLENGTH RDATA, back to back; every
    /// record after the first is preceded by a two-octet owner pointer to
    /// patch (to the first record's owner), so the whole RRset is one copy.
    bytes: Box<[u8]>,
    /// Where each record's TYPE field is in `bytes`.
    starts: Box<[u16]>,
    /// Pointers to the apex inside `bytes`, in increasing order of `at`.
    patches: Box<[Patch]>,
}

/// Where [`EncodedRRset::write`] put things, for later names to point to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// The owner of the records.
    pub owner: u16,
    /// The first record's RDATA (e.g. a CNAME's target).
    pub first_rdata: usize,
    /// The first record's TYPE field; record `k`'s is `starts[k]` later.
    pub first_bytes: usize,
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

impl EncodedRRset {
    /// Encodes records of one type and TTL for a zone whose apex is `apex`
    /// (lower-cased wire form). RDATA is uncompressed wire form.
    pub fn new(rtype: RType, ttl: u32, rdatas: &[&[u8]], apex: &[u8]) -> EncodedRRset {
        let mut bytes = Vec::new();
        let mut starts = Vec::with_capacity(rdatas.len());
        let mut patches = Vec::new();
        for (k, rd) in rdatas.iter().enumerate() {
            if k > 0 {
                bytes.extend_from_slice(&[0xC0, 0]); // owner, patched
            }
            starts.push(bytes.len() as u16);
            bytes.extend_from_slice(&rtype.0.to_be_bytes());
            bytes.extend_from_slice(&Class::IN.0.to_be_bytes());
            bytes.extend_from_slice(&ttl.to_be_bytes());
            let len_at = bytes.len();
            bytes.extend_from_slice(&[0, 0]);
            encode_rdata(rtype, rd, apex, &mut bytes, &mut patches);
            let rdlen = (bytes.len() - len_at - 2) as u16;
            bytes[len_at..len_at + 2].copy_from_slice(&rdlen.to_be_bytes());
        }
        EncodedRRset {
            bytes: bytes.into(),
            starts: starts.into(),
            patches: patches.into(),
        }
    }

    pub fn len(&self) -> usize {
        self.starts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
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

    fn write_records(&self, w: &mut Writer, owner: Owner, apex_pos: u16) -> Result<Written, Full> {
        if self.starts.is_empty() {
            return Ok(Written::default());
        }
        let owner_at = write_owner(w, owner, apex_pos)?;
        let base = w.len();
        w.raw_bytes(&self.bytes)?;
        for &start in &self.starts[1..] {
            w.patch_pointer(base + start as usize - 2, owner_at);
        }
        for p in self.patches.iter() {
            w.patch_pointer(base + p.at as usize, apex_pos + p.delta as u16);
        }
        w.count_records(self.starts.len() as u16);
        Ok(Written {
            owner: owner_at,
            first_rdata: base + 10,
            first_bytes: base,
        })
    }

    /// Where a name at byte `offset` of record `k` lands relative to the
    /// first record's TYPE field when the RRset is written (10 is the start
    /// of RDATA).
    pub fn name_position(&self, k: usize, offset: usize) -> usize {
        self.position_in(&Written::default(), k, offset)
    }

    /// Where byte `offset` of record `k` landed, given where the RRset was
    /// written.
    fn position_in(&self, written: &Written, k: usize, offset: usize) -> usize {
        written.first_bytes + self.starts[k] as usize + offset
    }
}

/// The additional-section records that go with an NS, MX or SRV RRset: the
/// addresses of its targets, encoded once with each owner a pointer to the
/// target's name inside the RRset as written. NSD and Knot precompute glue
/// the same way; doing it per query was most of a referral's cost.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AdditionalBlock {
    /// Records with their owner pointers (placeholders), back to back.
    bytes: Box<[u8]>,
    /// One group per target RRset (A or AAAA), in order.
    groups: Box<[Group]>,
    /// Owner pointers to patch: (offset in `bytes`, where the target name
    /// is relative to the parent RRset's first record as written).
    owners: Box<[(u16, u16)]>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Group {
    end: u16,
    records: u16,
    /// Glue the response cannot do without (RFC 9471): if it does not
    /// fit, the response is truncated.
    required: bool,
}

impl AdditionalBlock {
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Adds an RRset (A or AAAA, no names in RDATA) owned by the target name
    /// at `target` in the parent RRset as written (see
    /// [`EncodedRRset::name_position`]).
    pub fn push(
        &mut self,
        target: usize,
        rtype: RType,
        ttl: u32,
        rdatas: &[&[u8]],
        required: bool,
    ) {
        let mut bytes = std::mem::take(&mut self.bytes).into_vec();
        let mut owners = std::mem::take(&mut self.owners).into_vec();
        for rd in rdatas {
            owners.push((bytes.len() as u16, target as u16));
            bytes.extend_from_slice(&[0xC0, 0]);
            bytes.extend_from_slice(&rtype.0.to_be_bytes());
            bytes.extend_from_slice(&Class::IN.0.to_be_bytes());
            bytes.extend_from_slice(&ttl.to_be_bytes());
            bytes.extend_from_slice(&(rd.len() as u16).to_be_bytes());
            bytes.extend_from_slice(rd);
        }
        let mut groups = std::mem::take(&mut self.groups).into_vec();
        groups.push(Group {
            end: bytes.len() as u16,
            records: rdatas.len() as u16,
            required,
        });
        *self = AdditionalBlock {
            bytes: bytes.into(),
            groups: groups.into(),
            owners: owners.into(),
        };
    }

    /// Writes as many whole groups as fit into the current section. Err if
    /// a required group did not fit (the caller sets TC).
    pub fn write(&self, w: &mut Writer, at: &Written) -> Result<(), Full> {
        if w.raw_bytes(&self.bytes).is_ok() {
            // All of it fits (the usual case): one copy, then the owners.
            let base = w.len() - self.bytes.len();
            for &(off, target) in self.owners.iter() {
                w.patch_pointer(
                    base + off as usize,
                    (at.first_bytes + target as usize) as u16,
                );
            }
            let records = self.groups.iter().map(|g| g.records).sum();
            w.count_records(records);
            return Ok(());
        }
        let mut start = 0;
        let mut owners = self.owners.iter().peekable();
        for group in self.groups.iter() {
            let end = group.end as usize;
            let base = w.len();
            if w.raw_bytes(&self.bytes[start..end]).is_err() {
                return if group.required { Err(Full) } else { Ok(()) };
            }
            while let Some(&(off, target)) = owners.next_if(|o| (o.0 as usize) < end) {
                let target = at.first_bytes + target as usize;
                w.patch_pointer(base + (off as usize - start), target as u16);
            }
            w.count_records(group.records);
            start = end;
        }
        Ok(())
    }

    /// Whether every owner pointer can reach its target when the parent
    /// was written at `at` (pointers reach only the first 16 KiB).
    pub fn reachable(&self, parent: &EncodedRRset, at: &Written) -> bool {
        let last = parent.starts.len().saturating_sub(1);
        parent.position_in(at, last, u8::MAX as usize) <= 0x3FFF
    }
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

/// Appends RDATA, compressing the names that may be compressed against the
/// apex and recording the pointers to patch.
fn encode_rdata(rtype: RType, rd: &[u8], apex: &[u8], out: &mut Vec<u8>, patches: &mut Vec<Patch>) {
    if !rtype.rdata_names_compressible() {
        out.extend_from_slice(rd);
        return;
    }
    let (offsets, n) = rdata::compressible_name_offsets(rtype, rd);
    let mut done = 0;
    for &off in &offsets[..n] {
        let Some(len) = crate::name::uncompressed_len(&rd[off..], 0).ok() else {
            break;
        };
        out.extend_from_slice(&rd[done..off]);
        encode_name(&rd[off..off + len], apex, out, patches);
        done = off + len;
    }
    out.extend_from_slice(&rd[done..]);
}

/// Writes a name as its labels up to the longest suffix it shares with the
/// apex, then a pointer (patched per response) to that suffix.
fn encode_name(name: &[u8], apex: &[u8], out: &mut Vec<u8>, patches: &mut Vec<Patch>) {
    let Some((name_at, apex_at)) = shared_suffix(name, apex) else {
        out.extend_from_slice(name);
        return;
    };
    out.extend_from_slice(&name[..name_at]);
    patches.push(Patch {
        at: out.len() as u16,
        delta: apex_at as u8,
    });
    out.extend_from_slice(&[0xC0, 0]);
}

/// The longest non-root label-aligned suffix shared by `name` and `apex`
/// (ASCII case ignored): where it starts in each.
fn shared_suffix(name: &[u8], apex: &[u8]) -> Option<(usize, usize)> {
    let mut found = None;
    let name_offsets = label_starts(name);
    let apex_offsets = label_starts(apex);
    // Walk both from the root label upwards while the labels agree.
    for (&n, &a) in name_offsets.iter().rev().zip(apex_offsets.iter().rev()) {
        if name[n..].eq_ignore_ascii_case(&apex[a..]) {
            found = Some((n, a));
        } else {
            break;
        }
    }
    found
}

/// Offsets of the labels of an uncompressed name, root excluded.
fn label_starts(name: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < name.len() && name[i] != 0 {
        out.push(i);
        i += 1 + name[i] as usize;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;
    use crate::name::Name;

    fn wire(s: &str) -> Vec<u8> {
        Name::parse(s).unwrap().as_wire().to_vec()
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
        let set = EncodedRRset::new(RType::NS, 300, &[&ns1, &ext], &apex);
        assert_eq!(set.patches.len(), 1, "only the in-zone name is compressed");
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
        let set = EncodedRRset::new(RType::SOA, 60, &[&soa], &apex);
        assert_eq!(set.patches.len(), 2);
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
        let set = EncodedRRset::new(RType::MX, 60, &[&mx], &apex);
        assert_eq!(set.patches[0].delta, 8, "points at 'test' inside the apex");
        let m = respond("example.test", "example.test", &set, Owner::At(12));
        assert_eq!(m.answers[0].rdata, mx);
    }

    #[test]
    fn uncompressible_types_are_copied() {
        let apex = wire("example.test");
        let srv = [vec![0, 1, 0, 2, 0, 3], wire("sip.example.test")].concat();
        let set = EncodedRRset::new(RType::SRV, 60, &[&srv], &apex);
        assert!(set.patches.is_empty());
        let m = respond("_sip.example.test", "example.test", &set, Owner::At(12));
        assert_eq!(m.answers[0].rdata, srv);
    }

    /// An NS RRset for `cut` with two in-zone targets, and a block holding
    /// an A record for each (the first required, the second not).
    fn referral_parts() -> (EncodedRRset, AdditionalBlock) {
        let apex = wire("example.test");
        let (ns1, ns2) = (wire("ns1.sub.example.test"), wire("ns2.example.test"));
        let ns = EncodedRRset::new(RType::NS, 300, &[&ns1, &ns2], &apex);
        let mut block = AdditionalBlock::default();
        block.push(
            ns.name_position(0, 10),
            RType::A,
            60,
            &[&[192, 0, 2, 1]],
            true,
        );
        block.push(
            ns.name_position(1, 10),
            RType::A,
            60,
            &[&[192, 0, 2, 2]],
            false,
        );
        (ns, block)
    }

    /// Writes the referral for `qname` within `limit` octets.
    fn referral(limit: usize) -> (Vec<u8>, Result<(), Full>) {
        let (ns, block) = referral_parts();
        let mut buf = Vec::new();
        let mut w = Writer::new(&mut buf, limit);
        let q = wire("www.sub.example.test");
        w.question(&q, RType::A, Class::IN);
        let apex_pos = (12 + q.len() - wire("example.test").len()) as u16;
        w.section(crate::writer::Section::Authority);
        let cut_pos = (12 + q.len() - wire("sub.example.test").len()) as u16;
        let written = ns.write(&mut w, Owner::At(cut_pos), apex_pos).unwrap();
        assert!(block.reachable(&ns, &written));
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

    #[test]
    fn an_rrset_that_does_not_fit_is_not_written() {
        let apex = wire("example.test");
        let big = vec![200u8; 201];
        let set = EncodedRRset::new(RType::TXT, 60, &[&big, &big, &big], &apex);
        let mut buf = Vec::new();
        let mut w = Writer::new(&mut buf, 512);
        w.question(&apex, RType::TXT, Class::IN);
        let before = w.len();
        assert_eq!(set.write(&mut w, Owner::At(12), 12), Err(Full));
        assert_eq!(w.len(), before);
    }
}
