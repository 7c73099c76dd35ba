//! The catalog consumer (RFC 9432): what each version of a consumed
//! catalog zone asks of the secondary zones, without I/O. Which zones a
//! catalog lists, and how a version is read, are
//! `heron_xfr::catalog_zone`'s; this module keeps, for every catalog,
//! the members of the version it last took and which catalog owns each
//! member zone, and turns a new version into [`Step`]s that
//! the runtime's `secondary::Running` carries out.
//!
//! A version that breaks a rule is rejected whole: every problem is
//! logged naming its record, and the members stay as they were. The
//! version taken last is kept beside the catalog zone's own copy (which
//! is the version received, taken or not) in [`consumed_copy`], and a
//! restart takes its members from there.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use heron_proto::Name;
use heron_xfr::catalog_zone::{self, Change, Member, MemberSet, Members, Problem};
use heron_xfr::journal::serial_of;
use heron_xfr::primary::ZonePolicy;
use heron_xfr::secondary::refresh::SecondaryZone;
use heron_zone::Zone;
use heron_zone::diff::ZoneDiff;

use crate::config::CatalogConfig;

/// What a catalog's new version asks for one member zone.
#[derive(Debug)]
pub enum Step {
    /// Start transferring and serving it.
    Add(SecondaryZone, Arc<ZonePolicy>),
    /// Stop: no longer served.
    Remove(Name),
    /// Follow another template, keeping its data.
    Repoint(SecondaryZone, Arc<ZonePolicy>),
    /// Drop its data and transfer it afresh (its unique ID changed, or
    /// another catalog took it over).
    Reset(SecondaryZone, Arc<ZonePolicy>),
    /// Stop, leaving its files: the configuration uses its kept file for
    /// something else now.
    Forget(Name),
}

/// What [`Consumers::reconfigure`] changed.
#[derive(Debug, Default)]
pub struct Reconsumed {
    pub added: Vec<Name>,
    pub removed: Vec<Name>,
    /// Given other templates (or other primaries, which they inherit).
    pub changed: Vec<Name>,
    /// What that asks of their members.
    pub steps: Vec<Step>,
}

/// Every consumed catalog.
#[derive(Default)]
pub struct Consumers {
    /// By lower-cased catalog zone name.
    catalogs: HashMap<Name, Consumer>,
    /// The catalog (lower-cased) that owns each member zone (lower-cased).
    owner: HashMap<Name, Name>,
    /// By catalog, the member zones it lists but another catalog owns
    /// (it listed them second, or handed them over by `coo`): kept in
    /// [`ceded_copy`] so that a restart, which reads the catalogs in
    /// name order, gives each zone to the catalog that owned it.
    ceded: HashMap<Name, HashSet<Name>>,
    /// Catalogs whose `ceded` set changed since [`Consumers::changed_ceded`].
    ceded_changed: BTreeSet<Name>,
}

struct Consumer {
    config: CatalogConfig,
    members: MemberSet,
    /// The serial of the version `members` come from.
    consumed: Option<u32>,
    /// Why the newest version seen was rejected, while it is the newest
    /// (for `heron ctl zone-status`).
    rejected: Option<String>,
    /// The members of the version taken that are configured by hand, so
    /// ignored: the version is read again at a reload (which may have let
    /// go of them).
    ignored: Vec<Name>,
}

impl Consumers {
    pub fn new(configs: Vec<CatalogConfig>) -> Consumers {
        let catalogs = configs
            .into_iter()
            .map(|config| {
                let consumer = Consumer {
                    config,
                    members: MemberSet::default(),
                    consumed: None,
                    rejected: None,
                    ignored: Vec::new(),
                };
                (consumer.config.zone.to_lowercase(), consumer)
            })
            .collect();
        Consumers {
            catalogs,
            owner: HashMap::new(),
            ceded: HashMap::new(),
            ceded_changed: BTreeSet::new(),
        }
    }

    pub fn is_catalog(&self, origin: &Name) -> bool {
        self.catalogs.contains_key(origin)
    }

    /// Whether a version of the catalog `origin` (lower-cased) was taken:
    /// the members a later version adds are new ones then.
    pub fn has_consumed(&self, origin: &Name) -> bool {
        (self.catalogs.get(origin)).is_some_and(|c| c.consumed.is_some())
    }

    /// The members' folders of catalog `origin` (lower-cased) as
    /// configured now: its templates' `members-dir`s, each once.
    pub fn member_dirs(&self, origin: &Name) -> Vec<PathBuf> {
        let Some(consumer) = self.catalogs.get(origin) else {
            return Vec::new();
        };
        let config = &consumer.config;
        let mut dirs: Vec<PathBuf> = (config.default.iter().chain(config.groups.values()))
            .map(|t| t.dir.clone())
            .collect();
        dirs.sort();
        dirs.dedup();
        dirs
    }

    /// Whether a consumed catalog lists `zone` (lower-cased) as a member,
    /// owned by it or not (one configured by hand, which the catalog
    /// takes back once the hand lets go of it).
    pub fn lists(&self, zone: &Name) -> bool {
        (self.catalogs.values()).any(|c| c.members.members().contains_key(zone))
    }

    /// The consumed catalogs (lower-cased), sorted.
    pub fn names(&self) -> Vec<Name> {
        let mut names: Vec<Name> = self.catalogs.keys().cloned().collect();
        names.sort();
        names
    }

    /// Takes the catalogs configured now (a reload): one new is consumed
    /// from the next version it is given; the members of one no longer
    /// configured are removed; those of one whose templates changed are
    /// made again from them, keeping their data. Returns the catalogs
    /// added, removed and changed, and the steps for their members.
    pub fn reconfigure(&mut self, configs: Vec<CatalogConfig>) -> Reconsumed {
        let mut wanted: HashMap<Name, CatalogConfig> = (configs.into_iter())
            .map(|config| (config.zone.to_lowercase(), config))
            .collect();
        let mut out = Reconsumed::default();
        let gone: Vec<Name> = (self.catalogs.keys())
            .filter(|key| !wanted.contains_key(*key))
            .cloned()
            .collect();
        for key in gone {
            let consumer = self.catalogs.remove(&key).expect("listed");
            self.ceded.remove(&key);
            out.removed.push(consumer.config.zone);
            for zone in self.owned_by(&key) {
                self.owner.remove(&zone);
                let listed = consumer.members.members().get(&zone);
                out.steps
                    .push(Step::Remove(listed.map_or(zone, |m| m.zone.clone())));
            }
        }
        let mut keys: Vec<Name> = wanted.keys().cloned().collect();
        keys.sort();
        for key in keys {
            let config = wanted.remove(&key).expect("listed");
            let Some(consumer) = self.catalogs.get_mut(&key) else {
                out.added.push(config.zone.clone());
                let consumer = Consumer {
                    config,
                    members: MemberSet::default(),
                    consumed: None,
                    rejected: None,
                    ignored: Vec::new(),
                };
                self.catalogs.insert(key, consumer);
                continue;
            };
            if format!("{:?}", consumer.config) == format!("{config:?}") {
                continue;
            }
            out.changed.push(config.zone.clone());
            consumer.config = config;
            out.steps.extend(self.remade(&key));
        }
        out
    }

    /// Zones some consumed catalog lists that no catalog owns and the
    /// configuration does not name by hand (`configured`), each to the
    /// first catalog by name that lists it: the catalog that owned it
    /// was taken out of the configuration (its members were ceded by the
    /// others, before or across a restart), or a zone configured by hand
    /// in its place was. A zone some catalog lists is served while any
    /// does.
    pub fn adopt_orphans(&mut self, configured: impl Fn(&Name) -> bool) -> Vec<Step> {
        let mut catalogs: Vec<Name> = self.catalogs.keys().cloned().collect();
        catalogs.sort();
        let mut steps = Vec::new();
        for catalog in catalogs {
            // Every reload looks: only the few orphans are copied out of a
            // catalog that may list 100,000 members.
            let orphans: Vec<Member> = (self.catalogs.get(&catalog).into_iter())
                .flat_map(|c| c.members.members().iter())
                .filter(|(zone, _)| !self.owner.contains_key(*zone) && !configured(zone))
                .map(|(_, member)| member.clone())
                .collect();
            for member in orphans {
                let zone = member.zone.to_lowercase();
                // One left out for its template (said when it was) stays so.
                let config = &self.catalogs[&catalog].config;
                let template = config.template(member.group());
                if template.is_none_or(|t| t.file_in_use(&member.zone).is_some()) {
                    continue;
                }
                let Some((made, policy)) = self.made(&catalog, &member) else {
                    continue;
                };
                tracing::info!(
                    zone = %member.zone,
                    catalog = %catalog,
                    "zone {} is a member of catalog {catalog} again: no other catalog or zone \
                     of the configuration has it",
                    member.zone
                );
                self.cede(&catalog, &zone, false);
                self.owner.insert(zone, catalog.clone());
                steps.push(Step::Add(made, policy));
            }
        }
        steps
    }

    /// The member zones (lower-cased) catalog `catalog` owns, in order.
    fn owned_by(&self, catalog: &Name) -> Vec<Name> {
        let mut zones: Vec<Name> = (self.owner.iter())
            .filter(|(_, owner)| *owner == catalog)
            .map(|(zone, _)| zone.clone())
            .collect();
        zones.sort();
        zones
    }

    /// Every member of `catalog` made again from its templates: a member
    /// whose group lost its template keeps what it had (the catalog's
    /// next version is rejected for it); one whose kept file the
    /// configuration uses now is forgotten, its files left alone (and the
    /// catalog's next version rejected for it).
    fn remade(&mut self, catalog: &Name) -> Vec<Step> {
        let Some(consumer) = self.catalogs.get(catalog) else {
            return Vec::new();
        };
        let mut steps = Vec::new();
        let mut forgotten = Vec::new();
        for zone in self.owned_by(catalog) {
            let Some(member) = consumer.members.members().get(&zone) else {
                continue;
            };
            let template = consumer.config.template(member.group());
            if let Some(file) = template.and_then(|t| t.file_in_use(&member.zone)) {
                tracing::warn!(
                    zone = %member.zone,
                    catalog = %catalog,
                    "member zone {} of catalog {catalog}: the configuration uses its kept \
                     file {} for something else now; no longer served, the file left alone",
                    member.zone,
                    file.display()
                );
                steps.push(Step::Forget(member.zone.clone()));
                forgotten.push(zone);
                continue;
            }
            match self.made(catalog, member) {
                Some((zone, policy)) => steps.push(Step::Repoint(zone, policy)),
                None => tracing::warn!(
                    zone = %member.zone,
                    catalog = %consumer.config.zone,
                    "member zone {} of catalog {}: no template for it now; it keeps its settings",
                    member.zone,
                    consumer.config.zone
                ),
            }
        }
        for zone in forgotten {
            self.owner.remove(&zone);
        }
        steps
    }

    /// What adds `zone` again, a member its owning catalog lists (one held
    /// back before, to be served now); None if no catalog owns it.
    pub fn add_again(&self, zone: &Name) -> Option<Step> {
        let zone = zone.to_lowercase();
        let catalog = self.owner.get(&zone)?;
        let consumer = self.catalogs.get(catalog)?;
        let listed = consumer.members.members().get(&zone)?;
        let (member, policy) = self.made(catalog, listed)?;
        Some(Step::Add(member, policy))
    }

    /// The zone is configured by hand from now on: no catalog owns it.
    pub fn disown(&mut self, zone: &Name) {
        self.owner.remove(zone);
    }

    /// Why the newest version of the catalog at `origin` was rejected, if
    /// it was (the members of the version before still stand).
    pub fn rejection(&self, origin: &Name) -> Option<&str> {
        self.catalogs
            .get(&origin.to_lowercase())?
            .rejected
            .as_deref()
    }

    /// Takes `zone`, a new version of a consumed catalog; `diffs` are its
    /// IXFR steps, if it came by IXFR. `configured` says whether a zone is
    /// served or a secondary now (a member is not configured by hand).
    /// Returns what the secondary zones must do, or None if the version
    /// is rejected (logged) or was taken already.
    pub fn consume(
        &mut self,
        zone: &Zone,
        diffs: Option<&[ZoneDiff]>,
        configured: impl Fn(&Name) -> bool,
    ) -> Option<Vec<Step>> {
        self.take(zone, diffs, Some(&configured))
    }

    /// [`Consumers::consume`]; without `configured`, the version is
    /// not checked against the configuration (see [`Consumers::start`]).
    fn take(
        &mut self,
        zone: &Zone,
        diffs: Option<&[ZoneDiff]>,
        configured: Option<&dyn Fn(&Name) -> bool>,
    ) -> Option<Vec<Step>> {
        let key = zone.origin().to_lowercase();
        let owner = &self.owner;
        let by_hand = configured.map(|configured| {
            move |z: &Name| configured(z) && !owner.contains_key(&z.to_lowercase())
        });
        let consumer = self.catalogs.get_mut(&key)?;
        if consumer.consumed == Some(zone.serial()) && consumer.ignored.is_empty() {
            return None;
        }
        // A version older than the one taken is not a change to take: a
        // kept copy left behind the consumed version by a stop between
        // the two writes would otherwise undo the members taken since.
        if let Some(taken) = consumer.consumed
            && heron_xfr::serial::is_newer(taken, zone.serial())
        {
            tracing::warn!(
                catalog = %zone.origin(),
                "catalog zone {} serial {} is older than serial {taken}, whose members are \
                 kept: not taken",
                zone.origin(),
                zone.serial()
            );
            return None;
        }
        let changes = match consumer.read(zone, diffs, by_hand) {
            Ok(changes) => changes,
            Err(problems) => {
                let rejected = format!(
                    "catalog zone {} serial {} rejected, members unchanged",
                    zone.origin(),
                    zone.serial()
                );
                let lines = problem_lines(&problems);
                for line in &lines {
                    tracing::error!(
                        catalog = %zone.origin(),
                        serial = zone.serial(),
                        "{rejected}: {line}"
                    );
                }
                let first = lines.first().map_or("", String::as_str);
                consumer.rejected = Some(format!("serial {} rejected: {first}", zone.serial()));
                return None;
            }
        };
        consumer.consumed = Some(zone.serial());
        consumer.rejected = None;
        if !changes.is_empty() {
            tracing::info!(
                catalog = %zone.origin(),
                serial = zone.serial(),
                "catalog zone {} serial {}: {} member changes, {} members",
                zone.origin(),
                zone.serial(),
                changes.len(),
                consumer.members.members().len()
            );
        }
        let steps = changes.into_iter();
        Some(steps.filter_map(|change| self.step(&key, change)).collect())
    }

    /// What `change` to catalog `catalog` asks, given who owns the zone.
    fn step(&mut self, catalog: &Name, change: Change) -> Option<Step> {
        let member = match &change {
            Change::Add(m)
            | Change::Remove(m)
            | Change::Reset(m)
            | Change::Regroup(m)
            | Change::Coo(m) => m,
        };
        let zone = member.zone.to_lowercase();
        let owned_here = self.owner.get(&zone) == Some(catalog);
        if owned_here && matches!(change, Change::Regroup(_) | Change::Coo(_)) {
            // Listed by the catalog it is handed to already: it goes there.
            if let Some(step) = self.hand_over(catalog, member) {
                return Some(step);
            }
        }
        if matches!(change, Change::Remove(_)) {
            self.cede(catalog, &zone, false);
        }
        match change {
            Change::Remove(m) if owned_here => {
                self.owner.remove(&zone);
                self.pass_on(catalog, &zone).or(Some(Step::Remove(m.zone)))
            }
            // Owned by another catalog before a restart.
            Change::Add(_) if self.has_ceded(catalog, &zone) => None,
            Change::Add(m) => match self.owner.get(&zone).cloned() {
                None => {
                    let made = self.made(catalog, &m)?;
                    self.owner.insert(zone, catalog.clone());
                    Some(Step::Add(made.0, made.1))
                }
                Some(other) if self.hands_over(&other, &zone, catalog) => {
                    self.take_over(&other, catalog, &m, "coo")
                }
                Some(other) => {
                    self.cede(catalog, &zone, true);
                    tracing::warn!(
                        zone = %m.zone,
                        catalog = %catalog,
                        "catalog {catalog} lists {} already a member of catalog {other}, \
                         which has no coo property for it pointing here: ignored",
                        m.zone
                    );
                    None
                }
            },
            Change::Reset(m) if owned_here => {
                self.made(catalog, &m).map(|(z, p)| Step::Reset(z, p))
            }
            Change::Regroup(m) if owned_here => {
                self.made(catalog, &m).map(|(z, p)| Step::Repoint(z, p))
            }
            // A `coo` naming a catalog that does not list the zone (yet):
            // that catalog's listing will take it.
            _ => None,
        }
    }

    /// `member` of catalog `from`, if its `coo` property names a consumed
    /// catalog that lists it too: handed over to that one.
    fn hand_over(&mut self, from: &Name, member: &Member) -> Option<Step> {
        let to = member.coo()?.to_lowercase();
        let listed = self
            .catalogs
            .get(&to)?
            .members
            .members()
            .get(&member.zone.to_lowercase())?;
        let listed = listed.clone();
        self.take_over(from, &to, &listed, "coo")
    }

    /// `zone` (lower-cased), just dropped by its owner `from`, to the
    /// first other catalog (by name) that lists it and so had ceded it:
    /// a zone some catalog lists is served while any does, as it would
    /// be after a restart.
    fn pass_on(&mut self, from: &Name, zone: &Name) -> Option<Step> {
        let mut listing: Vec<&Name> = (self.ceded.iter())
            .filter(|(catalog, zones)| *catalog != from && zones.contains(zone))
            .map(|(catalog, _)| catalog)
            .collect();
        listing.sort();
        let (to, member) = listing.into_iter().find_map(|catalog| {
            let member = self.catalogs.get(catalog)?.members.members().get(zone)?;
            self.made(catalog, member)?;
            Some((catalog.clone(), member.clone()))
        })?;
        self.take_over(from, &to, &member, "its owner dropped it")
    }

    /// Catalog `to` takes `member` (as it lists it) from catalog `from`
    /// (`why`: for the log). Its data is dropped and transferred afresh
    /// from `to`'s primaries (RFC 9432 5.6: a migrated zone's state is
    /// reset; 4.1: a member dropped by its catalog loses its data), as
    /// BIND does: kept, another primary's version was served until it
    /// expired (black-box finding).
    fn take_over(&mut self, from: &Name, to: &Name, member: &Member, why: &str) -> Option<Step> {
        tracing::info!(
            zone = %member.zone,
            catalog = %to,
            "zone {} changes ownership from catalog {from} to {to} ({why})",
            member.zone
        );
        let zone = member.zone.to_lowercase();
        self.cede(to, &zone, false);
        let still_listed =
            (self.catalogs.get(from)).is_some_and(|c| c.members.members().contains_key(&zone));
        self.cede(from, &zone, still_listed);
        self.owner.insert(zone, to.clone());
        self.made(to, member).map(|(z, p)| Step::Reset(z, p))
    }

    /// Records whether `catalog` lists `zone` (lower-cased) while another
    /// catalog owns it.
    fn cede(&mut self, catalog: &Name, zone: &Name, ceded: bool) {
        let changed = match ceded {
            true => (self.ceded.entry(catalog.clone()).or_default()).insert(zone.clone()),
            false => (self.ceded.get_mut(catalog)).is_some_and(|zones| zones.remove(zone)),
        };
        if changed {
            self.ceded_changed.insert(catalog.clone());
        }
    }

    fn has_ceded(&self, catalog: &Name, zone: &Name) -> bool {
        (self.ceded.get(catalog)).is_some_and(|zones| zones.contains(zone))
    }

    /// The catalogs (lower-cased) whose ceded zones changed since the last
    /// call, each with those zones now, sorted: what to write to their
    /// [`ceded_copy`].
    pub fn changed_ceded(&mut self) -> Vec<(Name, Vec<Name>)> {
        let changed = std::mem::take(&mut self.ceded_changed);
        let ceded_by = |catalog: &Name| {
            let mut zones: Vec<Name> = (self.ceded.get(catalog).into_iter().flatten())
                .cloned()
                .collect();
            zones.sort();
            zones
        };
        changed
            .into_iter()
            .map(|c| (c.clone(), ceded_by(&c)))
            .collect()
    }

    /// At start, before [`Consumers::start`]: the zones `catalog` had
    /// ceded (read from its [`ceded_copy`]).
    pub fn restore_ceded(&mut self, catalog: &Name, zones: impl IntoIterator<Item = Name>) {
        let zones: HashSet<Name> = zones.into_iter().map(|z| z.to_lowercase()).collect();
        if !zones.is_empty() {
            self.ceded.insert(catalog.to_lowercase(), zones);
        }
    }

    /// Whether `from`'s member `zone` has a `coo` property naming `to`.
    fn hands_over(&self, from: &Name, zone: &Name, to: &Name) -> bool {
        let Some(consumer) = self.catalogs.get(from) else {
            return false;
        };
        let coo = consumer.members.members().get(zone).and_then(|m| m.coo());
        coo.is_some_and(|coo| coo.to_lowercase() == *to)
    }

    /// The member zone as catalog `catalog`'s template for it makes it.
    /// A version is checked for templates before it is taken, so a member
    /// without one is one of the version taken before a restart whose
    /// template the configuration no longer has: it is not served.
    fn made(&self, catalog: &Name, member: &Member) -> Option<(SecondaryZone, Arc<ZonePolicy>)> {
        let config = &self.catalogs.get(catalog)?.config;
        let Some(template) = config.template(member.group()) else {
            tracing::warn!(
                zone = %member.zone,
                catalog = %catalog,
                "catalog {catalog} lists {} with no member template for its group now ({})",
                member.zone,
                member.group().map_or("no group".into(), |g| format!("group {g:?}"))
            );
            return None;
        };
        if let Some(file) = template.file_in_use(&member.zone) {
            tracing::warn!(
                zone = %member.zone,
                catalog = %catalog,
                "catalog {catalog} lists {} whose kept file {} the configuration now uses \
                 for something else: not served",
                member.zone,
                file.display()
            );
            return None;
        }
        Some(template.member(&member.zone, &config.zone))
    }

    /// The members every catalog's copy lists, at start: `kept` finds
    /// the copy of the version of a catalog taken last. Returns them as
    /// zones to add.
    ///
    /// That version was taken under the configuration before the
    /// restart: what the configuration changed since (a member configured
    /// by hand now, a template gone, a lower `max-members`) leaves those
    /// members out, with a warning, but never the others; the next
    /// version from the primary is checked as usual.
    pub fn start<'z>(
        &mut self,
        kept: impl Fn(&Name) -> Option<&'z Zone>,
        configured: impl Fn(&Name) -> bool,
    ) -> Vec<(SecondaryZone, Arc<ZonePolicy>)> {
        let mut catalogs: Vec<Name> = self.catalogs.keys().cloned().collect();
        catalogs.sort();
        // Each member once, where the latest step left it: by origin, not
        // searched (a catalog of 100,000 members handed over at start).
        let mut members: Vec<Option<(SecondaryZone, Arc<ZonePolicy>)>> = Vec::new();
        let mut at: HashMap<Name, usize> = HashMap::new();
        for catalog in catalogs {
            let Some(zone) = kept(&catalog) else {
                continue;
            };
            for step in self.take(zone, None, None).unwrap_or_default() {
                let (member, policy) = match step {
                    Step::Add(member, policy) => (member, policy),
                    // A later catalog takes over a member an earlier one
                    // listed (its coo names it): the member is the later
                    // one's (regression hunt: the hand-over was dropped,
                    // and the zone went back to the old catalog's primary).
                    Step::Reset(member, policy) | Step::Repoint(member, policy) => {
                        if let Some(earlier) = at.remove(&member.origin.to_lowercase()) {
                            members[earlier] = None;
                        }
                        (member, policy)
                    }
                    _ => continue,
                };
                if configured(&member.origin) {
                    tracing::warn!(
                        zone = %member.origin,
                        catalog = %catalog,
                        "catalog {catalog} lists {}, configured by hand now: \
                         the configuration is followed",
                        member.origin
                    );
                    self.disown(&member.origin.to_lowercase());
                    continue;
                }
                at.insert(member.origin.to_lowercase(), members.len());
                members.push(Some((member, policy)));
            }
        }
        members.into_iter().flatten().collect()
    }
}

impl Consumer {
    /// The changes from the members taken last to those of `zone`, or the
    /// problems that reject it. An IXFR that follows the version taken
    /// last is read for the members it touches alone.
    ///
    /// Without `by_hand`, the version is taken whatever the configuration
    /// says of its members (see [`Consumers::start`]).
    fn read(
        &mut self,
        zone: &Zone,
        diffs: Option<&[ZoneDiff]>,
        by_hand: Option<impl Fn(&Name) -> bool>,
    ) -> Result<Vec<Change>, Vec<Problem>> {
        let catalog = zone.origin();
        let follows = diffs.and_then(|d| d.first()).map(|d| serial_of(&d.old_soa));
        let touched = match (diffs, follows) {
            (Some(diffs), Some(from)) if Some(from) == self.consumed => {
                catalog_zone::touched_ids(catalog, diffs)
            }
            _ => None,
        };
        let has_template = |group: Option<&str>| self.config.template(group).is_some();
        let file_in_use = |m: &Member| {
            let template = self.config.template(m.group())?;
            Some(template.file_in_use(&m.zone)?.display().to_string())
        };
        let max = match by_hand {
            Some(_) => self.config.max_members,
            None => usize::MAX,
        };
        let check = |members: &mut dyn Iterator<Item = &Member>| match &by_hand {
            Some(by_hand) => {
                catalog_zone::check(catalog, members, by_hand, file_in_use, has_template)
            }
            None => Vec::new(),
        };
        // Members configured by hand are ignored, with an error, and the
        // rest of the version taken (RFC 9432 5.2; black-box finding
        // DJ-4: one such name rejected the whole version). Those the
        // steps leave alone were members before their zone was configured
        // by hand: the configuration is followed, as at a start.
        self.ignored.clear();
        let mut ignore = |listed: &mut Members| {
            if let Some(by_hand) = &by_hand {
                self.ignored = ignore_configured_by_hand(zone, listed, by_hand);
            }
        };
        match touched {
            Some(ids) => {
                let mut listed = catalog_zone::parse_members(zone, &ids)?;
                ignore(&mut listed);
                let mut problems = self.members.clashes(catalog, &ids, &listed);
                problems.extend(self.members.over(catalog, &ids, &listed, max));
                problems.extend(check(&mut listed.values()));
                match problems.is_empty() {
                    true => Ok(self.members.update(&ids, listed)),
                    false => Err(problems),
                }
            }
            None => {
                let mut members = catalog_zone::parse_zone_at_most(zone, max)?;
                ignore(&mut members);
                let problems = check(&mut members.values());
                match problems.is_empty() {
                    true => Ok(self.members.replace(members)),
                    false => Err(problems),
                }
            }
        }
    }
}

/// Takes the members of `listed` configured by hand out of it, with an
/// error line each (the first [`MAX_PROBLEMS_LOGGED`]); returns their
/// zones.
fn ignore_configured_by_hand(
    catalog: &Zone,
    listed: &mut Members,
    by_hand: &impl Fn(&Name) -> bool,
) -> Vec<Name> {
    let keys: Vec<Name> = (listed.iter())
        .filter(|(_, member)| by_hand(&member.zone))
        .map(|(key, _)| key.clone())
        .collect();
    let (origin, serial) = (catalog.origin(), catalog.serial());
    let mut ignored = Vec::with_capacity(keys.len());
    for (n, key) in keys.into_iter().enumerate() {
        let member = listed.remove(&key).expect("listed");
        if n < MAX_PROBLEMS_LOGGED {
            let problem = Problem::ConfiguredByHand {
                zone: member.zone.clone(),
                owner: catalog_zone::member_owner(origin, &member.id),
            };
            tracing::error!(
                catalog = %origin,
                serial,
                "catalog zone {origin} serial {serial}: {problem}: that member is ignored (RFC 9432 5.2)"
            );
        }
        ignored.push(member.zone);
    }
    if ignored.len() > MAX_PROBLEMS_LOGGED {
        let more = ignored.len() - MAX_PROBLEMS_LOGGED;
        tracing::error!(catalog = %origin, serial, "and {more} more members configured by hand ignored");
    }
    ignored
}

/// The most problems of one rejected version logged one by one: a
/// hostile or broken producer can list a problem per member, and a
/// million log lines per transfer would bury everything else.
const MAX_PROBLEMS_LOGGED: usize = 20;

/// The log lines for `problems`: each of the first
/// [`MAX_PROBLEMS_LOGGED`], then how many more there are.
fn problem_lines(problems: &[Problem]) -> Vec<String> {
    let mut lines: Vec<String> = (problems.iter())
        .take(MAX_PROBLEMS_LOGGED)
        .map(Problem::to_string)
        .collect();
    if problems.len() > MAX_PROBLEMS_LOGGED {
        let more = problems.len() - MAX_PROBLEMS_LOGGED;
        lines.push(format!("and {more} more problems not logged one by one"));
    }
    lines
}

/// Where the version of a catalog taken last is kept, beside `file`, the
/// catalog zone's kept copy.
pub fn consumed_copy(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".consumed");
    PathBuf::from(name)
}

/// Where the member zones a catalog lists but does not own are kept,
/// beside `file`, the catalog zone's kept copy.
pub fn ceded_copy(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".ceded");
    PathBuf::from(name)
}

/// Writes `zones`, one name a line, to `path` (atomically: a new file
/// renamed over it); no zones, no file.
pub fn write_ceded(path: &Path, zones: &[Name]) -> std::io::Result<()> {
    if zones.is_empty() {
        return match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
    }
    let text: String = zones.iter().map(|z| format!("{z}\n")).collect();
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

/// The zones [`write_ceded`] wrote to `path`; none if there is no file.
/// A line that is not a name is reported and skipped.
pub fn read_ceded(path: &Path) -> Vec<Name> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    (text.lines().filter(|l| !l.trim().is_empty()))
        .filter_map(|line| match Name::parse(line.trim()) {
            Ok(name) => Some(name),
            Err(e) => {
                tracing::warn!(
                    "{}: {line:?} is not a zone name ({e}): skipped",
                    path.display()
                );
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use heron_xfr::acl::Acl;
    use heron_xfr::secondary::client::Upstream;
    use heron_xfr::secondary::kept_file::KeptFile;
    use heron_zone::load_zone_str;

    use super::*;
    use crate::config::catalog::Template;

    fn n(text: &str) -> Name {
        Name::parse(text).unwrap()
    }

    /// A template whose primary is 192.0.2.`last`, transferable by
    /// 127.0.0.1 if `open`.
    fn template(last: u8, open: bool) -> Template {
        let allow = match open {
            true => Acl::new(vec![heron_xfr::acl::Rule {
                prefix: "127.0.0.1".parse().unwrap(),
                key: None,
            }]),
            false => Acl::default(),
        };
        Template {
            primaries: Arc::new(vec![Upstream {
                addr: format!("192.0.2.{last}:53").parse().unwrap(),
                key: None,
                tls: None,
                source: None,
            }]),
            policy: Arc::new(ZonePolicy {
                allow_transfer: allow,
                ..ZonePolicy::default()
            }),
            keep_journal: false,
            kept: KeptFile::pattern("/var/lib/heron/members/{zone}.zone".into()),
            dir: "/var/lib/heron/members".into(),
            in_use: Default::default(),
        }
    }

    /// Catalog `name` with a default template (unless `groups_only`) and
    /// a "gold" one.
    fn config(name: &str, groups_only: bool) -> CatalogConfig {
        CatalogConfig {
            zone: n(name),
            default: (!groups_only).then(|| template(1, false)),
            groups: BTreeMap::from([("gold".to_string(), template(2, true))]),
            max_members: crate::config::catalog::DEFAULT_MAX_MEMBERS,
        }
    }

    fn version(catalog: &str, serial: u32, body: &str) -> Arc<Zone> {
        let text = format!(
            "$ORIGIN {catalog}.\n$TTL 0\n@ SOA invalid. invalid. {serial} 3600 600 86400 0\n\
             @ NS invalid.\nversion TXT \"2\"\n{body}"
        );
        Arc::new(load_zone_str(&text, "cat", &n(catalog)).unwrap().zone)
    }

    /// Takes `new` as an IXFR from `old`.
    fn ixfr(consumers: &mut Consumers, old: &Zone, new: &Zone) -> Option<Vec<Step>> {
        let steps = [heron_zone::diff::diff(old, new)];
        consumers.consume(new, Some(&steps), |_| false)
    }

    /// The steps as (what, zone, catalog, primary's last octet).
    fn summary(steps: &[Step]) -> Vec<(&'static str, String, Option<String>, u8)> {
        let of = |z: &SecondaryZone| {
            let ip = match z.primaries[0].addr.ip() {
                std::net::IpAddr::V4(v4) => v4.octets()[3],
                std::net::IpAddr::V6(_) => 0,
            };
            (
                z.origin.to_string(),
                z.catalog.as_ref().map(|c| c.to_string()),
                ip,
            )
        };
        steps
            .iter()
            .map(|step| match step {
                Step::Add(z, _) => ("add", of(z)),
                Step::Remove(origin) => ("remove", (origin.to_string(), None, 0)),
                Step::Repoint(z, _) => ("repoint", of(z)),
                Step::Reset(z, _) => ("reset", of(z)),
                Step::Forget(origin) => ("forget", (origin.to_string(), None, 0)),
            })
            .map(|(what, (zone, catalog, ip))| (what, zone, catalog, ip))
            .collect()
    }

    fn step(
        what: &'static str,
        zone: &str,
        catalog: Option<&str>,
        ip: u8,
    ) -> (&'static str, String, Option<String>, u8) {
        (what, zone.to_string(), catalog.map(str::to_string), ip)
    }

    #[test]
    fn members_follow_their_group_template_through_every_change() {
        let mut consumers = Consumers::new(vec![config("cat.test", false)]);
        let v1 = version(
            "cat.test",
            1,
            "a.zones PTR a.test.\nb.zones PTR b.test.\nc.zones PTR c.test.\n",
        );
        let steps = consumers.consume(&v1, None, |_| false).unwrap();
        let cat = Some("cat.test.");
        assert_eq!(
            summary(&steps),
            [
                step("add", "a.test.", cat, 1),
                step("add", "b.test.", cat, 1),
                step("add", "c.test.", cat, 1)
            ]
        );
        // Taken already: nothing to do.
        assert!(consumers.consume(&v1, None, |_| false).is_none());
        let v2 = version(
            "cat.test",
            2,
            "a.zones PTR a.test.\ngroup.a.zones TXT \"gold\"\nc2.zones PTR c.test.\nd.zones PTR d.test.\n",
        );
        let steps = ixfr(&mut consumers, &v1, &v2).unwrap();
        assert_eq!(
            summary(&steps),
            [
                step("remove", "b.test.", None, 0),
                step("repoint", "a.test.", cat, 2),
                step("reset", "c.test.", cat, 1),
                step("add", "d.test.", cat, 1),
            ]
        );
        let Step::Repoint(_, gold) = &steps[1] else {
            unreachable!()
        };
        assert!(!gold.allow_transfer.is_empty(), "the gold template's ACL");
    }

    /// Black-box finding: a stop between writing the consumed version and
    /// the kept copy left the copy one serial behind; at the restart the
    /// older copy was taken as a change, and the members added since went.
    #[test]
    fn a_version_older_than_the_one_taken_changes_nothing() {
        let mut consumers = Consumers::new(vec![config("cat.test", false)]);
        let newer = version("cat.test", 58, "a.zones PTR a.test.\nb.zones PTR b.test.\n");
        consumers.consume(&newer, None, |_| false).unwrap();
        let older = version("cat.test", 57, "a.zones PTR a.test.\n");
        assert!(consumers.consume(&older, None, |_| false).is_none());
        let members = consumers.catalogs[&n("cat.test")].members.members().len();
        assert_eq!(members, 2, "b.test stays");
        // Across the serial wrap, a later version is still taken.
        let wrapped = version(
            "cat.test",
            58u32.wrapping_add(1 << 30),
            "a.zones PTR a.test.\n",
        );
        assert!(consumers.consume(&wrapped, None, |_| false).is_some());
    }

    /// A member taken over by hand while the catalog still lists it: the
    /// next version is rejected whether it comes whole or as an IXFR
    /// that touches other members only (an IXFR was taken: black-box
    /// finding).
    /// A member configured by hand since it was listed: the next
    /// version is taken all the same, by IXFR and by AXFR (the member is
    /// the configuration's, not served from the catalog).
    #[test]
    fn a_member_taken_by_hand_leaves_the_next_version_taken_by_ixfr_and_by_axfr() {
        let by_hand = |z: &Name| z.eq(&n("hand.test"));
        let v1 = version(
            "cat.test",
            1,
            "a.zones PTR a.test.\nh.zones PTR hand.test.\n",
        );
        let v2 = version(
            "cat.test",
            2,
            "a.zones PTR a.test.\nh.zones PTR hand.test.\nb.zones PTR b.test.\n",
        );
        for by_ixfr in [true, false] {
            let mut consumers = Consumers::new(vec![config("cat.test", false)]);
            assert_eq!(consumers.consume(&v1, None, |_| false).unwrap().len(), 2);
            consumers.disown(&n("hand.test"));
            let steps = [heron_zone::diff::diff(&v1, &v2)];
            let diffs = by_ixfr.then_some(&steps[..]);
            let taken = consumers.consume(&v2, diffs, by_hand).expect("taken");
            assert_eq!(
                summary(&taken),
                [step("add", "b.test.", Some("cat.test."), 1)],
                "by IXFR: {by_ixfr}"
            );
            assert_eq!(consumers.rejection(&n("cat.test")), None);
        }
    }

    /// RFC 9432 5.2: a member whose zone is configured by hand is ignored
    /// (an error said) and the rest of the version taken; once the hand
    /// lets go, the same version read again serves it.
    #[test]
    fn a_member_configured_by_hand_is_ignored_and_the_rest_taken() {
        let mut consumers = Consumers::new(vec![config("cat.test", false)]);
        let v1 = version("cat.test", 1, "a.zones PTR a.test.\nr.zones PTR r.test.\n");
        consumers.consume(&v1, None, |_| false).unwrap();
        let v2 = version(
            "cat.test",
            2,
            "a.zones PTR a.test.\nh.zones PTR hand.test.\n",
        );
        let by_hand = |z: &Name| z.eq(&n("hand.test"));
        let steps = [heron_zone::diff::diff(&v1, &v2)];
        let taken = consumers
            .consume(&v2, Some(&steps), by_hand)
            .expect("taken");
        assert_eq!(summary(&taken), [step("remove", "r.test.", None, 0)]);
        assert_eq!(consumers.rejection(&n("cat.test")), None);
        // Read again while the hand holds it: nothing changes.
        let again = consumers.consume(&v2, None, by_hand).expect("read again");
        assert!(again.is_empty(), "{:?}", summary(&again));
        // The hand let go: the same serial, read again, adds it.
        let let_go = consumers.consume(&v2, None, |_| false).expect("read again");
        assert_eq!(
            summary(&let_go),
            [step("add", "hand.test.", Some("cat.test."), 1)]
        );
        // Nothing ignored now: the same serial is not read again.
        assert!(consumers.consume(&v2, None, |_| false).is_none());
    }

    #[test]
    fn a_member_whose_group_has_no_template_rejects_the_version() {
        let mut consumers = Consumers::new(vec![config("cat.test", true)]);
        let ungrouped = version("cat.test", 1, "a.zones PTR a.test.\n");
        assert!(consumers.consume(&ungrouped, None, |_| false).is_none());
        let other = version(
            "cat.test",
            2,
            "a.zones PTR a.test.\ngroup.a.zones TXT \"lead\"\n",
        );
        assert!(consumers.consume(&other, None, |_| false).is_none());
        let gold = version(
            "cat.test",
            3,
            "a.zones PTR a.test.\ngroup.a.zones TXT \"gold\"\n",
        );
        let steps = consumers.consume(&gold, None, |_| false).unwrap();
        assert_eq!(
            summary(&steps),
            [step("add", "a.test.", Some("cat.test."), 2)]
        );
    }

    #[test]
    fn coo_hands_a_member_to_the_catalog_it_names_and_no_other() {
        let mut consumers =
            Consumers::new(vec![config("old.test", false), config("new.test", false)]);
        let old1 = version("old.test", 1, "m.zones PTR z.test.\nn.zones PTR y.test.\n");
        consumers.consume(&old1, None, |_| false).unwrap();
        // Listed by a catalog it was not handed to: ignored.
        let new1 = version("new.test", 1, "x.zones PTR y.test.\n");
        assert_eq!(consumers.consume(&new1, None, |_| false).unwrap().len(), 0);
        let old2 = version(
            "old.test",
            2,
            "m.zones PTR z.test.\ncoo.m.zones PTR new.test.\nn.zones PTR y.test.\n",
        );
        assert!(ixfr(&mut consumers, &old1, &old2).unwrap().is_empty());
        let new2 = version("new.test", 2, "x.zones PTR y.test.\nk.zones PTR z.test.\n");
        let steps = ixfr(&mut consumers, &new1, &new2).unwrap();
        assert_eq!(
            summary(&steps),
            [step("reset", "z.test.", Some("new.test."), 1)]
        );
        // The old catalog drops it: it stays, owned by the new one.
        let old3 = version("old.test", 3, "n.zones PTR y.test.\n");
        assert!(ixfr(&mut consumers, &old2, &old3).unwrap().is_empty());
        let new3 = version("new.test", 3, "x.zones PTR y.test.\n");
        let steps = ixfr(&mut consumers, &new2, &new3).unwrap();
        assert_eq!(summary(&steps), [step("remove", "z.test.", None, 0)]);
    }

    #[test]
    fn a_zone_dropped_by_its_owner_goes_to_another_catalog_listing_it() {
        let mut consumers = Consumers::new(vec![
            config("a-cat.test", false),
            config("b-cat.test", true),
            config("c-cat.test", false),
        ]);
        let a1 = version("a-cat.test", 1, "m.zones PTR z.test.\n");
        consumers.consume(&a1, None, |_| false).unwrap();
        // Both list it second, without coo: ignored, ceded.
        let b1 = version(
            "b-cat.test",
            1,
            "k.zones PTR z.test.\ngroup.k.zones TXT \"gold\"\n",
        );
        assert!(consumers.consume(&b1, None, |_| false).unwrap().is_empty());
        let c1 = version("c-cat.test", 1, "j.zones PTR z.test.\n");
        assert!(consumers.consume(&c1, None, |_| false).unwrap().is_empty());
        consumers.changed_ceded();
        // The owner drops it: the first other catalog by name takes it,
        // with its own template, and no longer cedes it.
        let a2 = version("a-cat.test", 2, "");
        let steps = ixfr(&mut consumers, &a1, &a2).unwrap();
        assert_eq!(
            summary(&steps),
            [step("reset", "z.test.", Some("b-cat.test."), 2)]
        );
        assert_eq!(consumers.changed_ceded(), [(n("b-cat.test"), vec![])]);
        // Then that one drops it: the next one takes it.
        let b2 = version("b-cat.test", 2, "");
        let steps = ixfr(&mut consumers, &b1, &b2).unwrap();
        assert_eq!(
            summary(&steps),
            [step("reset", "z.test.", Some("c-cat.test."), 1)]
        );
        // The last listing goes: the zone goes.
        let c2 = version("c-cat.test", 2, "");
        let steps = ixfr(&mut consumers, &c1, &c2).unwrap();
        assert_eq!(summary(&steps), [step("remove", "z.test.", None, 0)]);
    }

    #[test]
    fn coo_added_after_the_other_catalog_listed_the_zone_hands_it_over() {
        let mut consumers =
            Consumers::new(vec![config("old.test", false), config("new.test", false)]);
        let old1 = version("old.test", 1, "m.zones PTR z.test.\n");
        consumers.consume(&old1, None, |_| false).unwrap();
        let new1 = version(
            "new.test",
            1,
            "k.zones PTR z.test.\ngroup.k.zones TXT \"gold\"\n",
        );
        assert!(
            consumers
                .consume(&new1, None, |_| false)
                .unwrap()
                .is_empty()
        );
        let old2 = version(
            "old.test",
            2,
            "m.zones PTR z.test.\ncoo.m.zones PTR new.test.\n",
        );
        let steps = ixfr(&mut consumers, &old1, &old2).unwrap();
        assert_eq!(
            summary(&steps),
            [step("reset", "z.test.", Some("new.test."), 2)]
        );
        let old3 = version("old.test", 3, "");
        assert!(ixfr(&mut consumers, &old2, &old3).unwrap().is_empty());
    }

    #[test]
    fn reconfigured_catalogs_come_go_and_repoint_their_members() {
        let mut consumers = Consumers::new(vec![config("cat.test", false)]);
        let v1 = version(
            "cat.test",
            1,
            "a.zones PTR a.test.\nb.zones PTR b.test.\ngroup.b.zones TXT \"gold\"\n",
        );
        consumers.consume(&v1, None, |_| false).unwrap();
        let same = consumers.reconfigure(vec![config("cat.test", false)]);
        assert!(same.steps.is_empty() && same.added.is_empty() && same.changed.is_empty());
        assert!(same.removed.is_empty());
        // The default template changes primaries: every member is made
        // again (the gold one as it was), and a new catalog is taken.
        let mut moved = config("cat.test", false);
        moved.default = Some(template(3, false));
        let out = consumers.reconfigure(vec![moved, config("new.test", false)]);
        assert_eq!(
            (out.added, out.changed),
            (vec![n("new.test")], vec![n("cat.test")])
        );
        let cat = Some("cat.test.");
        assert_eq!(
            summary(&out.steps),
            [
                step("repoint", "a.test.", cat, 3),
                step("repoint", "b.test.", cat, 2)
            ]
        );
        let new1 = version("new.test", 1, "x.zones PTR x.test.\n");
        let steps = consumers.consume(&new1, None, |_| false).unwrap();
        assert_eq!(
            summary(&steps),
            [step("add", "x.test.", Some("new.test."), 1)]
        );
        // cat.test is no longer configured: its members go, new.test's stay.
        let out = consumers.reconfigure(vec![config("new.test", false)]);
        assert_eq!(out.removed, [n("cat.test")]);
        assert_eq!(
            summary(&out.steps),
            [
                step("remove", "a.test.", None, 0),
                step("remove", "b.test.", None, 0)
            ]
        );
        assert!(!consumers.is_catalog(&n("cat.test")));
        assert!(consumers.consume(&v1, None, |_| false).is_none());
        // Configured again, it takes its members from the next version.
        consumers.reconfigure(vec![config("new.test", false), config("cat.test", false)]);
        let steps = consumers.consume(&v1, None, |_| false).unwrap();
        assert_eq!(
            summary(&steps),
            [
                step("add", "a.test.", cat, 1),
                step("add", "b.test.", cat, 2)
            ]
        );
    }

    /// Started from kept versions where the first catalog by name lists
    /// z.test with a coo naming the second, which lists it too: the
    /// second owns it (regression hunt: the hand-over made at the start
    /// was dropped, and the zone followed the first catalog's primary).
    #[test]
    fn a_coo_holds_when_started_from_the_kept_versions() {
        let configs = || vec![config("a-cat.test", false), config("z-cat.test", true)];
        let a1 = version(
            "a-cat.test",
            1,
            "m.zones PTR z.test.\ncoo.m.zones PTR z-cat.test.\n",
        );
        let z1 = version(
            "z-cat.test",
            1,
            "k.zones PTR z.test.\ngroup.k.zones TXT \"gold\"\n",
        );
        let kept = HashMap::from([(n("a-cat.test"), &a1), (n("z-cat.test"), &z1)]);
        let started = Consumers::new(configs()).start(|c| kept.get(c).map(|z| &***z), |_| false);
        let owners: Vec<(String, Option<String>)> = (started.iter())
            .map(|(z, _)| {
                (
                    z.origin.to_string(),
                    z.catalog.as_ref().map(|c| c.to_string()),
                )
            })
            .collect();
        assert_eq!(owners, [("z.test.".into(), Some("z-cat.test.".into()))]);
    }

    /// Two catalogs list z.test; the one that listed it first owns it,
    /// though its name sorts second. Restarted from the kept versions
    /// and what each ceded, the same catalog owns it, in either order.
    #[test]
    fn a_zone_two_catalogs_list_keeps_its_owner_across_a_restart() {
        let configs = || vec![config("a-cat.test", false), config("z-cat.test", true)];
        let mut consumers = Consumers::new(configs());
        let z1 = version(
            "z-cat.test",
            1,
            "m.zones PTR z.test.\ngroup.m.zones TXT \"gold\"\n",
        );
        let a1 = version(
            "a-cat.test",
            1,
            "k.zones PTR z.test.\nk2.zones PTR y.test.\n",
        );
        consumers.consume(&z1, None, |_| false).unwrap();
        let steps = consumers.consume(&a1, None, |_| false).unwrap();
        assert_eq!(
            summary(&steps),
            [step("add", "y.test.", Some("a-cat.test."), 1)]
        );
        let ceded = consumers.changed_ceded();
        assert_eq!(ceded, [(n("a-cat.test"), vec![n("z.test")])]);
        assert!(consumers.changed_ceded().is_empty(), "reported once");
        let restart = |ceded: &[(Name, Vec<Name>)], kept: [(Name, &Arc<Zone>); 2]| {
            let kept = HashMap::from(kept);
            let mut restarted = Consumers::new(configs());
            for (catalog, zones) in ceded {
                restarted.restore_ceded(catalog, zones.iter().cloned());
            }
            restarted.start(|c| kept.get(c).map(|z| &***z), |_| false)
        };
        let started = restart(&ceded, [(n("a-cat.test"), &a1), (n("z-cat.test"), &z1)]);
        let owners: Vec<(String, Option<String>)> = (started.iter())
            .map(|(z, _)| {
                (
                    z.origin.to_string(),
                    z.catalog.as_ref().map(|c| c.to_string()),
                )
            })
            .collect();
        assert_eq!(
            owners,
            [
                ("y.test.".into(), Some("a-cat.test.".into())),
                ("z.test.".into(), Some("z-cat.test.".into()))
            ]
        );
        // Handed over by coo, it stays with the new owner after a restart,
        // and the old catalog, still listing it, ceded it.
        let z2 = version(
            "z-cat.test",
            2,
            "m.zones PTR z.test.\ngroup.m.zones TXT \"gold\"\ncoo.m.zones PTR a-cat.test.\n",
        );
        let steps = ixfr(&mut consumers, &z1, &z2).unwrap();
        assert_eq!(
            summary(&steps),
            [step("reset", "z.test.", Some("a-cat.test."), 1)]
        );
        let ceded = consumers.changed_ceded();
        let expected = [
            (n("a-cat.test"), vec![]),
            (n("z-cat.test"), vec![n("z.test")]),
        ];
        assert_eq!(ceded, expected);
        let started = restart(&ceded, [(n("a-cat.test"), &a1), (n("z-cat.test"), &z2)]);
        let z = started
            .iter()
            .find(|(z, _)| z.origin == n("z.test"))
            .unwrap();
        assert_eq!(z.0.catalog, Some(n("a-cat.test")));
    }

    /// Black-box finding: the catalog owning a zone that another catalog
    /// lists (and so ceded) was taken out of the configuration, by a
    /// reload or while stopped: the zone was never served again. The
    /// other catalog adopts it.
    #[test]
    fn a_zone_whose_owning_catalog_is_unconfigured_goes_to_another_listing_it() {
        let both = || vec![config("a-cat.test", false), config("z-cat.test", false)];
        let mut consumers = Consumers::new(both());
        let a1 = version("a-cat.test", 1, "m.zones PTR z.test.\n");
        let z1 = version("z-cat.test", 1, "k.zones PTR z.test.\n");
        consumers.consume(&a1, None, |_| false).unwrap();
        assert!(consumers.consume(&z1, None, |_| false).unwrap().is_empty());
        let ceded = consumers.changed_ceded();
        assert_eq!(ceded, [(n("z-cat.test"), vec![n("z.test")])]);
        // By a reload: removed with its owner, then adopted.
        let out = consumers.reconfigure(vec![config("z-cat.test", false)]);
        assert_eq!(summary(&out.steps), [step("remove", "z.test.", None, 0)]);
        let adopted = consumers.adopt_orphans(|_| false);
        assert_eq!(
            summary(&adopted),
            [step("add", "z.test.", Some("z-cat.test."), 1)]
        );
        assert!(consumers.adopt_orphans(|_| false).is_empty(), "once");
        // While stopped: the ceded list read back names an owner gone.
        let mut restarted = Consumers::new(vec![config("z-cat.test", false)]);
        restarted.restore_ceded(&n("z-cat.test"), [n("z.test")]);
        let kept = HashMap::from([(n("z-cat.test"), &z1)]);
        assert!(
            restarted
                .start(|c| kept.get(c).map(|z| &***z), |_| false)
                .is_empty()
        );
        let adopted = restarted.adopt_orphans(|_| false);
        assert_eq!(
            summary(&adopted),
            [step("add", "z.test.", Some("z-cat.test."), 1)]
        );
        // A zone configured by hand is left to the hand.
        let mut by_hand = Consumers::new(vec![config("z-cat.test", false)]);
        by_hand.restore_ceded(&n("z-cat.test"), [n("z.test")]);
        by_hand.start(|c| kept.get(c).map(|z| &***z), |_| false);
        assert!(by_hand.adopt_orphans(|z| *z == n("z.test")).is_empty());
    }

    #[test]
    fn ceded_zones_are_written_read_back_and_removed_when_none_are_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = ceded_copy(&dir.path().join("cat.test.zone"));
        assert!(read_ceded(&path).is_empty(), "no file, nothing ceded");
        let zones = [n("a.test"), n("b.test")];
        write_ceded(&path, &zones).unwrap();
        assert_eq!(read_ceded(&path), zones);
        std::fs::write(&path, "a.test.\nnot..a name\n\n").unwrap();
        assert_eq!(read_ceded(&path), [n("a.test")]);
        write_ceded(&path, &[]).unwrap();
        assert!(!path.exists());
        write_ceded(&path, &[]).unwrap();
    }

    #[test]
    fn the_copy_of_the_version_consumed_sits_beside_the_kept_copy() {
        assert_eq!(
            consumed_copy(Path::new("/var/lib/heron/cat.test.zone")),
            Path::new("/var/lib/heron/cat.test.zone.consumed")
        );
    }

    #[test]
    fn a_restart_serves_every_member_the_configuration_still_allows() {
        let mut consumers = Consumers::new(vec![config("cat.test", true)]);
        // Taken before the restart; since, hand.test was configured by
        // hand and the template of group "lead" was removed.
        let kept = version(
            "cat.test",
            7,
            "a.zones PTR a.test.\ngroup.a.zones TXT \"gold\"\n\
             b.zones PTR b.test.\ngroup.b.zones TXT \"lead\"\n\
             h.zones PTR hand.test.\ngroup.h.zones TXT \"gold\"\n",
        );
        let by_hand = |z: &Name| z.eq(&n("hand.test"));
        let started = consumers.start(|_| Some(&*kept), by_hand);
        let origins: Vec<String> = started.iter().map(|(z, _)| z.origin.to_string()).collect();
        assert_eq!(origins, ["a.test."]);
        // The primary's next version is checked as usual: hand.test is
        // ignored (RFC 9432 5.2), the rest taken; b.test, never started,
        // has nothing to stop.
        let next = version(
            "cat.test",
            8,
            "a.zones PTR a.test.\ngroup.a.zones TXT \"gold\"\n\
             h.zones PTR hand.test.\ngroup.h.zones TXT \"gold\"\n",
        );
        let steps = consumers.consume(&next, None, by_hand).expect("taken");
        assert_eq!(summary(&steps), []);
        let fixed = version(
            "cat.test",
            9,
            "a.zones PTR a.test.\ngroup.a.zones TXT \"gold\"\n\
             c.zones PTR c.test.\ngroup.c.zones TXT \"gold\"\n",
        );
        let steps = consumers.consume(&fixed, None, by_hand).unwrap();
        let cat = Some("cat.test.");
        assert_eq!(summary(&steps), [step("add", "c.test.", cat, 2)]);
    }

    /// A member whose kept file the configuration uses for something
    /// else rejects the version, as one configured by hand does; at a
    /// restart, the version taken before leaves it out, and only it.
    #[test]
    fn a_member_kept_over_a_file_in_use_rejects_the_version_and_a_restart_leaves_it_out() {
        let configs = || {
            let mut configs = vec![config("cat.test", false)];
            let used = Path::new("/var/lib/heron/members/victim.test.zone");
            crate::config::catalog::mark_files_in_use(&mut configs, [used]);
            configs
        };
        let mut consumers = Consumers::new(configs());
        let listed = "a.zones PTR a.test.\nv.zones PTR victim.test.\n";
        let v1 = version("cat.test", 1, listed);
        assert!(consumers.consume(&v1, None, |_| false).is_none());
        let v2 = version("cat.test", 2, "a.zones PTR a.test.\n");
        let steps = consumers.consume(&v2, None, |_| false).unwrap();
        assert_eq!(
            summary(&steps),
            [step("add", "a.test.", Some("cat.test."), 1)]
        );

        // Taken before the configuration used the file.
        let mut restarted = Consumers::new(configs());
        let started = restarted.start(|_| Some(&*v1), |_| false);
        let origins: Vec<String> = started.iter().map(|(z, _)| z.origin.to_string()).collect();
        assert_eq!(origins, ["a.test."]);
    }

    /// A reload that puts a running member's kept file to another use:
    /// the member is forgotten (its files are not deleted: they are the
    /// configuration's now), the others are made again as usual, and the
    /// next version still listing it is rejected.
    #[test]
    fn a_member_whose_file_a_reload_puts_to_another_use_is_forgotten() {
        let mut consumers = Consumers::new(vec![config("cat.test", false)]);
        let listed = "a.zones PTR a.test.\nb.zones PTR b.test.\n";
        let v1 = version("cat.test", 1, listed);
        assert_eq!(consumers.consume(&v1, None, |_| false).unwrap().len(), 2);
        let mut configs = vec![config("cat.test", false)];
        let used = Path::new("/var/lib/heron/members/b.test.zone");
        crate::config::catalog::mark_files_in_use(&mut configs, [used]);
        let out = consumers.reconfigure(configs);
        assert_eq!(
            summary(&out.steps),
            [
                step("repoint", "a.test.", Some("cat.test."), 1),
                step("forget", "b.test.", None, 0)
            ]
        );
        let v2 = version("cat.test", 2, &format!("{listed}c.zones PTR c.test.\n"));
        assert!(consumers.consume(&v2, None, |_| false).is_none());
    }

    #[test]
    fn a_catalog_past_max_members_is_rejected_whole_or_by_ixfr() {
        let mut catalog = config("cat.test", false);
        catalog.max_members = 2;
        let mut consumers = Consumers::new(vec![catalog]);
        let three = version(
            "cat.test",
            1,
            "a.zones PTR a.test.\nb.zones PTR b.test.\nc.zones PTR c.test.\n",
        );
        assert!(consumers.consume(&three, None, |_| false).is_none());
        let two = version("cat.test", 2, "a.zones PTR a.test.\nb.zones PTR b.test.\n");
        assert_eq!(consumers.consume(&two, None, |_| false).unwrap().len(), 2);
        let three = version(
            "cat.test",
            3,
            "a.zones PTR a.test.\nb.zones PTR b.test.\nc.zones PTR c.test.\n",
        );
        assert!(ixfr(&mut consumers, &two, &three).is_none());
        // One swapped for another fits.
        let swapped = version("cat.test", 4, "a.zones PTR a.test.\nc.zones PTR c.test.\n");
        let steps = ixfr(&mut consumers, &two, &swapped).unwrap();
        assert_eq!(
            summary(&steps),
            [
                step("remove", "b.test.", None, 0),
                step("add", "c.test.", Some("cat.test."), 1)
            ]
        );
    }

    #[test]
    fn a_version_with_many_problems_logs_a_bounded_number_of_lines() {
        let problem = |i: usize| Problem::ItselfAMember {
            owner: n(&format!("m{i}.zones.cat.test")),
        };
        let at_bound: Vec<Problem> = (0..MAX_PROBLEMS_LOGGED).map(problem).collect();
        assert_eq!(problem_lines(&at_bound).len(), MAX_PROBLEMS_LOGGED);
        let past: Vec<Problem> = (0..1_000).map(problem).collect();
        let lines = problem_lines(&past);
        assert_eq!(lines.len(), MAX_PROBLEMS_LOGGED + 1);
        assert_eq!(lines[0], past[0].to_string());
        assert_eq!(
            lines.last().unwrap(),
            &format!(
                "and {} more problems not logged one by one",
                1_000 - MAX_PROBLEMS_LOGGED
            )
        );
    }
}
