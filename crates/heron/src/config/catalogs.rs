//! Catalog zones Heron generates (RFC 9432): a `[[zone]]` with
//! `catalog = "generate"`, and the zones that name it in
//! `catalog-member` (with `catalog-group` and `catalog-id-generation`).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use heron_proto::Name;
use heron_xfr::catalog_zone::generate::{MAX_GROUP_LEN, Wanted, has_room};

use super::{ZoneEntry, ZoneSettings, ZoneSpec};

/// A catalog zone to generate, and its members.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GeneratedCatalog {
    pub origin: Name,
    /// Where each version is written, to be read back after a restart.
    pub file: PathBuf,
    pub members: Vec<Wanted>,
}

/// What `catalog-member`, `catalog-group` and `catalog-id-generation`
/// give a zone.
#[derive(Clone, Debug)]
pub(super) struct Membership {
    catalog: Name,
    group: Option<String>,
    generation: u32,
}

/// A zone's membership, if it names a catalog; `catalog-group` and
/// `catalog-id-generation` mean nothing without one.
pub(super) fn membership(
    catalog: Option<&str>,
    group: Option<&str>,
    generation: u32,
) -> Result<Option<Membership>, String> {
    let Some(catalog) = catalog else {
        if group.is_some() || generation != 0 {
            return Err("catalog-group and catalog-id-generation need catalog-member".into());
        }
        return Ok(None);
    };
    let catalog = Name::parse(catalog).map_err(|e| format!("catalog-member '{catalog}': {e}"))?;
    if let Some(group) = group
        && (group.is_empty() || group.len() > MAX_GROUP_LEN)
    {
        return Err(format!(
            "catalog-group must be 1 to {MAX_GROUP_LEN} octets, not {}",
            group.len()
        ));
    }
    // RFC 9432 4.4.2: the group property holds no whitespace.
    if let Some(group) = group.filter(|g| g.chars().any(char::is_whitespace)) {
        return Err(format!(
            "catalog-group {group:?} holds whitespace, which a catalog's group property must not (RFC 9432 4.4.2)"
        ));
    }
    Ok(Some(Membership {
        catalog,
        group: group.map(str::to_string),
        generation,
    }))
}

/// Whether `entry` is a catalog to generate, and if so whether of every
/// primary zone (`catalog-members = "all"`); an error if it asks for
/// something else or for what a generated catalog cannot be.
pub(super) fn generated(
    entry: &ZoneEntry,
    spec: &ZoneSpec,
    settings: &ZoneSettings,
) -> Result<Option<bool>, String> {
    let all = match entry.catalog_members.as_deref() {
        None | Some("named") => false,
        Some("all") => true,
        Some(other) => {
            return Err(format!(
                "catalog-members = \"{other}\": \"named\" or \"all\""
            ));
        }
    };
    match entry.catalog.as_deref() {
        None if entry.catalog_members.is_some() => {
            Err("catalog-members needs catalog = \"generate\"".into())
        }
        None => Ok(None),
        Some("generate") if !settings.primaries.is_empty() => {
            Err("catalog = \"generate\" is for a primary zone: it has primaries".into())
        }
        Some("generate") if settings.catalog_member.is_some() => {
            Err("a generated catalog cannot itself be a catalog-member".into())
        }
        // Heron writes every version from the configuration: an update
        // would be dropped at the next one, a signature never made.
        Some("generate") if !entry.allow_update.is_empty() || !entry.allow_update_forwarding.is_empty() => Err(
            "a generated catalog takes no updates (allow-update, allow-update-forwarding): Heron rebuilds it from the configuration, and would drop what an update added"
                .into(),
        ),
        Some("generate") if entry.dnssec_policy.is_some() => Err(
            "a generated catalog is not signed: it cannot have dnssec-policy".into(),
        ),
        Some("generate") if !has_room(&spec.origin) => Err(
            "the name is too long for a catalog: group.<unique-id>.zones.<catalog> must fit in 255 octets"
                .into(),
        ),
        Some("generate") => Ok(Some(all)),
        Some(other) => Err(format!("catalog = \"{other}\": the only value is \"generate\"")),
    }
}

/// The generated catalogs of a configuration, gathered zone by zone.
#[derive(Default)]
pub(super) struct Catalogs {
    catalogs: Vec<GeneratedCatalog>,
    /// Each member zone with the catalog it names.
    members: Vec<(Name, Membership)>,
    /// The catalogs (indexes) that list every primary zone.
    of_all: Vec<usize>,
}

impl Catalogs {
    pub(super) fn add_catalog(&mut self, spec: &ZoneSpec, all: bool) {
        if all {
            self.of_all.push(self.catalogs.len());
        }
        self.catalogs.push(GeneratedCatalog {
            origin: spec.origin.clone(),
            file: spec.file.clone(),
            members: Vec::new(),
        });
    }

    pub(super) fn add_member(&mut self, zone: &Name, membership: &Membership) {
        self.members.push((zone.clone(), membership.clone()));
    }

    /// Each catalog with its members (those listing all of them, every
    /// zone of `primaries` too); an error for every member naming a
    /// catalog that is not generated here.
    pub(super) fn finish(self, primaries: &[Name]) -> Result<Vec<GeneratedCatalog>, Vec<String>> {
        let Catalogs {
            mut catalogs,
            members,
            of_all,
        } = self;
        let index: HashMap<Name, usize> = (catalogs.iter().enumerate())
            .map(|(i, c)| (c.origin.to_lowercase(), i))
            .collect();
        let mut errors = Vec::new();
        if of_all.len() > 1 {
            // A zone listed by two catalogs without a coo is claimed twice.
            let names: Vec<String> = of_all
                .iter()
                .map(|&i| catalogs[i].origin.to_string())
                .collect();
            errors.push(format!(
                "catalogs {} all have catalog-members = \"all\": one at most may",
                names.join(", ")
            ));
        }
        // Zones naming a catalog belong to that one alone.
        let named_anywhere: HashSet<Name> = members.iter().map(|(z, _)| z.to_lowercase()).collect();
        for (zone, membership) in members {
            let Some(&i) = index.get(&membership.catalog.to_lowercase()) else {
                errors.push(format!(
                    "zone '{zone}': catalog-member '{}' is not a [[zone]] with catalog = \"generate\"",
                    membership.catalog
                ));
                continue;
            };
            catalogs[i].members.push(Wanted {
                zone,
                group: membership.group,
                generation: membership.generation,
            });
        }
        for i in of_all {
            let catalog = &mut catalogs[i];
            let others = primaries
                .iter()
                .map(|zone| (zone, zone.to_lowercase()))
                .filter(|(_, key)| !named_anywhere.contains(key) && !index.contains_key(key));
            let others: Vec<Wanted> = others
                .map(|(zone, _)| Wanted {
                    zone: zone.clone(),
                    group: None,
                    generation: 0,
                })
                .collect();
            catalog.members.extend(others);
        }
        if errors.is_empty() {
            Ok(catalogs)
        } else {
            Err(errors)
        }
    }
}
