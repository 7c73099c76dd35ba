//! Fake-clock runs of every timeline, years in milliseconds; the harness
//! checks the chain of trust at every step of each.

use super::chain_check::Harness;
use super::*;

const HOUR: u64 = 3600;
const DAY: u64 = 86_400;
const YEAR: u64 = 365 * DAY;
/// 2026-01-01, so that times look like times.
const START: UnixTime = 1_767_225_600;

fn policy() -> Policy {
    Policy {
        algorithm: 13,
        csk: false,
        ksk_lifetime: YEAR,
        zsk_lifetime: 30 * DAY,
        csk_lifetime: 90 * DAY,
        ksk_method: KskMethod::DoubleSignature,
        propagation_delay: HOUR,
        dnskey_ttl: HOUR,
        max_zone_ttl: DAY,
        signature_validity: 14 * DAY,
        parent_ds_ttl: DAY,
        parent_propagation_delay: HOUR,
        retire_safety: HOUR,
        insecure: false,
    }
}

fn generated(h: &Harness, role: Role) -> usize {
    h.generated.iter().filter(|(_, r, _)| *r == role).count()
}

fn in_use(h: &Harness) -> Vec<(Role, u8)> {
    let mut keys: Vec<_> = h
        .machine
        .keys()
        .iter()
        .filter(|k| k.goal == Goal::Omnipresent)
        .map(|k| (k.role, k.algorithm))
        .collect();
    keys.sort_by_key(|(role, alg)| (*role as u8, *alg));
    keys
}

/// Runs `h` until every key in use is in place and nothing else remains.
fn settle(h: &mut Harness, within: u64) {
    let end = h.now + within;
    for _ in 0..10_000 {
        h.run_until((h.now + DAY).min(end));
        let keys = h.machine.keys();
        if keys.iter().all(Key::is_active) || h.now >= end {
            return;
        }
    }
}

#[test]
fn a_new_zone_gets_signed_then_secured() {
    let mut h = Harness::new(policy(), START);
    let plan = h.step();
    assert_eq!(plan.dnskey.len(), 2, "{plan:?}");
    assert_eq!(plan.zone_signers.len(), 1);
    assert!(plan.cds.is_empty(), "no DS before the DNSKEY is everywhere");
    settle(&mut h, 10 * DAY);
    assert_eq!(in_use(&h), [(Role::Ksk, 13), (Role::Zsk, 13)]);
    assert_eq!(h.parent_ds.len(), 1);
    assert!(h.machine.keys().iter().all(Key::is_active));
}

#[test]
fn zsk_and_ksk_roll_over_for_three_years() {
    let mut h = Harness::new(policy(), START);
    h.run_until(START + 3 * YEAR);
    // 30-day ZSKs: about 36 in three years; yearly KSKs: 3 or 4.
    assert!(generated(&h, Role::Zsk) >= 33, "{:?}", h.generated);
    assert!(generated(&h, Role::Ksk) >= 3, "{:?}", h.generated);
    assert_eq!(in_use(&h), [(Role::Ksk, 13), (Role::Zsk, 13)]);
    // Retired keys are forgotten once gone: at most old + new per role.
    assert!(h.machine.keys().len() <= 4);
}

#[test]
fn zsk_pre_publication_publishes_the_dnskey_before_signing() {
    let mut p = policy();
    p.zsk_lifetime = 10 * DAY;
    let mut h = Harness::new(p, START);
    settle(&mut h, 10 * DAY);
    let first = h.last_plan.zone_signers[0].id.clone();
    let mut saw_prepublished = false;
    for _ in 0..200 {
        let plan = h.step();
        let next = [plan.next_check.unwrap(), h.now + DAY]
            .into_iter()
            .min()
            .unwrap();
        if plan.dnskey.len() == 3 && plan.zone_signers[0].id == first {
            // The old key signs while the new DNSKEY propagates.
            saw_prepublished = true;
        }
        // Never two signers at once: pre-publication, not double signature.
        assert_eq!(plan.zone_signers.len(), 1);
        if plan.zone_signers[0].id != first {
            break;
        }
        h.run_until(next);
    }
    assert!(saw_prepublished);
}

#[test]
fn ksk_double_ds_keeps_one_ksk_in_the_dnskey_rrset() {
    let mut p = policy();
    p.ksk_method = KskMethod::DoubleDs;
    p.ksk_lifetime = 60 * DAY;
    let mut h = Harness::new(p, START);
    let mut two_ds = false;
    for _ in 0..400 {
        h.run_until(h.now + DAY);
        let plan = &h.last_plan;
        assert!(plan.key_signers.len() <= 1, "at {}: {plan:?}", h.now);
        two_ds |= plan.cds.len() == 2;
    }
    assert!(two_ds, "the new DS goes to the parent beside the old");
    assert!(generated(&h, Role::Ksk) >= 5, "{:?}", h.generated);
}

#[test]
fn ksk_double_signature_asks_the_parent_for_keys_it_publishes() {
    let mut p = policy();
    p.ksk_lifetime = 60 * DAY;
    let mut h = Harness::new(p, START);
    for _ in 0..400 {
        h.run_until(h.now + DAY);
        let plan = &h.last_plan;
        assert!(plan.cds.len() <= 1, "one DS swapped for another");
        assert!(plan.cds.iter().all(|k| plan.dnskey.contains(k)), "{plan:?}");
    }
    assert!(generated(&h, Role::Ksk) >= 5);
}

#[test]
fn csk_rolls_over() {
    let mut p = policy();
    p.csk = true;
    let mut h = Harness::new(p, START);
    h.run_until(START + 2 * YEAR);
    assert!(generated(&h, Role::Csk) >= 7, "{:?}", h.generated);
    assert_eq!(in_use(&h), [(Role::Csk, 13)]);
}

#[test]
fn algorithm_rollover_publishes_signatures_before_keys() {
    let mut p = policy();
    p.algorithm = 8;
    let mut h = Harness::new(p.clone(), START);
    h.run_until(START + 45 * DAY);
    p.algorithm = 13;
    h.machine.set_policy(p);
    let mut signed_before_published = false;
    for _ in 0..100 {
        h.run_until(h.now + HOUR);
        let plan = &h.last_plan;
        let algs = |refs: &[KeyRef]| refs.iter().map(|k| k.algorithm).collect::<Vec<_>>();
        if algs(&plan.zone_signers).contains(&13) && !algs(&plan.dnskey).contains(&13) {
            signed_before_published = true;
        }
        assert!(
            !algs(&plan.dnskey).contains(&13) || algs(&plan.zone_signers).contains(&13),
            "a 13 DNSKEY before 13 signatures"
        );
    }
    assert!(signed_before_published);
    h.run_until(h.now + 60 * DAY);
    assert_eq!(in_use(&h), [(Role::Ksk, 13), (Role::Zsk, 13)]);
    assert!(h.machine.keys().iter().all(|k| k.algorithm == 13));
    assert_eq!(h.parent_ds.iter().map(|d| d.1).collect::<Vec<_>>(), [13]);
}

#[test]
fn algorithm_rollover_of_a_csk() {
    let mut p = policy();
    p.csk = true;
    p.algorithm = 15;
    let mut h = Harness::new(p.clone(), START);
    h.run_until(START + 20 * DAY);
    p.algorithm = 13;
    h.machine.set_policy(p);
    h.run_until(h.now + 30 * DAY);
    assert_eq!(in_use(&h), [(Role::Csk, 13)]);
    assert!(h.machine.keys().iter().all(|k| k.algorithm == 13));
}

#[test]
fn csk_to_split_and_back_by_rollover() {
    let mut p = policy();
    p.csk = true;
    let mut h = Harness::new(p.clone(), START);
    h.run_until(START + 20 * DAY);
    p.csk = false;
    h.machine.set_policy(p.clone());
    h.run_until(h.now + 20 * DAY);
    assert_eq!(in_use(&h), [(Role::Ksk, 13), (Role::Zsk, 13)]);
    assert!(h.machine.keys().iter().all(|k| k.role != Role::Csk));
    p.csk = true;
    h.machine.set_policy(p);
    h.run_until(h.now + 20 * DAY);
    assert_eq!(in_use(&h), [(Role::Csk, 13)]);
    assert_eq!(h.machine.keys().len(), 1);
}

#[test]
fn a_policy_change_during_a_rollover_waits_for_it() {
    let mut p = policy();
    p.zsk_lifetime = 10 * DAY;
    let mut h = Harness::new(p.clone(), START);
    settle(&mut h, 10 * DAY);
    // Run into the middle of the next ZSK rollover, then change algorithm.
    for _ in 0..400 {
        h.run_until(h.now + HOUR);
        if h.last_plan.dnskey.len() == 3 {
            break;
        }
    }
    assert_eq!(h.last_plan.dnskey.len(), 3);
    p.algorithm = 15;
    h.machine.set_policy(p);
    h.run_until(h.now + 30 * DAY);
    assert_eq!(in_use(&h), [(Role::Ksk, 15), (Role::Zsk, 15)]);
}

#[test]
fn going_insecure_withdraws_the_ds_before_the_keys() {
    let mut p = policy();
    let mut h = Harness::new(p.clone(), START);
    settle(&mut h, 10 * DAY);
    p.insecure = true;
    h.machine.set_policy(p);
    let plan = h.step();
    assert!(plan.cds_delete, "{plan:?}");
    assert_eq!(plan.dnskey.len(), 2, "keys stay until the DS is gone");
    assert!(plan.parent.unwrap().message.contains("delete"));
    h.run_until(h.now + 10 * DAY);
    assert!(h.parent_ds.is_empty());
    assert!(h.machine.keys().is_empty(), "{:?}", h.machine.keys());
    assert!(h.last_plan.dnskey.is_empty() && h.last_plan.zone_signers.is_empty());
    assert!(!h.last_plan.cds_delete);
}

/// Going insecure on the fake clock, event by event, for a KSK and ZSK
/// and for a CSK: the zone stays fully signed (and publishes the CDS
/// delete) until the parent's DS has left every cache, then is served
/// unsigned in one step: never signatures without their DNSKEY, never a
/// DNSKEY without signatures. The parent is seen without the DS only
/// after the operator removes it; nothing moves before.
#[test]
fn going_insecure_keeps_the_zone_signed_until_no_cache_holds_the_ds() {
    for csk in [false, true] {
        let mut p = Policy { csk, ..policy() };
        let mut h = Harness::new(p.clone(), START);
        h.parent_lag = None;
        let mut ds = Vec::new();
        for _ in 0..200 {
            h.run_until(h.now + HOUR);
            if let Some(wait) = h.last_plan.parent.clone() {
                ds = wait.add.iter().map(|k| (k.id.clone(), 13)).collect();
                h.parent_publishes(ds.clone(), true);
            }
            if h.machine.keys().iter().all(Key::is_active) {
                break;
            }
        }
        assert!(h.machine.keys().iter().all(Key::is_active));
        p.insecure = true;
        h.machine.set_policy(p.clone());
        // The parent does nothing yet: the zone stays signed, CDS delete.
        h.run_until(h.now + 30 * DAY);
        let plan = h.last_plan.clone();
        assert!(plan.cds_delete && plan.cds.is_empty(), "{plan:?}");
        assert_eq!(plan.dnskey.len(), if csk { 1 } else { 2 });
        assert_eq!(plan.zone_signers.len(), 1);
        assert!(plan.parent.is_some_and(|w| w.remove.len() == 1));
        assert_eq!(h.parent_ds, ds);
        // The operator removes the DS and says so.
        h.parent_publishes(Vec::new(), false);
        h.machine.handle(Event::DsSeen, h.now).unwrap();
        let gone = h.now;
        let cached_until = gone + p.parent_propagation_delay + p.parent_ds_ttl + p.retire_safety;
        let mut unsigned_from = None;
        for _ in 0..1000 {
            let plan = h.step();
            let signed = !plan.dnskey.is_empty();
            assert_eq!(signed, !plan.zone_signers.is_empty(), "{plan:?}");
            assert_eq!(signed, !plan.key_signers.is_empty(), "{plan:?}");
            if signed {
                assert!(unsigned_from.is_none(), "signed again: {plan:?}");
                assert!(plan.cds_delete, "{plan:?}");
            } else {
                unsigned_from = unsigned_from.or(Some(h.now));
                assert!(!plan.cds_delete && plan.cds.is_empty(), "{plan:?}");
            }
            match plan.next_check {
                Some(at) => h.now = at,
                None => break,
            }
        }
        assert!(
            unsigned_from.is_some_and(|at| at >= cached_until),
            "{unsigned_from:?}"
        );
        assert!(h.machine.keys().is_empty(), "every key gone and forgotten");
        assert!(h.last_plan.generate.is_empty() && h.last_plan.parent.is_none());
    }
}

/// A policy whose algorithm changed while the first KSK's DS is still
/// awaited says that the algorithm rollover waits on that DS (regression
/// hunt BG-4: the DS of a key about to be rolled away was asked for, and
/// nothing said why nothing moved).
#[test]
fn a_changed_algorithm_waiting_on_the_first_ds_says_so() {
    let mut p = policy();
    let mut h = Harness::new(p.clone(), START);
    h.parent_lag = None;
    h.run_until(START + 2 * DAY);
    let waiting = h.last_plan.parent.clone().expect("waits for the parent");
    assert!(
        !waiting.message.contains("algorithm rollover"),
        "{}",
        waiting.message
    );
    p.algorithm = 15;
    h.machine.set_policy(p);
    h.run_until(h.now + DAY);
    let wait = h
        .last_plan
        .parent
        .clone()
        .expect("still waits for the parent");
    assert!(
        wait.message.contains("the policy's algorithm is now 15: the algorithm rollover to it starts once this DS is at the parent"),
        "{}",
        wait.message
    );
}

#[test]
fn a_silent_parent_leaves_the_zone_waiting_with_a_message() {
    let mut h = Harness::new(policy(), START);
    h.parent_lag = None;
    h.run_until(START + 30 * DAY);
    let plan = h.last_plan.clone();
    let wait = plan.parent.expect("waits for the parent");
    assert_eq!(wait.add.len(), 1);
    let tag = wait.add[0].tag;
    assert!(
        wait.message.contains(&format!("key {tag} (algorithm 13)")),
        "{}",
        wait.message
    );
    assert!(wait.message.contains("ds-seen"));
    // The operator adds the DS by hand and says so.
    let ds = vec![(wait.add[0].id.clone(), 13)];
    h.parent_publishes(ds, false);
    h.machine.handle(Event::DsSeen, h.now).unwrap();
    h.run_until(h.now + 2 * DAY);
    assert!(h.last_plan.parent.is_none());
    let ksk = h
        .machine
        .keys()
        .iter()
        .find(|k| k.role == Role::Ksk)
        .unwrap();
    assert!(ksk.is_active());
}

#[test]
fn a_ksk_rollover_waits_for_the_parent_without_breaking_the_chain() {
    let mut p = policy();
    p.ksk_lifetime = 30 * DAY;
    let mut h = Harness::new(p, START);
    settle(&mut h, 10 * DAY);
    h.parent_lag = None;
    h.run_until(h.now + 60 * DAY);
    let wait = h.last_plan.parent.clone().expect("waits for the DS swap");
    assert_eq!((wait.add.len(), wait.remove.len()), (1, 1));
    // Two KSKs wait: the rollover of the ZSK goes on; no third KSK.
    assert_eq!(generated(&h, Role::Ksk), 2);
    assert!(generated(&h, Role::Zsk) >= 3);
    h.parent_lag = Some(HOUR);
    h.run_until(h.now + 10 * DAY);
    assert!(h.last_plan.parent.is_none());
    assert_eq!(h.last_plan.key_signers.len(), 1);
}

#[test]
fn a_requested_roll_starts_at_once() {
    let mut h = Harness::new(policy(), START);
    settle(&mut h, 10 * DAY);
    let zsk = h.last_plan.zone_signers[0].id.clone();
    h.machine.handle(Event::Roll(zsk.clone()), h.now).unwrap();
    let plan = h.step();
    assert_eq!(plan.dnskey.len(), 3, "the successor is published: {plan:?}");
    h.run_until(h.now + 5 * DAY);
    assert!(h.machine.keys().iter().all(|k| k.id != zsk));
}

#[test]
fn events_about_unknown_or_busy_keys_are_refused() {
    let mut h = Harness::new(policy(), START);
    h.step();
    let id = h.machine.keys()[0].id.clone();
    let m = &mut h.machine;
    assert_eq!(
        m.handle(Event::Roll("nope".into()), START),
        Err(RolloverError::UnknownKey("nope".into()))
    );
    assert_eq!(
        m.handle(Event::Forget(id.clone()), START),
        Err(RolloverError::KeyInUse(id.clone()))
    );
    let copy = m.keys()[0].clone();
    assert_eq!(
        m.handle(Event::KeyAdded(copy), START),
        Err(RolloverError::DuplicateKey(id))
    );
}

#[test]
fn policies_are_validated() {
    assert_eq!(policy().validate(), Ok(()));
    let mut p = policy();
    p.signature_validity = DAY;
    assert!(p.validate().unwrap_err().contains("signature validity"));
    let mut p = policy();
    p.zsk_lifetime = DAY;
    assert!(p.validate().unwrap_err().contains("Zsk lifetime"));
    let mut p = policy();
    p.zsk_lifetime = 0;
    assert_eq!(p.validate(), Ok(()), "0 is unlimited");
}

#[test]
fn a_restored_machine_continues_where_it_stopped() {
    let mut h = Harness::new(policy(), START);
    h.run_until(START + 40 * DAY);
    let state = state_file::ZoneKeys::new("example.", h.machine.keys().to_vec());
    let text = state.to_text();
    let back = state_file::ZoneKeys::parse(&text, std::path::Path::new("x")).unwrap();
    let mut restored = Rollover::new(policy(), back.keys);
    let now = h.now + HOUR;
    assert_eq!(restored.advance(now), h.machine.clone().advance(now));
}

/// The checker is not vacuous: a DNSKEY swapped without pre-publication
/// breaks validators holding the old signatures.
#[test]
#[should_panic(expected = "none of algorithm 13 validates")]
fn the_chain_check_catches_a_zsk_swapped_at_once() {
    let mut h = Harness::new(policy(), START);
    settle(&mut h, 10 * DAY);
    let keys = h.machine.keys().to_vec();
    let zsk = keys.iter().position(|k| k.role == Role::Zsk).unwrap();
    let mut swapped = keys.clone();
    swapped[zsk].id = "k9999".into();
    h.machine = Rollover::new(policy(), swapped);
    h.now += HOUR;
    h.step();
}

/// Random policy changes, requested rolls, parent delays and clock steps:
/// the chain holds at every step, and the zone ends on the last policy.
#[test]
fn random_policy_changes_never_break_the_chain() {
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut random = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for _ in 0..12 {
        let mut p = policy();
        let mut h = Harness::new(p.clone(), START);
        for _ in 0..25 {
            match random(6) {
                0 => p.algorithm = [8, 13, 15][random(3) as usize],
                1 => p.csk = !p.csk,
                2 => {
                    p.ksk_method = match p.ksk_method {
                        KskMethod::DoubleDs => KskMethod::DoubleSignature,
                        KskMethod::DoubleSignature => KskMethod::DoubleDs,
                    }
                }
                3 => h.parent_lag = Some(random(3 * DAY)),
                4 => {
                    let keys = h.machine.keys();
                    if !keys.is_empty() {
                        let id = keys[random(keys.len() as u64) as usize].id.clone();
                        h.machine.handle(Event::Roll(id), h.now).unwrap();
                    }
                }
                _ => p.zsk_lifetime = [0, 10 * DAY, 30 * DAY][random(3) as usize],
            }
            h.machine.set_policy(p.clone());
            h.run_until(h.now + random(20 * DAY) + 1);
        }
        h.run_until(h.now + 120 * DAY);
        let roles: Vec<Role> = in_use(&h).iter().map(|k| k.0).collect();
        assert_eq!(roles, p.roles(), "{:?}", h.machine.keys());
        assert!(in_use(&h).iter().all(|k| k.1 == p.algorithm));
    }
}

#[test]
fn status_lists_each_keys_next_event() {
    let mut h = Harness::new(policy(), START);
    h.parent_lag = None;
    h.run_until(START + 2 * DAY);
    let status = h.machine.status(h.now);
    let ksk = status.iter().find(|s| s.role == Role::Ksk).unwrap();
    assert_eq!(ksk.next, NextEvent::Parent { add: true });
    assert_eq!(
        (ksk.dnskey, ksk.ds, ksk.zone_rrsig),
        (State::Omnipresent, Some(State::Rumoured), None)
    );
    let line = ksk.to_string();
    assert!(
        line.contains("ksk active") && line.contains("ds=rumoured"),
        "{line}"
    );
    assert!(
        line.ends_with("next: waits for the parent to add its DS"),
        "{line}"
    );
    let zsk = status.iter().find(|s| s.role == Role::Zsk).unwrap();
    let active = h
        .machine
        .keys()
        .iter()
        .find(|k| k.role == Role::Zsk)
        .unwrap()
        .active
        .unwrap();
    assert_eq!(
        zsk.next,
        NextEvent::Rollover {
            at: active + 30 * DAY
        }
    );
    // In a ZSK rollover, the new key's next event is its DNSKEY's arrival.
    h.parent_lag = Some(HOUR);
    h.run_until(active + 30 * DAY);
    let status = h.machine.status(h.now);
    let new = status.iter().rev().find(|s| s.role == Role::Zsk).unwrap();
    let at = h.now + 2 * HOUR;
    let expected = NextEvent::Record {
        kind: RecordKind::Dnskey,
        to: State::Omnipresent,
        at,
    };
    assert_eq!(new.next, expected);
    assert_eq!(new.next.to_string(), format!("DNSKEY omnipresent at {at}"));
    // A table with a column for the time takes the two apart.
    assert_eq!(
        (new.next.what(), new.next.at()),
        ("DNSKEY omnipresent".into(), Some(at))
    );
    let old = status.iter().find(|s| s.role == Role::Zsk).unwrap();
    assert_eq!(
        (old.goal, old.next.clone()),
        (Goal::Hidden, NextEvent::OtherKeys)
    );
    assert_eq!(old.next.at(), None);
}

/// Keys another signer had in place (as `import` makes them) keep
/// validating under Heron with no rollover until their lifetime ends,
/// then roll as Heron's own.
#[test]
fn imported_keys_continue_without_a_rollover() {
    let mut keys = Vec::new();
    for (tag, role) in [(7001, Role::Ksk), (7002, Role::Zsk)] {
        let mut key = Key::new(format!("k{tag}"), tag, 13, role, START - YEAR);
        key.dnskey.state = State::Omnipresent;
        if role.signs_zone() {
            key.zone_rrsig.state = State::Omnipresent;
        }
        if role.signs_keys() {
            key.ds.state = State::Omnipresent;
        }
        key.active = Some(START);
        keys.push(key);
    }
    let mut h = Harness::with_keys(policy(), keys, START);
    h.run_until(START + 29 * DAY);
    assert!(
        h.generated.is_empty(),
        "no rollover before the lifetime ends: {:?}",
        h.generated
    );
    assert_eq!(h.last_plan.dnskey.len(), 2);
    assert!(h.last_plan.parent.is_none());
    h.run_until(START + 60 * DAY);
    assert_eq!(generated(&h, Role::Zsk), 1);
    assert!(h.machine.keys().iter().all(|k| k.id != "k7002"));
}

/// Keys in any combination of roles, goals, states and times (a damaged
/// or hand-edited state file), with any policy numbers: the machine never
/// panics, and each advance ends.
#[test]
fn arbitrary_key_states_never_panic() {
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut random = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let states = [
        State::Hidden,
        State::Rumoured,
        State::Omnipresent,
        State::Unretentive,
    ];
    let times = [0, 1, START, u64::MAX / 2, u64::MAX];
    for _ in 0..3000 {
        let mut p = policy();
        p.dnskey_ttl = times[random(5) as usize];
        p.csk = random(2) == 0;
        p.insecure = random(4) == 0;
        let mut keys = Vec::new();
        for index in 0..random(6) {
            let role = [Role::Ksk, Role::Zsk, Role::Csk][random(3) as usize];
            let algorithm = [8, 13, 15][random(3) as usize];
            let mut key = Key::new(format!("k{index}"), random(3) as u16, algorithm, role, 0);
            key.goal = if random(2) == 0 {
                Goal::Omnipresent
            } else {
                Goal::Hidden
            };
            for record in [&mut key.dnskey, &mut key.zone_rrsig, &mut key.ds] {
                record.state = states[random(4) as usize];
                record.since = times[random(5) as usize];
            }
            key.ds_seen = [None, Some(times[random(5) as usize])][random(2) as usize];
            key.ds_gone = [None, Some(times[random(5) as usize])][random(2) as usize];
            key.active = [None, Some(times[random(5) as usize])][random(2) as usize];
            key.roll_requested = random(2) == 0;
            keys.push(key);
        }
        let mut machine = Rollover::new(p, keys);
        let now = times[random(5) as usize];
        let plan = machine.advance(now);
        let _ = machine.status(now);
        assert!(plan.next_check.is_none_or(|at| at > now));
    }
}

#[test]
fn a_failed_generation_is_returned_and_retried_at_the_next_advance() {
    let mut machine = Rollover::new(policy(), Vec::new());
    let failed = machine.advance_generating(START, |_| Err::<Key, _>("disk full"));
    assert_eq!(failed, Err("disk full"));
    assert!(machine.keys().is_empty());
    let plan = machine
        .advance_generating(START, |r| {
            Ok::<_, ()>(Key::new(
                format!("{:?}", r.role),
                1,
                r.algorithm,
                r.role,
                START,
            ))
        })
        .unwrap();
    assert!(plan.generate.is_empty());
    assert_eq!(plan.dnskey.len(), 2);
}
