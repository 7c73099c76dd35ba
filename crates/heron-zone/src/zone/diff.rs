//! The difference between two versions of a zone: the records to delete
//! and the records to add to turn one into the other (the body of an IXFR
//! reply, RFC 1995 4).

use heron_proto::{Name, RType};

use std::borrow::Cow;

use crate::zone::{Node, Zone};

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

    /// This change followed by `next` (which starts where this one ends),
    /// as one: what the two versions apart differ by, without a walk of
    /// either. A record one deletes and the other adds back cancels out.
    pub fn then(self, next: ZoneDiff) -> ZoneDiff {
        let sorted = |mut list: Vec<DiffRecord>| {
            list.sort();
            list
        };
        let (first_deleted, first_added) = (sorted(self.deleted), sorted(self.added));
        let (next_deleted, next_added) = (sorted(next.deleted), sorted(next.added));
        let mut deleted = minus(&first_deleted, &next_added);
        deleted.extend(minus(&next_deleted, &first_added));
        let mut added = minus(&first_added, &next_deleted);
        added.extend(minus(&next_added, &first_deleted));
        ZoneDiff {
            old_soa: self.old_soa,
            new_soa: next.new_soa,
            deleted: sorted(deleted),
            added: sorted(added),
        }
    }
}

/// The records of `list` not in `sorted`.
fn minus(list: &[DiffRecord], sorted: &[DiffRecord]) -> Vec<DiffRecord> {
    (list.iter())
        .filter(|r| sorted.binary_search(r).is_err())
        .cloned()
        .collect()
}

/// The records of `old` that `new` lacks and those `new` has that `old`
/// lacks. A record whose TTL changed counts as deleted and added.
///
/// Walks the zones node by node and compares RRsets, so only what changed
/// is copied: diffing two versions of a large zone costs no memory beyond
/// the change itself. Parts the versions share are skipped, so the diff of
/// a version made by `Zone::apply` costs time in proportion to the change.
pub fn diff(old: &Zone, new: &Zone) -> ZoneDiff {
    diff_leaving_out(old, new, &|_| false)
}

/// [`diff`], with the records of `old` whose type is `left_out` (an
/// RRSIG counts as type RRSIG) taken as absent: the change from a zone
/// signed here to its file read again, the signer's records left out
/// while walking rather than made into records, sorted and dropped.
pub fn diff_leaving_out(old: &Zone, new: &Zone, left_out: &dyn Fn(RType) -> bool) -> ZoneDiff {
    let mut deleted = Vec::new();
    let mut added = Vec::new();
    let mut compare = |old_node: Option<Node>, new_node: Option<Node>| {
        let old_records = old_node.map_or_else(Vec::new, |n| node_records(n, left_out));
        let new_records = new_node.map_or_else(Vec::new, |n| node_records(n, &|_| false));
        let owner = || old_node.or(new_node).expect("one side exists").key();
        compare_records(owner, &old_records, &new_records, &mut deleted, &mut added);
    };
    for node in new.nodes_not_shared_with(old) {
        compare(counterpart(old, node), Some(node));
    }
    for node in old.nodes_not_shared_with(new) {
        if counterpart(new, node).is_none() {
            compare(Some(node), None);
        }
    }
    let is_apex_soa = |r: &DiffRecord, z: &Zone| r.rtype == RType::SOA && r.owner == *z.origin();
    deleted.retain(|r| !is_apex_soa(r, old));
    added.retain(|r| !is_apex_soa(r, new));
    deleted.sort();
    added.sort();
    ZoneDiff {
        old_soa: soa_record(old),
        new_soa: soa_record(new),
        deleted,
        added,
    }
}

/// The node of `zone` with the same (case-insensitive) owner as `node`.
fn counterpart<'z>(zone: &'z Zone, node: Node) -> Option<Node<'z>> {
    zone.node(node.key())
}

/// One node's records: type, TTL, RDATA.
type NodeRecords<'n> = Vec<(RType, u32, Cow<'n, [u8]>)>;

/// Adds the records of one owner that differ between its two versions.
fn compare_records<'o>(
    owner: impl Fn() -> &'o [u8],
    old_records: &NodeRecords,
    new_records: &NodeRecords,
    deleted: &mut Vec<DiffRecord>,
    added: &mut Vec<DiffRecord>,
) {
    if old_records == new_records {
        return;
    }
    let owner = Name::from_wire(owner()).expect("a name");
    let make = |(rtype, ttl, rdata): &(RType, u32, Cow<[u8]>)| DiffRecord {
        owner: owner.clone(),
        rtype: *rtype,
        ttl: *ttl,
        rdata: rdata.to_vec(),
    };
    let gone = old_records.iter().filter(|r| !new_records.contains(r));
    deleted.extend(gone.map(make));
    let new_ones = new_records.iter().filter(|r| !old_records.contains(r));
    added.extend(new_ones.map(make));
}

/// The records at one node, RRSIGs as records of type RRSIG, sorted;
/// those of the types `left_out` left out.
fn node_records<'n>(node: Node<'n>, left_out: &dyn Fn(RType) -> bool) -> NodeRecords<'n> {
    let mut out = Vec::new();
    for set in node.rrsets() {
        if !left_out(set.rtype) {
            out.extend(set.rdatas().map(|rd| (set.rtype, set.ttl(), rd)));
        }
        if !left_out(RType::RRSIG) {
            out.extend(set.sigs().map(|rd| (RType::RRSIG, set.sig_ttl(), rd)));
        }
    }
    out.sort();
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

pub(crate) fn soa_record(zone: &Zone) -> DiffRecord {
    let soa = zone.soa();
    record(zone.origin(), RType::SOA, soa.ttl(), &soa.first_rdata())
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
    fn two_changes_in_a_row_are_the_diff_of_the_ends() {
        let bodies = [
            "www A 192.0.2.2\nold TXT \"x\"\n",
            "www A 192.0.2.3\nnew TXT \"y\"\nold TXT \"x\"\n",
            "www A 192.0.2.2\nnew TXT \"z\"\nmore AAAA 2001:db8::1\n",
            "www A 192.0.2.2\n",
        ];
        let zones: Vec<Zone> = (bodies.iter().enumerate())
            .map(|(i, b)| zone(i as u32 + 1, b))
            .collect();
        for (a, b, c) in [(0, 1, 2), (1, 2, 3), (0, 2, 3), (0, 1, 3), (3, 0, 3)] {
            let joined = diff(&zones[a], &zones[b]).then(diff(&zones[b], &zones[c]));
            assert_eq!(joined, diff(&zones[a], &zones[c]), "{a} {b} {c}");
        }
    }

    #[test]
    fn records_left_out_of_the_old_version_are_not_deleted() {
        let signed = zone(
            1,
            "www A 192.0.2.2\nwww NSEC ns A RRSIG NSEC\n\
             www RRSIG A 13 3 60 20300101000000 20200101000000 1 d.test. AAAA\n\
             gone A 192.0.2.9\ngone NSEC www A NSEC\n",
        );
        let file = zone(2, "www A 192.0.2.2\nnew A 192.0.2.3\n");
        let signer_types = |t: RType| matches!(t, RType::NSEC | RType::RRSIG);
        let d = diff_leaving_out(&signed, &file, &signer_types);
        assert_eq!(names(&d.deleted), ["gone.d.test. A"]);
        assert_eq!(names(&d.added), ["new.d.test. A"]);
        // Records of those types in the new version are still added.
        let with_nsec = zone(3, "www A 192.0.2.2\nwww NSEC new A NSEC\n");
        let d = diff_leaving_out(&signed, &with_nsec, &signer_types);
        assert!(
            names(&d.added).contains(&"www.d.test. NSEC".to_string()),
            "{d:?}"
        );
        // Nothing left out: the whole diff.
        assert_eq!(
            diff_leaving_out(&signed, &file, &|_| false),
            diff(&signed, &file)
        );
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
