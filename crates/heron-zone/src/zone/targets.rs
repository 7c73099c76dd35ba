//! What packing reads of other nodes, read before it: the addresses each
//! in-zone NS, MX and SRV target brings into additional sections (and so
//! whether it has any). Packing a large zone (a grouped log, `build.rs`)
//! frees each group of the builder's log once that group's shards are
//! packed; a target may live in a group already freed, so its addresses
//! are copied here first. A small zone's one log stays whole and is read
//! as it is. Most zones have few targets (the apex's name servers, glue of
//! delegations), and each is copied once however many records name it.

use std::hash::BuildHasher;

use hashbrown::DefaultHashBuilder;
use heron_proto::RType;
use heron_proto::encoded::Signatures;

/// Reports the addresses (A, then AAAA) a zone holds for a lower-cased
/// name through the closure; false if the zone has no such name.
/// With each RRset come the RRSIGs over it, none for glue.
pub(super) type Emit<'e> = &'e mut dyn FnMut((RType, u32, &[&[u8]]), Signatures);

/// An address RRset as an additional section carries it.
struct AddressSet {
    rtype: RType,
    ttl: u32,
    rdatas: Vec<Box<[u8]>>,
    sig_ttl: u32,
    sigs: Vec<Box<[u8]>>,
}

/// Targets by lower-cased name, each with its address RRsets as the
/// zone's own lookup reported them. Sorted by a hash of the name, which a
/// search reads from one array: packing asks once per NS, MX and SRV
/// record, and a binary search of 200,000 names themselves (a TLD's glue)
/// was a fifth of loading the zone.
#[derive(Default)]
pub(super) struct Targets {
    hasher: DefaultHashBuilder,
    /// Of each name, ascending.
    hashes: Vec<u64>,
    /// Beside `hashes`, no repeats.
    names: Vec<Box<[u8]>>,
    /// Beside `names`: None where the zone has no such name.
    found: Vec<Option<Vec<AddressSet>>>,
}

impl Targets {
    /// Looks each of `names` (lower-cased; any order, repeats allowed)
    /// up with `addresses` (the zone's lookup, while its log is whole).
    pub(super) fn gather(
        names: Vec<Box<[u8]>>,
        addresses: impl Fn(&[u8], Emit) -> bool,
    ) -> Targets {
        let hasher = DefaultHashBuilder::default();
        let mut keyed: Vec<(u64, Box<[u8]>)> = (names.into_iter())
            .map(|name| (hasher.hash_one(&name[..]), name))
            .collect();
        keyed.sort_unstable();
        keyed.dedup();
        let (hashes, names): (Vec<u64>, Vec<Box<[u8]>>) = keyed.into_iter().unzip();
        let found = names.iter().map(|name| {
            let mut sets = Vec::new();
            let found = addresses(name, &mut |(rtype, ttl, rdatas), (sig_ttl, sigs)| {
                sets.push(AddressSet {
                    rtype,
                    ttl,
                    rdatas: rdatas.iter().map(|r| Box::from(*r)).collect(),
                    sig_ttl,
                    sigs: sigs.iter().map(|s| Box::from(*s)).collect(),
                });
            });
            found.then_some(sets)
        });
        let found = found.collect();
        Targets {
            hasher,
            hashes,
            names,
            found,
        }
    }

    fn get(&self, lower: &[u8]) -> Option<&[AddressSet]> {
        let hash = self.hasher.hash_one(lower);
        let first = self.hashes.partition_point(|&h| h < hash);
        let same = self.hashes[first..]
            .iter()
            .take_while(|&&h| h == hash)
            .count();
        let at = first
            + self.names[first..first + same]
                .iter()
                .position(|n| **n == *lower)?;
        self.found[at].as_deref()
    }

    /// The addresses of `lower` through `emit`, as the zone's lookup gave
    /// them; false if the zone has no such name (or it was not gathered).
    pub(super) fn addresses(&self, lower: &[u8], emit: Emit) -> bool {
        let Some(sets) = self.get(lower) else {
            return false;
        };
        for set in sets {
            let rdatas: Vec<&[u8]> = set.rdatas.iter().map(|r| &r[..]).collect();
            let sigs: Vec<&[u8]> = set.sigs.iter().map(|s| &s[..]).collect();
            emit((set.rtype, set.ttl, &rdatas), (set.sig_ttl, &sigs));
        }
        true
    }

    /// Whether the zone holds an A or AAAA RRset at `lower`.
    pub(super) fn has_address(&self, lower: &[u8]) -> bool {
        self.get(lower).is_some_and(|sets| !sets.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets() -> Targets {
        let names: Vec<Box<[u8]>> = vec![
            b"\x02ns\x01b\x00".as_slice().into(),
            b"\x02ns\x01a\x00".as_slice().into(),
            b"\x02ns\x01b\x00".as_slice().into(),
            b"\x04none\x01a\x00".as_slice().into(),
            b"\x05empty\x01a\x00".as_slice().into(),
        ];
        Targets::gather(names, |name, emit| match name {
            b"\x02ns\x01a\x00" => {
                emit((RType::A, 60, &[&[192, 0, 2, 1]]), (60, &[b"sig"]));
                emit((RType::AAAA, 70, &[&[0; 16], &[1; 16]]), (0, &[]));
                true
            }
            b"\x02ns\x01b\x00" => {
                emit((RType::A, 5, &[&[192, 0, 2, 2]]), (0, &[]));
                true
            }
            b"\x05empty\x01a\x00" => true,
            _ => false,
        })
    }

    #[test]
    fn a_gathered_target_reports_what_the_lookup_reported() {
        let t = targets();
        let mut seen = Vec::new();
        let found = t.addresses(
            b"\x02ns\x01a\x00",
            &mut |(rtype, ttl, rdatas), (sttl, sigs)| {
                let rdatas: Vec<Vec<u8>> = rdatas.iter().map(|r| r.to_vec()).collect();
                let sigs: Vec<Vec<u8>> = sigs.iter().map(|s| s.to_vec()).collect();
                seen.push((rtype, ttl, rdatas, sttl, sigs));
            },
        );
        assert!(found);
        assert_eq!(
            seen,
            vec![
                (
                    RType::A,
                    60,
                    vec![vec![192, 0, 2, 1]],
                    60,
                    vec![b"sig".to_vec()]
                ),
                (RType::AAAA, 70, vec![vec![0; 16], vec![1; 16]], 0, vec![]),
            ]
        );
        assert!(t.has_address(b"\x02ns\x01a\x00") && t.has_address(b"\x02ns\x01b\x00"));
    }

    #[test]
    fn a_name_without_addresses_or_not_gathered_has_none() {
        let t = targets();
        let mut calls = 0;
        // In the zone, no address: found, nothing emitted.
        assert!(t.addresses(b"\x05empty\x01a\x00", &mut |_, _| calls += 1));
        assert!(!t.has_address(b"\x05empty\x01a\x00"));
        // Not in the zone, or never gathered: not found.
        assert!(!t.addresses(b"\x04none\x01a\x00", &mut |_, _| calls += 1));
        assert!(!t.addresses(b"\x05other\x01a\x00", &mut |_, _| calls += 1));
        assert!(!t.has_address(b"\x04none\x01a\x00"));
        assert_eq!(calls, 0);
    }
}
