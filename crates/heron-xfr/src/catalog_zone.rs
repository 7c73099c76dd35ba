//! Catalog zones (RFC 9432, version 2), consumer side, without I/O: the
//! records of a catalog zone in, its member zones out ([`parse`]); the
//! member zones checked against what the configuration allows
//! ([`check`]); and what changed from one version of a catalog to the
//! next ([`diff`]). A catalog's IXFR is applied to its members in
//! proportion to the change ([`touched_ids`], [`parse_members`],
//! [`MemberSet::update`]), not by parsing the whole catalog again.
//!
//! A catalog that breaks a rule of RFC 9432 is rejected whole, with every
//! problem naming its record, so that a consumer keeps what it serves.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};
use heron_proto::{Name, RType};
use heron_zone::Zone;
use heron_zone::diff::ZoneDiff;
use heron_zone::zone::Node;

/// One member zone of a catalog: 40 octets, for there may be 100,000
/// of them in one tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// The zone, as its PTR names it.
    pub zone: Name,
    /// The label that names its member node (`<unique-id>.zones.<catalog>`),
    /// lower-cased. Boxed: 100,000 members pay no spare room.
    pub id: Box<[u8]>,
    /// Its properties, which most members have none of: one pointer
    /// where the two of them inline took four (24 octets a member).
    properties: Option<Box<Properties>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Properties {
    group: Option<Box<str>>,
    coo: Option<Name>,
}

impl Member {
    pub fn new(zone: Name, id: Box<[u8]>, group: Option<Box<str>>, coo: Option<Name>) -> Member {
        let properties = match (group, coo) {
            (None, None) => None,
            (group, coo) => Some(Box::new(Properties { group, coo })),
        };
        Member {
            zone,
            id,
            properties,
        }
    }

    /// The `group` property: which template the zone follows.
    pub fn group(&self) -> Option<&str> {
        self.properties.as_ref()?.group.as_deref()
    }

    /// The `coo` property: the catalog the zone is moving to.
    pub fn coo(&self) -> Option<&Name> {
        self.properties.as_ref()?.coo.as_ref()
    }
}

/// A catalog's member zones, by lower-cased zone name.
pub type Members = BTreeMap<Name, Member>;

/// Why a catalog is rejected; each names the record at fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// No `version` TXT, or one saying another version.
    Version { owner: Name, found: Option<String> },
    /// A member node without exactly one PTR, or a PTR that cannot be read.
    MemberPtr { owner: Name, count: usize },
    /// A zone listed by two member nodes.
    Duplicate { zone: Name, owners: [Name; 2] },
    /// A property record not of the form RFC 9432 gives it.
    Property { owner: Name, what: &'static str },
    /// The catalog lists itself.
    ItselfAMember { owner: Name },
    /// A member zone also configured by hand.
    ConfiguredByHand { zone: Name, owner: Name },
    /// A member whose kept file (`file`) is one the configuration uses
    /// for something else: writing or deleting it would harm that.
    FileInUse {
        zone: Name,
        owner: Name,
        file: String,
    },
    /// A member whose group (or lack of one) has no template.
    NoTemplate {
        zone: Name,
        owner: Name,
        group: Option<String>,
    },
    /// More member nodes than the consumer takes (its `max-members`):
    /// each becomes a zone to keep, so a producer cannot ask for any
    /// number of them.
    TooManyMembers { owner: Name, max: usize },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Version { owner, found: None } => {
                write!(
                    f,
                    "{owner} TXT: missing or not one string; version \"2\" is required"
                )
            }
            // Strings from the producer are escaped (`{:?}`): a line
            // break or a terminal control in them must not reach the log
            // as they are.
            Problem::Version {
                owner,
                found: Some(v),
            } => {
                write!(f, "{owner} TXT {v:?}: only version \"2\" is understood")
            }
            Problem::MemberPtr { owner, count } => {
                write!(
                    f,
                    "{owner} PTR: a member node needs exactly one readable PTR, it has {count}"
                )
            }
            Problem::Duplicate { zone, owners } => write!(
                f,
                "{} PTR {zone}: the zone is already a member as {}",
                owners[1], owners[0]
            ),
            Problem::Property { owner, what } => write!(f, "{owner}: {what}"),
            Problem::ItselfAMember { owner } => {
                write!(f, "{owner} PTR: a catalog cannot list itself")
            }
            Problem::ConfiguredByHand { zone, owner } => write!(
                f,
                "{owner} PTR {zone}: the zone is configured by hand already"
            ),
            Problem::FileInUse { zone, owner, file } => write!(
                f,
                "{owner} PTR {zone}: its kept file {file} is used by the configuration \
                 for something else"
            ),
            Problem::NoTemplate { zone, owner, group } => match group {
                Some(group) => write!(
                    f,
                    "{owner} PTR {zone}: no member template for group {group:?}"
                ),
                None => write!(f, "{owner} PTR {zone}: no member template without a group"),
            },
            Problem::TooManyMembers { owner, max } => write!(
                f,
                "{owner}: more than {max} member nodes, the most max-members lets this server take"
            ),
        }
    }
}

/// One record of a catalog zone: owner, type, uncompressed RDATA.
pub type Record<'a> = (&'a Name, RType, &'a [u8]);

/// The member zones of `catalog` from its records, or every problem that
/// rejects it. Records that RFC 9432 gives no meaning to (other
/// properties, custom `ext` ones, records outside `zones` and `version`)
/// are ignored.
pub fn parse<'a>(
    catalog: &Name,
    records: impl IntoIterator<Item = Record<'a>>,
) -> Result<Members, Vec<Problem>> {
    parse_at_most(catalog, records, usize::MAX)
}

/// [`parse`], rejecting a catalog of more than `max_members` member
/// nodes as soon as the reading finds one more.
pub fn parse_at_most<'a>(
    catalog: &Name,
    records: impl IntoIterator<Item = Record<'a>>,
    max_members: usize,
) -> Result<Members, Vec<Problem>> {
    let Ok(version_owner) = catalog.prepend(b"version") else {
        return Err(vec![Problem::Version {
            owner: catalog.clone(),
            found: None,
        }]);
    };
    let mut version = Vec::new();
    let mut ptrs: HashMap<Vec<u8>, Vec<&[u8]>> = HashMap::new();
    let mut groups: HashMap<Vec<u8>, Vec<&[u8]>> = HashMap::new();
    let mut coos: HashMap<Vec<u8>, Vec<&[u8]>> = HashMap::new();
    for (owner, rtype, rdata) in records {
        if owner.eq(&version_owner) && rtype == RType::TXT {
            version.push(rdata);
            continue;
        }
        let Some(relative) = below_zones(owner, catalog) else {
            continue;
        };
        match (relative.as_slice(), rtype) {
            ([id], RType::PTR) => {
                ptrs.entry(id.clone()).or_default().push(rdata);
                if ptrs.len() > max_members {
                    return Err(vec![too_many(catalog, max_members)]);
                }
            }
            ([property, id], RType::TXT) if property == b"group" => {
                groups.entry(id.clone()).or_default().push(rdata)
            }
            ([property, id], RType::PTR) if property == b"coo" => {
                coos.entry(id.clone()).or_default().push(rdata)
            }
            _ => {}
        }
    }
    let mut problems = Vec::new();
    match version.as_slice() {
        [one] if single_string(one).as_deref() == Some("2") => {}
        [one] => problems.push(Problem::Version {
            owner: version_owner,
            found: single_string(one),
        }),
        _ => problems.push(Problem::Version {
            owner: version_owner,
            found: None,
        }),
    }
    let members = members(catalog, ptrs, &groups, &coos, &mut problems);
    if problems.is_empty() {
        Ok(members)
    } else {
        Err(problems)
    }
}

/// The member nodes' PTRs, with their properties, as members.
fn members(
    catalog: &Name,
    ptrs: HashMap<Vec<u8>, Vec<&[u8]>>,
    groups: &HashMap<Vec<u8>, Vec<&[u8]>>,
    coos: &HashMap<Vec<u8>, Vec<&[u8]>>,
    problems: &mut Vec<Problem>,
) -> Members {
    let mut members = Members::new();
    // In the order of their ids, so that the problems reported do not
    // depend on the order the records came in.
    let mut ptrs: Vec<_> = ptrs.into_iter().collect();
    ptrs.sort();
    for (id, rdatas) in ptrs {
        let owner = member_owner(catalog, &id);
        let zone = match rdatas.as_slice() {
            [one] => Name::from_wire(one).ok(),
            _ => None,
        };
        let Some(zone) = zone else {
            problems.push(Problem::MemberPtr {
                owner,
                count: rdatas.len(),
            });
            continue;
        };
        if zone.eq(catalog) {
            problems.push(Problem::ItselfAMember { owner });
            continue;
        }
        let group = match groups.get(&id).map(Vec::as_slice) {
            None => None,
            Some([one]) => match single_string(one) {
                Some(group) => Some(group.into_boxed_str()),
                None => {
                    problems.push(property_problem(catalog, "group", &id, "one TXT string"));
                    continue;
                }
            },
            Some(_) => {
                problems.push(property_problem(catalog, "group", &id, "more than one TXT"));
                continue;
            }
        };
        let coo = match coos.get(&id).map(Vec::as_slice) {
            None => None,
            Some([one]) => match Name::from_wire(one) {
                // Handing a zone to the catalog that lists it is no move:
                // taken as one, it ceded the zone to nobody (RFC 9432 5.6).
                Ok(to) if to.to_lowercase() == catalog.to_lowercase() => {
                    problems.push(property_problem(
                        catalog,
                        "coo",
                        &id,
                        "PTR names this catalog",
                    ));
                    continue;
                }
                Ok(to) => Some(to),
                Err(_) => {
                    problems.push(property_problem(catalog, "coo", &id, "PTR unreadable"));
                    continue;
                }
            },
            Some(_) => {
                problems.push(property_problem(catalog, "coo", &id, "more than one PTR"));
                continue;
            }
        };
        let key = zone.to_lowercase();
        if let Some(first) = members.get(&key) {
            problems.push(Problem::Duplicate {
                zone,
                owners: [member_owner(catalog, &first.id), owner],
            });
            continue;
        }
        let member = Member::new(zone, id.into_boxed_slice(), group, coo);
        members.insert(key, member);
    }
    // Inserted in the order of their ids, the tree's nodes are about
    // two-thirds full; built again in key order, they are full (126
    // octets a member at 100,000 by heaptrack, before).
    members.into_iter().collect()
}

fn too_many(catalog: &Name, max: usize) -> Problem {
    let owner = catalog
        .prepend(b"zones")
        .unwrap_or_else(|_| catalog.clone());
    Problem::TooManyMembers { owner, max }
}

fn property_problem(catalog: &Name, property: &str, id: &[u8], what: &'static str) -> Problem {
    let owner = member_owner(catalog, id)
        .prepend(property.as_bytes())
        .unwrap_or_else(|_| catalog.clone());
    Problem::Property { owner, what }
}

/// `<id>.zones.<catalog>`.
pub fn member_owner(catalog: &Name, id: &[u8]) -> Name {
    catalog
        .prepend(b"zones")
        .and_then(|zones| zones.prepend(id))
        .unwrap_or_else(|_| catalog.clone())
}

/// The lower-cased labels of `owner` in front of `zones.<catalog>`,
/// nearest to it last, if `owner` is below it.
fn below_zones(owner: &Name, catalog: &Name) -> Option<Vec<Vec<u8>>> {
    let front = owner.label_count().checked_sub(catalog.label_count() + 1)?;
    if front == 0 || !owner.is_subdomain_of(catalog) {
        return None;
    }
    let labels: Vec<Vec<u8>> = owner.labels().map(<[u8]>::to_ascii_lowercase).collect();
    if labels[front] != b"zones" {
        return None;
    }
    Some(labels[..front].to_vec())
}

/// The one character-string of a TXT RDATA, if it holds exactly one and
/// it is text.
fn single_string(rdata: &[u8]) -> Option<String> {
    let (&len, rest) = rdata.split_first()?;
    if rest.len() != len as usize {
        return None;
    }
    String::from_utf8(rest.to_vec()).ok()
}

/// The member zones of a catalog zone as served (see [`parse`]).
pub fn parse_zone(zone: &Zone) -> Result<Members, Vec<Problem>> {
    parse_zone_at_most(zone, usize::MAX)
}

/// [`parse_zone`] with the bound of [`parse_at_most`], found before the
/// records of a catalog past it are copied for reading.
pub fn parse_zone_at_most(zone: &Zone, max_members: usize) -> Result<Members, Vec<Problem>> {
    let catalog = zone.origin();
    let mut records = Vec::new();
    let mut member_nodes = 0;
    for node in zone.nodes() {
        let has_ptr = node.data().any(|rrset| rrset.rtype == RType::PTR);
        if has_ptr && below_zones(&node.owner(), catalog).is_some_and(|l| l.len() == 1) {
            member_nodes += 1;
            if member_nodes > max_members {
                return Err(vec![too_many(catalog, max_members)]);
            }
        }
        push_records(&node, &mut records);
    }
    parse_owned(catalog, &records, max_members)
}

/// A record with its parts owned.
type OwnedRecord = (Name, RType, Vec<u8>);

fn push_records(node: &Node, records: &mut Vec<OwnedRecord>) {
    let owner = node.owner();
    for rrset in node.data() {
        for rdata in rrset.rdatas() {
            records.push((owner.clone(), rrset.rtype, rdata.into_owned()));
        }
    }
}

fn parse_owned(
    catalog: &Name,
    records: &[OwnedRecord],
    max_members: usize,
) -> Result<Members, Vec<Problem>> {
    let records = records.iter();
    let records = records.map(|(owner, rtype, rdata)| (owner, *rtype, rdata.as_slice()));
    parse_at_most(catalog, records, max_members)
}

/// The member ids whose nodes the steps of an IXFR of `catalog` touch
/// (a member node or one of its properties), or None when a step touches
/// the `version` record: the catalog must then be parsed whole.
pub fn touched_ids(catalog: &Name, diffs: &[ZoneDiff]) -> Option<HashSet<Vec<u8>>> {
    let version = catalog.prepend(b"version").ok()?;
    let mut ids = HashSet::new();
    let records = diffs.iter().flat_map(|d| d.deleted.iter().chain(&d.added));
    for record in records {
        if record.owner.eq(&version) {
            return None;
        }
        if let Some(mut labels) = below_zones(&record.owner, catalog) {
            ids.insert(labels.pop().expect("at least one label"));
        }
    }
    Some(ids)
}

/// The members that the nodes of `ids` list in `zone`, a catalog zone,
/// checked as [`parse`] checks a whole catalog (its version included).
/// Only those nodes are read.
pub fn parse_members(zone: &Zone, ids: &HashSet<Vec<u8>>) -> Result<Members, Vec<Problem>> {
    let catalog = zone.origin();
    let mut records = Vec::new();
    let mut read = |name: Result<Name, _>| {
        if let Some(node) = name
            .ok()
            .and_then(|n| zone.node(n.to_lowercase().as_wire()))
        {
            push_records(&node, &mut records);
        }
    };
    read(catalog.prepend(b"version"));
    for id in ids {
        let member = member_owner(catalog, id);
        read(Ok(member.clone()));
        read(member.prepend(b"group"));
        read(member.prepend(b"coo"));
    }
    parse_owned(catalog, &records, usize::MAX)
}

/// A catalog's members as consumed, indexed by zone and by unique ID, so
/// that a change to a few of them costs in proportion to those few.
#[derive(Clone, Debug, Default)]
pub struct MemberSet {
    members: Members,
    /// The key in `members` of each member, hashed by its unique ID: an
    /// index by ID that holds no copy of the IDs (a map from IDs to keys
    /// held 48 octets a member, and a copy of each ID).
    by_id: HashTable<Name>,
    hasher: DefaultHashBuilder,
}

impl MemberSet {
    pub fn new(members: Members) -> MemberSet {
        let mut set = MemberSet {
            by_id: HashTable::with_capacity(members.len()),
            members,
            hasher: DefaultHashBuilder::default(),
        };
        let MemberSet {
            members,
            by_id,
            hasher,
        } = &mut set;
        for (key, member) in members.iter() {
            let hash = hasher.hash_one(&*member.id);
            by_id.insert_unique(hash, key.clone(), |_| unreachable!("room reserved"));
        }
        set
    }

    /// The key of the member whose unique ID is `id`.
    fn key_of(&self, id: &[u8]) -> Option<&Name> {
        let members = &self.members;
        let hash = self.hasher.hash_one(id);
        (self.by_id).find(hash, |key| members.get(key).is_some_and(|m| &*m.id == id))
    }

    pub fn members(&self) -> &Members {
        &self.members
    }

    /// Makes `new` the members; returns what changed.
    pub fn replace(&mut self, new: Members) -> Vec<Change> {
        let changes = diff(&self.members, &new);
        *self = MemberSet::new(new);
        changes
    }

    /// The members the nodes of `ids` list now.
    pub fn listed_at(&self, ids: &HashSet<Vec<u8>>) -> Members {
        ids.iter()
            .filter_map(|id| self.key_of(id))
            .filter_map(|key| Some((key.clone(), self.members.get(key)?.clone())))
            .collect()
    }

    /// The problems of a new version of the catalog in which the nodes of
    /// `ids` list `listed` and every other node is as before: a zone
    /// listed by one of them and by a node not among them.
    pub fn clashes(
        &self,
        catalog: &Name,
        ids: &HashSet<Vec<u8>>,
        listed: &Members,
    ) -> Vec<Problem> {
        let mut problems = Vec::new();
        for (key, member) in listed {
            if let Some(other) = self.members.get(key).filter(|o| !ids.contains(&*o.id)) {
                problems.push(Problem::Duplicate {
                    zone: member.zone.clone(),
                    owners: [
                        member_owner(catalog, &other.id),
                        member_owner(catalog, &member.id),
                    ],
                });
            }
        }
        problems
    }

    /// The problem of a new version in which the nodes of `ids` list
    /// `listed` (and every other node is as before), if it has more than
    /// `max` members.
    pub fn over(
        &self,
        catalog: &Name,
        ids: &HashSet<Vec<u8>>,
        listed: &Members,
        max: usize,
    ) -> Option<Problem> {
        let listed_before = ids.iter().filter(|id| self.key_of(id).is_some());
        let after = self.members.len() - listed_before.count() + listed.len();
        (after > max).then(|| too_many(catalog, max))
    }

    /// Takes a new version in which the nodes of `ids` list `listed` (see
    /// [`MemberSet::clashes`], which must have found nothing); returns
    /// what changed.
    pub fn update(&mut self, ids: &HashSet<Vec<u8>>, listed: Members) -> Vec<Change> {
        let before = self.listed_at(ids);
        let changes = diff(&before, &listed);
        for (key, member) in before {
            let hash = self.hasher.hash_one(&*member.id);
            if let Ok(found) = (self.by_id).find_entry(hash, |k| *k == key) {
                found.remove();
            }
            self.members.remove(&key);
        }
        for (key, member) in listed {
            let hash = self.hasher.hash_one(&*member.id);
            self.members.insert(key.clone(), member);
            let (members, hasher) = (&self.members, &self.hasher);
            let rehash = |k: &Name| hasher.hash_one(&*members[k].id);
            self.by_id.insert_unique(hash, key, rehash);
        }
        changes
    }
}

/// The problems of `members` against the configuration: zones configured
/// by hand, kept files the configuration uses (`file_in_use` gives the
/// file, if so), and groups without a template.
pub fn check<'m>(
    catalog: &Name,
    members: impl IntoIterator<Item = &'m Member>,
    configured_by_hand: impl Fn(&Name) -> bool,
    file_in_use: impl Fn(&Member) -> Option<String>,
    has_template: impl Fn(Option<&str>) -> bool,
) -> Vec<Problem> {
    let mut problems = Vec::new();
    for member in members {
        let owner = member_owner(catalog, &member.id);
        if configured_by_hand(&member.zone) {
            problems.push(Problem::ConfiguredByHand {
                zone: member.zone.clone(),
                owner,
            });
        } else if let Some(file) = file_in_use(member) {
            problems.push(Problem::FileInUse {
                zone: member.zone.clone(),
                owner,
                file,
            });
        } else if !has_template(member.group()) {
            problems.push(Problem::NoTemplate {
                zone: member.zone.clone(),
                owner,
                group: member.group().map(String::from),
            });
        }
    }
    problems
}

/// What changed in a catalog, for its consumer to act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// A new member: transfer it.
    Add(Member),
    /// No longer a member: stop serving it.
    Remove(Member),
    /// Its unique ID changed: drop what is kept and transfer it afresh
    /// (RFC 9432 5.6).
    Reset(Member),
    /// Another group: follow the other template, keeping its data.
    Regroup(Member),
    /// Only its `coo` property changed: it may be handed to the catalog
    /// it now names (RFC 9432 5.6).
    Coo(Member),
}

/// The changes from `old` to `new`, in the order of zone names.
pub fn diff(old: &Members, new: &Members) -> Vec<Change> {
    let mut changes = Vec::new();
    for (key, member) in old {
        if !new.contains_key(key) {
            changes.push(Change::Remove(member.clone()));
        }
    }
    for (key, member) in new {
        match old.get(key) {
            None => changes.push(Change::Add(member.clone())),
            Some(before) if before.id != member.id => changes.push(Change::Reset(member.clone())),
            Some(before) if before.group() != member.group() => {
                changes.push(Change::Regroup(member.clone()))
            }
            Some(before) if before.coo() != member.coo() => {
                changes.push(Change::Coo(member.clone()))
            }
            Some(_) => {}
        }
    }
    changes
}

/// The producer side: a catalog zone generated from configured members.
pub mod generate;

#[cfg(test)]
mod tests;
