//! The difference between two versions of a zone: the records to delete
//! and the records to add to turn one into the other (the body of an IXFR
//! reply, RFC 1995 4).

use std::collections::BTreeSet;

use heron_proto::{Name, RType};

use crate::zone::Zone;

/// One record in a diff; RRSIGs appear as records of type RRSIG.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct DiffRecord {
    pub owner: Name,
    pub rtype: RType,
    pub ttl: u32,
    pub rdata: Vec<u8>,
}

/// What changed from one zone version to the next. Both lists are in
/// canonical order (owner, then type, then RDATA); the SOA of each version
/// is not in the lists but in `old_soa` / `new_soa`, as IXFR frames it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZoneDiff {
    pub old_soa: DiffRecord,
    pub new_soa: DiffRecord,
    pub deleted: Vec<DiffRecord>,
    pub added: Vec<DiffRecord>,
}

impl ZoneDiff {
    pub fn is_empty(&self) -> bool {
        self.deleted.is_empty() && self.added.is_empty() && self.old_soa == self.new_soa
    }
}

/// The records of `old` that `new` lacks and those `new` has that `old`
/// lacks. A record whose TTL changed counts as deleted and added.
pub fn diff(old: &Zone, new: &Zone) -> ZoneDiff {
    let before = records(old);
    let after = records(new);
    ZoneDiff {
        old_soa: soa_record(old),
        new_soa: soa_record(new),
        deleted: before.difference(&after).cloned().collect(),
        added: after.difference(&before).cloned().collect(),
    }
}

/// Every record of a zone but the apex SOA, in canonical order (`Name`
/// orders canonically, RFC 4034 6.1).
fn records(zone: &Zone) -> BTreeSet<DiffRecord> {
    let mut out = BTreeSet::new();
    for node in zone.nodes() {
        for set in &node.rrsets {
            let is_apex_soa = set.rtype == RType::SOA && node.owner == *zone.origin();
            if !is_apex_soa {
                for rd in &set.rdatas {
                    out.insert(record(&node.owner, set.rtype, set.ttl, rd));
                }
            }
            for sig in &set.sigs {
                out.insert(record(&node.owner, RType::RRSIG, set.sig_ttl, sig));
            }
        }
    }
    out
}

fn record(owner: &Name, rtype: RType, ttl: u32, rdata: &[u8]) -> DiffRecord {
    DiffRecord {
        owner: owner.to_lowercase(),
        rtype,
        ttl,
        rdata: rdata.to_vec(),
    }
}

fn soa_record(zone: &Zone) -> DiffRecord {
    let soa = zone.soa();
    record(zone.origin(), RType::SOA, soa.ttl, &soa.rdatas[0])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load_zone_str;

    fn zone(serial: u32, body: &str) -> Zone {
        let text = format!(
            "$ORIGIN d.test.\n$TTL 60\n@ SOA ns h {serial} 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n{body}"
        );
        load_zone_str(&text, "d.zone", &Name::parse("d.test").unwrap())
            .unwrap_or_else(|p| panic!("{p:?}"))
            .zone
    }

    fn names(list: &[DiffRecord]) -> Vec<String> {
        list.iter()
            .map(|r| format!("{} {}", r.owner, r.rtype))
            .collect()
    }

    #[test]
    fn identical_versions_differ_in_nothing() {
        let a = zone(1, "www A 192.0.2.2\n");
        assert!(diff(&a, &zone(1, "www A 192.0.2.2\n")).is_empty());
    }

    #[test]
    fn added_deleted_and_changed_records() {
        let old = zone(1, "www A 192.0.2.2\nold TXT \"x\"\nmx MX 10 www\n");
        let new = zone(2, "www A 192.0.2.3\nnew TXT \"y\"\nmx MX 10 www\n");
        let d = diff(&old, &new);
        assert_eq!(names(&d.deleted), ["old.d.test. TXT", "www.d.test. A"]);
        assert_eq!(names(&d.added), ["new.d.test. TXT", "www.d.test. A"]);
        assert_eq!(d.deleted[1].rdata, [192, 0, 2, 2]);
        assert_eq!(d.added[1].rdata, [192, 0, 2, 3]);
        assert_ne!(d.old_soa, d.new_soa);
    }

    #[test]
    fn a_ttl_change_is_a_delete_and_an_add() {
        let d = diff(
            &zone(1, "www 60 A 192.0.2.2\n"),
            &zone(2, "www 120 A 192.0.2.2\n"),
        );
        assert_eq!((d.deleted[0].ttl, d.added[0].ttl), (60, 120));
    }

    #[test]
    fn owner_case_alone_is_no_change() {
        let d = diff(&zone(1, "WWW A 192.0.2.2\n"), &zone(1, "www A 192.0.2.2\n"));
        assert!(d.is_empty(), "{d:?}");
    }

    #[test]
    fn lists_are_in_canonical_order() {
        let d = diff(
            &zone(1, ""),
            &zone(2, "z A 192.0.2.9\nA.b A 192.0.2.8\nb AAAA ::1\n"),
        );
        assert_eq!(
            names(&d.added),
            ["b.d.test. AAAA", "a.b.d.test. A", "z.d.test. A"]
        );
    }
}
