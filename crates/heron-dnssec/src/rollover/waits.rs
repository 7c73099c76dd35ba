//! The waits of a policy (TTLs and delays) as the zone was served under
//! them. A record served under a TTL stays in caches that long whatever
//! the policy says later: when a TTL or delay is lowered, the rollover
//! goes on timing by the larger one until everything served under it can
//! have left every cache (RFC 7583 3.3: a wait is for the TTL the record
//! was published with).

use serde::{Deserialize, Serialize};

use super::{Policy, UnixTime};

/// The parts of a policy a rollover waits for, in seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Waits {
    pub propagation_delay: u64,
    pub dnskey_ttl: u64,
    pub max_zone_ttl: u64,
    pub parent_ds_ttl: u64,
    pub parent_propagation_delay: u64,
    pub retire_safety: u64,
}

impl Waits {
    pub fn of(policy: &Policy) -> Waits {
        Waits {
            propagation_delay: policy.propagation_delay,
            dnskey_ttl: policy.dnskey_ttl,
            max_zone_ttl: policy.max_zone_ttl,
            parent_ds_ttl: policy.parent_ds_ttl,
            parent_propagation_delay: policy.parent_propagation_delay,
            retire_safety: policy.retire_safety,
        }
    }

    fn fields(&self) -> [u64; 6] {
        [
            self.propagation_delay,
            self.dnskey_ttl,
            self.max_zone_ttl,
            self.parent_ds_ttl,
            self.parent_propagation_delay,
            self.retire_safety,
        ]
    }

    /// Field by field, the larger of the two.
    fn max(self, other: Waits) -> Waits {
        Waits {
            propagation_delay: self.propagation_delay.max(other.propagation_delay),
            dnskey_ttl: self.dnskey_ttl.max(other.dnskey_ttl),
            max_zone_ttl: self.max_zone_ttl.max(other.max_zone_ttl),
            parent_ds_ttl: self.parent_ds_ttl.max(other.parent_ds_ttl),
            parent_propagation_delay: self
                .parent_propagation_delay
                .max(other.parent_propagation_delay),
            retire_safety: self.retire_safety.max(other.retire_safety),
        }
    }

    fn any_lower_than(&self, other: &Waits) -> bool {
        (self.fields().iter().zip(other.fields())).any(|(mine, theirs)| *mine < theirs)
    }

    /// How long after its last serving anything served under these waits
    /// may still be cached somewhere.
    fn longest(&self) -> u64 {
        let cached = (self.dnskey_ttl.max(self.max_zone_ttl))
            .max(self.parent_ds_ttl + self.parent_propagation_delay);
        self.propagation_delay + cached + self.retire_safety
    }

    fn applied_to(&self, policy: &mut Policy) {
        policy.propagation_delay = self.propagation_delay;
        policy.dnskey_ttl = self.dnskey_ttl;
        policy.max_zone_ttl = self.max_zone_ttl;
        policy.parent_ds_ttl = self.parent_ds_ttl;
        policy.parent_propagation_delay = self.parent_propagation_delay;
        policy.retire_safety = self.retire_safety;
    }
}

/// What the state file keeps of the waits: those the zone was last
/// served under, and the larger ones still waited for until `until`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeldWaits {
    pub last: Waits,
    pub held: Waits,
    pub until: UnixTime,
}

/// The policy a step at `now` runs under: `configured`, with any wait
/// lowered since the zone was served under a larger one kept at that
/// larger one while records served under it can be cached. `before`:
/// what the state file kept, or None (then `recorded`, the policy it
/// last ran under, stands for the waits last served). Returns the policy
/// and what to keep.
pub fn effective_policy(
    mut configured: Policy,
    before: Option<HeldWaits>,
    recorded: Option<&Policy>,
    now: UnixTime,
) -> (Policy, HeldWaits) {
    let waits = Waits::of(&configured);
    let mut kept = before.unwrap_or(HeldWaits {
        last: recorded.map_or(waits, Waits::of),
        held: Waits::default(),
        until: 0,
    });
    if now >= kept.until {
        kept.held = Waits::default();
    }
    if waits.any_lower_than(&kept.last) {
        kept.held = kept.held.max(kept.last);
        kept.until = kept.until.max(now.saturating_add(kept.last.longest()));
    }
    kept.last = waits;
    waits.max(kept.held).applied_to(&mut configured);
    (configured, kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default policy with the waits of a fast test.
    fn policy(dnskey_ttl: u64, max_zone_ttl: u64) -> Policy {
        let mut p = crate::policy::Policy::default().rollover_policy(0);
        (p.dnskey_ttl, p.max_zone_ttl) = (dnskey_ttl, max_zone_ttl);
        (p.propagation_delay, p.retire_safety) = (1, 1);
        (p.parent_ds_ttl, p.parent_propagation_delay) = (2, 1);
        p
    }

    #[test]
    fn a_lowered_ttl_is_waited_for_at_its_old_value_until_caches_drop_it() {
        let (first, kept) = effective_policy(policy(60, 40), None, None, 1000);
        assert_eq!(first, policy(60, 40));
        // The DNSKEY TTL lowered at 1010: 60 still counts until what was
        // served under it can have left caches (1 + 60 + 1 later).
        let (during, kept) = effective_policy(policy(2, 40), Some(kept), None, 1010);
        assert_eq!((during.dnskey_ttl, kept.until), (60, 1072));
        let (still, kept) = effective_policy(policy(2, 40), Some(kept), None, 1071);
        assert_eq!(still.dnskey_ttl, 60);
        let (after, kept) = effective_policy(policy(2, 40), Some(kept), None, 1072);
        assert_eq!(after, policy(2, 40));
        // The zone's own TTL lowered: the same.
        let (during, kept) = effective_policy(policy(2, 5), Some(kept), None, 2000);
        assert_eq!((during.max_zone_ttl, during.dnskey_ttl), (40, 2));
        // Raised meanwhile: the larger new value counts at once.
        let (raised, _) = effective_policy(policy(90, 5), Some(kept), None, 2001);
        assert_eq!((raised.dnskey_ttl, raised.max_zone_ttl), (90, 40));
    }

    /// Keys imported with the DNSKEY TTL the old signer served (all else
    /// unknown, 0): that TTL counts until its RRset can have left caches.
    #[test]
    fn an_imported_dnskey_ttl_is_waited_for_from_the_first_step() {
        let imported = HeldWaits {
            last: Waits {
                dnskey_ttl: 120,
                ..Waits::default()
            },
            held: Waits::default(),
            until: 0,
        };
        let (first, kept) = effective_policy(policy(30, 40), Some(imported), None, 1000);
        assert_eq!((first.dnskey_ttl, kept.until), (120, 1120));
        let (after, _) = effective_policy(policy(30, 40), Some(kept), None, 1120);
        assert_eq!(after, policy(30, 40));
    }

    #[test]
    fn a_state_file_from_before_takes_its_recorded_policy_as_last_served() {
        let recorded = policy(60, 40);
        let (during, kept) = effective_policy(policy(2, 40), None, Some(&recorded), 1000);
        assert_eq!(during.dnskey_ttl, 60);
        assert_eq!(kept.last, Waits::of(&policy(2, 40)));
    }
}
