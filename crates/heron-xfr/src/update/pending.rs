//! A batch's updates to one zone applied one after the other without a
//! version made for each: every update reads the names the earlier ones
//! changed from here and the rest from the zone, and keeps its own step
//! for the journal; the batch then makes one version from the zone by
//! one [`Zone::apply`] of the net change. A version costs a copy of each
//! shard it touches, so one per batch instead of one per update.
//!
//! The checks a version makes ([`Zone::apply`]'s: CNAME alone, one
//! DNAME, RRsets within 64 KiB) are made of each step when the version
//! is made ([`Zone::apply_steps`]). When one fails, the updates after it
//! read a zone that should not have been: the caller runs the batch
//! again one update at a time with [`process`](super::process).

use std::collections::HashMap;
use std::sync::Arc;

use heron_proto::{Class, Name, RType};
use heron_zone::diff::{DiffRecord, ZoneDiff};
use heron_zone::{Problem, Zone};

use super::message::{Rejected, UpdateMessage};
use super::rules::Requester;
use super::view::{NodeNow, Set, View, record_changes};
use super::{Ignored, UpdateSettings, edit_of};

/// A zone with some updates applied and no version made yet.
pub struct Pending {
    base: Arc<Zone>,
    /// The names the updates reached, as they leave them, by lower-cased
    /// wire owner.
    nodes: HashMap<Vec<u8>, NodeNow>,
    /// The apex SOA as the last update left it.
    soa: DiffRecord,
    /// One step per update that changed something, in order.
    steps: Vec<ZoneDiff>,
}

impl Pending {
    pub fn new(base: Arc<Zone>) -> Pending {
        let soa = base.soa_record();
        Pending {
            base,
            nodes: HashMap::new(),
            soa,
            steps: Vec::new(),
        }
    }

    /// Runs one update against the zone as the updates before it left
    /// it (as [`process`](super::process) does against a version).
    /// Whether it changed anything.
    pub fn process(
        &mut self,
        update: &UpdateMessage,
        settings: &UpdateSettings,
        who: Requester,
        now: u64,
    ) -> Result<bool, Rejected> {
        self.process_noting(update, settings, who, now)
            .map(|(changed, _)| changed)
    }

    /// [`Pending::process`], with the changes the RFC's rules ignored.
    pub fn process_noting(
        &mut self,
        update: &UpdateMessage,
        settings: &UpdateSettings,
        who: Requester,
        now: u64,
    ) -> Result<(bool, Vec<Ignored>), Rejected> {
        let edited = edit_of(self, update, settings, who, now)?;
        let Some((step, reached)) = edited.step else {
            return Ok((false, edited.ignored));
        };
        for node in reached {
            let key = node.owner.to_lowercase().as_wire().to_vec();
            self.nodes.insert(key, node);
        }
        self.soa = step.new_soa.clone();
        self.steps.push(step);
        Ok((true, edited.ignored))
    }

    /// The SOA serial the updates so far lead to.
    pub fn serial(&self) -> u32 {
        View::serial(self)
    }

    pub fn is_changed(&self) -> bool {
        !self.steps.is_empty()
    }

    /// The zone's next version, with each update's step (every step
    /// checked as [`Zone::apply`] checks a version) and the net change
    /// from the zone to it; or the index among the steps of the first
    /// that breaks the zone, and its problems.
    pub fn finish(self) -> Result<Finished, (usize, Vec<Problem>)> {
        let zone = self.base.apply_steps(&self.steps)?;
        // What other servers refuse, looked for in the version made: a
        // step found is run again alone, and refused there.
        for (at, step) in self.steps.iter().enumerate() {
            if let Some(why) = super::what_secondaries_refuse(&zone, step) {
                let problem = Problem {
                    severity: heron_zone::Severity::Error,
                    location: None,
                    message: why,
                };
                return Err((at, vec![problem]));
            }
        }
        let net = self.net_change();
        Ok(Finished {
            zone,
            steps: self.steps,
            net,
        })
    }

    /// The change from the zone to what the updates left: the records of
    /// every name they reached, before and after.
    fn net_change(&self) -> ZoneDiff {
        let mut deleted = Vec::new();
        let mut added = Vec::new();
        for (key, now) in &self.nodes {
            let before = self
                .base
                .node_now(key)
                .map_or_else(Vec::new, |n| n.records());
            record_changes(before, now.records(), &mut deleted, &mut added);
        }
        deleted.sort();
        added.sort();
        ZoneDiff {
            old_soa: self.base.soa_record(),
            new_soa: self.soa.clone(),
            deleted,
            added,
        }
    }
}

/// What a batch's updates to a zone came to.
pub struct Finished {
    /// The zone's next version.
    pub zone: Zone,
    /// Each update's step, in order (for the journal).
    pub steps: Vec<ZoneDiff>,
    /// The change from the zone before the batch to `zone`, all steps in one.
    pub net: ZoneDiff,
}

impl View for Pending {
    fn origin(&self) -> &Name {
        self.base.origin()
    }

    fn class(&self) -> Class {
        self.base.class()
    }

    fn soa_record(&self) -> DiffRecord {
        self.soa.clone()
    }

    fn has_rrset(&self, key: &[u8], rtype: RType) -> bool {
        if rtype == RType::SOA && key == self.base.origin().as_wire() {
            return true;
        }
        match self.nodes.get(key) {
            Some(node) => node.sets.iter().any(|s| s.rtype == rtype),
            None => self.base.has_rrset(key, rtype),
        }
    }

    fn has_data(&self, key: &[u8]) -> bool {
        if key == self.base.origin().as_wire() {
            return true; // its SOA
        }
        match self.nodes.get(key) {
            Some(node) => node.sets.iter().any(|s| !super::is_dnssec_type(s.rtype)),
            None => self.base.has_data(key),
        }
    }

    fn node_now(&self, key: &[u8]) -> Option<NodeNow> {
        let mut node = match self.nodes.get(key) {
            Some(node) => node.clone(),
            None => self.base.node_now(key)?,
        };
        if key == self.base.origin().as_wire() {
            // The apex's SOA is the last update's, not the one read.
            node.sets.retain(|s| s.rtype != RType::SOA);
            node.sets.push(Set {
                rtype: RType::SOA,
                ttl: self.soa.ttl,
                rdatas: vec![self.soa.rdata.clone()],
            });
        }
        Some(node)
    }
}
