//! The primary side: who may transfer each zone, the journal of recent
//! changes each transfer can be served from, and NOTIFY out.
//!
//! * [`transfer`]: the messages of an AXFR or IXFR, packed with no I/O.
//! * [`notify`]: telling secondaries about a new serial (RFC 1996).

pub mod notify;
pub mod transfer;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use heron_proto::Name;
use heron_zone::Zone;
use heron_zone::diff::{ZoneDiff, diff};
use heron_zone::journal::{self, Journal};

use crate::acl::{Acl, Prefix};
use crate::serial;

/// A secondary to notify of new serials, with the TSIG key to sign with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotifyTarget {
    pub addr: SocketAddr,
    pub key: Option<Name>,
}

/// The transfer settings of one zone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ZonePolicy {
    /// Who may AXFR/IXFR the zone (nobody by default).
    pub allow_transfer: Acl,
    /// Who may send NOTIFY for the zone (its primaries, when secondary).
    pub allow_notify: Acl,
    /// Secondaries told about every new serial.
    pub notify: Vec<NotifyTarget>,
}

/// How to answer one transfer request for a zone we serve.
#[derive(Debug)]
pub enum TransferPlan {
    /// The whole zone.
    Axfr,
    /// The steps from the client's serial to ours.
    Ixfr(Vec<Arc<ZoneDiff>>),
    /// The client has our serial (or a newer one): our SOA alone.
    UpToDate,
}

/// Transfer policies and journals of every zone this server is primary for.
pub struct Primary {
    policies: HashMap<Name, ZonePolicy>,
    /// The policy of a zone that has none configured: refuse everything.
    closed: ZonePolicy,
    journals: Mutex<HashMap<Name, Journal>>,
    journal_max_bytes: usize,
}

impl Primary {
    pub fn new(policies: HashMap<Name, ZonePolicy>, journal_max_bytes: usize) -> Primary {
        let policies = policies
            .into_iter()
            .map(|(origin, p)| (origin.to_lowercase(), p))
            .collect();
        Primary {
            policies,
            closed: ZonePolicy::default(),
            journals: Mutex::new(HashMap::new()),
            journal_max_bytes,
        }
    }

    pub fn policy(&self, origin: &Name) -> &ZonePolicy {
        // Names hash and compare ignoring case: no lower-cased copy.
        self.policies.get(origin).unwrap_or(&self.closed)
    }

    /// Records a new version of a zone: its diff goes to the journal when
    /// the serial moved forward and someone may transfer the zone (no
    /// journal is kept for zones nobody can IXFR). Returns whether
    /// secondaries should be notified (the serial moved forward).
    pub fn zone_changed(&self, old: &Zone, new: &Zone) -> bool {
        if !self.serial_moved_on(old, new) {
            return false;
        }
        if self.policy(new.origin()).allow_transfer.is_empty() {
            tracing::info!(
                "zone {}: serial {} -> {}",
                new.origin(),
                old.serial(),
                new.serial()
            );
            return true;
        }
        // The diff walks the zone: computed before taking the lock that
        // transfers in progress need.
        let step = diff(old, new);
        tracing::info!(
            "zone {}: serial {} -> {}, {} records deleted, {} added",
            new.origin(),
            old.serial(),
            new.serial(),
            step.deleted.len(),
            step.added.len()
        );
        self.journal(new.origin(), |j| {
            j.record(step);
        });
        true
    }

    /// Records a new version received by IXFR, whose steps are known
    /// already. Returns whether secondaries should be notified.
    pub fn zone_received(&self, old: &Zone, new: &Zone, steps: Vec<ZoneDiff>) -> bool {
        if !self.serial_moved_on(old, new) {
            return false;
        }
        if !self.policy(new.origin()).allow_transfer.is_empty() {
            self.journal(new.origin(), |j| {
                steps.into_iter().for_each(|s| {
                    j.record(s);
                })
            });
        }
        true
    }

    /// Whether `new` has a later serial than `old`; if not, the zone's
    /// history is restarted (a serial that went back breaks every chain).
    fn serial_moved_on(&self, old: &Zone, new: &Zone) -> bool {
        if serial::is_newer(new.serial(), old.serial()) {
            return true;
        }
        if new.serial() == old.serial() {
            tracing::warn!(
                "zone {}: content changed but serial {} did not; secondaries will not see the change",
                new.origin(),
                new.serial()
            );
        }
        self.journal(new.origin(), Journal::clear);
        false
    }

    fn journal(&self, origin: &Name, update: impl FnOnce(&mut Journal)) {
        let mut journals = self.journals.lock().unwrap();
        let journal = journals
            .entry(origin.to_lowercase())
            .or_insert_with(|| Journal::new(self.journal_max_bytes));
        update(journal);
    }

    /// Every address prefix some zone's `allow-transfer` names (each once):
    /// the secondaries, which may open many connections at once.
    pub fn transfer_clients(&self) -> Vec<Prefix> {
        let mut all: Vec<Prefix> = Vec::new();
        for prefix in self
            .policies
            .values()
            .flat_map(|p| p.allow_transfer.prefixes())
        {
            if !all.contains(&prefix) {
                all.push(prefix);
            }
        }
        all
    }

    /// How to answer a request for `zone`: `client_serial` is the serial
    /// in an IXFR request, None for AXFR.
    pub fn plan(&self, zone: &Zone, client_serial: Option<u32>) -> TransferPlan {
        let Some(client) = client_serial else {
            return TransferPlan::Axfr;
        };
        let ours = zone.serial();
        if client == ours || serial::is_newer(client, ours) {
            return TransferPlan::UpToDate;
        }
        let journals = self.journals.lock().unwrap();
        let chain = journals
            .get(&zone.origin().to_lowercase())
            .and_then(|j| j.chain(client, ours));
        match chain {
            // An IXFR longer than the zone itself is better sent whole.
            Some(chain) if journal::chain_records(&chain) <= zone.record_count() => {
                TransferPlan::Ixfr(chain)
            }
            _ => TransferPlan::Axfr,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_zone::load_zone_str;

    fn zone(serial: u32, body: &str) -> Zone {
        let text = format!(
            "$ORIGIN p.test.\n$TTL 60\n@ SOA ns h {serial} 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n{body}"
        );
        load_zone_str(&text, "p.zone", &Name::parse("p.test").unwrap())
            .unwrap()
            .zone
    }

    /// A primary that lets 127.0.0.0/8 transfer p.test.
    fn open_primary() -> Primary {
        let open = ZonePolicy {
            allow_transfer: Acl::new(vec![crate::acl::Rule {
                prefix: "127.0.0.0/8".parse().unwrap(),
                key: None,
            }]),
            ..ZonePolicy::default()
        };
        let policies = HashMap::from([(Name::parse("p.test").unwrap(), open)]);
        Primary::new(policies, journal::DEFAULT_MAX_BYTES)
    }

    #[test]
    fn transfer_clients_are_every_allow_transfer_prefix_once() {
        let rule = |p: &str, key: Option<&str>| crate::acl::Rule {
            prefix: p.parse().unwrap(),
            key: key.map(|k| Name::parse(k).unwrap()),
        };
        let policy = |rules| ZonePolicy {
            allow_transfer: Acl::new(rules),
            ..ZonePolicy::default()
        };
        let policies = HashMap::from([
            (
                Name::parse("a.test").unwrap(),
                policy(vec![rule("192.0.2.0/24", None), rule("::1", Some("k"))]),
            ),
            (
                Name::parse("b.test").unwrap(),
                policy(vec![rule("192.0.2.0/24", Some("k"))]),
            ),
            (Name::parse("c.test").unwrap(), ZonePolicy::default()),
        ]);
        let mut got: Vec<String> = Primary::new(policies, 1024)
            .transfer_clients()
            .iter()
            .map(|p| p.to_string())
            .collect();
        got.sort();
        assert_eq!(got, ["192.0.2.0/24", "::1/128"]);
    }

    #[test]
    fn no_journal_for_a_zone_nobody_may_transfer() {
        let p = Primary::new(HashMap::new(), journal::DEFAULT_MAX_BYTES);
        let (v1, v2) = (zone(1, ""), zone(2, "a A 192.0.2.9\n"));
        assert!(p.zone_changed(&v1, &v2), "secondaries are still notified");
        assert!(matches!(p.plan(&v2, Some(1)), TransferPlan::Axfr));
        assert!(p.journals.lock().unwrap().is_empty());
    }

    #[test]
    fn steps_received_by_ixfr_are_journaled_as_they_came() {
        let p = open_primary();
        let (v1, v2, v3) = (
            zone(1, &hosts(10)),
            zone(2, &hosts(11)),
            zone(3, &hosts(12)),
        );
        let steps = vec![diff(&v1, &v2), diff(&v2, &v3)];
        assert!(p.zone_received(&v1, &v3, steps));
        match p.plan(&v3, Some(1)) {
            TransferPlan::Ixfr(chain) => assert_eq!(chain.len(), 2),
            other => panic!("{other:?}"),
        }
        assert!(!p.zone_received(&v3, &v1, Vec::new()), "older serial");
        assert!(
            matches!(p.plan(&v3, Some(2)), TransferPlan::Axfr),
            "history restarted"
        );
    }

    fn hosts(n: usize) -> String {
        (0..n).map(|i| format!("h{i} A 192.0.2.{i}\n")).collect()
    }

    #[test]
    fn ixfr_from_a_journaled_serial_axfr_otherwise() {
        let p = open_primary();
        let (v1, v2, v3) = (
            zone(1, &hosts(10)),
            zone(2, &hosts(11)),
            zone(3, &hosts(12)),
        );
        assert!(p.zone_changed(&v1, &v2));
        assert!(p.zone_changed(&v2, &v3));
        match p.plan(&v3, Some(1)) {
            TransferPlan::Ixfr(chain) => assert_eq!(chain.len(), 2),
            other => panic!("{other:?}"),
        }
        assert!(matches!(p.plan(&v3, Some(0)), TransferPlan::Axfr));
        assert!(matches!(p.plan(&v3, None), TransferPlan::Axfr));
        assert!(matches!(p.plan(&v3, Some(3)), TransferPlan::UpToDate));
        assert!(matches!(p.plan(&v3, Some(4)), TransferPlan::UpToDate));
    }

    #[test]
    fn a_serial_that_goes_back_clears_the_history() {
        let p = open_primary();
        let (v5, v6) = (zone(5, "a A 192.0.2.9\n"), zone(6, "a A 192.0.2.8\n"));
        assert!(p.zone_changed(&v5, &v6));
        let v2 = zone(2, "");
        assert!(!p.zone_changed(&v6, &v2), "no notify for an older serial");
        assert!(matches!(p.plan(&v2, Some(5)), TransferPlan::UpToDate));
        assert!(matches!(p.plan(&v2, Some(1)), TransferPlan::Axfr));
    }

    #[test]
    fn an_ixfr_larger_than_the_zone_is_sent_as_axfr() {
        let p = open_primary();
        let (v1, v2) = (zone(1, &hosts(20)), zone(2, &hosts(1)));
        assert!(p.zone_changed(&v1, &v2));
        assert!(matches!(p.plan(&v2, Some(1)), TransferPlan::Axfr));
    }

    #[test]
    fn zones_without_a_policy_are_closed() {
        let open = ZonePolicy {
            allow_transfer: Acl::new(vec![crate::acl::Rule {
                prefix: "127.0.0.0/8".parse().unwrap(),
                key: None,
            }]),
            ..ZonePolicy::default()
        };
        let mut policies = HashMap::new();
        policies.insert(Name::parse("Open.test").unwrap(), open);
        let p = Primary::new(policies, 1024);
        let local = "127.0.0.1".parse().unwrap();
        let open = p.policy(&Name::parse("open.TEST").unwrap());
        assert!(open.allow_transfer.check(local, None).is_ok());
        let closed = p.policy(&Name::parse("other.test").unwrap());
        assert!(closed.allow_transfer.check(local, None).is_err());
    }
}
