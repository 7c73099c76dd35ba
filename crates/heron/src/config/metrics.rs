//! `[metrics]`: the Prometheus endpoint's section, read and checked here
//! with the rest of the file; the endpoint itself is `crate::control::metrics`.

use std::net::SocketAddr;

use heron_proto::prefix::Prefix;
use heron_server::http;
use serde::Deserialize;

/// `[metrics]`: off unless `listen` is set.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsSection {
    /// `"ADDR:PORT"` of the HTTP endpoint.
    pub listen: Option<String>,
    /// Export the per-zone series (serial, load time, transfers,
    /// NOTIFYs); off for servers of very many zones, where they would
    /// make every scrape large.
    #[serde(rename = "zone-metrics")]
    pub zone_metrics: bool,
    /// The only addresses that may connect (addresses or prefixes);
    /// absent: any.
    pub allow: Option<Vec<AllowedPrefix>>,
}

impl Default for MetricsSection {
    fn default() -> Self {
        MetricsSection {
            listen: None,
            zone_metrics: true,
            allow: None,
        }
    }
}

/// One `[metrics] allow` entry, checked as the file is read so that a
/// mistake is reported with its line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllowedPrefix(pub Prefix);

impl<'de> Deserialize<'de> for AllowedPrefix {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<AllowedPrefix, D::Error> {
        let text = String::deserialize(de)?;
        text.parse()
            .map(AllowedPrefix)
            .map_err(serde::de::Error::custom)
    }
}

/// `[metrics]` read: the endpoint is on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetricsSettings {
    pub listen: SocketAddr,
    pub zone_metrics: bool,
    pub allow: http::Allowed,
}

impl MetricsSection {
    /// The endpoint's settings, None when it is off.
    pub fn settings(&self) -> Result<Option<MetricsSettings>, String> {
        let Some(text) = &self.listen else {
            return Ok(None);
        };
        let listen = text.parse().map_err(|_| {
            format!("listen = \"{text}\": not an ADDRESS:PORT (e.g. \"127.0.0.1:9153\")")
        })?;
        let allow = self
            .allow
            .as_ref()
            .map(|list| list.iter().map(|a| a.0).collect());
        if allow.as_ref().is_some_and(Vec::is_empty) {
            return Err("allow = []: nobody could scrape; leave it out to allow anyone".into());
        }
        Ok(Some(MetricsSettings {
            listen,
            zone_metrics: self.zone_metrics,
            allow,
        }))
    }
}
