//! Authenticated denial of existence for pre-signed zones: which NSEC
//! (RFC 4035 3.1.3 and 3.1.4.1) or NSEC3 (RFC 5155 7.2) records prove a
//! negative answer, a wildcard expansion (RFC 4592) or a referral to an
//! unsigned child, chosen as NSD and Knot choose them.
//!
//! The answer engine says what it answered ([`Denial`]); [`prove`] finds
//! the records in the zone's chain ([`DenialChain`]) and the engine writes
//! them, with their RRSIGs, to the authority section. Nothing here runs
//! for an unsigned zone or a query without the DO bit.
//!
//! A zone whose chain is broken (gaps, NSEC3 missing for some names) gets
//! the best proof its records allow, never a panic: a covering record is
//! whatever precedes the name, a closest encloser the nearest ancestor
//! that has an NSEC3.

#[cfg(test)]
mod tests;

use heron_proto::name::suffixes;

use crate::zone::chain::{ChainKind, DenialChain};
use crate::zone::nsec3::{HASH_LEN, HashedOwner, Nsec3Params};
use crate::zone::wildcard::WildcardName;
use crate::zone::{Node, RRset, Zone};

/// What an answer to a name says that a signed zone must prove.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Denial<'z> {
    /// The name does not exist; `encloser` is its closest encloser.
    NxDomain { encloser: Node<'z> },
    /// The name is `node` (perhaps an empty non-terminal), which lacks the
    /// type asked (NODATA, or DS at a delegation).
    NoData { node: Node<'z> },
    /// The name was answered (data or a CNAME) from the wildcard `source`.
    Wildcard { source: Node<'z> },
    /// The name matched the wildcard `source`, which lacks the type asked.
    WildcardNoData { source: Node<'z> },
    /// A referral to the child at `cut`, which has no DS: it is unsigned.
    InsecureReferral { cut: Node<'z> },
}

/// The records that prove a [`Denial`]: up to three chain nodes, each to
/// be written with its NSEC or NSEC3 RRset.
#[derive(Debug)]
pub(crate) struct Proof<'z> {
    nodes: [Option<Node<'z>>; 3],
    kind: &'z ChainKind,
}

impl<'z> Proof<'z> {
    fn new(kind: &'z ChainKind) -> Proof<'z> {
        Proof {
            nodes: [None; 3],
            kind,
        }
    }

    /// Adds a node, once: the same record may prove two things.
    fn add(&mut self, node: Option<Node<'z>>) {
        let Some(node) = node else { return };
        if self.nodes.iter().flatten().any(|n| n.id() == node.id()) {
            return;
        }
        if let Some(free) = self.nodes.iter_mut().find(|slot| slot.is_none()) {
            *free = Some(node);
        }
    }

    /// Each proving node with its NSEC or NSEC3 RRset, in the order found.
    pub(crate) fn records(&self) -> impl Iterator<Item = (Node<'z>, RRset<'z>)> + '_ {
        let rtype = self.kind.rtype();
        self.nodes
            .iter()
            .flatten()
            .filter_map(move |n| Some((*n, n.rrset(rtype)?)))
    }
}

/// The proof of `denial` for `name` (lower-cased wire, in `zone`, the
/// name the answer was for) from the zone's `chain`.
pub(crate) fn prove<'z>(
    zone: &'z Zone,
    chain: &'z DenialChain,
    name: &[u8],
    denial: Denial<'z>,
) -> Proof<'z> {
    let mut proof = Proof::new(chain.kind());
    let mut prover = Prover {
        zone,
        chain,
        proof: &mut proof,
    };
    match chain.kind() {
        ChainKind::Nsec => prover.nsec(name, denial),
        ChainKind::Nsec3(params) => prover.nsec3(params, name, denial),
    }
    proof
}

struct Prover<'z, 'p> {
    zone: &'z Zone,
    chain: &'z DenialChain,
    proof: &'p mut Proof<'z>,
}

impl<'z> Prover<'z, '_> {
    /// RFC 4035 3.1.3 and 3.1.4.1.
    fn nsec(&mut self, name: &[u8], denial: Denial<'z>) {
        match denial {
            Denial::NxDomain { encloser } => {
                self.proof.add(self.nsec_covering(name));
                let star = WildcardName::below(encloser.key());
                self.proof
                    .add(star.and_then(|s| self.nsec_covering(s.as_wire())));
            }
            Denial::NoData { node } | Denial::InsecureReferral { cut: node } => {
                self.proof.add(self.nsec_of(node));
            }
            Denial::Wildcard { .. } => self.proof.add(self.nsec_covering(name)),
            Denial::WildcardNoData { source } => {
                self.proof.add(self.nsec_of(source));
                self.proof.add(self.nsec_covering(name));
            }
        }
    }

    /// The NSEC that covers (or matches) a name.
    fn nsec_covering(&self, name: &[u8]) -> Option<Node<'z>> {
        self.chain.at_or_before(self.zone, name)
    }

    /// A node's own NSEC, or for one without (an empty non-terminal) the
    /// NSEC that covers its name, whose next name lies below it.
    fn nsec_of(&self, node: Node<'z>) -> Option<Node<'z>> {
        match self.chain.kind().links(&node) {
            true => Some(node),
            false => self.nsec_covering(node.key()),
        }
    }

    /// RFC 5155 7.2.
    fn nsec3(&mut self, params: &Nsec3Params, name: &[u8], denial: Denial<'z>) {
        let h = Nsec3Chain {
            zone: self.zone,
            chain: self.chain,
            params,
        };
        match denial {
            // 7.2.2: the closest encloser proof, and no wildcard there.
            Denial::NxDomain { encloser } => {
                let longest = encloser.key().len();
                let found = h.closest_encloser_proof(name, longest, Some(encloser), self.proof);
                if let Some((ce, ce_node)) = found {
                    self.proof.add(h.covering_wildcard_of(ce, ce_node));
                }
            }
            // 7.2.3, 7.2.4 and 7.2.7: the matching NSEC3, or where there
            // is none (opt-out) the closest provable encloser proof.
            Denial::NoData { node } | Denial::InsecureReferral { cut: node } => {
                let own = node.key();
                match h.matching_node(node) {
                    Some(m) => self.proof.add(Some(m)),
                    None => {
                        h.closest_encloser_proof(own, parent_len(own), None, self.proof);
                    }
                }
            }
            // 7.2.6: the next closer name does not exist.
            Denial::Wildcard { source } => {
                let ce = parent(source.key());
                self.proof
                    .add(next_closer(name, ce.len()).and_then(|nc| h.covering(nc)));
            }
            // 7.2.5: the closest encloser proof and the wildcard's NSEC3.
            Denial::WildcardNoData { source } => {
                let ce = parent(source.key());
                h.closest_encloser_proof(name, ce.len(), None, self.proof);
                self.proof.add(h.matching_node(source));
            }
        }
    }
}

/// A zone's NSEC3 chain and the parameters to hash names with.
struct Nsec3Chain<'z, 'p> {
    zone: &'z Zone,
    chain: &'z DenialChain,
    params: &'p Nsec3Params,
}

impl<'z> Nsec3Chain<'z, '_> {
    /// The hash of `name` (the first digest) or of its wildcard child
    /// (the second): the one computed at load when `node`, `name`'s node
    /// in the zone, is given, else computed now.
    fn digest_of(&self, name: &[u8], node: Option<Node>, which: usize) -> Option<[u8; HASH_LEN]> {
        if let Some(stored) = node.and_then(|n| self.chain.owner_digests(self.zone, &n)) {
            return Some(stored[which]);
        }
        match which {
            0 => Some(self.params.hash(name)),
            _ => WildcardName::below(name).map(|star| self.params.hash(star.as_wire())),
        }
    }

    /// The NSEC3 that matches the owner of `node`.
    fn matching_node(&self, node: Node<'z>) -> Option<Node<'z>> {
        if node.id() == self.zone.apex().id() {
            return self.chain.apex_match(self.zone);
        }
        self.matching_digest(&self.digest_of(node.key(), Some(node), 0)?)
    }

    /// The NSEC3 whose hashed owner is that of `digest`.
    fn matching_digest(&self, digest: &[u8; HASH_LEN]) -> Option<Node<'z>> {
        let owner = HashedOwner::new(digest, self.zone.origin().as_wire())?;
        let node = self.zone.node(owner.as_wire())?;
        self.chain.kind().links(&node).then_some(node)
    }

    /// The NSEC3 that covers `*.<ce>`: that there is no wildcard at the
    /// closest encloser `ce`.
    /// `ce_node` is its node, if the zone has one.
    fn covering_wildcard_of(&self, ce: &[u8], ce_node: Option<Node>) -> Option<Node<'z>> {
        let apex = self.zone.origin().as_wire();
        if ce == apex {
            return self.chain.apex_wildcard_cover(self.zone);
        }
        let owner = HashedOwner::new(&self.digest_of(ce, ce_node, 1)?, apex)?;
        self.chain.before(self.zone, owner.as_wire())
    }

    /// The NSEC3 whose owner precedes `name`'s hash: the one that covers
    /// it (wrapping from the first hash to the last).
    fn covering(&self, name: &[u8]) -> Option<Node<'z>> {
        let apex = self.zone.origin().as_wire();
        if name.len() == apex.len() + 2 && name.starts_with(b"\x01*") && name.ends_with(apex) {
            return self.chain.apex_wildcard_cover(self.zone);
        }
        let owner = self.params.hashed_owner(name, apex)?;
        self.chain.before(self.zone, owner.as_wire())
    }

    /// Adds the closest provable encloser proof of `name` (RFC 5155
    /// 7.2.1): the NSEC3 of the nearest ancestor, at most `longest`
    /// octets long, that has one, and the NSEC3 covering the next closer
    /// name below it. Returns that encloser and its node; None when not
    /// even the apex has an NSEC3. `known` is the node of one of the
    /// candidates, if the caller has it (no lookup for that one).
    fn closest_encloser_proof<'n>(
        &self,
        name: &'n [u8],
        longest: usize,
        known: Option<Node<'z>>,
        proof: &mut Proof<'z>,
    ) -> Option<(&'n [u8], Option<Node<'z>>)> {
        let apex_len = self.zone.origin().wire_len();
        let candidates = suffixes(name)
            .filter(|s| s.len() <= longest && s.len() < name.len())
            .take_while(|s| s.len() >= apex_len);
        for ce in candidates {
            let node = match known {
                Some(k) if k.key() == ce => Some(k),
                _ => self.zone.node(ce),
            };
            let matched = match node {
                Some(n) => self.matching_node(n),
                None => self.matching_digest(&self.params.hash(ce)),
            };
            if let Some(m) = matched {
                proof.add(Some(m));
                proof.add(next_closer(name, ce.len()).and_then(|nc| self.covering(nc)));
                return Some((ce, node));
            }
        }
        None
    }
}

/// The parent of a wire name (the root's is the root).
fn parent(wire: &[u8]) -> &[u8] {
    match wire.first() {
        Some(&len) if len > 0 => &wire[1 + len as usize..],
        _ => wire,
    }
}

fn parent_len(wire: &[u8]) -> usize {
    parent(wire).len()
}

/// The next closer name of `name` for a closest encloser of `ce_len`
/// octets: the ancestor of `name` (or itself) one label longer.
fn next_closer(name: &[u8], ce_len: usize) -> Option<&[u8]> {
    suffixes(name).take_while(|s| s.len() > ce_len).last()
}
