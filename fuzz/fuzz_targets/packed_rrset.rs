//! Any bytes as an RRset of names (NS, MX, SOA, CNAME or PTR) owned by a
//! name in the zone ex.test, packed as a zone stores it
//! (`heron_proto::encoded`): names in RDATA point to the apex, the owner
//! (not a wildcard's) or names earlier in the RRset. Read back, each
//! record's RDATA is the original; written into a response after any
//! number of octets (in the pointers' reach, across 16 KiB and past it),
//! the response parses and carries the original RDATA; a CNAME's target
//! reads back without allocating the same.
#![no_main]

use heron_proto::encoded::{EncodedRRset, Names, Owner};
use heron_proto::message::Message;
use heron_proto::name::NameBuf;
use heron_proto::types::{Class, RType};
use heron_proto::writer::Writer;
use libfuzzer_sys::fuzz_target;

const APEX: &[u8] = b"\x02ex\x04test\x00";
const TYPES: [RType; 5] = [RType::NS, RType::MX, RType::SOA, RType::CNAME, RType::PTR];

fuzz_target!(|data: &[u8]| {
    let [choice, pad, rest @ ..] = data else {
        return;
    };
    let rtype = TYPES[*choice as usize % TYPES.len()];
    let mut input = Input(rest);
    let owner = input.owner();
    let mut rdatas = Vec::new();
    while !input.0.is_empty() && rdatas.len() < 40 {
        rdatas.push(input.rdata(rtype, &owner));
        if rtype == RType::CNAME {
            break;
        }
    }
    if rdatas.is_empty() {
        return;
    }
    let refs: Vec<&[u8]> = rdatas.iter().map(|r| &r[..]).collect();
    let names = Names {
        apex: APEX,
        owner: &owner,
    };
    let set = EncodedRRset::new(rtype, 300, &refs, names);
    let back: Vec<Vec<u8>> = set.view().rdatas(names).map(|r| r.into_owned()).collect();
    assert_eq!(back, rdatas, "read back as stored");
    if rtype == RType::CNAME {
        let mut target = NameBuf::new();
        set.view().first_name(names, &mut target);
        assert_eq!(target.as_wire(), &rdatas[0][..]);
    }
    let padding = *pad as usize * 90;
    assert_eq!(
        written(&set, rtype, &owner, padding),
        rdatas,
        "after {padding} octets"
    );
});

/// The RDATA of `rtype`'s records in a response to a query for a name at
/// or below `owner`, `set` written after `padding` octets of records.
fn written(set: &EncodedRRset, rtype: RType, owner: &[u8], padding: usize) -> Vec<Vec<u8>> {
    // A wildcard's records are written under the query name.
    let wildcard = owner.starts_with(b"\x01*");
    let qname = match wildcard {
        true => [b"\x01q", &owner[2..]].concat(),
        false => [b"\x01q", owner].concat(),
    };
    let apex_pos = (12 + qname.len() - APEX.len()) as u16;
    let mut buf = Vec::new();
    let mut w = Writer::new(&mut buf, 65535);
    w.question(&qname, rtype, Class::IN);
    // Records of 100 octets of RDATA and one of the rest (each 12 more):
    // the RRset starts at any offset.
    let (pad, rest) = (vec![0u8; 100], vec![0u8; padding % 112]);
    let mut pads = vec![&pad[..]; padding / 112];
    pads.push(&rest);
    let names = Names {
        apex: APEX,
        owner: APEX,
    };
    let before = EncodedRRset::new(RType::NULL, 0, &pads, names);
    before.write(&mut w, Owner::At(12), apex_pos).unwrap();
    let at = if wildcard {
        Owner::At(12)
    } else if padding > 0 {
        Owner::BelowApex(owner, APEX.len())
    } else {
        Owner::At(12 + 2) // the owner after the question's first label
    };
    set.write(&mut w, at, apex_pos).unwrap();
    let len = w.finish(1, 0x8400, 1);
    let m = Message::parse(&buf[..len]).expect("the response parses");
    m.answers
        .iter()
        .filter(|r| r.rtype == rtype)
        .map(|r| r.rdata.clone())
        .collect()
}

/// Bytes read as names that often share suffixes: short labels of a
/// small lower-case alphabet, then the apex, the owner or a name outside
/// the zone.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let Some((&b, rest)) = self.0.split_first() else {
            return 0;
        };
        self.0 = rest;
        b
    }

    /// Up to three labels of one to four letters of "abcd".
    fn labels(&mut self, out: &mut Vec<u8>) {
        let count = self.byte() % 4;
        for _ in 0..count {
            let b = self.byte();
            let len = 1 + (b & 3) as usize;
            out.push(len as u8);
            out.extend((0..len).map(|i| b'a' + ((b >> (2 + i)) & 3)));
        }
    }

    /// A name in the zone: labels over the apex, maybe a wildcard.
    fn owner(&mut self) -> Vec<u8> {
        let mut owner = Vec::new();
        if self.byte() & 7 == 0 {
            owner.extend_from_slice(b"\x01*");
        }
        self.labels(&mut owner);
        owner.extend_from_slice(APEX);
        owner
    }

    fn name(&mut self, owner: &[u8]) -> Vec<u8> {
        let mut name = Vec::new();
        self.labels(&mut name);
        let tail: &[u8] = match self.byte() % 4 {
            0 => APEX,
            1 => owner,
            2 => b"\x05other\x03net\x00",
            _ => b"\x00",
        };
        name.extend_from_slice(tail);
        name
    }

    fn rdata(&mut self, rtype: RType, owner: &[u8]) -> Vec<u8> {
        match rtype {
            RType::MX => [vec![0, self.byte()], self.name(owner)].concat(),
            RType::SOA => [self.name(owner), self.name(owner), vec![0; 20]].concat(),
            _ => self.name(owner),
        }
    }
}
