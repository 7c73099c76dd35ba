//! A zone's next version from a small change (an IXFR step, a reload that
//! touched a few records), sharing everything the change did not touch.
//!
//! Only the nodes a change reaches are decoded and packed again: the names
//! whose records change, ancestors that appear or vanish as empty
//! non-terminals, and the names whose additional sections carry addresses
//! that changed. Only the shards holding them are copied; every other
//! shard is shared with the previous version. The cost follows the size of
//! the change (plus one shard copy, about 1,000 records, per shard
//! touched), not the size of the zone.

use std::borrow::Cow;
use std::hash::BuildHasher;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;

use hashbrown::{HashMap, HashSet};
use heron_proto::encoded::AdditionalBlock;
use heron_proto::name::{lowercase_wire, suffixes};
use heron_proto::{Name, RType};

use super::build::{
    NodeParts, RECORDS_PER_SHARD, SetParts, ZoneBuilder, additional_block, in_zone_targets,
    negative_ttl, node_errors, rdata_equal, write_node,
};
use super::chain::DenialChain;
use super::diff::{DiffRecord, ZoneDiff};
use super::node::{Moves, Node, RRSET_TOO_LARGE, Shard, node_len};
use super::table::NodeTable;
use super::targets::Emit;
use super::{Links, Problem, SOA_FAR, Severity, Zone, count, is_wildcard, node_place, shard_of};

impl Zone {
    /// This zone with `diff` applied: its deleted records removed, its
    /// added records added and the SOA replaced by `diff.new_soa`. The
    /// diff must start from this version's serial and delete only records
    /// the zone holds; the result passes the same checks as a loaded zone
    /// (one SOA and NS at the apex, CNAME alone, one DNAME, RRsets within
    /// 64 KiB), or nothing changes and the problems come back.
    pub fn apply(&self, diff: &ZoneDiff) -> Result<Zone, Vec<Problem>> {
        self.apply_counting(diff).map(|(zone, _)| zone)
    }

    /// [`Zone::apply`], with how many of the added records the zone held
    /// already (or the change added twice): they change nothing, but a
    /// primary that sends them keeps a history other than ours.
    pub fn apply_counting(&self, diff: &ZoneDiff) -> Result<(Zone, usize), Vec<Problem>> {
        let mut edit = Edit::new(self);
        edit.check_start(&diff.old_soa);
        diff.deleted.iter().for_each(|r| edit.delete(r));
        diff.added.iter().for_each(|r| edit.add(r));
        edit.replace_soa(&diff.new_soa);
        edit.settle_existence();
        edit.load_referrers();
        let already_present = edit.already_present;
        edit.finish().map(|zone| (zone, already_present))
    }

    /// This zone with `steps` applied one after the other, each starting
    /// from the serial the one before left and checked as [`Zone::apply`]
    /// checks it, but one version made at the end: the shards the steps
    /// touch are copied once, not once per step. On a step that breaks a
    /// rule, its index and problems (nothing made; the steps before it
    /// were sound).
    pub fn apply_steps(&self, steps: &[ZoneDiff]) -> Result<Zone, (usize, Vec<Problem>)> {
        let Some(last) = steps.len().checked_sub(1) else {
            let none = Problem {
                severity: Severity::Error,
                location: None,
                message: "no steps to apply".into(),
            };
            return Err((0, vec![none]));
        };
        let mut edit = Edit::new(self);
        for (at, step) in steps.iter().enumerate() {
            let reached = edit.step(step);
            // The last step's nodes are checked when packed, below.
            if at < last {
                edit.check_step(reached)
                    .map_err(|problems| (at, problems))?;
            }
        }
        edit.settle_existence();
        edit.load_referrers();
        edit.finish().map_err(|problems| (last, problems))
    }
}

/// One RRset being edited, records and signatures owned.
struct EditSet {
    rtype: RType,
    ttl: u32,
    rdatas: Vec<Vec<u8>>,
    sig_ttl: u32,
    sigs: Vec<Vec<u8>>,
}

/// A node being edited.
struct EditNode {
    /// The owner as written, wire form.
    owner: Vec<u8>,
    /// In type order.
    sets: Vec<EditSet>,
    /// In the zone before the change, and after it.
    existed: bool,
    exists: bool,
    /// Its A or AAAA records, or the RRSIGs over them, changed (others'
    /// additional sections may carry them).
    addresses_changed: bool,
    /// NS records below the apex were added or deleted: it may have become
    /// a delegation or stopped being one, which changes whether the
    /// addresses at and below it are glue (unsigned in an additional
    /// section, and required in a referral).
    cut_changed: bool,
}

impl EditNode {
    fn absent(owner: &[u8]) -> EditNode {
        EditNode {
            owner: owner.to_vec(),
            sets: Vec::new(),
            existed: false,
            exists: false,
            addresses_changed: false,
            cut_changed: false,
        }
    }

    fn decode(node: Node) -> EditNode {
        let owned = |rds: &mut dyn Iterator<Item = Cow<[u8]>>| rds.map(Cow::into_owned).collect();
        let sets = node
            .rrsets()
            .map(|s| EditSet {
                rtype: s.rtype,
                ttl: s.ttl(),
                rdatas: owned(&mut s.rdatas()),
                sig_ttl: s.sig_ttl(),
                sigs: owned(&mut s.sigs()),
            })
            .collect();
        EditNode {
            owner: node.owner_wire().to_vec(),
            sets,
            existed: true,
            exists: true,
            addresses_changed: false,
            cut_changed: false,
        }
    }

    fn has_data(&self) -> bool {
        self.sets
            .iter()
            .any(|s| !s.rdatas.is_empty() || !s.sigs.is_empty())
    }

    fn set(&self, rtype: RType) -> Option<&EditSet> {
        self.sets
            .iter()
            .find(|s| s.rtype == rtype && !s.rdatas.is_empty())
    }

    /// The RRset of `rtype`, added (empty, in type order) if missing.
    fn set_mut(&mut self, rtype: RType) -> &mut EditSet {
        let at = self.sets.partition_point(|s| s.rtype.0 < rtype.0);
        if self.sets.get(at).is_none_or(|s| s.rtype != rtype) {
            let empty = EditSet {
                rtype,
                ttl: 0,
                rdatas: Vec::new(),
                sig_ttl: 0,
                sigs: Vec::new(),
            };
            self.sets.insert(at, empty);
        }
        &mut self.sets[at]
    }

    /// The node as the packing code reads it.
    fn parts(&self) -> NodeParts<'_> {
        fn slices(list: &[Vec<u8>]) -> Vec<&[u8]> {
            list.iter().map(Vec::as_slice).collect()
        }
        let sets: Vec<SetParts> = self
            .sets
            .iter()
            .filter(|s| !s.rdatas.is_empty() || !s.sigs.is_empty())
            .map(|s| SetParts {
                rtype: s.rtype,
                ttl: s.ttl,
                rdatas: slices(&s.rdatas),
                sig_ttl: s.sig_ttl,
                sigs: slices(&s.sigs),
                first: None,
            })
            .collect();
        NodeParts::of(&self.owner, sets)
    }
}

/// The lower-cased wire form of a name.
pub(super) fn key_of(owner: &[u8]) -> Box<[u8]> {
    let mut key: Box<[u8]> = owner.into();
    lowercase_wire(&mut key);
    key
}

/// The parent of a wire name (its first label dropped).
fn parent_of(wire: &[u8]) -> &[u8] {
    &wire[1 + wire[0] as usize..]
}

/// For a record: the type whose RRset it belongs to, and whether it is a
/// signature over that RRset.
pub(super) fn placement(rtype: RType, rdata: &[u8]) -> (RType, bool) {
    match rtype {
        RType::RRSIG if rdata.len() >= 2 => (RType(u16::from_be_bytes([rdata[0], rdata[1]])), true),
        t => (t, false),
    }
}

/// A change being applied to `zone`.
struct Edit<'z> {
    zone: &'z Zone,
    apex: &'z [u8],
    /// Every node the change reaches, by key.
    nodes: HashMap<Box<[u8]>, EditNode>,
    /// The zone's links, brought up to date as the change goes.
    links: Links,
    records: usize,
    /// Added records that were there already.
    already_present: usize,
    problems: Vec<Problem>,
    /// The serial the change has reached (the zone's, then each step's).
    serial: u32,
    /// For [`Zone::apply_steps`]: the names the steps so far made NS, MX
    /// or SRV records point at, with the nodes that point there (the
    /// referrers index is brought up to date only at the end).
    new_referrers: HashMap<Box<[u8]>, Vec<Box<[u8]>>>,
    /// The nodes that appeared or vanished since [`Edit::check_step`]
    /// last looked.
    flipped: Vec<Box<[u8]>>,
}

impl<'z> Edit<'z> {
    fn new(zone: &'z Zone) -> Edit<'z> {
        Edit {
            zone,
            apex: zone.origin.as_wire(),
            nodes: HashMap::new(),
            links: zone.links.as_deref().cloned().unwrap_or_default(),
            records: zone.record_count(),
            already_present: 0,
            problems: Vec::new(),
            serial: zone.serial(),
            new_referrers: HashMap::new(),
            flipped: Vec::new(),
        }
    }

    fn error(&mut self, message: String) {
        self.problems.push(Problem {
            severity: Severity::Error,
            location: None,
            message,
        });
    }

    /// The node at `key` (written `owner`), loaded from the zone on first use.
    fn node(&mut self, key: &[u8], owner: &[u8]) -> &mut EditNode {
        let zone = self.zone;
        if !self.nodes.contains_key(key) {
            let node = zone
                .node(key)
                .map_or_else(|| EditNode::absent(owner), EditNode::decode);
            self.nodes.insert(key.into(), node);
        }
        self.nodes.get_mut(key).expect("just inserted")
    }

    fn check_start(&mut self, old_soa: &DiffRecord) {
        let from = heron_proto::rdata::soa_serial(&old_soa.rdata);
        if from != Some(self.serial) {
            let msg = format!(
                "the change starts from serial {}, but the zone is at serial {}",
                from.map_or("(none)".into(), |s| s.to_string()),
                self.serial
            );
            self.error(msg);
        }
    }

    fn delete(&mut self, r: &DiffRecord) {
        let (rtype, is_sig) = placement(r.rtype, &r.rdata);
        let node = self.node(&key_of(r.owner.as_wire()), r.owner.as_wire());
        let found = node
            .sets
            .iter_mut()
            .find(|s| s.rtype == rtype)
            .and_then(|set| {
                let list = if is_sig {
                    &mut set.sigs
                } else {
                    &mut set.rdatas
                };
                let at = list
                    .iter()
                    .position(|x| rdata_equal(r.rtype, x, &r.rdata))?;
                Some(list.remove(at))
            });
        node.addresses_changed |= matches!(rtype, RType::A | RType::AAAA);
        node.cut_changed |= rtype == RType::NS;
        match found {
            Some(_) => self.records -= 1,
            None => {
                let mut rdata = String::new();
                heron_proto::rdata::format_text(r.rtype, &r.rdata, &mut rdata);
                self.error(format!(
                    "the change deletes {} {} {} {rdata}, which the zone does not hold",
                    r.owner, r.ttl, r.rtype
                ))
            }
        }
    }

    fn add(&mut self, r: &DiffRecord) {
        if !r.owner.is_subdomain_of(&self.zone.origin) {
            return self.error(format!("{} {} is outside the zone", r.owner, r.rtype));
        }
        if r.rtype.is_meta() || (r.rtype == RType::SOA && r.owner.as_wire() == self.apex) {
            return self.error(format!(
                "{} {} cannot be added as zone data",
                r.owner, r.rtype
            ));
        }
        let (rtype, is_sig) = placement(r.rtype, &r.rdata);
        let node = self.node(&key_of(r.owner.as_wire()), r.owner.as_wire());
        node.addresses_changed |= matches!(rtype, RType::A | RType::AAAA);
        node.cut_changed |= rtype == RType::NS;
        let set = node.set_mut(rtype);
        let (list, ttl) = if is_sig {
            (&mut set.sigs, &mut set.sig_ttl)
        } else {
            (&mut set.rdatas, &mut set.ttl)
        };
        if list.iter().any(|x| rdata_equal(r.rtype, x, &r.rdata)) {
            self.already_present += 1;
            return;
        }
        // An RRset keeps one TTL; the first record of a new RRset sets it.
        if list.is_empty() {
            *ttl = r.ttl;
        }
        list.push(r.rdata.clone());
        self.records += 1;
    }

    fn replace_soa(&mut self, soa: &DiffRecord) {
        let apex = self.apex;
        let node = self.node(apex, apex);
        let set = node.set_mut(RType::SOA);
        set.rdatas = vec![soa.rdata.clone()];
        set.ttl = soa.ttl;
        self.serial = heron_proto::rdata::soa_serial(&soa.rdata).unwrap_or(self.serial);
    }

    /// One step of [`Zone::apply_steps`] applied to the nodes; the keys of
    /// the nodes it reached.
    fn step(&mut self, diff: &ZoneDiff) -> Vec<Box<[u8]>> {
        self.check_start(&diff.old_soa);
        diff.deleted.iter().for_each(|r| self.delete(r));
        diff.added.iter().for_each(|r| self.add(r));
        self.replace_soa(&diff.new_soa);
        let owners = diff
            .deleted
            .iter()
            .chain(&diff.added)
            .map(|r| key_of(r.owner.as_wire()));
        let mut reached: Vec<Box<[u8]>> = owners.collect();
        reached.push(self.apex.into());
        reached.sort_unstable();
        reached.dedup();
        reached
    }

    /// Checks the zone as one step of [`Zone::apply_steps`] left it, as
    /// [`Zone::apply`] would check that step's version: every node the
    /// step reached, made appear or vanish, or whose additional section
    /// carries what it changed, packed.
    fn check_step(&mut self, reached: Vec<Box<[u8]>>) -> Result<(), Vec<Problem>> {
        self.flipped.clear();
        self.settle(&reached);
        let mut changed = reached;
        changed.append(&mut self.flipped);
        for key in &changed {
            self.note_targets(key);
        }
        let cuts: Vec<Box<[u8]>> = (changed.iter())
            .filter(|k| ***k != *self.apex && self.nodes.get(*k).is_some_and(|n| n.cut_changed))
            .cloned()
            .collect();
        let mut checked = self.referrers(changed.clone(), &cuts, true);
        checked.extend(changed);
        checked.sort_unstable();
        checked.dedup();
        let mut problems = std::mem::take(&mut self.problems);
        for key in &checked {
            if let Some(node) = self.nodes.get(key).filter(|n| n.exists) {
                self.pack(key, node, &mut problems);
            }
        }
        match problems.is_empty() {
            true => Ok(()),
            false => Err(problems),
        }
    }

    /// Notes the in-zone names a node's NS, MX and SRV records point at
    /// now, for the checks of later steps.
    fn note_targets(&mut self, key: &[u8]) {
        let Some(node) = self.nodes.get(key).filter(|n| n.exists) else {
            return;
        };
        for target in in_zone_targets(&node.parts(), self.apex) {
            let list = self.new_referrers.entry(target).or_default();
            if !list.iter().any(|k| **k == *key) {
                list.push(key.into());
            }
        }
    }

    /// Names that gained their first record appear (with any missing
    /// ancestors as empty non-terminals); names left with no records and
    /// no children vanish, and so do ancestors they leave empty.
    fn settle_existence(&mut self) {
        let keys: Vec<Box<[u8]>> = self.nodes.keys().cloned().collect();
        self.settle(&keys);
    }

    /// [`Edit::settle_existence`] for the nodes at `keys` (and the
    /// ancestors they make appear or vanish): after one step of
    /// [`Zone::apply_steps`], only the nodes it reached can have changed.
    fn settle(&mut self, keys: &[Box<[u8]>]) {
        for key in keys {
            let node = &self.nodes[key];
            if !node.exists && node.has_data() {
                self.appear(key);
            }
        }
        for key in keys {
            let node = &self.nodes[key];
            let childless = !self.links.children.contains_key(key);
            if node.exists && !node.has_data() && childless && **key != *self.apex {
                self.vanish(key);
            }
        }
    }

    fn appear(&mut self, key: &[u8]) {
        let mut key: Box<[u8]> = key.into();
        loop {
            let node = self.nodes.get_mut(&key).expect("loaded");
            if !node.exists {
                self.flipped.push(key.clone());
            }
            node.exists = true;
            let owner = node.owner.clone();
            let parent = parent_of(&key);
            if parent.len() <= self.apex.len() {
                return;
            }
            *self.links.children.entry(parent.into()).or_insert(0) += 1;
            let parent_owner = parent_of(&owner);
            if self.node(parent, parent_owner).exists {
                return;
            }
            key = parent.into();
        }
    }

    fn vanish(&mut self, key: &[u8]) {
        let mut key: Box<[u8]> = key.into();
        loop {
            let node = self.nodes.get_mut(&key).expect("loaded");
            if node.exists {
                self.flipped.push(key.clone());
            }
            node.exists = false;
            let owner = node.owner.clone();
            let parent = parent_of(&key);
            if parent.len() <= self.apex.len() {
                return;
            }
            let count = self
                .links
                .children
                .get_mut(parent)
                .expect("a node's parent counts it");
            *count -= 1;
            if *count > 0 {
                return;
            }
            self.links.children.remove(parent);
            if self.node(parent, parent_of(&owner)).has_data() {
                return;
            }
            key = parent.into();
        }
    }

    /// Loads the nodes whose additional sections carry addresses that
    /// changed, or that became glue or stopped being glue, so that they
    /// are packed again.
    fn load_referrers(&mut self) {
        let changed: Vec<Box<[u8]>> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.addresses_changed || n.existed != n.exists)
            .map(|(k, _)| k.clone())
            .collect();
        let cuts: Vec<Box<[u8]>> = self
            .nodes
            .iter()
            .filter(|(k, n)| n.cut_changed && &***k != self.apex)
            .map(|(k, _)| k.clone())
            .collect();
        self.referrers(changed, &cuts, false);
    }

    /// Loads and returns the nodes whose additional sections carry the
    /// addresses of the `changed` names, or of any name at or below one
    /// of the `cuts` (whose glue status may have changed); with
    /// `batch`, the referrers the steps so far made too.
    fn referrers(
        &mut self,
        mut changed: Vec<Box<[u8]>>,
        cuts: &[Box<[u8]>],
        batch: bool,
    ) -> Vec<Box<[u8]>> {
        if !cuts.is_empty() {
            let at_or_below = |t: &[u8]| suffixes(t).any(|s| cuts.iter().any(|c| s == &**c));
            let targets = self.links.referrers.keys().chain(self.new_referrers.keys());
            changed.extend(targets.filter(|t| at_or_below(t)).cloned());
        }
        let mut found = Vec::new();
        for target in changed {
            let mut referrers = self
                .links
                .referrers
                .get(&target)
                .cloned()
                .unwrap_or_default();
            if batch && let Some(more) = self.new_referrers.get(&target) {
                referrers.extend(more.iter().cloned());
            }
            for key in referrers {
                if self.nodes.contains_key(&key) {
                    found.push(key);
                } else if let Some(node) = self.zone.node(&key) {
                    self.node(&key, node.owner_wire());
                    found.push(key);
                }
            }
        }
        found
    }

    /// The addresses of a lower-cased name in the new version, with the
    /// RRSIGs over them unless they are glue.
    fn addresses(&self, lower: &[u8], emit: Emit) -> bool {
        let glue = || self.at_or_below_cut(lower);
        if let Some(node) = self.nodes.get(lower) {
            for rtype in [RType::A, RType::AAAA] {
                if let Some(set) = node.set(rtype) {
                    let rdatas: Vec<&[u8]> = set.rdatas.iter().map(Vec::as_slice).collect();
                    let sigs: Vec<&[u8]> = match set.sigs.is_empty() || glue() {
                        true => Vec::new(),
                        false => set.sigs.iter().map(Vec::as_slice).collect(),
                    };
                    emit((rtype, set.ttl, &rdatas), (set.sig_ttl, &sigs));
                }
            }
            return node.exists;
        }
        let Some(node) = self.zone.node(lower) else {
            return false;
        };
        for rtype in [RType::A, RType::AAAA] {
            if let Some(set) = node.rrset(rtype) {
                let owned: Vec<Cow<[u8]>> = set.rdatas().collect();
                let rdatas: Vec<&[u8]> = owned.iter().map(|r| &**r).collect();
                let owned: Vec<Cow<[u8]>> = match set.has_sigs() && !glue() {
                    true => set.sigs().collect(),
                    false => Vec::new(),
                };
                let sigs: Vec<&[u8]> = owned.iter().map(|r| &**r).collect();
                emit((rtype, set.ttl(), &rdatas), (set.sig_ttl(), &sigs));
            }
        }
        true
    }

    /// Whether a lower-cased name is a delegation or below one in the new
    /// version: its addresses there are glue.
    fn at_or_below_cut(&self, lower: &[u8]) -> bool {
        let is_cut = |key: &[u8]| match self.nodes.get(key) {
            Some(node) => node.exists && node.set(RType::NS).is_some(),
            None => self.zone.node(key).is_some_and(|n| n.is_cut()),
        };
        suffixes(lower)
            .take_while(|s| s.len() > self.apex.len())
            .any(is_cut)
    }

    /// Packs one node; its bytes, or None (with the problems noted) if it
    /// breaks a rule.
    fn pack(&self, key: &[u8], node: &EditNode, problems: &mut Vec<Problem>) -> Option<Vec<u8>> {
        let parts = node.parts();
        let owner = Name::from_wire(&node.owner).expect("a stored name");
        let is_apex = key == self.apex;
        let is_cut = !is_apex && parts.set(RType::NS).is_some();
        let mut errors: Vec<String> = node_errors(&parts, &owner, is_apex)
            .into_iter()
            .map(|(_, msg)| msg)
            .collect();
        if is_apex {
            match parts.set(RType::SOA).map(|s| s.rdatas.len()) {
                Some(1) => {}
                _ => errors.push(format!("the apex {owner} must have exactly one SOA record")),
            }
            if parts.set(RType::NS).is_none() {
                errors.push(format!("no NS records at the zone apex {owner}"));
            }
            errors.extend(super::build::below_apex_dname(&parts, &owner));
        }
        let addresses = |lower: &[u8], emit: Emit| self.addresses(lower, emit);
        let mut bytes = Vec::new();
        let glue_left_out = std::cell::Cell::new(0);
        let written = write_node(
            &mut bytes,
            &parts,
            key,
            is_cut,
            self.apex,
            |set, encoded| match set.rtype {
                RType::NS | RType::MX | RType::SRV => {
                    let block = additional_block(set, encoded, &owner, is_cut, &addresses);
                    glue_left_out.set(glue_left_out.get() + block.required_left_out());
                    block
                }
                _ => AdditionalBlock::default(),
            },
        );
        if let Err(set) = written {
            errors.push(format!("{owner} {}: {RRSET_TOO_LARGE}", set.rtype));
        }
        // A change that would leave referrals without part of their glue
        // is refused, as one making an RRset too large (black-box finding
        // BM-2: taken without a word).
        if glue_left_out.get() > 0 {
            let n = glue_left_out.get();
            errors.push(format!(
                "{owner} NS: {n} glue RRsets would not fit in what Heron keeps for a referral (64 KiB)"
            ));
        }
        let ok = errors.is_empty();
        problems.extend(errors.into_iter().map(|message| Problem {
            severity: Severity::Error,
            location: None,
            message,
        }));
        ok.then_some(bytes)
    }

    /// Brings the referrers index up to date with the edited nodes' targets.
    fn update_referrers(&mut self) {
        let index = &mut self.links.referrers;
        for (key, node) in &self.nodes {
            let old = self.zone.node(key).map(EditNode::decode);
            let old = old.map_or_else(Vec::new, |n| in_zone_targets(&n.parts(), self.apex));
            let new = match node.exists {
                true => in_zone_targets(&node.parts(), self.apex),
                false => Vec::new(),
            };
            for target in old.iter().filter(|t| !new.contains(t)) {
                if let Some(list) = index.get_mut(target) {
                    list.retain(|k| k != key);
                    if list.is_empty() {
                        index.remove(target);
                    }
                }
            }
            for target in new.into_iter().filter(|t| !old.contains(t)) {
                index.entry(target).or_default().push(key.clone());
            }
        }
    }

    fn finish(mut self) -> Result<Zone, Vec<Problem>> {
        let mut problems = std::mem::take(&mut self.problems);
        let zone = self.zone;
        let shard_count = zone.shards.len();
        let mut touched: HashMap<usize, ShardEdit> = HashMap::new();
        for (key, node) in &self.nodes {
            let shard = shard_of(zone.hasher.hash_one(&**key), shard_count);
            let entry = touched.entry(shard).or_default();
            entry.0.insert(key);
            if node.exists
                && let Some(bytes) = self.pack(key, node, &mut problems)
            {
                entry.1.push(bytes);
            }
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        // Per shard rewritten: where its kept nodes moved (for the chain).
        let mut moves: Vec<Option<Moves>> = vec![None; shard_count];
        let shards: Vec<Arc<Shard>> = (0..shard_count)
            .map(|at| match touched.remove(&at) {
                Some((replaced, written)) => {
                    let (shard, moved) = rewrite_shard(zone, &zone.shards[at], &replaced, &written);
                    moves[at] = Some(moved);
                    Arc::new(shard)
                }
                None => zone.shards.shared(at),
            })
            .collect();
        drop(touched); // it borrows the nodes, which change below
        let apex_hash = zone.hasher.hash_one(self.apex);
        let apex_shard = shard_of(apex_hash, shard_count);
        let apex_at = shards[apex_shard]
            .find(apex_hash, self.apex)
            .expect("the apex is kept");
        let apex_node = &self.nodes[self.apex];
        let apex_parts = apex_node.parts();
        let negative_ttl = negative_ttl(&apex_parts);
        let apex_dname = apex_parts.set(RType::DNAME).is_some();
        self.update_referrers();
        let appeared = self.nodes.values().filter(|n| n.exists && !n.existed);
        let vanished = self.nodes.values().filter(|n| n.existed && !n.exists);
        // Kept once set: a wildcard removed costs lookups, never answers.
        let added_wildcard = self
            .nodes
            .iter()
            .any(|(key, n)| n.exists && is_wildcard(key));
        let mut next = Zone {
            origin: zone.origin.clone(),
            origin_labels: zone.origin_labels,
            class: zone.class,
            hasher: zone.hasher.clone(),
            shards: shards.into(),
            apex: node_place(apex_shard, apex_at),
            apex_dname,
            wildcards: zone.wildcards || added_wildcard,
            negative_ttl,
            soa_at: SOA_FAR, // until `find_soa`
            expires_at: AtomicU32::new(0),
            records: count(self.records),
            nodes: count(zone.node_count() + appeared.count() - vanished.count()),
            links: self.links.boxed(),
            chain: None,
        }
        .find_soa();
        next.chain = match &zone.chain {
            Some(chain) => {
                let changed: Vec<&[u8]> = self.nodes.keys().map(|k| &**k).collect();
                chain.after_change(&next, &changed, &moves)
            }
            None => DenialChain::of(&next),
        }
        .map(Box::new);
        Ok(resharded(next))
    }
}

/// Times the records a shard was sized for that a zone may grow to by
/// changes before it is built again with more shards. A change copies
/// each shard it touches: a zone grown from 4 records to 240,000 by
/// UPDATE kept its one shard and copied all of it at each update (30 ms
/// of CPU an update; black-box finding). Built again at 4 times, the
/// copies stay within a few times a shard's size, and the whole builds
/// cost a constant share of the growth.
const GROWTH_BEFORE_RESHARDING: usize = 4;

/// `zone`, built again from its records when it has outgrown its shards
/// ([`GROWTH_BEFORE_RESHARDING`]); as it is otherwise, or if that build
/// fails (it passes the checks the change passed).
fn resharded(zone: Zone) -> Zone {
    let sized_for = zone.shards.len() * RECORDS_PER_SHARD;
    if zone.record_count() <= GROWTH_BEFORE_RESHARDING * sized_for {
        return zone;
    }
    let from: Arc<Path> = Arc::from(Path::new("(resharded)"));
    let mut builder = ZoneBuilder::new(zone.origin.clone(), zone.class).without_warnings();
    for node in zone.nodes() {
        let owner = node.owner_wire();
        for rrset in node.rrsets() {
            let sigs = rrset.sigs().map(|r| (RType::RRSIG, rrset.sig_ttl(), r));
            let records = rrset.rdatas().map(|r| (rrset.rtype, rrset.ttl(), r));
            for (rtype, ttl, rdata) in records.chain(sigs) {
                builder.add_wire(owner, (rtype, ttl), &rdata, (&from, 0));
            }
        }
    }
    // Its deadline as secondary is set by the caller, as for any change.
    builder.build().map_or(zone, |(rebuilt, _)| rebuilt)
}

/// Per shard touched: the keys replaced and the nodes written.
type ShardEdit<'k> = (HashSet<&'k [u8]>, Vec<Vec<u8>>);

/// A copy of `shard` without the nodes whose keys are in `replaced`, with
/// the `written` nodes appended, and its table built anew; with where
/// each node kept moved.
fn rewrite_shard(
    zone: &Zone,
    shard: &Shard,
    replaced: &HashSet<&[u8]>,
    written: &[Vec<u8>],
) -> (Shard, Moves) {
    let apex = zone.origin.as_wire();
    let mut arena =
        Vec::with_capacity(shard.arena.len() + written.iter().map(Vec::len).sum::<usize>());
    let mut moves = Vec::new();
    for at in shard.offsets() {
        let bytes = &shard.arena[at..];
        if !replaced.contains(Node::new(bytes, apex).key()) {
            moves.push((at as u32, arena.len() as u32));
            arena.extend_from_slice(&bytes[..node_len(bytes)]);
        }
    }
    let written_from = arena.len();
    written.iter().for_each(|n| arena.extend_from_slice(n));
    let mut shard = Shard {
        arena: arena.into(),
        table: NodeTable::with_capacity(0),
    };
    let offsets: Vec<usize> = shard.offsets().collect();
    let mut table = NodeTable::with_capacity(offsets.len());
    for at in offsets {
        let key = Node::new(&shard.arena[at..], apex).key();
        table.insert_unique(zone.hasher.hash_one(key), at as u32);
    }
    shard.table = table;
    (shard, Moves::new(moves, written_from))
}
