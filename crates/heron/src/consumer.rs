//! The catalog consumer (RFC 9432): what each version of a consumed
//! catalog zone asks of the secondary zones, without I/O. Which zones a
//! catalog lists, and how a version is read, are
//! `heron_xfr::catalog_zone`'s; this module keeps, for every catalog,
//! the members of the version it last took and which catalog owns each
//! member zone, and turns a new version into [`Step`]s that
//! [`crate::secondary::Running`] carries out.
//!
//! A version that breaks a rule is rejected whole: every problem is
//! logged naming its record, and the members stay as they were. The
//! version taken last is kept beside the catalog zone's own copy (which
//! is the version received, taken or not) in [`consumed_copy`], and a
//! restart takes its members from there.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use heron_proto::Name;
use heron_xfr::catalog_zone::{self, Change, Member, MemberSet, Problem};
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
    Add(SecondaryZone, ZonePolicy),
    /// Stop: no longer served.
    Remove(Name),
    /// Follow another template, keeping its data.
    Repoint(SecondaryZone, ZonePolicy),
    /// Drop its data and transfer it afresh (its unique ID changed).
    Reset(SecondaryZone, ZonePolicy),
}

/// Every consumed catalog.
#[derive(Default)]
pub struct Consumers {
    /// By lower-cased catalog zone name.
    catalogs: HashMap<Name, Consumer>,
    /// The catalog (lower-cased) that owns each member zone (lower-cased).
    owner: HashMap<Name, Name>,
}

struct Consumer {
    config: CatalogConfig,
    members: MemberSet,
    /// The serial of the version `members` come from.
    consumed: Option<u32>,
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
                };
                (consumer.config.zone.to_lowercase(), consumer)
            })
            .collect();
        Consumers {
            catalogs,
            owner: HashMap::new(),
        }
    }

    pub fn is_catalog(&self, origin: &Name) -> bool {
        self.catalogs.contains_key(origin)
    }

    /// The zone is configured by hand from now on: no catalog owns it.
    pub fn disown(&mut self, zone: &Name) {
        self.owner.remove(zone);
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
        let key = zone.origin().to_lowercase();
        let owner = &self.owner;
        let by_hand = |z: &Name| configured(z) && !owner.contains_key(&z.to_lowercase());
        let consumer = self.catalogs.get_mut(&key)?;
        if consumer.consumed == Some(zone.serial()) {
            return None;
        }
        let changes = match consumer.read(zone, diffs, by_hand) {
            Ok(changes) => changes,
            Err(problems) => {
                for problem in &problems {
                    tracing::error!(
                        catalog = %zone.origin(),
                        serial = zone.serial(),
                        "catalog zone {} serial {} rejected, members unchanged: {problem}",
                        zone.origin(),
                        zone.serial()
                    );
                }
                return None;
            }
        };
        consumer.consumed = Some(zone.serial());
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
            Change::Add(m) | Change::Remove(m) | Change::Reset(m) | Change::Regroup(m) => m,
        };
        let zone = member.zone.to_lowercase();
        let owned_here = self.owner.get(&zone) == Some(catalog);
        match change {
            Change::Remove(m) if owned_here => {
                self.owner.remove(&zone);
                Some(Step::Remove(m.zone))
            }
            Change::Add(m) => match self.owner.get(&zone).cloned() {
                None => {
                    self.owner.insert(zone, catalog.clone());
                    self.made(catalog, &m).map(|(z, p)| Step::Add(z, p))
                }
                Some(other) if self.hands_over(&other, &zone, catalog) => {
                    tracing::info!(
                        zone = %m.zone,
                        catalog = %catalog,
                        "zone {} changes ownership from catalog {other} to {catalog} (coo)",
                        m.zone
                    );
                    self.owner.insert(zone, catalog.clone());
                    self.made(catalog, &m).map(|(z, p)| Step::Repoint(z, p))
                }
                Some(other) => {
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
            _ => None,
        }
    }

    /// Whether `from`'s member `zone` has a `coo` property naming `to`.
    fn hands_over(&self, from: &Name, zone: &Name, to: &Name) -> bool {
        let Some(consumer) = self.catalogs.get(from) else {
            return false;
        };
        let coo = consumer
            .members
            .members()
            .get(zone)
            .and_then(|m| m.coo.as_ref());
        coo.is_some_and(|coo| coo.to_lowercase() == *to)
    }

    /// The member zone as catalog `catalog`'s template for it makes it.
    fn made(&self, catalog: &Name, member: &Member) -> Option<(SecondaryZone, ZonePolicy)> {
        let config = &self.catalogs.get(catalog)?.config;
        let template = config.template(member.group.as_deref())?;
        Some(template.member(&member.zone, &config.zone))
    }

    /// The members every catalog's copy lists, at start: `kept` finds
    /// the copy of the version of a catalog taken last. Returns them as
    /// zones to add.
    pub fn start<'z>(
        &mut self,
        kept: impl Fn(&Name) -> Option<&'z Zone>,
        configured: impl Fn(&Name) -> bool,
    ) -> Vec<(SecondaryZone, ZonePolicy)> {
        let mut catalogs: Vec<Name> = self.catalogs.keys().cloned().collect();
        catalogs.sort();
        let mut members = Vec::new();
        for catalog in catalogs {
            let Some(zone) = kept(&catalog) else {
                continue;
            };
            for step in self.consume(zone, None, &configured).unwrap_or_default() {
                if let Step::Add(zone, policy) = step {
                    members.push((zone, policy));
                }
            }
        }
        members
    }
}

impl Consumer {
    /// The changes from the members taken last to those of `zone`, or the
    /// problems that reject it. An IXFR that follows the version taken
    /// last is read for the members it touches alone.
    fn read(
        &mut self,
        zone: &Zone,
        diffs: Option<&[ZoneDiff]>,
        by_hand: impl Fn(&Name) -> bool,
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
        match touched {
            Some(ids) => {
                let listed = catalog_zone::parse_members(zone, &ids)?;
                let mut problems = self.members.clashes(catalog, &ids, &listed);
                problems.extend(catalog_zone::check(catalog, &listed, by_hand, has_template));
                match problems.is_empty() {
                    true => Ok(self.members.update(&ids, listed)),
                    false => Err(problems),
                }
            }
            None => {
                let members = catalog_zone::parse_zone(zone)?;
                let problems = catalog_zone::check(catalog, &members, by_hand, has_template);
                match problems.is_empty() {
                    true => Ok(self.members.replace(members)),
                    false => Err(problems),
                }
            }
        }
    }
}

/// Where the version of a catalog taken last is kept, beside `file`, the
/// catalog zone's kept copy.
pub fn consumed_copy(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".consumed");
    PathBuf::from(name)
}
