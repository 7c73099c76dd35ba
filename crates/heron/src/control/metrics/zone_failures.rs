//! Per-zone failure counters kept by the modules that count them, read
//! at each scrape: `heron_zone_zonemd_failures_total{zone}` (versions
//! refused because their ZONEMD did not match, see `plan::zonemd`) and
//! `heron_update_forward_tsig_failures_total{zone}` (forwarded UPDATEs
//! whose primary's answer failed the TSIG check with the zone's
//! `update-forwarding-key`, see `runtime::update_forward`).

use std::collections::BTreeMap;
use std::sync::Mutex;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use super::{counters, label};

#[derive(Debug)]
pub(super) struct ZoneFailures {
    name: &'static str,
    help: &'static str,
    counts: Vec<(String, u64)>,
}

impl ZoneFailures {
    fn read(name: &'static str, help: &'static str, all: &Mutex<BTreeMap<String, u64>>) -> Self {
        let all = all.lock().unwrap_or_else(|e| e.into_inner());
        let counts = all.iter().map(|(z, n)| (z.clone(), *n)).collect();
        ZoneFailures { name, help, counts }
    }

    pub(super) fn zonemd() -> ZoneFailures {
        Self::read(
            "heron_zone_zonemd_failures",
            "Versions of the zone refused (from its file or a transfer) because their ZONEMD digest did not match",
            crate::plan::zonemd::failures(),
        )
    }

    pub(super) fn forward_tsig() -> ZoneFailures {
        Self::read(
            "heron_update_forward_tsig_failures",
            "Forwarded UPDATEs answered SERVFAIL because the primary's answer failed the TSIG check with the zone's update-forwarding-key",
            crate::runtime::update_forward::tsig_failures(),
        )
    }
}

impl Collector for ZoneFailures {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if self.counts.is_empty() {
            return Ok(());
        }
        counters(
            &mut encoder,
            self.name,
            self.help,
            self.counts
                .iter()
                .map(|(zone, n)| (label("zone", zone), *n)),
        )
    }
}
