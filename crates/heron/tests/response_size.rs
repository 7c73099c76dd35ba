//! Responses the size of NSD's: the same zones served by Heron and NSD,
//! referrals and answers whose RDATA names share suffixes with the owner,
//! with the apex and with each other, asked over UDP without EDNS (the
//! 512-octet limit, where a longer referral loses glue first) and with
//! EDNS. The answers must match (normalised) and be as long: names in
//! RDATA are compressed against the owner and earlier names as NSD
//! compresses them, not against the apex alone.

use std::path::PathBuf;

use heron_proto::{Name, RType};
use heron_testkit::{
    EdnsOpts, QueryOpts, ServerProcess, build_query, diff, normalize, try_query_udp,
};

/// A TLD-like zone: delegations with in-bailiwick name servers, out of
/// zone ones sharing a suffix, thirteen of one provider, a sibling's.
const TLD: &str = "\
$ORIGIN tld.test.
$TTL 3600
@ SOA ns.registry.example. hostmaster.registry.example. 1 7200 3600 1209600 300
@ NS ns1.registry.example.
@ NS ns2.registry.example.
inbail NS ns1.inbail
inbail NS ns2.inbail
inbail NS ns3.inbail
ns1.inbail A 192.0.2.1
ns2.inbail A 192.0.2.2
ns3.inbail AAAA 2001:db8::3
hosted NS ns1.provider.example.
hosted NS ns2.provider.example.
hosted NS ns3.provider.example.
sibling NS ns.inbail
sibling NS ns.sibling
ns.sibling A 192.0.2.9
ns.inbail A 192.0.2.10
many NS a.many-servers.example.
many NS b.many-servers.example.
many NS c.many-servers.example.
many NS d.many-servers.example.
many NS e.many-servers.example.
many NS f.many-servers.example.
many NS g.many-servers.example.
many NS h.many-servers.example.
many NS i.many-servers.example.
many NS j.many-servers.example.
many NS k.many-servers.example.
many NS l.many-servers.example.
many NS m.many-servers.example.
mail MX 10 mx1.mail
mail MX 20 mx2.mail
mail MX 30 mx.elsewhere.example.
mx1.mail A 192.0.2.21
mx2.mail A 192.0.2.22
www.deep CNAME web.www.deep
web.www.deep A 192.0.2.30
";

/// A root-like zone: TLDs whose servers are named under themselves.
const ROOT: &str = "\
$TTL 86400
. SOA a.root-servers.net. nstld.verisign-grs.com. 1 1800 900 604800 86400
. 518400 NS a.root-servers.net.
. 518400 NS b.root-servers.net.
a.root-servers.net. A 198.41.0.4
b.root-servers.net. A 199.9.14.201
com. 172800 NS ns1.nic.com.
com. 172800 NS ns2.nic.com.
com. 172800 NS ns3.nic.com.
com. 172800 NS ns4.nic.com.
ns1.nic.com. A 198.18.0.1
ns2.nic.com. A 198.18.0.2
ns3.nic.com. A 198.18.0.3
ns4.nic.com. A 198.18.0.4
ns1.nic.com. AAAA 2001:db8:1::1
ns2.nic.com. AAAA 2001:db8:1::2
net. 172800 NS a.root-servers.net.
net. 172800 NS b.root-servers.net.
net. 172800 NS ns.net-servers.org.
org. 172800 NS ns1.org-servers.org.
org. 172800 NS ns2.org-servers.org.
ns1.org-servers.org. A 198.18.1.1
ns2.org-servers.org. A 198.18.1.2
";

/// Queries (name, type) answered from each zone: referrals, and answers
/// with names below their owner.
/// Not here: MX, whose targets' addresses Heron adds and NSD (minimal
/// responses) does not (the packing of MX is in `encoded.rs`'s tests).
const TLD_QUERIES: [(&str, RType); 7] = [
    ("www.inbail.tld.test", RType::A),
    ("inbail.tld.test", RType::NS),
    ("www.hosted.tld.test", RType::A),
    ("x.sibling.tld.test", RType::AAAA),
    ("many.tld.test", RType::A),
    ("www.deep.tld.test", RType::A),
    ("tld.test", RType::SOA),
];
/// Not here: a query for an NS target's own name (`ns1.nic.com`), where
/// NSD points the targets into the question and Heron to the owner.
const ROOT_QUERIES: [(&str, RType); 4] = [
    ("www.example.com", RType::A),
    ("com", RType::NS),
    ("net", RType::A),
    ("www.example.org", RType::AAAA),
];

#[test]
fn responses_are_nsds_size_to_the_octet() {
    let dir = tempfile::tempdir().unwrap();
    let (tld, root) = (dir.path().join("tld.zone"), dir.path().join("root.zone"));
    std::fs::write(&tld, TLD).unwrap();
    std::fs::write(&root, ROOT).unwrap();
    let zones: [(&str, PathBuf); 2] = [("tld.test.", tld), (".", root)];
    let heron = ServerProcess::heron(&PathBuf::from(env!("CARGO_BIN_EXE_heron")), &zones);
    let nsd = ServerProcess::nsd(&zones);
    let queries = TLD_QUERIES.iter().chain(&ROOT_QUERIES);
    for (qname, qtype) in queries {
        for edns in [None, Some(1232)] {
            let opts = QueryOpts {
                id: 7,
                edns: edns.map(|udp_size| EdnsOpts {
                    udp_size,
                    ..EdnsOpts::default()
                }),
                ..QueryOpts::default()
            };
            let query = build_query(&Name::parse(qname).unwrap(), *qtype, &opts);
            let ours = try_query_udp(heron.addr(), &query).unwrap();
            let theirs = try_query_udp(nsd.addr(), &query).unwrap();
            let what = format!("{qname} {qtype} (EDNS {edns:?})");
            let differences = diff(&normalize(&ours).unwrap(), &normalize(&theirs).unwrap());
            assert!(differences.is_empty(), "{what}: {differences:?}");
            eprintln!("{what}: Heron {}, NSD {}", ours.len(), theirs.len());
            assert_eq!(ours.len(), theirs.len(), "{what}: octets, Heron and NSD");
        }
    }
}
