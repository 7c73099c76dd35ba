//! Signing a change to a signed zone without walking the zone: the
//! RRsets the change touched are signed anew, the NSEC or NSEC3 records
//! of the names it added, removed or changed the types of are made again
//! (and those of their predecessors in the chain, re-pointed), and the
//! SOA is signed once with its new serial. Everything else, signatures
//! included, is shared with the version served: the work follows the
//! size of the change (the zone's chain index is merged, 16 octets a
//! link), not the size of the zone.
//!
//! Changes that reach beyond the names they touch are left to a whole
//! signing ([`super::sign_zone_after`]): a delegation or DNAME added or
//! removed below the apex (the names under it change status), the
//! DNSKEY, CDS or CDNSKEY RRsets, keys or roles other than those the
//! served version was signed with, another denial chain or parameters,
//! and a change of the SOA's negative TTL (every NSEC's TTL).

use std::collections::{BTreeMap, BTreeSet};

use heron_proto::{Name, RType};
use heron_zone::Zone;
use heron_zone::diff::{DiffRecord, ZoneDiff};
use heron_zone::zone::{Node, RRset};

use super::denial::{Denial, base32hex, bitmap, nsec3_hash, nsec3param_rdata};
use super::plan::{Entry, Kind, from_signer};
use super::{
    Context, Job, OwnedRRset, SignConfig, SignError, Signed, ZoneKey, check_keys, sign_jobs,
    signed_by_key_signers, soa_with_serial,
};

/// `updated` (the signed zone `served` with `change` applied, `change`
/// being `diff(served, updated)`, its signatures over what changed stale
/// or gone) signed again with `keys` at `now`: only what the change
/// touched gets new signatures; with the signer's own change, from
/// `updated` to the signed version (the RRSIG, NSEC and NSEC3 records
/// made and dropped, and the SOA), so that the caller need not diff the
/// two. None when the change needs the whole zone signed (see the
/// module's notes).
pub fn sign_change(
    served: &Zone,
    updated: &Zone,
    change: &ZoneDiff,
    keys: &[ZoneKey],
    config: &SignConfig,
    now: u64,
) -> Result<Option<(Signed, ZoneDiff)>, SignError> {
    check_keys(keys)?;
    if !same_signing(served, updated, keys, config) {
        return Ok(None);
    }
    let Some(touched) = touched(updated, change) else {
        return Ok(None);
    };
    // A change read from a file or an IXFR deletes records and leaves
    // their signatures, which would keep deleted names in the zone and
    // the chain: they go first, and are part of the signer's change.
    let orphans = orphan_signatures(updated, &touched);
    let cleaned;
    let updated = match orphans.is_empty() {
        true => updated,
        false => {
            cleaned = without(updated, &orphans)?;
            &cleaned
        }
    };
    let mut edit = Edit::new(updated);
    for (owner, types) in &touched {
        types.iter().for_each(|t| edit.resign(owner, *t));
    }
    let relinked = Relinked::of(served, updated, &config.denial, touched.keys())?;
    relinked.apply(&mut edit)?;
    let new_soa = match config.serial {
        Some(serial) => soa_with_serial(updated, serial),
        None => owned(updated.apex().owner_wire(), updated.soa()),
    };
    edit.drop_sigs(&updated.apex(), updated.soa());
    edit.sign.push(new_soa.clone());
    let context = Context {
        keys,
        signer: updated.origin().as_wire(),
        class: updated.class().0,
        validity: config.validity_at(now),
        previous: None,
        // The new SOA is among the RRsets gathered; no chain is made here.
        soa_replaced: false,
        nsec_ttl: None,
    };
    let (signed, mut step) = edit.finish(updated, new_soa, &context)?;
    if !orphans.is_empty() {
        step.deleted.extend(orphans);
        step.deleted.sort();
    }
    Ok(Some((signed, step)))
}

/// The signatures over RRsets of `touched` types that hold no records
/// in `updated` any more.
fn orphan_signatures(updated: &Zone, touched: &BTreeMap<Name, BTreeSet<RType>>) -> Vec<DiffRecord> {
    let mut out = Vec::new();
    for (owner, types) in touched {
        let Some(node) = updated.node(owner.as_wire()) else {
            continue;
        };
        let emptied = node
            .rrsets()
            .filter(|s| !s.has_records() && types.contains(&s.rtype));
        for set in emptied {
            let sigs = set.sigs().map(|s| s.into_owned());
            let ttl = set.sig_ttl();
            out.extend(sigs.map(|s| record(node.owner_wire(), RType::RRSIG, ttl, s)));
        }
    }
    out
}

/// `zone` without `deleted`, its SOA as it is.
fn without(zone: &Zone, deleted: &[DiffRecord]) -> Result<Zone, SignError> {
    let soa = zone.soa();
    let apex = zone.apex().owner_wire();
    let same = record(apex, RType::SOA, soa.ttl(), soa.first_rdata().into_owned());
    let diff = ZoneDiff {
        old_soa: same.clone(),
        new_soa: same,
        deleted: deleted.to_vec(),
        added: Vec::new(),
    };
    zone.apply(&diff).map_err(|problems| {
        let text: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        SignError(format!(
            "stale signatures do not come off: {}",
            text.join("; ")
        ))
    })
}

/// Whether `updated` is signed as `keys` and `config` would sign it: the
/// same denial chain and parameters, the DNSKEY RRset the keys publish,
/// the keys that signed the served version's DNSKEY and SOA RRsets, and
/// the same negative TTL as `served`.
fn same_signing(served: &Zone, updated: &Zone, keys: &[ZoneKey], config: &SignConfig) -> bool {
    let apex = updated.apex();
    let chain = match &config.denial {
        Denial::Nsec => apex.rrset(RType::NSEC3PARAM).is_none(),
        Denial::Nsec3 {
            iterations, salt, ..
        } => apex.rrset(RType::NSEC3PARAM).is_some_and(|set| {
            set.rdata_count() == 1 && *set.first_rdata() == nsec3param_rdata(salt, *iterations)
        }),
    };
    let sorted = |mut v: Vec<Vec<u8>>| {
        v.sort();
        v
    };
    let published = sorted(
        keys.iter()
            .filter(|k| k.published)
            .map(|k| k.dnskey.clone())
            .collect(),
    );
    let dnskeys = apex.rrset(RType::DNSKEY).is_some_and(|set| {
        set.ttl() == config.dnskey_ttl
            && sorted(set.rdatas().map(|r| r.to_vec()).collect()) == published
    });
    let signers = |rtype: RType| -> BTreeSet<(u8, u16)> {
        (keys.iter())
            .filter(|k| match signed_by_key_signers(rtype) {
                true => k.signs_keys,
                false => k.signs_zone,
            })
            .map(|k| (k.key.algorithm().number(), k.tag))
            .collect()
    };
    let signed_by = |set: Option<RRset>| -> BTreeSet<(u8, u16)> {
        (set.iter().flat_map(|s| s.sigs()))
            .filter(|s| s.len() > 18)
            .map(|s| (s[2], u16::from_be_bytes([s[16], s[17]])))
            .collect()
    };
    let served_apex = served.apex();
    served.signed_chain_len().is_some()
        && chain
        && dnskeys
        && served.negative_ttl() == updated.negative_ttl()
        && signed_by(served_apex.rrset(RType::DNSKEY)) == signers(RType::DNSKEY)
        && signed_by(served_apex.rrset(RType::SOA)) == signers(RType::SOA)
}

/// The RRsets `change` touched (lower-cased owners), the SOA and the
/// signer's records left out; None if it touched what a whole signing
/// must redo.
fn touched(updated: &Zone, change: &ZoneDiff) -> Option<BTreeMap<Name, BTreeSet<RType>>> {
    let apex = updated.origin();
    let mut touched: BTreeMap<Name, BTreeSet<RType>> = BTreeMap::new();
    for record in change.deleted.iter().chain(&change.added) {
        let owner = record.owner.to_lowercase();
        let at_apex = owner == *apex;
        match record.rtype {
            t if from_signer(t) => continue,
            RType::SOA if at_apex => continue,
            RType::DNSKEY | RType::CDS | RType::CDNSKEY => return None,
            RType::NS | RType::DNAME if !at_apex => return None,
            _ => {}
        }
        touched.entry(owner).or_default().insert(record.rtype);
    }
    Some(touched)
}

/// An RRset the signer makes, from one the zone holds.
fn owned(owner: &[u8], set: RRset) -> OwnedRRset {
    OwnedRRset {
        owner: owner.to_vec(),
        rtype: set.rtype,
        ttl: set.ttl(),
        rdatas: set.rdatas().map(|r| r.into_owned()).collect(),
    }
}

pub(super) fn record(owner: &[u8], rtype: RType, ttl: u32, rdata: Vec<u8>) -> DiffRecord {
    DiffRecord {
        owner: Name::from_wire(owner).expect("a name from the zone"),
        rtype,
        ttl,
        rdata,
    }
}

/// What `updated` in a signed zone is to the signer (None: not signed,
/// not in the chain: absent, occluded by a delegation or DNAME above it,
/// or holding only records the signer replaces).
fn kind_of<'z>(zone: &'z Zone, lower: &Name) -> Option<Entry<'z>> {
    let node = zone.node(lower.as_wire())?;
    let apex = zone.origin();
    if lower == apex {
        return Some(Entry {
            node,
            kind: Kind::Apex,
        });
    }
    let mut above = lower.parent();
    while let Some(name) = above.filter(|n| n != apex) {
        let occludes = zone
            .node(name.as_wire())
            .is_some_and(|n| n.is_cut() || n.has_dname());
        if occludes {
            return None;
        }
        above = name.parent();
    }
    if zone.apex_has_dname() {
        return None;
    }
    let kind = if node.is_cut() {
        Kind::Cut {
            secure: node.rrset(RType::DS).is_some(),
        }
    } else if node.is_empty() {
        Kind::EmptyNonTerminal
    } else if node.data().all(|s| from_signer(s.rtype)) {
        super::plan::signer_only(zone, lower.as_wire())?
    } else {
        Kind::Data
    };
    Some(Entry { node, kind })
}

/// The diff to sign and apply to the updated zone.
struct Edit<'z> {
    zone: &'z Zone,
    deleted: Vec<DiffRecord>,
    added: Vec<DiffRecord>,
    /// RRsets to sign.
    sign: Vec<OwnedRRset>,
}

impl<'z> Edit<'z> {
    fn new(zone: &'z Zone) -> Edit<'z> {
        Edit {
            zone,
            deleted: Vec::new(),
            added: Vec::new(),
            sign: Vec::new(),
        }
    }

    /// The signatures the zone holds over `set` of `node` go.
    fn drop_sigs(&mut self, node: &Node, set: RRset) {
        let owner = node.owner_wire();
        let ttl = set.sig_ttl();
        (self.deleted).extend(
            set.sigs()
                .map(|s| record(owner, RType::RRSIG, ttl, s.into_owned())),
        );
    }

    /// The RRset of `rtype` at `owner`, changed: its old signatures go,
    /// and it is signed if it still holds records the signer signs.
    fn resign(&mut self, owner: &Name, rtype: RType) {
        let Some(node) = self.zone.node(owner.as_wire()) else {
            return;
        };
        let Some(set) = node.rrset(rtype) else {
            return;
        };
        self.drop_sigs(&node, set);
        let signed = kind_of(self.zone, owner).is_some_and(|entry| match entry.kind {
            Kind::Apex | Kind::Data => true,
            Kind::Cut { .. } => rtype == RType::DS,
            Kind::EmptyNonTerminal => false,
        });
        if signed && set.has_records() {
            self.sign.push(owned(node.owner_wire(), set));
        }
    }

    /// The chain record at `lower` (NSEC or NSEC3) goes, with its
    /// signatures.
    fn drop_link(&mut self, lower: &Name, rtype: RType) {
        let Some(node) = self.zone.node(lower.as_wire()) else {
            return;
        };
        let Some(set) = node.rrset(rtype) else {
            return;
        };
        let owner = node.owner_wire();
        for rdata in set.rdatas() {
            (self.deleted).push(record(owner, rtype, set.ttl(), rdata.into_owned()));
        }
        self.drop_sigs(&node, set);
    }

    /// The new SOA and every RRset gathered signed, and the diff applied.
    fn finish(
        mut self,
        zone: &Zone,
        new_soa: OwnedRRset,
        context: &Context,
    ) -> Result<(Signed, ZoneDiff), SignError> {
        let jobs: Vec<Job> = self.sign.iter().map(Job::Made).collect();
        let signatures = sign_jobs(&jobs, context)?;
        let count = signatures.len();
        for (index, rdata) in signatures {
            let job = &jobs[index as usize];
            self.added
                .push(record(job.owner(), RType::RRSIG, job.ttl(), rdata));
        }
        self.deleted.sort();
        self.deleted.dedup();
        let soa = zone.soa();
        let apex = zone.apex().owner_wire();
        let old_soa = record(apex, RType::SOA, soa.ttl(), soa.first_rdata().into_owned());
        let new_rdata = new_soa.rdatas.into_iter().next().expect("one SOA");
        let diff = ZoneDiff {
            old_soa,
            new_soa: record(apex, RType::SOA, new_soa.ttl, new_rdata),
            deleted: self.deleted,
            added: self.added,
        };
        let next = zone.apply(&diff).map_err(|problems| {
            let text: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
            SignError(format!(
                "the signed change does not apply: {}",
                text.join("; ")
            ))
        })?;
        let signed = Signed {
            zone: next,
            signatures: count,
            reused: 0,
            warnings: Vec::new(),
        };
        Ok((signed, diff))
    }
}

/// A link of the chain as it is to be: its owner as written and the
/// types its record lists (the bitmap, encoded).
struct Link {
    owner: Vec<u8>,
    types: Vec<u8>,
}

/// How the chain changes around the names a change touched. Links are
/// named by their owner lower-cased (for NSEC3 the hashed owner, whose
/// canonical order is the hashes' order).
struct Relinked<'a> {
    served: &'a Zone,
    denial: &'a Denial,
    /// The touched links as they are to be (None: out of the chain)...
    after: BTreeMap<Name, Option<Link>>,
    /// ...and those of them in the served chain.
    before: BTreeSet<Name>,
    /// In the chain now, not before; and the reverse.
    joined: BTreeSet<Name>,
    left: BTreeSet<Name>,
}

impl<'a> Relinked<'a> {
    /// The chain's change for the names `touched` (lower-cased): each
    /// name, and for NSEC3 each of its ancestors below the apex (empty
    /// non-terminals come and go with it).
    fn of<'t>(
        served: &'a Zone,
        updated: &Zone,
        denial: &'a Denial,
        touched: impl Iterator<Item = &'t Name>,
    ) -> Result<Relinked<'a>, SignError> {
        let apex = updated.origin();
        let mut names: BTreeSet<Name> = BTreeSet::new();
        for name in touched {
            names.insert(name.clone());
            if matches!(denial, Denial::Nsec3 { .. }) {
                let mut above = name.parent();
                while let Some(parent) = above.filter(|p| p != apex && p.is_subdomain_of(apex)) {
                    above = parent.parent();
                    names.insert(parent);
                }
            }
        }
        let mut relinked = Relinked {
            served,
            denial,
            after: BTreeMap::new(),
            before: BTreeSet::new(),
            joined: BTreeSet::new(),
            left: BTreeSet::new(),
        };
        for name in &names {
            relinked.add_name(updated, name)?;
        }
        Ok(relinked)
    }

    fn rtype(&self) -> RType {
        match self.denial {
            Denial::Nsec => RType::NSEC,
            Denial::Nsec3 { .. } => RType::NSEC3,
        }
    }

    /// The link owner (lower-cased) of a name lower-cased.
    fn link_of(&self, name: &Name) -> Result<Name, SignError> {
        match self.denial {
            Denial::Nsec => Ok(name.clone()),
            Denial::Nsec3 {
                iterations, salt, ..
            } => {
                let hash = nsec3_hash(name.as_wire(), salt, *iterations);
                hashed_owner(&hash, self.served.origin())
            }
        }
    }

    /// Whether `link` is in the served chain.
    fn served_has(&self, link: &Name) -> bool {
        let node = self.served.node(link.as_wire());
        node.is_some_and(|n| n.rrset(self.rtype()).is_some())
    }

    fn add_name(&mut self, updated: &Zone, name: &Name) -> Result<(), SignError> {
        let link = self.link_of(name)?;
        let entry = kind_of(updated, name).filter(|e| match (self.denial, e.kind) {
            (Denial::Nsec, Kind::EmptyNonTerminal) => false,
            (Denial::Nsec3 { opt_out, .. }, Kind::Cut { secure }) => secure || !opt_out,
            _ => true,
        });
        let after = entry.map(|e| Link {
            owner: match self.denial {
                Denial::Nsec => e.node.owner_wire().to_vec(),
                Denial::Nsec3 { .. } => link.as_wire().to_vec(),
            },
            types: bitmap(&e, self.denial),
        });
        let before = self.served_has(&link);
        match (before, after.is_some()) {
            (false, true) => self.joined.insert(link.clone()),
            (true, false) => self.left.insert(link.clone()),
            _ => false,
        };
        if before {
            self.before.insert(link.clone());
        }
        self.after.insert(link, after);
        Ok(())
    }

    /// The served link strictly before `link` (wrapping).
    fn served_before(&self, link: &Name) -> Result<Name, SignError> {
        let node = (self.served.denial_before(link.as_wire()))
            .ok_or_else(|| SignError("the served zone has no denial chain".into()))?;
        Ok(Name::from_wire(node.key()).expect("a name from the zone"))
    }

    /// The served record at `link` (which the served chain holds):
    /// (next link, types).
    fn served_record(&self, link: &Name) -> Result<(Name, Vec<u8>), SignError> {
        let rdata = (self.served.node(link.as_wire()))
            .and_then(|n| n.rrset(self.rtype()))
            .map(|set| set.first_rdata().into_owned())
            .ok_or_else(|| SignError(format!("{link} is not in the served chain")))?;
        let broken = || SignError(format!("{link}: its {} record is malformed", self.rtype()));
        match self.denial {
            Denial::Nsec => {
                let (next, end) = Name::read_uncompressed(&rdata, 0).map_err(|_| broken())?;
                Ok((next.to_lowercase(), rdata[end..].to_vec()))
            }
            Denial::Nsec3 { .. } => {
                let salt_len = *rdata.get(4).ok_or_else(broken)? as usize;
                let at = 6 + salt_len;
                let hash: [u8; 20] = (rdata.get(at..at + 20))
                    .and_then(|h| h.try_into().ok())
                    .ok_or_else(broken)?;
                Ok((
                    hashed_owner(&hash, self.served.origin())?,
                    rdata[at + 20..].to_vec(),
                ))
            }
        }
    }

    /// The first served link after `link` that stays, wrapping.
    fn next_staying(&self, link: &Name) -> Result<Name, SignError> {
        let mut next = match self.before.contains(link) || self.served_has(link) {
            true => self.served_record(link)?.0,
            false => self.served_record(&self.served_before(link)?)?.0,
        };
        for _ in 0..=self.left.len() {
            if !self.left.contains(&next) {
                return Ok(next);
            }
            next = self.served_record(&next)?.0;
        }
        Err(SignError("the chain has no link left".into()))
    }

    /// The last served link before `link` that stays, wrapping.
    fn previous_staying(&self, link: &Name) -> Result<Name, SignError> {
        let mut previous = self.served_before(link)?;
        for _ in 0..=self.left.len() {
            if !self.left.contains(&previous) {
                return Ok(previous);
            }
            previous = self.served_before(&previous)?;
        }
        Err(SignError("the chain has no link left".into()))
    }

    /// The link after `link` in the new chain.
    fn next_of(&self, link: &Name) -> Result<Name, SignError> {
        let staying = self.next_staying(link)?;
        let joined = (self
            .joined
            .range::<Name, _>((std::ops::Bound::Excluded(link), std::ops::Bound::Unbounded)))
        .next()
        .or_else(|| self.joined.first());
        // The nearer after `link`, going round.
        let rank = |n: &Name| (n <= link, n.clone());
        Ok(match joined {
            Some(j) if rank(j) < rank(&staying) => j.clone(),
            _ => staying,
        })
    }

    /// The link before `link` in the new chain.
    fn previous_of(&self, link: &Name) -> Result<Name, SignError> {
        let staying = self.previous_staying(link)?;
        let joined = (self.joined.range::<Name, _>(..link).next_back())
            .or_else(|| self.joined.last())
            .filter(|j| *j != link);
        let rank = |n: &Name| (n < link, n.clone());
        Ok(match joined {
            Some(j) if rank(j) > rank(&staying) => j.clone(),
            _ => staying,
        })
    }

    /// The records of the new chain that differ from the served one's
    /// go into `edit`: the links that left go, those that joined or
    /// changed types are made, and the links before a joined or left one
    /// re-pointed.
    fn apply(&self, edit: &mut Edit) -> Result<(), SignError> {
        let mut made: BTreeSet<Name> = self.joined.clone();
        for (link, after) in &self.after {
            if after.is_some() && self.before.contains(link) {
                made.insert(link.clone());
            }
        }
        for link in self.joined.iter().chain(&self.left) {
            made.insert(self.previous_of(link)?);
        }
        let rtype = self.rtype();
        let ttl = edit.zone.negative_ttl();
        for link in &self.left {
            edit.drop_link(link, rtype);
        }
        for link in &made {
            let next = self.next_of(link)?;
            let (owner, types) = match self.after.get(link) {
                Some(Some(l)) => (l.owner.clone(), l.types.clone()),
                _ => {
                    let node = self.served.node(link.as_wire());
                    let owner = node.map(|n| n.owner_wire().to_vec());
                    (
                        owner.unwrap_or_else(|| link.as_wire().to_vec()),
                        self.served_record(link)?.1,
                    )
                }
            };
            let rdata = self.rdata(&next, &types)?;
            let held = edit.zone.node(link.as_wire()).and_then(|n| n.rrset(rtype));
            let same = held.is_some_and(|s| {
                s.ttl() == ttl && s.rdata_count() == 1 && *s.first_rdata() == rdata
            });
            if same {
                continue;
            }
            edit.drop_link(link, rtype);
            edit.added.push(record(&owner, rtype, ttl, rdata.clone()));
            edit.sign.push(OwnedRRset {
                owner,
                rtype,
                ttl,
                rdatas: vec![rdata],
            });
        }
        Ok(())
    }

    /// The RDATA of a link whose next is `next`, listing `types`.
    fn rdata(&self, next: &Name, types: &[u8]) -> Result<Vec<u8>, SignError> {
        let mut rdata = Vec::new();
        match self.denial {
            Denial::Nsec => rdata.extend_from_slice(next.as_wire()),
            Denial::Nsec3 {
                iterations,
                salt,
                opt_out,
            } => {
                rdata.extend_from_slice(&nsec3param_rdata(salt, *iterations));
                rdata[1] = u8::from(*opt_out);
                let label = &next.as_wire()[1..33];
                rdata.push(20);
                rdata
                    .extend_from_slice(&base32hex_decode(label).ok_or_else(|| {
                        SignError(format!("{next} is not an NSEC3 hashed owner"))
                    })?);
            }
        }
        rdata.extend_from_slice(types);
        Ok(rdata)
    }
}

/// `<base32hex of hash>.<apex>`, lower-cased.
fn hashed_owner(hash: &[u8; 20], apex: &Name) -> Result<Name, SignError> {
    apex.prepend(&base32hex(hash))
        .map_err(|_| SignError("the zone's name is too long for NSEC3".into()))
}

/// The 20 octets a 32-character base32hex label (either case) spells.
fn base32hex_decode(label: &[u8]) -> Option<[u8; 20]> {
    if label.len() != 32 {
        return None;
    }
    let mut out = [0u8; 20];
    for (group, chunk) in label.chunks(8).enumerate() {
        let mut bits = 0u64;
        for &c in chunk {
            let value = match c.to_ascii_lowercase() {
                d @ b'0'..=b'9' => d - b'0',
                l @ b'a'..=b'v' => l - b'a' + 10,
                _ => return None,
            };
            bits = bits << 5 | u64::from(value);
        }
        out[group * 5..group * 5 + 5].copy_from_slice(&bits.to_be_bytes()[3..]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base32hex_round_trips() {
        let hash: [u8; 20] = std::array::from_fn(|i| (i as u8).wrapping_mul(37) ^ 0xA5);
        assert_eq!(base32hex_decode(&base32hex(&hash)), Some(hash));
        let upper = base32hex(&hash).to_ascii_uppercase();
        assert_eq!(base32hex_decode(&upper), Some(hash));
        assert_eq!(base32hex_decode(b"short"), None);
        assert_eq!(base32hex_decode(&[b'w'; 32]), None);
    }
}
