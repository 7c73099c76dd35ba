//! A test harness that runs the machine on a fake clock with a simulated
//! parent, and checks at every step that every validator can validate.
//!
//! The check knows nothing of the rules: it keeps every DNSKEY RRset, every
//! set of zone signatures and every parent DS RRset that was ever served,
//! and at each step combines every one that a cache may still hold (served
//! until `end`, cached up to propagation delay plus TTL after) as a
//! validator could have fetched them at different times. Each combination
//! must validate: a DS matches a DNSKEY that signs the DNSKEY RRset, every
//! algorithm of the DS RRset has such a key (harden-algo-downgrade), every
//! algorithm of the DNSKEY RRset signs the DNSKEY RRset and the zone's
//! RRsets (RFC 4035 2.2, RFC 6840 5.11). An empty DS RRset is an insecure
//! delegation and needs nothing.

use super::{Event, Key, Plan, Policy, Role, Rollover, UnixTime};

/// A key as a validator sees it: (id, algorithm).
type Seen = (String, u8);

#[derive(Clone, Debug, PartialEq)]
struct ZoneView {
    dnskey: Vec<Seen>,
    key_signers: Vec<Seen>,
    zone_signers: Vec<Seen>,
}

/// Something served from `start` until the next one's start.
#[derive(Debug)]
struct Served<T> {
    start: UnixTime,
    what: T,
}

/// Whether the `index`th of `history` may be in a cache at `now`, when
/// caches keep it `hold` seconds after it stops being served.
fn cacheable<T>(history: &[Served<T>], index: usize, hold: u64, now: UnixTime) -> bool {
    let start = history[index].start;
    let end = history.get(index + 1).map(|next| next.start);
    start <= now && end.is_none_or(|end| now < end + hold)
}

pub(super) struct Harness {
    pub machine: Rollover,
    pub now: UnixTime,
    /// How long the parent takes to apply the CDS RRset; None: it never
    /// does by itself (the test acts as the operator).
    pub parent_lag: Option<u64>,
    pub parent_ds: Vec<Seen>,
    pending_parent: Option<(UnixTime, Vec<Seen>)>,
    zone_history: Vec<Served<ZoneView>>,
    parent_history: Vec<Served<Vec<Seen>>>,
    next_tag: u16,
    pub steps: usize,
    pub last_plan: Plan,
    /// Every key ever generated: (id, role, algorithm).
    pub generated: Vec<(String, Role, u8)>,
}

fn seen(refs: &[super::KeyRef]) -> Vec<Seen> {
    refs.iter().map(|k| (k.id.clone(), k.algorithm)).collect()
}

impl Harness {
    pub fn new(policy: Policy, start: UnixTime) -> Harness {
        Harness {
            machine: Rollover::new(policy, Vec::new()),
            now: start,
            parent_lag: Some(3600),
            parent_ds: Vec::new(),
            pending_parent: None,
            zone_history: Vec::new(),
            parent_history: vec![Served {
                start: 0,
                what: Vec::new(),
            }],
            next_tag: 1000,
            steps: 0,
            last_plan: Plan::default(),
            generated: Vec::new(),
        }
    }

    /// A harness for keys another signer ran until `start`: caches hold
    /// what they publish now (and nothing older), the parent their DS.
    pub fn with_keys(policy: Policy, keys: Vec<Key>, start: UnixTime) -> Harness {
        let mut h = Harness::new(policy.clone(), start);
        let ds: Vec<Seen> = keys
            .iter()
            .filter(|k| k.ds.state == super::State::Omnipresent)
            .map(|k| (k.id.clone(), k.algorithm))
            .collect();
        h.parent_history = vec![Served {
            start: 0,
            what: ds.clone(),
        }];
        h.parent_ds = ds;
        h.machine = Rollover::new(policy, keys);
        let plan = h.machine.clone().advance(start);
        h.zone_history.push(Served {
            start: 0,
            what: ZoneView {
                dnskey: seen(&plan.dnskey),
                key_signers: seen(&plan.key_signers),
                zone_signers: seen(&plan.zone_signers),
            },
        });
        h
    }

    /// Runs the machine at `now`: generates what it asks, records and
    /// checks what is served, and hands changed CDS to the parent.
    pub fn step(&mut self) -> Plan {
        let (now, mut tag, mut made) = (self.now, self.next_tag, Vec::new());
        let plan = self
            .machine
            .advance_generating(now, |request| {
                tag += 1;
                let id = format!("k{tag}");
                made.push((id.clone(), request.role, request.algorithm));
                Ok::<Key, ()>(Key::new(id, tag, request.algorithm, request.role, now))
            })
            .unwrap();
        self.next_tag = tag;
        self.generated.extend(made);
        assert!(plan.generate.is_empty(), "asks for keys again: {plan:?}");
        for id in plan.removable.clone() {
            self.machine.handle(Event::Forget(id), self.now).unwrap();
        }
        self.record(&plan);
        self.check_cds(&plan);
        self.check_chain();
        self.check_one_rollover_per_role();
        self.ask_parent(&plan);
        self.steps += 1;
        self.last_plan = plan.clone();
        plan
    }

    fn record(&mut self, plan: &Plan) {
        let view = ZoneView {
            dnskey: seen(&plan.dnskey),
            key_signers: seen(&plan.key_signers),
            zone_signers: seen(&plan.zone_signers),
        };
        if self
            .zone_history
            .last()
            .is_none_or(|last| last.what != view)
        {
            self.zone_history.push(Served {
                start: self.now,
                what: view,
            });
        }
    }

    fn ask_parent(&mut self, plan: &Plan) {
        let wanted = if plan.cds_delete {
            Vec::new()
        } else {
            seen(&plan.cds)
        };
        let pending_same = self
            .pending_parent
            .as_ref()
            .is_some_and(|(_, w)| *w == wanted);
        if wanted != self.parent_ds
            && !pending_same
            && let Some(lag) = self.parent_lag
        {
            self.pending_parent = Some((self.now + lag, wanted));
        }
    }

    /// The parent publishes `ds`; a check of its servers reports it.
    pub fn parent_publishes(&mut self, ds: Vec<Seen>, report: bool) {
        self.parent_ds = ds.clone();
        self.parent_history.push(Served {
            start: self.now,
            what: ds.clone(),
        });
        if report {
            let tags = ds.iter().map(|(id, alg)| (self.tag_of(id), *alg)).collect();
            self.machine
                .handle(Event::ParentDs(tags), self.now)
                .unwrap();
        }
    }

    fn tag_of(&self, id: &str) -> u16 {
        id[1..].parse().unwrap()
    }

    /// Steps the clock from event to event until `end`.
    pub fn run_until(&mut self, end: UnixTime) {
        for _ in 0..100_000 {
            let plan = self.step();
            let parent_at = self.pending_parent.as_ref().map(|(at, _)| *at);
            let next = [plan.next_check, parent_at, Some(end)]
                .into_iter()
                .flatten()
                .min()
                .unwrap();
            if self.now >= end {
                return;
            }
            assert!(next > self.now, "the machine asks to be woken in the past");
            self.now = next;
            if parent_at == Some(self.now) {
                let (_, ds) = self.pending_parent.take().unwrap();
                self.parent_publishes(ds, true);
            }
        }
        panic!("too many steps before {end}");
    }

    /// Every combination of what caches may hold at `now` validates.
    fn check_chain(&self) {
        let p = self.machine.policy();
        let ds_hold = p.parent_propagation_delay + p.parent_ds_ttl;
        let dnskey_hold = p.propagation_delay + p.dnskey_ttl;
        let sig_hold = p.propagation_delay + p.max_zone_ttl;
        let zone = &self.zone_history;
        for a in 0..self.parent_history.len() {
            let ds = &self.parent_history[a].what;
            if ds.is_empty() || !cacheable(&self.parent_history, a, ds_hold, self.now) {
                continue;
            }
            for b in (0..zone.len()).filter(|&b| cacheable(zone, b, dnskey_hold, self.now)) {
                let keys = &zone[b].what;
                self.check_trust(ds, keys);
                for c in (0..zone.len()).filter(|&c| cacheable(zone, c, sig_hold, self.now)) {
                    self.check_signatures(keys, &zone[c].what.zone_signers, b, c);
                }
            }
        }
    }

    fn check_trust(&self, ds: &[Seen], keys: &ZoneView) {
        let trusted = |k: &Seen| keys.dnskey.contains(k) && keys.key_signers.contains(k);
        for (_, alg) in ds {
            assert!(
                ds.iter().any(|k| k.1 == *alg && trusted(k)),
                "at {}: no DNSKEY of algorithm {alg} for DS {ds:?} in {keys:?}",
                self.now
            );
        }
        for (_, alg) in &keys.dnskey {
            assert!(
                keys.key_signers.iter().any(|k| k.1 == *alg),
                "at {}: DNSKEY RRset not signed with algorithm {alg}: {keys:?}",
                self.now
            );
        }
    }

    fn check_signatures(&self, keys: &ZoneView, signers: &[Seen], b: usize, c: usize) {
        for (_, alg) in &keys.dnskey {
            assert!(
                signers
                    .iter()
                    .any(|s| s.1 == *alg && keys.dnskey.contains(s)),
                "at {}: DNSKEY RRset {b} {keys:?} with signatures {c} {signers:?}: none of algorithm {alg} validates",
                self.now
            );
        }
    }

    /// A parent that checks CDS against the DNSKEY RRset (RFC 7344 4.1)
    /// accepts every CDS RRset: outside double-DS rollovers, each names a
    /// published key; the delete form comes alone.
    fn check_cds(&self, plan: &Plan) {
        if self.machine.policy().ksk_method == super::KskMethod::DoubleSignature {
            for key in &plan.cds {
                assert!(
                    plan.dnskey.contains(key),
                    "at {}: CDS of unpublished {key:?}",
                    self.now
                );
            }
        }
        assert!(!plan.cds_delete || plan.cds.is_empty());
    }

    /// At most two keys (the old and the new) do each job at any time.
    fn check_one_rollover_per_role(&self) {
        for signs in [Role::signs_keys as fn(Role) -> bool, Role::signs_zone] {
            let doing = self
                .machine
                .keys()
                .iter()
                .filter(|k| signs(k.role) && !k.is_gone())
                .count();
            assert!(
                doing <= 2,
                "at {}: {doing} keys do one job: {:?}",
                self.now,
                self.machine.keys()
            );
        }
    }
}
