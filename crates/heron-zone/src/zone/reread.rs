//! Reading a zone file again as a change to the version already loaded.
//!
//! The file's records are matched against the loaded zone as they stream
//! past: one that the zone holds sets a bit for that record; one it does
//! not is kept as an addition. Records whose bits stay clear were deleted.
//! The change then goes through [`Zone::apply`], so the next version
//! shares every shard the change did not touch, and a reload that edits a
//! few records of a large zone holds the old version, a few bits per node
//! and the change, never a second copy of the zone.
//!
//! When a change is large, or one the builder would settle by file order
//! (an RRset whose records disagree on their TTL), or it breaks a rule,
//! the caller loads the file in full instead: same result, and the
//! problems come back with their file and line.

use std::hash::BuildHasher;

use hashbrown::{HashMap, HashSet};
use heron_proto::{Name, RType};

use super::apply::{key_of, placement};
use super::build::{rdata_equal, refusal};
use super::diff::{DiffRecord, ZoneDiff, soa_record};
use super::node::Node;
use super::{Loaded, Problem, Severity, Zone, shard_of};
use crate::zonefile::{Record, ZoneFileError};

/// What reading the file again came to.
pub(crate) enum Reread {
    /// The next version, built as a change to the loaded one.
    Changed(Loaded),
    /// The file has syntax errors: the zone cannot be reloaded from it.
    Broken(Vec<ZoneFileError>),
    /// A full load must decide (a large change, or a rule broken).
    LoadInFull,
}

/// Bits of a node's "seen" word: records past these are tracked apart.
const WORD_BITS: usize = u32::BITS as usize;

/// A zone file being matched against the zone loaded from it before.
struct Matcher<'z> {
    zone: &'z Zone,
    /// Per shard, per table slot: bit k is set when the file holds the
    /// node's k-th record (counting RRsets in type order, each one's
    /// records, then its signatures).
    seen: Vec<Vec<u32>>,
    /// The same for records past a node's 32nd: (shard, slot, k).
    seen_beyond: HashSet<(u32, u32, u32)>,
    new_soa: Option<DiffRecord>,
    added: Vec<DiffRecord>,
    warnings: Vec<Problem>,
    /// How many records a change may hold before a full load is cheaper.
    limit: usize,
    load_in_full: bool,
}

/// Reads a zone file (`read` streams its records) as a change to `zone`.
pub(crate) fn reread(
    zone: &Zone,
    read: impl FnOnce(&mut dyn FnMut(&Record)) -> Vec<ZoneFileError>,
) -> Reread {
    let mut m = Matcher::new(zone);
    let errors = read(&mut |rec| m.take(rec));
    if !errors.is_empty() {
        return Reread::Broken(errors);
    }
    let Some(diff) = m.into_diff() else {
        return Reread::LoadInFull;
    };
    match zone.apply(&diff.0) {
        Ok(next) => Reread::Changed(Loaded {
            zone: next,
            warnings: diff.1,
        }),
        Err(_) => Reread::LoadInFull,
    }
}

impl<'z> Matcher<'z> {
    fn new(zone: &'z Zone) -> Matcher<'z> {
        Matcher {
            zone,
            seen: zone.shards.iter().map(|s| vec![0; s.slots()]).collect(),
            seen_beyond: HashSet::new(),
            new_soa: None,
            added: Vec::new(),
            warnings: Vec::new(),
            limit: (zone.record_count() / 8).max(4096),
            load_in_full: false,
        }
    }

    fn take(&mut self, rec: &Record) {
        if self.load_in_full {
            return;
        }
        if let Some(problem) = refusal(&self.zone.origin, self.zone.class, rec) {
            match problem.severity {
                Severity::Warning => self.warnings.push(problem),
                Severity::Error => self.load_in_full = true,
            }
            return;
        }
        let key = key_of(rec.owner.as_wire());
        if rec.rtype == RType::SOA && *key == *self.zone.origin.as_wire() {
            // A second SOA is an error the full load reports.
            self.load_in_full |= self.new_soa.is_some();
            self.new_soa = Some(diff_record(rec));
            return;
        }
        if let Some((shard, slot, node)) = self.locate(&key)
            && let Some(k) = record_index(node, rec.rtype, rec.ttl, &rec.rdata)
        {
            self.mark_seen(shard, slot, k);
            return;
        }
        if self.added.len() >= self.limit {
            self.load_in_full = true;
            return;
        }
        self.added.push(diff_record(rec));
    }

    /// The node at `key`, with its shard and table slot.
    fn locate(&self, key: &[u8]) -> Option<(usize, usize, Node<'z>)> {
        let zone = self.zone;
        let hash = zone.hasher.hash_one(key);
        let shard = shard_of(hash, zone.shards.len());
        let slot = zone.shards[shard].find_slot(hash, key)?;
        let at = zone.shards[shard].node_in_slot(slot)?;
        Some((shard, slot, zone.node_at((shard, at))))
    }

    fn mark_seen(&mut self, shard: usize, slot: usize, k: usize) {
        if k < WORD_BITS {
            self.seen[shard][slot] |= 1 << k;
        } else {
            self.seen_beyond
                .insert((shard as u32, slot as u32, k as u32));
        }
    }

    fn was_seen(&self, shard: usize, slot: usize, k: usize) -> bool {
        match k < WORD_BITS {
            true => self.seen[shard][slot] & (1 << k) != 0,
            false => {
                let at = (shard as u32, slot as u32, k as u32);
                self.seen_beyond.contains(&at)
            }
        }
    }

    /// The change, with the warnings met on the way; None if a full load
    /// must decide.
    fn into_diff(mut self) -> Option<(ZoneDiff, Vec<Problem>)> {
        if self.load_in_full || !self.ttls_agree() {
            return None;
        }
        let new_soa = self.new_soa.take()?;
        let deleted = self.deleted()?;
        let diff = ZoneDiff {
            old_soa: soa_record(self.zone),
            new_soa,
            deleted,
            added: self.added,
        };
        Some((diff, self.warnings))
    }

    /// Every record of the zone the file no longer holds (the apex SOA
    /// aside: the new one replaces it); None past the limit.
    fn deleted(&self) -> Option<Vec<DiffRecord>> {
        let mut deleted = Vec::new();
        let apex = self.zone.origin.as_wire();
        for (s, shard) in self.zone.shards.iter().enumerate() {
            for slot in 0..shard.slots() {
                let Some(at) = shard.node_in_slot(slot) else {
                    continue;
                };
                let node = self.zone.node_at((s, at));
                let is_apex = node.key() == apex;
                for (k, record) in node_records(node).enumerate() {
                    let is_soa = is_apex && record.0 == RType::SOA;
                    if !is_soa && !self.was_seen(s, slot, k) {
                        deleted.push(record.into_diff(node));
                    }
                }
                if deleted.len() > self.limit {
                    return None;
                }
            }
        }
        Some(deleted)
    }

    /// Whether every RRset the change touches ends with one TTL, as the
    /// records that stay and those added give it. If not, the zone file
    /// gives an RRset mixed TTLs and the builder settles it by file order,
    /// which only a full load knows.
    fn ttls_agree(&self) -> bool {
        let mut ttls: HashMap<(Box<[u8]>, RType, bool), u32> = HashMap::new();
        for r in &self.added {
            let key = key_of(r.owner.as_wire());
            let (rtype, is_sig) = placement(r.rtype, &r.rdata);
            if let Some(&ttl) = ttls.get(&(key.clone(), rtype, is_sig)) {
                if ttl != r.ttl {
                    return false;
                }
                continue;
            }
            if let Some(kept) = self.kept_ttl(&key, rtype, is_sig)
                && kept != r.ttl
            {
                return false;
            }
            ttls.insert((key, rtype, is_sig), r.ttl);
        }
        true
    }

    /// The TTL of the loaded RRset (records, or signatures if `is_sig`)
    /// of `rtype` at `key`, if the file keeps any of its records.
    fn kept_ttl(&self, key: &[u8], rtype: RType, is_sig: bool) -> Option<u32> {
        let (shard, slot, node) = self.locate(key)?;
        let mut kept = None;
        for (k, (t, set_type, ttl)) in node_records(node).map(|r| (r.0, r.1, r.2)).enumerate() {
            if set_type == rtype && (t == RType::RRSIG) == is_sig && self.was_seen(shard, slot, k) {
                kept = Some(ttl);
            }
        }
        kept
    }
}

/// One record of a node: its type, the RRset it belongs to, TTL, RDATA.
struct NodeRecord<'a>(RType, RType, u32, std::borrow::Cow<'a, [u8]>);

impl NodeRecord<'_> {
    fn into_diff(self, node: Node) -> DiffRecord {
        DiffRecord {
            owner: Name::from_wire(node.owner_wire()).expect("a stored name"),
            rtype: self.0,
            ttl: self.2,
            rdata: self.3.into_owned(),
        }
    }
}

/// A node's records in the order their "seen" bits count them.
fn node_records(node: Node) -> impl Iterator<Item = NodeRecord> {
    node.rrsets().flat_map(|set| {
        let records = set
            .rdatas()
            .map(move |rd| NodeRecord(set.rtype, set.rtype, set.ttl(), rd));
        let sigs = set
            .sigs()
            .map(move |rd| NodeRecord(RType::RRSIG, set.rtype, set.sig_ttl(), rd));
        records.chain(sigs)
    })
}

/// Where a record read from the file sits among the node's records, if
/// the node holds it with the same TTL.
fn record_index(node: Node, rtype: RType, ttl: u32, rdata: &[u8]) -> Option<usize> {
    let (set_type, is_sig) = placement(rtype, rdata);
    let mut k = 0;
    for set in node.rrsets() {
        let (records, sigs) = (set.rdata_count(), set.sigs().count());
        if set.rtype != set_type {
            k += records + sigs;
            continue;
        }
        let (base, set_ttl) = match is_sig {
            false => (k, set.ttl()),
            true => (k + records, set.sig_ttl()),
        };
        if set_ttl != ttl {
            return None;
        }
        let same = |x: std::borrow::Cow<[u8]>| rdata_equal(rtype, &x, rdata);
        let found = match is_sig {
            false => set.rdatas().position(same),
            true => set.sigs().position(same),
        };
        return found.map(|i| base + i);
    }
    None
}

/// A changed record, copied out of the reader's buffers.
fn diff_record(rec: &Record) -> DiffRecord {
    DiffRecord {
        owner: rec.owner.clone(),
        rtype: rec.rtype,
        ttl: rec.ttl,
        rdata: rec.rdata.clone(),
    }
}
