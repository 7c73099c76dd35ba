//! The queries `heron compare` asks both servers: every owner name × every
//! type it holds, and generated ones for the answers that come from no
//! record (NXDOMAIN, NODATA, wildcard matches, names below delegations),
//! and the same questions with the DO bit, without EDNS, with other EDNS
//! sizes and over TCP. The generated and varied probes are made for at
//! most `sample` names of each zone (its apex always), so a zone of a
//! million names costs about a million queries, not eight million.

use std::fmt;

use heron_proto::message::{HEADER_LEN, Header};
use heron_proto::{Class, Name, RType};
use heron_zone::Zone;
use heron_zone::zone::Node;

/// How a probe is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Variant {
    /// UDP, EDNS with a 1232-octet payload, DO clear: every owner and type.
    Udp1232,
    /// UDP, EDNS 1232, DO set.
    Dnssec,
    /// UDP without EDNS (512 octets).
    NoEdns,
    /// UDP, EDNS 512.
    Edns512,
    /// UDP, EDNS 4096.
    Edns4096,
    /// TCP, EDNS 1232.
    Tcp,
}

impl Variant {
    /// The variants sent for a sampled name besides [`Variant::Udp1232`].
    pub const EXTRA: [Variant; 5] = [
        Variant::Dnssec,
        Variant::NoEdns,
        Variant::Edns512,
        Variant::Edns4096,
        Variant::Tcp,
    ];

    pub fn is_tcp(self) -> bool {
        self == Variant::Tcp
    }

    /// (payload size, DO) of the OPT record, or None for no EDNS.
    fn edns(self) -> Option<(u16, bool)> {
        match self {
            Variant::Udp1232 | Variant::Tcp => Some((1232, false)),
            Variant::Dnssec => Some((1232, true)),
            Variant::NoEdns => None,
            Variant::Edns512 => Some((512, false)),
            Variant::Edns4096 => Some((4096, false)),
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Variant::Udp1232 => "udp edns=1232",
            Variant::Dnssec => "udp edns=1232 +do",
            Variant::NoEdns => "udp no-edns",
            Variant::Edns512 => "udp edns=512",
            Variant::Edns4096 => "udp edns=4096",
            Variant::Tcp => "tcp edns=1232",
        })
    }
}

/// Why a probe is in the list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A type an owner holds.
    Existing,
    /// An empty non-terminal (NODATA).
    EmptyNonTerminal,
    /// A type absent at an owner (NODATA).
    Nodata,
    /// A name that does not exist (NXDOMAIN, or a wildcard's answer).
    Nxdomain,
    /// A name a wildcard answers for.
    Wildcard,
    /// A name below a delegation (a referral with glue), or DS at the cut.
    Delegation,
    /// An owner and type only the old server's copy holds (its AXFR).
    OldOnly,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Existing => "existing",
            Kind::EmptyNonTerminal => "empty non-terminal",
            Kind::Nodata => "nodata",
            Kind::Nxdomain => "nxdomain",
            Kind::Wildcard => "wildcard",
            Kind::Delegation => "delegation",
            Kind::OldOnly => "only the old server's",
        })
    }
}

/// One question to ask both servers.
#[derive(Clone, Debug)]
pub struct Probe {
    pub qname: Name,
    pub qtype: RType,
    pub variant: Variant,
    pub kind: Kind,
}

impl Probe {
    /// The query in wire form with message ID `id`.
    pub fn query(&self, id: u16) -> Vec<u8> {
        let edns = self.variant.edns();
        let header = Header {
            id,
            flags: 0,
            qdcount: 1,
            ancount: 0,
            nscount: 0,
            arcount: edns.is_some() as u16,
        };
        let mut out = vec![0u8; HEADER_LEN];
        header.write(&mut out);
        out.extend_from_slice(self.qname.as_wire());
        out.extend_from_slice(&self.qtype.0.to_be_bytes());
        out.extend_from_slice(&Class::IN.0.to_be_bytes());
        if let Some((size, do_bit)) = edns {
            let ttl: u32 = if do_bit { 0x8000 } else { 0 };
            out.push(0);
            out.extend_from_slice(&RType::OPT.0.to_be_bytes());
            out.extend_from_slice(&size.to_be_bytes());
            out.extend_from_slice(&ttl.to_be_bytes());
            out.extend_from_slice(&0u16.to_be_bytes());
        }
        out
    }
}

impl fmt::Display for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} ({}, {})",
            self.qname, self.qtype, self.variant, self.kind
        )
    }
}

/// A small deterministic generator (splitmix64): the same seed asks the
/// same made-up names, so a run can be repeated.
pub struct Random(u64);

impl Random {
    pub fn new(seed: u64) -> Random {
        Random(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A label no zone is likely to hold.
    fn label(&mut self) -> Vec<u8> {
        format!("hc-{:012x}", self.next() & 0xFFFF_FFFF_FFFF).into_bytes()
    }
}

/// Types tried, in order, for the NODATA probe of a name (the first one
/// the name lacks).
const NODATA_TYPES: [RType; 5] = [RType::TXT, RType::A, RType::AAAA, RType::MX, RType::SRV];

/// Every probe for `zone`.
pub fn for_zone(zone: &Zone, sample: usize, random: &mut Random, out: &mut Vec<Probe>) {
    let nodes = zone.node_count().max(1);
    let stride = nodes.div_ceil(sample.max(1));
    for (i, node) in zone.nodes().enumerate() {
        let sampled = i % stride == 0; // the apex comes first: always
        for_node(zone, &node, sampled, random, out);
    }
}

fn for_node(zone: &Zone, node: &Node, sampled: bool, random: &mut Random, out: &mut Vec<Probe>) {
    let owner = node.owner();
    let types: Vec<RType> = node.data().map(|set| set.rtype).collect();
    // An NSEC3 owner is a hash, outside the zone's names (RFC 5155 7.2.8);
    // nobody asks for it.
    if !types.is_empty() && types.iter().all(|&t| t == RType::NSEC3) {
        return;
    }
    let mut push = |qname: &Name, qtype, variant, kind| {
        out.push(Probe {
            qname: qname.clone(),
            qtype,
            variant,
            kind,
        })
    };
    let first = types.first().copied().unwrap_or(RType::A);
    if types.is_empty() {
        push(&owner, RType::A, Variant::Udp1232, Kind::EmptyNonTerminal);
    }
    for &qtype in &types {
        push(&owner, qtype, Variant::Udp1232, Kind::Existing);
        if sampled {
            for variant in Variant::EXTRA {
                push(&owner, qtype, variant, Kind::Existing);
            }
        }
    }
    if !sampled {
        return;
    }
    let absent = NODATA_TYPES.into_iter().find(|t| !types.contains(t));
    let names_data = !node.has_cname() && !owner.is_wildcard();
    if let (Some(absent), true, false) = (absent, names_data, node.is_cut()) {
        push(&owner, absent, Variant::Udp1232, Kind::Nodata);
        push(&owner, absent, Variant::Dnssec, Kind::Nodata);
    }
    let Ok(below) = owner.prepend(&random.label()) else {
        return;
    };
    if node.is_cut() {
        push(&owner, RType::DS, Variant::Udp1232, Kind::Delegation);
        push(&owner, RType::DS, Variant::Dnssec, Kind::Delegation);
        push(&below, RType::A, Variant::Udp1232, Kind::Delegation);
        push(&below, RType::A, Variant::Dnssec, Kind::Delegation);
        push(&below, RType::A, Variant::Tcp, Kind::Delegation);
    } else if owner.is_wildcard() {
        let Some(Ok(matched)) = owner.parent().map(|p| p.prepend(&random.label())) else {
            return;
        };
        for variant in [Variant::Udp1232, Variant::Dnssec] {
            for &qtype in &types {
                push(&matched, qtype, variant, Kind::Wildcard);
            }
            if let Some(absent) = absent {
                push(&matched, absent, variant, Kind::Wildcard);
            }
        }
        if let Ok(deeper) = matched.prepend(&random.label()) {
            push(&deeper, first, Variant::Udp1232, Kind::Wildcard);
        }
    } else if owner.is_subdomain_of(zone.origin()) {
        push(&below, RType::A, Variant::Udp1232, Kind::Nxdomain);
        push(&below, RType::A, Variant::Dnssec, Kind::Nxdomain);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_zone::load_zone_str;

    const ZONE: &str = "$ORIGIN p.test.\n$TTL 300\n\
        @ SOA ns hostmaster 1 3600 600 86400 60\n@ NS ns\nns A 192.0.2.1\n\
        www A 192.0.2.2\nwww AAAA 2001:db8::2\na.b.c TXT \"deep\"\n\
        *.wild TXT \"any\"\nsub NS ns.sub\nns.sub A 192.0.2.3\nalias CNAME www\n";

    fn probes(sample: usize) -> Vec<Probe> {
        let origin = Name::parse("p.test").unwrap();
        let zone = load_zone_str(ZONE, "p.test", &origin).unwrap().zone;
        let mut out = Vec::new();
        for_zone(&zone, sample, &mut Random::new(7), &mut out);
        out
    }

    fn has(probes: &[Probe], name: &str, qtype: RType, variant: Variant, kind: Kind) -> bool {
        let name = Name::parse(name).unwrap();
        probes
            .iter()
            .any(|p| p.qname == name && p.qtype == qtype && p.variant == variant && p.kind == kind)
    }

    #[test]
    fn every_owner_and_type_is_asked() {
        let all = probes(1000);
        for (name, qtype) in [
            ("p.test", RType::SOA),
            ("p.test", RType::NS),
            ("www.p.test", RType::A),
            ("www.p.test", RType::AAAA),
            ("a.b.c.p.test", RType::TXT),
            ("*.wild.p.test", RType::TXT),
            ("alias.p.test", RType::CNAME),
            ("sub.p.test", RType::NS),
        ] {
            assert!(
                has(&all, name, qtype, Variant::Udp1232, Kind::Existing),
                "{name} {qtype}"
            );
            assert!(
                has(&all, name, qtype, Variant::Tcp, Kind::Existing),
                "{name} {qtype}"
            );
        }
        assert!(has(
            &all,
            "b.c.p.test",
            RType::A,
            Variant::Udp1232,
            Kind::EmptyNonTerminal
        ));
    }

    #[test]
    fn generated_probes_cover_negative_wildcard_and_delegation_answers() {
        let all = probes(1000);
        assert!(has(
            &all,
            "www.p.test",
            RType::TXT,
            Variant::Udp1232,
            Kind::Nodata
        ));
        assert!(has(
            &all,
            "sub.p.test",
            RType::DS,
            Variant::Dnssec,
            Kind::Delegation
        ));
        let below_cut = all.iter().any(|p| {
            p.kind == Kind::Delegation && p.qname.label_count() == 4 && p.qtype == RType::A
        });
        assert!(below_cut);
        let nx = all.iter().filter(|p| p.kind == Kind::Nxdomain).count();
        assert!(nx >= 2, "{nx}");
        let wild = Name::parse("wild.p.test").unwrap();
        assert!(all.iter().any(|p| p.kind == Kind::Wildcard
            && p.qname.parent() == Some(wild.clone())
            && p.qtype == RType::TXT));
        // No NODATA for a CNAME owner or a cut: those answer otherwise.
        assert!(!all.iter().any(|p| p.kind == Kind::Nodata
            && (p.qname == Name::parse("alias.p.test").unwrap()
                || p.qname == Name::parse("sub.p.test").unwrap())));
    }

    #[test]
    fn the_sample_bounds_the_extra_probes_but_not_the_owners() {
        let all = probes(1);
        let owners = all
            .iter()
            .filter(|p| p.variant == Variant::Udp1232 && p.kind == Kind::Existing);
        assert_eq!(owners.count(), 10);
        // Only the apex is sampled: its two types in five extra variants,
        // its NODATA (two) and its NXDOMAIN (two).
        assert_eq!(all.iter().filter(|p| p.variant == Variant::Tcp).count(), 2);
        assert!(
            all.iter()
                .filter(|p| p.variant != Variant::Udp1232)
                .all(|p| p.qname == Name::parse("p.test").unwrap() || p.kind == Kind::Nxdomain)
        );
    }

    #[test]
    fn queries_carry_the_variant() {
        let p = Probe {
            qname: Name::parse("x.test").unwrap(),
            qtype: RType::A,
            variant: Variant::Dnssec,
            kind: Kind::Existing,
        };
        let q = heron_proto::message::parse_query(&p.query(77)).unwrap();
        assert_eq!(q.header.id, 77);
        let edns = q.edns.unwrap();
        assert!(edns.do_bit);
        assert_eq!(edns.udp_size, 1232);
        let plain = Probe {
            variant: Variant::NoEdns,
            ..p
        };
        assert!(
            heron_proto::message::parse_query(&plain.query(1))
                .unwrap()
                .edns
                .is_none()
        );
    }
}
