//! When a record of a key may move to its next state.
//!
//! Introductions (hidden → rumoured) and withdrawals (omnipresent or
//! rumoured → unretentive) wait until the chain of trust survives them for
//! every cache; the other two moves wait for time alone (for a DS, from the
//! moment the parent was seen to act). See the module documentation of
//! `rollover` for the order each rollover takes.

use super::{Goal, Key, KskMethod, Policy, RecordKind, Role, State, UnixTime, after};

/// The state `keys[index]`'s record of `kind` moves to at `now`, if any.
pub(super) fn next_state(
    keys: &[Key],
    index: usize,
    kind: RecordKind,
    policy: &Policy,
    now: UnixTime,
) -> Option<State> {
    let key = &keys[index];
    if !key.has(kind) {
        return None;
    }
    let allowed = match (key.goal, key.record(kind).state) {
        (_, State::Unretentive) => hidden_at(key, kind, policy).is_some_and(|at| now >= at),
        (Goal::Omnipresent, State::Hidden) => may_introduce(keys, index, kind, policy),
        (Goal::Omnipresent, State::Rumoured) => {
            omnipresent_at(key, kind, policy).is_some_and(|at| now >= at)
        }
        (Goal::Hidden, State::Rumoured | State::Omnipresent) => {
            may_withdraw(keys, index, kind, policy)
        }
        // A DS the parent may hold though it was never seen there.
        (Goal::Hidden, State::Hidden) if kind == RecordKind::Ds && key.ds_offered => {
            may_withdraw(keys, index, kind, policy)
        }
        _ => false,
    };
    allowed.then(|| next_of(key.goal, key.record(kind).state))
}

fn next_of(goal: Goal, state: State) -> State {
    match (goal, state) {
        (Goal::Omnipresent, State::Hidden) => State::Rumoured,
        (Goal::Omnipresent, State::Rumoured) => State::Omnipresent,
        (_, State::Unretentive) => State::Hidden,
        _ => State::Unretentive,
    }
}

/// When a rumoured record reaches every cache; a DS only counts from when
/// the parent was seen to publish it.
pub(super) fn omnipresent_at(key: &Key, kind: RecordKind, policy: &Policy) -> Option<UnixTime> {
    let since = key.record(kind).since;
    match kind {
        RecordKind::Dnskey => Some(after(since, &[policy.propagation_delay, policy.dnskey_ttl])),
        RecordKind::ZoneRrsig => Some(after(
            since,
            &[policy.propagation_delay, policy.max_zone_ttl],
        )),
        RecordKind::Ds => key.ds_seen.map(|seen| {
            after(
                seen,
                &[policy.parent_propagation_delay, policy.parent_ds_ttl],
            )
        }),
    }
}

/// When a withdrawn record has left every cache.
pub(super) fn hidden_at(key: &Key, kind: RecordKind, policy: &Policy) -> Option<UnixTime> {
    let at = match kind {
        RecordKind::Ds => key.ds_gone.map(|gone| {
            after(
                gone,
                &[policy.parent_propagation_delay, policy.parent_ds_ttl],
            )
        }),
        _ => omnipresent_at(key, kind, policy),
    };
    at.map(|at| at.saturating_add(policy.retire_safety))
}

fn in_use(key: &Key) -> bool {
    key.goal == Goal::Omnipresent
}

/// Whether `key`'s record of `kind` is in `state`; a DS offered to the
/// parent ([`Key::ds_offered`]) is never taken as hidden.
fn is(key: &Key, kind: RecordKind, state: State) -> bool {
    let offered = kind == RecordKind::Ds && key.ds_offered;
    key.record(kind).state == state && !(offered && state == State::Hidden)
}

/// Some DS of the zone is at, or on its way to, the parent, as the
/// keys' states say (a DS only offered is not: the zone is signed for the
/// first time as any other, DNSKEY and signatures at once).
fn zone_secure(keys: &[Key]) -> bool {
    keys.iter()
        .any(|k| k.has(RecordKind::Ds) && k.ds.state != State::Hidden)
}

/// Some DS of the zone may be at the parent: [`zone_secure`], or a DS
/// offered to it ([`Key::ds_offered`]).
fn ds_may_be_out(keys: &[Key]) -> bool {
    keys.iter()
        .any(|k| k.has(RecordKind::Ds) && !is(k, RecordKind::Ds, State::Hidden))
}

/// A key whose algorithm no cache may know from the DNSKEY RRset yet,
/// in a secure zone: its signatures must be everywhere before any DNSKEY
/// of the algorithm appears (RFC 6781 4.1.4).
fn signatures_first(keys: &[Key], index: usize) -> bool {
    let algorithm = keys[index].algorithm;
    zone_secure(keys)
        && !keys.iter().enumerate().any(|(other, k)| {
            other != index
                && k.algorithm == algorithm
                && is(k, RecordKind::Dnskey, State::Omnipresent)
        })
}

/// A KSK whose DS goes to the parent before its DNSKEY to the zone.
fn double_ds(keys: &[Key], key: &Key, policy: &Policy) -> bool {
    policy.ksk_method == KskMethod::DoubleDs
        && key.role == Role::Ksk
        && keys.iter().any(|old| {
            old.goal == Goal::Hidden
                && old.role.signs_keys()
                && old.algorithm == key.algorithm
                && is(old, RecordKind::Ds, State::Omnipresent)
        })
}

/// Some key of `algorithm` has its DNSKEY and its zone signatures in every cache.
fn zone_chain_ready(keys: &[Key], algorithm: u8) -> bool {
    keys.iter().any(|k| {
        k.algorithm == algorithm
            && k.role.signs_zone()
            && is(k, RecordKind::Dnskey, State::Omnipresent)
            && is(k, RecordKind::ZoneRrsig, State::Omnipresent)
    })
}

fn may_introduce(keys: &[Key], index: usize, kind: RecordKind, policy: &Policy) -> bool {
    let key = &keys[index];
    match kind {
        RecordKind::Dnskey => {
            // Every algorithm of the DNSKEY RRset signs it and every other
            // RRset (RFC 4035 2.2): keys of both kinds must be there.
            let of_algorithm = |signs: fn(Role) -> bool| {
                keys.iter()
                    .filter(move |k| in_use(k) && signs(k.role) && k.algorithm == key.algorithm)
            };
            let signed = of_algorithm(Role::signs_keys).next().is_some()
                && of_algorithm(Role::signs_zone).next().is_some();
            let sigs_ready = !signatures_first(keys, index)
                || of_algorithm(Role::signs_zone)
                    .all(|k| is(k, RecordKind::ZoneRrsig, State::Omnipresent));
            let ds_ready =
                !double_ds(keys, key, policy) || is(key, RecordKind::Ds, State::Omnipresent);
            signed && sigs_ready && ds_ready
        }
        RecordKind::ZoneRrsig => {
            !zone_secure(keys)
                || signatures_first(keys, index)
                || is(key, RecordKind::Dnskey, State::Omnipresent)
        }
        RecordKind::Ds => {
            (double_ds(keys, key, policy) || is(key, RecordKind::Dnskey, State::Omnipresent))
                && zone_chain_ready(keys, key.algorithm)
        }
    }
}

fn may_withdraw(keys: &[Key], index: usize, kind: RecordKind, policy: &Policy) -> bool {
    let key = &keys[index];
    let algorithm_leaving = !keys
        .iter()
        .any(|k| in_use(k) && k.algorithm == key.algorithm);
    let all_of_algorithm = |kind, state| {
        keys.iter()
            .filter(|k| k.algorithm == key.algorithm && k.has(kind))
            .all(|k| is(k, kind, state))
    };
    match kind {
        // Going insecure, once no cache may hold a DS of the zone, the
        // signatures leave with the DNSKEYs: the zone is served unsigned
        // at once, never with signatures but no key.
        RecordKind::ZoneRrsig if policy.insecure && !ds_may_be_out(keys) => true,
        RecordKind::ZoneRrsig if algorithm_leaving => {
            all_of_algorithm(RecordKind::Dnskey, State::Hidden)
        }
        RecordKind::ZoneRrsig => keys.iter().any(|k| {
            in_use(k)
                && k.role.signs_zone()
                && k.algorithm == key.algorithm
                && is(k, RecordKind::Dnskey, State::Omnipresent)
                && k.zone_rrsig.is_published()
        }),
        RecordKind::Dnskey if algorithm_leaving => {
            all_of_algorithm(RecordKind::Ds, State::Hidden)
                && (policy.insecure || successor_ds_in_place(keys))
        }
        RecordKind::Dnskey => {
            (!key.role.signs_zone() || is(key, RecordKind::ZoneRrsig, State::Hidden))
                && (!key.role.signs_keys()
                    || is(key, RecordKind::Ds, State::Hidden)
                    || double_ds_swap(keys, key, policy))
        }
        RecordKind::Ds => {
            if keys.iter().any(|k| in_use(k) && k.role.signs_keys()) {
                keys.iter().any(|k| {
                    in_use(k)
                        && k.role.signs_keys()
                        && k.ds.is_published()
                        && is(k, RecordKind::Dnskey, State::Omnipresent)
                })
            } else {
                policy.insecure
            }
        }
    }
}

/// Some key in use has its DS in every cache.
fn successor_ds_in_place(keys: &[Key]) -> bool {
    keys.iter()
        .any(|k| in_use(k) && k.role.signs_keys() && is(k, RecordKind::Ds, State::Omnipresent))
}

/// In a double-DS rollover, the old KSK's DNSKEY leaves as the new one
/// arrives, once the new DS is in every cache.
fn double_ds_swap(keys: &[Key], old: &Key, policy: &Policy) -> bool {
    policy.ksk_method == KskMethod::DoubleDs
        && old.role == Role::Ksk
        && keys.iter().any(|k| {
            in_use(k)
                && k.role == Role::Ksk
                && k.algorithm == old.algorithm
                && is(k, RecordKind::Ds, State::Omnipresent)
                && k.dnskey.is_published()
        })
}
