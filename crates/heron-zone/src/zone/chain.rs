//! The NSEC or NSEC3 chain of a signed zone in canonical order: what finds
//! the record that covers a name the zone does not have. Nodes are stored
//! by hash, so this is the one ordered index a zone keeps, and only signed
//! zones have it: 16 bytes per NSEC or NSEC3 owner.
//!
//! A change (`Zone::apply`) rewrites the shards it touches, which moves
//! their nodes: the next version's chain keeps the links into the shards
//! it shares with the previous one as they are and sorts in only the
//! owners of the rewritten shards (a merge, no full sort).

use std::cmp::Ordering;

use heron_proto::RType;
use heron_proto::name::Name;

use super::canonical::{Position, order_key};
use super::node::Moves;
use super::nsec3::{HASH_LEN, LABEL_LEN, Nsec3Params, base32hex_lower};
use super::nsec3_owners::{OwnerDigests, OwnerHashes};
use super::wildcard::WildcardName;
use super::{Node, Zone, shard_of};

/// Chain breaks named one by one in the loader's warnings; more are
/// counted.
const BREAKS_NAMED: usize = 3;

/// How a signed zone denies existence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ChainKind {
    /// NSEC records (RFC 4034 4).
    Nsec,
    /// NSEC3 records hashed with these parameters (RFC 5155).
    Nsec3(Nsec3Params),
}

impl ChainKind {
    /// How the zone whose apex is `apex` is signed: NSEC3 when it has an
    /// NSEC3PARAM we can hash with (flags 0, SHA-1; RFC 5155 4.1.2 has
    /// servers ignore others), else NSEC when the apex has one; None for
    /// an unsigned zone.
    fn of_apex(apex: &Node) -> Option<ChainKind> {
        let nsec3 = apex.rrset(RType::NSEC3PARAM).and_then(|set| {
            set.rdatas()
                .filter(|rd| rd.get(1) == Some(&0))
                .find_map(|rd| Nsec3Params::from_nsec3param(&rd))
        });
        match nsec3 {
            Some(params) => Some(ChainKind::Nsec3(params)),
            None => apex.rrset(RType::NSEC).map(|_| ChainKind::Nsec),
        }
    }

    /// The record type of the chain.
    pub(crate) fn rtype(&self) -> RType {
        match self {
            ChainKind::Nsec => RType::NSEC,
            ChainKind::Nsec3(_) => RType::NSEC3,
        }
    }

    /// Whether `node` is a link of the chain: it has the chain's record
    /// (for NSEC3, one made with the zone's parameters).
    pub(crate) fn links(&self, node: &Node) -> bool {
        let Some(set) = node.rrset(self.rtype()) else {
            return false;
        };
        match self {
            ChainKind::Nsec => true,
            ChainKind::Nsec3(params) => set.rdatas().any(|rd| params.made(&rd)),
        }
    }
}

/// A signed zone's chain: its kind and its owners in canonical order.
pub(crate) struct DenialChain {
    kind: ChainKind,
    links: Box<[Position]>,
    /// NSEC3 only: the links (indexes into `links`) that match the apex
    /// and cover `*.<apex>`, found when the chain is built. An NXDOMAIN
    /// whose closest encloser is the apex, the usual one, then hashes only
    /// its next closer name at query time.
    apex_nsec3: [Option<u32>; 2],
    /// NSEC3 only: the hash of every owner and of its wildcard child, so
    /// that a proof hashes only names derived from the query name.
    owners: Option<OwnerHashes>,
}

impl DenialChain {
    /// The chain of `zone`, or None if the zone is not signed.
    pub(super) fn of(zone: &Zone) -> Option<DenialChain> {
        let kind = ChainKind::of_apex(&zone.apex())?;
        let mut links = Vec::new();
        for (shard, s) in zone.shards.iter().enumerate() {
            links.extend(kind.positions_in(zone, shard, s.offsets()));
        }
        zone.sort_canonically(&mut links);
        let owners = match &kind {
            ChainKind::Nsec3(params) => Some(OwnerHashes::of(zone, &|n| kind.links(n), params)),
            ChainKind::Nsec => None,
        };
        Some(DenialChain::new(kind, links, owners, zone))
    }

    fn new(
        kind: ChainKind,
        links: Vec<Position>,
        owners: Option<OwnerHashes>,
        zone: &Zone,
    ) -> DenialChain {
        let mut chain = DenialChain {
            kind,
            links: links.into(),
            apex_nsec3: [None; 2],
            owners,
        };
        if let ChainKind::Nsec3(params) = &chain.kind {
            let apex = zone.origin.as_wire();
            let own = params.hashed_owner(apex, apex).and_then(|owner| {
                let at = chain.index_where(zone, owner.as_wire(), |o| o != Ordering::Greater)?;
                let found = zone.node_of(&chain.links[at]).key() == owner.as_wire();
                found.then_some(at as u32)
            });
            let star = WildcardName::below(apex)
                .and_then(|star| params.hashed_owner(star.as_wire(), apex))
                .and_then(|owner| {
                    chain.index_where(zone, owner.as_wire(), |o| o == Ordering::Less)
                });
            chain.apex_nsec3 = [own, star.map(|at| at as u32)];
        }
        chain
    }

    /// NSEC3: the NSEC3 that matches the apex, found at load time.
    pub(crate) fn apex_match<'z>(&self, zone: &'z Zone) -> Option<Node<'z>> {
        self.apex_nsec3[0].map(|at| zone.node_of(&self.links[at as usize]))
    }

    /// NSEC3: the NSEC3 that covers `*.<apex>`, found at load time.
    pub(crate) fn apex_wildcard_cover<'z>(&self, zone: &'z Zone) -> Option<Node<'z>> {
        self.apex_nsec3[1].map(|at| zone.node_of(&self.links[at as usize]))
    }

    /// The chain of `next`, a version `apply` made from `previous`: this
    /// chain's links into the shards they share; a link in a rewritten
    /// shard to a node the copy kept (`moves`) keeps its place in the
    /// order, only moved to the node's new offset; the links of the
    /// `changed` nodes (the keys of every node `apply` wrote) are sorted
    /// and merged in. The whole chain is built again when the zone
    /// changed how it is signed.
    pub(super) fn after_change(
        &self,
        next: &Zone,
        changed: &[&[u8]],
        moves: &[Option<Moves>],
    ) -> Option<DenialChain> {
        let kind = ChainKind::of_apex(&next.apex())?;
        if kind != self.kind {
            return DenialChain::of(next);
        }
        let kept = (self.links.iter()).filter_map(|p| match &moves[p.shard as usize] {
            None => Some(*p),
            Some(moved) => moved.of(p.at).map(|at| Position { at, ..*p }),
        });
        let kept: Vec<Position> = kept.collect();
        let mut fresh = Vec::new();
        for key in changed {
            let hash = next.hash(key);
            let shard = shard_of(hash, next.shards.len());
            let Some(at) = next.shards[shard].find(hash, key) else {
                continue; // gone
            };
            if kind.links(&next.node_at((shard, at))) {
                fresh.push(next.position((shard, at)));
            }
        }
        next.sort_canonically(&mut fresh);
        let links = merge(kept, fresh, |a, b| next.cmp_positions(a, b));
        let owners = match (&self.owners, &kind) {
            (Some(owners), ChainKind::Nsec3(params)) => {
                Some(owners.after_change(next, moves, &|n| kind.links(n), params))
            }
            _ => None,
        };
        Some(DenialChain::new(kind, links, owners, next))
    }

    /// NSEC3: the digests of `node`'s owner and of its wildcard child,
    /// computed when the chain was built (None: hash them).
    pub(crate) fn owner_digests<'z>(
        &'z self,
        zone: &'z Zone,
        node: &Node,
    ) -> Option<&'z OwnerDigests> {
        self.owners.as_ref()?.get(zone, node)
    }

    /// Forgets the owner digests, so that proofs hash every name at
    /// query time: the reference the digests are tested against.
    #[cfg(test)]
    pub(crate) fn forget_owner_digests(&mut self) {
        self.owners = None;
    }

    /// Owners whose digests were computed, for tests.
    #[cfg(test)]
    pub(crate) fn owner_digest_count(&self) -> Option<usize> {
        self.owners.as_ref().map(OwnerHashes::len)
    }

    pub(crate) fn kind(&self) -> &ChainKind {
        &self.kind
    }

    pub(crate) fn len(&self) -> usize {
        self.links.len()
    }

    /// Heap bytes the chain takes.
    pub(crate) fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.links)
            + self.owners.as_ref().map_or(0, OwnerHashes::heap_bytes)
    }

    /// The link whose owner is the last at or before `name` (lower-cased
    /// wire, in `zone`) in canonical order: the record that matches or
    /// covers it. Before the first owner (only when the apex has no
    /// record, or for NSEC3 hashes), the chain wraps to its last link.
    pub(crate) fn at_or_before<'z>(&self, zone: &'z Zone, name: &[u8]) -> Option<Node<'z>> {
        self.last_where(zone, name, |o| o != Ordering::Greater)
    }

    /// The link whose owner is the last strictly before `name`, wrapping
    /// likewise: the record that covers a name it does not match.
    pub(crate) fn before<'z>(&self, zone: &'z Zone, name: &[u8]) -> Option<Node<'z>> {
        self.last_where(zone, name, |o| o == Ordering::Less)
    }

    /// The last link whose comparison with `name` `keep` accepts.
    fn last_where<'z>(
        &self,
        zone: &'z Zone,
        name: &[u8],
        keep: impl Fn(Ordering) -> bool,
    ) -> Option<Node<'z>> {
        let at = self.index_where(zone, name, keep)?;
        Some(zone.node_of(&self.links[at]))
    }

    /// [`DenialChain::last_where`]'s index into `links`.
    fn index_where(
        &self,
        zone: &Zone,
        name: &[u8],
        keep: impl Fn(Ordering) -> bool,
    ) -> Option<usize> {
        let key = order_key(name, zone.origin.wire_len());
        let end = self
            .links
            .partition_point(|p| keep(zone.cmp_position_name(p, key, name)));
        match end {
            0 => self.links.len().checked_sub(1),
            _ => Some(end - 1),
        }
    }

    /// What is wrong with how `zone` proves denial, for the loader's
    /// warnings (`chain` is the zone's chain, None if it has none). The
    /// zone is served all the same: a proof is then built from whatever
    /// records the zone has (the record before a name covers it), and a
    /// validator may reject it.
    pub(super) fn problems(zone: &Zone, chain: Option<&DenialChain>) -> Vec<String> {
        let apex = zone.apex();
        let Some(chain) = chain else {
            if apex.rrset(RType::DNSKEY).is_none() {
                return Vec::new(); // unsigned
            }
            let why = match apex.rrset(RType::NSEC3PARAM) {
                Some(_) => {
                    "its NSEC3PARAM has a hash algorithm other than SHA-1 (1) or flags \
                     other than 0, and it has no NSEC at the apex"
                }
                None => "it has neither an NSEC record nor an NSEC3PARAM record at the apex",
            };
            return vec![format!(
                "the zone is signed (DNSKEY at the apex {}) but {why}: answers with the DO \
                 bit carry no proof of denial of existence (NXDOMAIN, NODATA, wildcards, \
                 unsigned delegations); add the NSEC3PARAM (or NSEC chain) the zone was \
                 signed with",
                zone.origin
            )];
        };
        let nodes: Vec<Node> = chain.links.iter().map(|p| zone.node_of(p)).collect();
        let rtype = chain.kind.rtype();
        let mut breaks = Vec::new();
        for (at, node) in nodes.iter().enumerate() {
            let next = &nodes[(at + 1) % nodes.len()];
            let Some(set) = node.rrset(rtype) else {
                continue;
            };
            // Compared where they lie: a copy of each was most of this
            // check's time on a signed zone of 200,000 names.
            let rdata = set.first_rdata();
            let says = match &chain.kind {
                ChainKind::Nsec => {
                    let Some(named) = nsec_next(&rdata) else {
                        continue;
                    };
                    // Length octets are below any ASCII letter.
                    if named.eq_ignore_ascii_case(next.key()) {
                        continue;
                    }
                    named.to_ascii_lowercase()
                }
                ChainKind::Nsec3(params) => {
                    let made = set.rdatas().find(|rd| params.made(rd));
                    let Some(hash) = made.as_deref().and_then(nsec3_next) else {
                        continue;
                    };
                    let mut label = [0u8; LABEL_LEN];
                    base32hex_lower(&hash, &mut label);
                    if label[..] == next.key()[1..1 + next.key()[0] as usize] {
                        continue;
                    }
                    label.to_vec()
                }
            };
            breaks.push((node.owner(), says, next.owner()));
        }
        let mut out = Vec::new();
        let name = |wire: &[u8]| match &chain.kind {
            ChainKind::Nsec => Name::from_wire(wire).map_or_else(|_| "?".into(), |n| n.to_string()),
            ChainKind::Nsec3(_) => String::from_utf8_lossy(wire).into_owned(),
        };
        for (owner, says, next) in breaks.iter().take(BREAKS_NAMED) {
            out.push(format!(
                "{} chain broken at {owner}: its next name is {}, but the next {} in the zone \
                 is {next}; proofs of denial near it will not validate (sign the zone again)",
                rtype,
                name(says),
                rtype,
            ));
        }
        if breaks.len() > BREAKS_NAMED {
            out.push(format!(
                "{} more breaks in the {rtype} chain",
                breaks.len() - BREAKS_NAMED
            ));
        }
        out
    }

    /// The links in order, for tests.
    #[cfg(test)]
    pub(crate) fn nodes<'z>(&self, zone: &'z Zone) -> Vec<Node<'z>> {
        self.links.iter().map(|p| zone.node_of(p)).collect()
    }
}

impl ChainKind {
    /// The positions of the links among the nodes at `offsets` of a shard.
    fn positions_in<'z>(
        &'z self,
        zone: &'z Zone,
        shard: usize,
        offsets: impl Iterator<Item = usize> + 'z,
    ) -> impl Iterator<Item = Position> + 'z {
        offsets
            .filter(move |&at| self.links(&zone.node_at((shard, at))))
            .map(move |at| zone.position((shard, at)))
    }
}

/// The next domain name of NSEC RDATA (RFC 4034 4.1), in wire form.
fn nsec_next(rdata: &[u8]) -> Option<&[u8]> {
    let mut at = 0;
    loop {
        let len = *rdata.get(at)? as usize;
        at += 1 + len;
        if len == 0 {
            return rdata.get(..at);
        }
    }
}

/// The next hashed owner of NSEC3 RDATA (RFC 5155 3.2), if SHA-1 sized.
fn nsec3_next(rdata: &[u8]) -> Option<[u8; HASH_LEN]> {
    let salt_len = *rdata.get(4)? as usize;
    let hash_len = *rdata.get(5 + salt_len)? as usize;
    let hash = rdata.get(6 + salt_len..6 + salt_len + hash_len)?;
    hash.try_into().ok()
}

/// Two sorted sequences as one.
fn merge<T: Copy>(a: Vec<T>, b: Vec<T>, cmp: impl Fn(&T, &T) -> Ordering) -> Vec<T> {
    // Few links are merged into many: each found by a binary search, the
    // runs between them copied whole.
    let mut out = Vec::with_capacity(a.len() + b.len());
    let mut rest = &a[..];
    for y in b {
        let before = rest.partition_point(|x| cmp(&y, x) != Ordering::Less);
        out.extend_from_slice(&rest[..before]);
        out.push(y);
        rest = &rest[before..];
    }
    out.extend_from_slice(rest);
    out
}
