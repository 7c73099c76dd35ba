//! `heron_zone_zonemd_failures_total{zone}`: versions refused because
//! their ZONEMD did not match (see `plan::zonemd`).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use super::{counters, label};

#[derive(Debug)]
pub(super) struct ZonemdFailures(Vec<(String, u64)>);

impl ZonemdFailures {
    pub(super) fn read() -> ZonemdFailures {
        let all = crate::plan::zonemd::failures()
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        ZonemdFailures(all.iter().map(|(z, n)| (z.clone(), *n)).collect())
    }
}

impl Collector for ZonemdFailures {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if self.0.is_empty() {
            return Ok(());
        }
        counters(
            &mut encoder,
            "heron_zone_zonemd_failures",
            "Versions of the zone refused (from its file or a transfer) because their ZONEMD digest did not match",
            self.0.iter().map(|(zone, n)| (label("zone", zone), *n)),
        )
    }
}
