//! The configuration file (TOML) and the command-line equivalents.
//!
//! ```toml
//! [server]
//! listen = ["127.0.0.1:53", "[::1]:53"]
//! workers = 2
//! cpu-affinity = [0, 1]      # pin UDP workers to these CPUs, round robin
//! udp-coalesce-us = 0        # off (default); 50: under load, let queries gather up to 50 µs when that measures cheaper
//! udp-segmentation = true    # runs of equal-sized replies to one client leave as one UDP GSO message
//! max-udp-payload = 1232
//! version = "heron"          # CH TXT version.bind; REFUSED when absent
//! identity = "ns1"           # CH TXT id.server; REFUSED when absent
//!
//! [tls]                      # DNS over TLS (RFC 7858), XFR over TLS (RFC 9103)
//! listen = ["127.0.0.1:853"]
//! certificate = "tls/chain.pem"  # PEM, the server's certificate first
//! key = "tls/key.pem"            # PEM private key
//!
//! [tcp]                      # also bounds the TLS connections
//! idle-timeout = 10          # seconds
//! max-connections = 10000
//! max-connections-per-client = 100
//!
//! [[key]]                            # TSIG keys (`heron keygen NAME` prints one)
//! name = "xfr.example"
//! algorithm = "hmac-sha256"
//! secret = "base64..."
//!
//! [[zone]]
//! origin = "example.com"
//! file = "zones/example.com.zone"   # relative to this file's folder
//! allow-transfer = ["192.0.2.0/24 key xfr.example", "::1"]  # default: nobody
//! notify = ["192.0.2.7:53 key xfr.example"]                # on every new serial
//! journal = false            # IXFR history in memory only (default: in FILE.jnl)
//!
//! [[zone]]                              # a secondary zone
//! origin = "example.net"
//! file = "secondary/example.net.zone"   # where the received zone is kept
//! primaries = ["192.0.2.1 key xfr.example"]  # NOTIFY accepted from these
//!                                       # "192.0.2.1 tls": over TLS (XoT), port 853;
//!                                       # "... tls ns1.example": certificate checked
//!
//! [[catalog]]                           # a catalog zone (RFC 9432) to consume
//! zone = "catalog.example"
//! file = "secondary/catalog.example.zone"
//! primaries = ["192.0.2.1 key xfr.example"]
//! members-dir = "secondary/members"     # member zones' kept copies
//! [catalog.group.gold]                  # members whose group is "gold"
//! allow-transfer = ["192.0.2.0/24"]
//!
//! [[zone-group]]                        # zones that share their settings
//! origins = ["example.org", "example.info"]
//! file = "zones/{zone}.zone"            # {zone}: each origin, no final dot
//! allow-transfer = ["192.0.2.0/24"]
//! catalog-member = "catalog.invalid"    # listed in this generated catalog
//! catalog-group = "gold"                # with this group property
//!
//! [[zone]]                              # a catalog zone (RFC 9432) Heron writes
//! origin = "catalog.invalid"
//! file = "catalog.invalid.zone"         # where each version is kept
//! catalog = "generate"                  # members: zones naming it
//! allow-transfer = ["192.0.2.0/24"]
//! ```

use std::borrow::Cow;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

use heron_proto::Name;
use heron_proto::tsig::{Algorithm, Key};
use heron_server::processor::QueryPolicy;
use heron_server::xdp::{Mode, XdpConfig, XdpListen};
use heron_server::{ServerConfig, TcpLimits, TlsListen, tls};
use heron_sys::privileges::Ids;
use heron_xfr::acl::{Acl, Rule};
use heron_xfr::journal::file as journal_file;
use heron_xfr::primary::{NotifyTarget, ZonePolicy};
use heron_xfr::secondary::client::Upstream;
use heron_xfr::secondary::kept_file::KeptFile;
pub(crate) use heron_xfr::secondary::kept_file::{ZONE_PLACEHOLDER, pattern_file, text_stem};
use heron_xfr::secondary::receive::TransferLimits;
use heron_xfr::secondary::refresh::{Primaries, SecondaryZone, TimerBounds};
use heron_xfr::secondary::tls::{TlsClients, XotTrust};
use heron_xfr::update::{SerialPolicy, UpdatePolicy, UpdateRule, UpdateSettings};
use heron_zone::AnswerConfig;
use serde::Deserialize;

use crate::privileges;

pub(crate) mod catalog;
mod catalogs;
pub mod dnssec;
pub mod dnstap;
mod every_error;
pub mod metrics;
pub(crate) mod shared_files;
mod shield;
mod sources;

pub use catalog::CatalogConfig;
use catalog::CatalogEntry;
pub use catalogs::GeneratedCatalog;

pub use shield::{CookiesSection, RrlSection};

pub const DEFAULT_LISTEN: &str = "127.0.0.1:5300";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub server: ServerSection,
    #[serde(default)]
    pub tcp: TcpSection,
    #[serde(default)]
    pub tls: TlsSection,
    #[serde(default, rename = "zone")]
    pub zones: Vec<ZoneEntry>,
    #[serde(default, rename = "zone-group")]
    pub zone_groups: Vec<ZoneGroup>,
    #[serde(default, rename = "key")]
    pub keys: Vec<KeyEntry>,
    /// DNSSEC policies that zones name (`default` is built in).
    #[serde(default, rename = "dnssec-policy")]
    pub dnssec_policies: Vec<dnssec::PolicyEntry>,
    #[serde(default)]
    pub secondary: SecondarySection,
    /// Catalog zones to consume (RFC 9432).
    #[serde(default, rename = "catalog")]
    pub catalogs: Vec<CatalogEntry>,
    /// `None` without an `[xdp]` section: one with no `listen` is warned of.
    pub xdp: Option<XdpSection>,
    /// Source addresses of outgoing transfers, SOA queries and NOTIFYs.
    #[serde(default)]
    pub xfr: sources::XfrSection,
    pub rrl: Option<RrlSection>,
    #[serde(default)]
    pub cookies: CookiesSection,
    pub dnstap: Option<dnstap::DnstapSection>,
    #[serde(default)]
    pub metrics: metrics::MetricsSection,
    /// Checked here with the rest; read before the rest when logging
    /// starts (see [`crate::logging::section_of`]), and its levels
    /// applied again at each reload.
    #[serde(default)]
    pub log: crate::logging::LogSection,
}

/// The AF_XDP fast path for UDP (off unless `listen` names an interface).
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct XdpSection {
    /// `"IFACE@PORT"` entries, e.g. `"eth0@53"`.
    pub listen: Vec<String>,
    /// `"auto"` (native if the driver has it, else generic), `"native"`
    /// or `"generic"`.
    pub mode: Option<String>,
}

impl XdpSection {
    fn config(&self) -> Result<Option<XdpConfig>, Vec<String>> {
        let mut errors = Vec::new();
        let listen: Vec<XdpListen> = self
            .listen
            .iter()
            .filter_map(|l| {
                l.parse()
                    .map_err(|e| errors.push(format!("[xdp] listen: {e}")))
                    .ok()
            })
            .collect();
        // As `[server] listen` (black-box finding BJ-8: taken twice).
        for (i, l) in listen.iter().enumerate() {
            if listen[..i].contains(l) {
                let entry = format!("{}@{}", l.interface, l.port);
                errors.push(format!("[xdp] listen: {entry} is listed twice"));
            }
        }
        let mode = match self.mode.as_deref().unwrap_or("auto") {
            "auto" => Mode::Auto,
            "native" => Mode::Native,
            "generic" => Mode::Generic,
            other => {
                errors.push(format!(
                    "[xdp] mode: {other:?} is not one of \"auto\", \"native\", \"generic\""
                ));
                Mode::Auto
            }
        };
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok((!listen.is_empty()).then_some(XdpConfig { listen, mode }))
    }
}

/// How secondary zones are refreshed (all times in seconds).
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct SecondarySection {
    /// Bounds on the SOA refresh, retry and expire intervals, whatever
    /// the primary's SOA says.
    pub min_refresh: u64,
    pub max_refresh: u64,
    pub min_retry: u64,
    pub max_retry: u64,
    pub min_expire: u64,
    pub max_expire: u64,
    /// SOA checks and transfers in flight at once (all primaries).
    pub concurrency: usize,
    /// Bound on each connect, read and write to a primary.
    pub timeout: u64,
    /// PEM certificates that primaries reached by `tls NAME` must chain to.
    pub tls_ca: Option<PathBuf>,
    /// Bounds on each incoming transfer: past one, it is dropped and the
    /// version served is kept.
    pub max_transfer_records: u64,
    pub max_transfer_bytes: u64,
    pub transfer_timeout: u64,
    /// Whether a secondary zone no longer configured keeps its kept copy
    /// and journal on disk (by default both are deleted).
    pub keep_removed: bool,
}

impl Default for SecondarySection {
    fn default() -> Self {
        let bounds = TimerBounds::default();
        let transfer = TransferLimits::default();
        SecondarySection {
            min_refresh: bounds.min_refresh.as_secs(),
            max_refresh: bounds.max_refresh.as_secs(),
            min_retry: bounds.min_retry.as_secs(),
            max_retry: bounds.max_retry.as_secs(),
            min_expire: bounds.min_expire.as_secs(),
            max_expire: bounds.max_expire.as_secs(),
            concurrency: 32,
            timeout: 10,
            tls_ca: None,
            max_transfer_records: transfer.max_records,
            max_transfer_bytes: transfer.max_bytes,
            transfer_timeout: transfer.max_time.as_secs(),
            keep_removed: false,
        }
    }
}

impl SecondarySection {
    fn check(&self) -> Vec<String> {
        let mut errors = Vec::new();
        for (timer, min, max) in [
            ("refresh", self.min_refresh, self.max_refresh),
            ("retry", self.min_retry, self.max_retry),
            ("expire", self.min_expire, self.max_expire),
        ] {
            errors.extend(check_timer_bounds(timer, min, max));
        }
        if self.concurrency == 0 {
            errors.push("[secondary] concurrency must be at least 1".into());
        }
        for (key, value) in [
            ("timeout", self.timeout),
            ("max-transfer-records", self.max_transfer_records),
            ("max-transfer-bytes", self.max_transfer_bytes),
            ("transfer-timeout", self.transfer_timeout),
        ] {
            if value == 0 {
                errors.push(format!("[secondary] {key} must be at least 1"));
            }
        }
        errors
    }

    /// What TLS connections to primaries are made with.
    fn tls_clients(&self, base: &Path) -> Result<TlsClients, String> {
        let ca = match &self.tls_ca {
            None => None,
            Some(file) => {
                let file = base.join(file);
                let pem = heron_sys::files::read_settings_file(&file)?;
                Some((file, pem))
            }
        };
        let pem = ca.as_ref().map(|(_, pem)| pem.as_slice());
        TlsClients::new(pem).map_err(|e| match &ca {
            Some((file, _)) => format!("[secondary] tls-ca: {}: {e}", file.display()),
            None => e,
        })
    }

    pub fn transfer_limits(&self) -> TransferLimits {
        TransferLimits {
            max_records: self.max_transfer_records,
            max_bytes: self.max_transfer_bytes,
            max_time: Duration::from_secs(self.transfer_timeout),
        }
    }

    pub fn bounds(&self) -> TimerBounds {
        TimerBounds {
            min_refresh: Duration::from_secs(self.min_refresh),
            max_refresh: Duration::from_secs(self.max_refresh),
            min_retry: Duration::from_secs(self.min_retry),
            max_retry: Duration::from_secs(self.max_retry),
            min_expire: Duration::from_secs(self.min_expire),
            max_expire: Duration::from_secs(self.max_expire),
        }
    }
}

/// What is wrong with `min-TIMER` and `max-TIMER`, if anything: the
/// minimum must be at least 1 and at most the maximum, which may not
/// exceed what an SOA field can say.
fn check_timer_bounds(timer: &str, min: u64, max: u64) -> Vec<String> {
    let mut errors = Vec::new();
    if min == 0 || min > max {
        errors.push(format!(
            "[secondary] min-{timer} {min} must be at least 1 and at most max-{timer} {max}"
        ));
    }
    if max > u64::from(u32::MAX) {
        errors.push(format!(
            "[secondary] max-{timer} {max} is more than an SOA can say ({})",
            u32::MAX
        ));
    }
    errors
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct KeyEntry {
    pub name: String,
    #[serde(default = "default_algorithm")]
    pub algorithm: String,
    pub secret: String,
}

fn default_algorithm() -> String {
    "hmac-sha256".into()
}

/// DNS over TLS: where, and with which certificate (paths relative to
/// the configuration file's folder).
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct TlsSection {
    pub listen: Vec<SocketAddr>,
    pub certificate: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

impl TlsSection {
    /// The listeners and their TLS settings; None when TLS is off.
    fn load(&self, base: &Path) -> Result<Option<TlsListen>, String> {
        let (Some(chain), Some(key)) = (&self.certificate, &self.key) else {
            if self.listen.is_empty() && self.certificate.is_none() && self.key.is_none() {
                return Ok(None);
            }
            return Err("[tls] needs listen, certificate and key".into());
        };
        if self.listen.is_empty() {
            return Err("[tls] listen is empty".into());
        }
        let files = vec![base.join(chain), base.join(key)];
        let (settings, certificate, kept) =
            tls::server_config_from_files_noting(&files[0], &files[1])
                .map_err(|e| format!("[tls]: {e}"))?;
        // Said with what a reload answers, and by check-config.
        let dated = tls::validity_problem(&files[0], heron_proto::time::unix_now() as i64);
        let kept = match (kept, dated) {
            (Some(kept), Some(dated)) => Some(format!("{kept}; {dated}")),
            (kept, dated) => kept.or(dated),
        };
        Ok(Some(TlsListen {
            listen: self.listen.clone(),
            settings,
            certificate,
            files,
            kept,
        }))
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ServerSection {
    #[serde(default = "default_listen")]
    pub listen: Vec<SocketAddr>,
    /// UDP worker threads (and async runtime threads); default one per core.
    pub workers: Option<usize>,
    /// CPUs to pin UDP workers to (round robin); empty: no pinning.
    #[serde(default)]
    pub cpu_affinity: Vec<usize>,
    /// Longest a busy UDP worker waits for queries to gather, in µs.
    #[serde(default = "default_udp_coalesce_us")]
    pub udp_coalesce_us: u64,
    /// Runs of equal-sized UDP replies to one client leave as one
    /// segmented message (UDP GSO).
    #[serde(default = "default_udp_segmentation")]
    pub udp_segmentation: bool,
    #[serde(default = "default_udp_payload")]
    pub max_udp_payload: u16,
    pub version: Option<String>,
    pub identity: Option<String>,
    /// The control socket `heron reload` talks to, relative to the file.
    pub control: Option<PathBuf>,
    /// Most octets one zone load reads, its `$INCLUDE`s included.
    #[serde(default = "default_max_zone_file_size")]
    pub max_zone_file_size: u64,
    // Query ACLs, NSID and the user to run as (issue 25), read into
    // `QueryAccess`, the NSID and `RunAs` by `from_file`.
    /// "PREFIX [key NAME]" entries allowed to query; unset: everyone.
    pub allow_query: Option<Vec<String>>,
    /// Prefixes whose queries get no answer at all.
    #[serde(default)]
    pub blackhole: Vec<String>,
    /// Name server identifier (RFC 5001), as text or as hex.
    pub nsid: Option<String>,
    pub nsid_hex: Option<String>,
    /// Who the server runs as once its sockets are bound.
    pub user: Option<String>,
    pub group: Option<String>,
}

impl Default for ServerSection {
    fn default() -> Self {
        ServerSection {
            listen: default_listen(),
            workers: None,
            cpu_affinity: Vec::new(),
            udp_coalesce_us: default_udp_coalesce_us(),
            udp_segmentation: default_udp_segmentation(),
            max_udp_payload: default_udp_payload(),
            version: None,
            identity: None,
            control: None,
            max_zone_file_size: default_max_zone_file_size(),
            allow_query: None,
            blackhole: Vec::new(),
            nsid: None,
            nsid_hex: None,
            user: None,
            group: None,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TcpSection {
    #[serde(default = "default_idle")]
    pub idle_timeout: u64,
    #[serde(default = "default_message_timeout")]
    pub message_timeout: u64,
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    #[serde(default = "default_per_client")]
    pub max_connections_per_client: usize,
    #[serde(default = "default_ipv4_client_prefix")]
    pub ipv4_client_prefix: u8,
    #[serde(default = "default_ipv6_client_prefix")]
    pub ipv6_client_prefix: u8,
    /// TCP and TLS on Heron's own event loops (true) or on the async
    /// runtime's tasks (false).
    #[serde(default = "default_event_loop")]
    pub event_loop: bool,
}

impl Default for TcpSection {
    fn default() -> Self {
        TcpSection {
            idle_timeout: default_idle(),
            message_timeout: default_message_timeout(),
            max_connections: default_max_connections(),
            max_connections_per_client: default_per_client(),
            ipv4_client_prefix: default_ipv4_client_prefix(),
            ipv6_client_prefix: default_ipv6_client_prefix(),
            event_loop: default_event_loop(),
        }
    }
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ZoneEntry {
    pub origin: String,
    pub file: PathBuf,
    /// "PREFIX [key NAME]" entries.
    #[serde(default)]
    pub allow_transfer: Vec<String>,
    #[serde(default)]
    pub allow_notify: Vec<String>,
    /// "PREFIX [key NAME]" entries that may query the zone; unset: the
    /// server's `allow-query`.
    pub allow_query: Option<Vec<String>>,
    /// "ADDRESS[:PORT] [key NAME]" entries.
    #[serde(default)]
    pub notify: Vec<String>,
    /// Makes the zone a secondary: "ADDRESS[:PORT] [key NAME] [tls [NAME]]"
    /// of its primaries; `file` is then where the received zone is kept.
    #[serde(default)]
    pub primaries: Vec<String>,
    /// Whether the journal (IXFR history) is kept in `FILE.jnl` across
    /// restarts; default yes, when `allow-transfer` is set.
    pub journal: Option<bool>,
    /// `"generate"`: the zone is a catalog (RFC 9432) that Heron writes
    /// from the zones naming it in `catalog-member`; `file` keeps it.
    pub catalog: Option<String>,
    /// A generated catalog's members: `"named"` (the default), the zones
    /// naming it in `catalog-member`; `"all"`, every primary zone besides.
    pub catalog_members: Option<String>,
    /// The generated catalog that lists this zone.
    pub catalog_member: Option<String>,
    /// The member's `group` property in that catalog.
    pub catalog_group: Option<String>,
    /// Bump to give the zone a new unique ID in its catalog: consumers
    /// drop their copy and transfer it afresh (RFC 9432 5.6).
    #[serde(default)]
    pub catalog_id_generation: u32,
    /// The `[[dnssec-policy]]` Heron signs the zone with (`"default"`
    /// is built in); unset: served as the file has it.
    pub dnssec_policy: Option<String>,
    /// Where the zone's keys are; default `keys` by the configuration.
    pub key_directory: Option<PathBuf>,
    /// Dynamic update rules, "[PREFIX] [key NAME] KIND [TARGET] TYPE...".
    #[serde(default)]
    pub allow_update: Vec<String>,
    /// How an update moves the SOA serial on: "increment" (the default),
    /// "unixtime" or "dateserial".
    pub serial: Option<String>,
    /// Seconds after an update before the zone is written back to its
    /// file, or "never"; default 60.
    pub zonefile_sync: Option<toml::Value>,
    /// A secondary zone's "PREFIX [key NAME]" entries whose UPDATEs are
    /// forwarded to its primary.
    #[serde(default)]
    pub allow_update_forwarding: Vec<String>,
    /// The `[[key]]` forwarded UPDATEs are signed with for the primary
    /// (the answer signed again with the client's key); unset: forwarded
    /// as received.
    pub update_forwarding_key: Option<String>,
}

/// Zones that share their settings, their files named by a pattern: what
/// a hosting provider with thousands of zones writes instead of a
/// `[[zone]]` per zone (and what reads five times faster).
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ZoneGroup {
    pub origins: Vec<String>,
    /// Each zone's file: `{zone}` stands for its origin as written, without
    /// a final dot (`root` for the root zone).
    pub file: String,
    #[serde(default)]
    pub allow_transfer: Vec<String>,
    #[serde(default)]
    pub allow_notify: Vec<String>,
    pub allow_query: Option<Vec<String>>,
    #[serde(default)]
    pub notify: Vec<String>,
    #[serde(default)]
    pub primaries: Vec<String>,
    pub journal: Option<bool>,
    pub catalog_member: Option<String>,
    pub catalog_group: Option<String>,
    /// As in `[[zone]]`: every zone of the group signed under it, each
    /// with its own keys in the one key directory.
    pub dnssec_policy: Option<String>,
    pub key_directory: Option<PathBuf>,
    /// As in `[[zone]]`, each zone's own: `{zone}` in a rule stands for
    /// the zone's origin.
    #[serde(default)]
    pub allow_update: Vec<String>,
    pub serial: Option<String>,
    pub zonefile_sync: Option<toml::Value>,
    #[serde(default)]
    pub allow_update_forwarding: Vec<String>,
    pub update_forwarding_key: Option<String>,
}

/// The update settings a `[[zone]]` or `[[zone-group]]` gives its zones.
struct UpdateOptions<'a> {
    allow_update: &'a [String],
    allow_update_forwarding: &'a [String],
    update_forwarding_key: Option<&'a str>,
    serial: Option<&'a str>,
    zonefile_sync: Option<&'a toml::Value>,
    secondary: bool,
    journal: Option<bool>,
}

impl UpdateOptions<'_> {
    fn is_empty(&self) -> bool {
        self.allow_update.is_empty()
            && self.allow_update_forwarding.is_empty()
            && self.update_forwarding_key.is_none()
            && self.serial.is_none()
            && self.zonefile_sync.is_none()
    }
}

/// The settings a `[[zone]]` or `[[zone-group]]` gives its zones. Both
/// tables spell the fields out: serde's `flatten` would share them, but it
/// cannot be combined with `deny_unknown_fields`, and a misspelt key must
/// be an error.
struct ZoneOptions<'a> {
    allow_transfer: &'a [String],
    allow_notify: &'a [String],
    allow_query: Option<&'a [String]>,
    notify: &'a [String],
    primaries: &'a [String],
    journal: Option<bool>,
    catalog_member: Option<&'a str>,
    catalog_group: Option<&'a str>,
    catalog_id_generation: u32,
}

impl ZoneEntry {
    fn update_options(&self) -> UpdateOptions<'_> {
        UpdateOptions {
            allow_update: &self.allow_update,
            allow_update_forwarding: &self.allow_update_forwarding,
            update_forwarding_key: self.update_forwarding_key.as_deref(),
            serial: self.serial.as_deref(),
            zonefile_sync: self.zonefile_sync.as_ref(),
            secondary: !self.primaries.is_empty(),
            journal: self.journal,
        }
    }

    fn options(&self) -> ZoneOptions<'_> {
        ZoneOptions {
            allow_transfer: &self.allow_transfer,
            allow_notify: &self.allow_notify,
            allow_query: self.allow_query.as_deref(),
            notify: &self.notify,
            primaries: &self.primaries,
            journal: self.journal,
            catalog_member: self.catalog_member.as_deref(),
            catalog_group: self.catalog_group.as_deref(),
            catalog_id_generation: self.catalog_id_generation,
        }
    }
}

impl ZoneGroup {
    fn update_options(&self) -> UpdateOptions<'_> {
        UpdateOptions {
            allow_update: &self.allow_update,
            allow_update_forwarding: &self.allow_update_forwarding,
            update_forwarding_key: self.update_forwarding_key.as_deref(),
            serial: self.serial.as_deref(),
            zonefile_sync: self.zonefile_sync.as_ref(),
            secondary: !self.primaries.is_empty(),
            journal: self.journal,
        }
    }

    fn options(&self) -> ZoneOptions<'_> {
        ZoneOptions {
            allow_transfer: &self.allow_transfer,
            allow_notify: &self.allow_notify,
            allow_query: self.allow_query.as_deref(),
            notify: &self.notify,
            primaries: &self.primaries,
            journal: self.journal,
            catalog_member: self.catalog_member.as_deref(),
            catalog_group: self.catalog_group.as_deref(),
            catalog_id_generation: 0,
        }
    }

    /// The file of the zone at `origin`, from the pattern.
    fn file_of(&self, origin: &str) -> String {
        pattern_file(&self.file, text_stem(origin))
    }
}

fn default_listen() -> Vec<SocketAddr> {
    vec![DEFAULT_LISTEN.parse().unwrap()]
}
/// A millisecond: longer would hold answers longer than a network hop.
const MAX_UDP_COALESCE_US: u64 = 1_000;
/// 65,535 less the IPv4 and UDP headers: an answer past it is never sent
/// (black-box finding: no TC, the client only timed out).
const MAX_UDP_PAYLOAD: u16 = 65_507;
/// Off: on a quiet machine pacing measured dearer than not pacing
/// (heron_server::udp::coalesce).
/// `udp-segmentation` when the file does not say.
pub const DEFAULT_UDP_SEGMENTATION: bool = true;

fn default_udp_segmentation() -> bool {
    DEFAULT_UDP_SEGMENTATION
}

fn default_udp_coalesce_us() -> u64 {
    0
}
fn default_max_zone_file_size() -> u64 {
    heron_zone::zonefile::DEFAULT_MAX_LOAD_SIZE
}
fn default_udp_payload() -> u16 {
    1232
}
fn default_event_loop() -> bool {
    TcpLimits::default().event_loop
}
fn default_idle() -> u64 {
    TcpLimits::default().idle_timeout.as_secs()
}
/// The longest `[tcp]` timeout, in seconds (a day): a deadline that far
/// is still a time the clock can say.
const MAX_TCP_TIMEOUT: u64 = 86_400;

/// Errors in `[tcp]`: prefix lengths an address cannot have, a timeout of
/// zero (every connection or message would be late) or past a day, a
/// connection limit of zero (every connection, TLS too, closed on accept).
fn check_tcp(tcp: &TcpSection) -> Vec<String> {
    let mut errors = Vec::new();
    for (key, limit) in [
        ("max-connections", tcp.max_connections),
        ("max-connections-per-client", tcp.max_connections_per_client),
    ] {
        if limit == 0 {
            errors.push(format!(
                "[tcp] {key} must be at least 1, not 0: every TCP and TLS connection \
                 would be closed on accept"
            ));
        }
    }
    for (key, seconds) in [
        ("idle-timeout", tcp.idle_timeout),
        ("message-timeout", tcp.message_timeout),
    ] {
        if !(1..=MAX_TCP_TIMEOUT).contains(&seconds) {
            errors.push(format!(
                "[tcp] {key} must be 1 to {MAX_TCP_TIMEOUT} seconds, not {seconds}"
            ));
        }
    }
    if tcp.ipv4_client_prefix > 32 {
        let got = tcp.ipv4_client_prefix;
        errors.push(format!("[tcp] ipv4-client-prefix {got} is above 32"));
    }
    if tcp.ipv6_client_prefix > 128 {
        let got = tcp.ipv6_client_prefix;
        errors.push(format!("[tcp] ipv6-client-prefix {got} is above 128"));
    }
    errors
}

fn default_message_timeout() -> u64 {
    TcpLimits::default().message_timeout.as_secs()
}
fn default_ipv4_client_prefix() -> u8 {
    TcpLimits::default().ipv4_client_prefix
}
fn default_ipv6_client_prefix() -> u8 {
    TcpLimits::default().ipv6_client_prefix
}
fn default_max_connections() -> usize {
    TcpLimits::default().max_connections
}
fn default_per_client() -> usize {
    TcpLimits::default().max_connections_per_client
}

/// A zone to load: its origin and file, resolved.
#[derive(Debug, Clone)]
pub struct ZoneSpec {
    pub origin: Name,
    pub file: PathBuf,
    /// Set when Heron signs the zone.
    pub signing: Option<std::sync::Arc<dnssec::Signing>>,
    /// A copy Heron wrote for itself (a secondary's, a signed zone's):
    /// read only if its seal holds (`heron_xfr::secondary::seal`).
    pub kept: bool,
}

/// A configuration ready to run.
#[derive(Debug)]
pub struct Settings {
    pub server: ServerConfig,
    pub zones: Vec<ZoneSpec>,
    pub keys: Vec<Key>,
    /// Transfer settings of the zones that have any.
    pub policies: HashMap<Name, ZonePolicy>,
    /// Zones pulled from primaries (not in `zones`), catalog zones
    /// included.
    pub secondaries: Vec<SecondaryZone>,
    /// The secondary zones Heron signs (`dnssec-policy` with
    /// `primaries`): each transferred unsigned, served signed.
    pub signed_secondaries: Vec<(Name, std::sync::Arc<dnssec::Signing>)>,
    /// Catalog zones consumed, and their member templates.
    pub catalogs: Vec<CatalogConfig>,
    /// Catalog zones Heron writes (not in `zones`).
    pub generated_catalogs: Vec<GeneratedCatalog>,
    pub secondary: SecondarySection,
    /// TLS to primaries (XoT).
    pub xot: TlsClients,
    /// Where the control socket is, if there is one.
    pub control: Option<PathBuf>,
    /// Most octets one zone load reads (see
    /// [`heron_zone::zonefile::set_max_load_size`]).
    pub max_zone_file_size: u64,
    /// Query ACLs, NSID and the user to run as.
    pub shield: Shield,
    /// What is worth saying about a configuration that is not wrong.
    pub warnings: Vec<String>,
    /// What a reload would not apply.
    pub restart_only: RestartOnly,
    /// The sections a reload applies whole (`[secondary]`), fingerprinted
    /// to say which changed.
    pub live: RestartOnly,
    /// `[cookies]`.
    pub cookies: heron_proto::cookie::CookieSettings,
    /// `[dnstap]`; None: off.
    pub dnstap: Option<dnstap::Dnstap>,
    /// Where the Prometheus endpoint listens (`[metrics] listen`); None: off.
    pub metrics: Option<metrics::MetricsSettings>,
    /// `[log]`: its levels apply at a reload, its format at a restart.
    pub log: crate::logging::LogSection,
}

/// Reads and checks a configuration file. Errors name the file and say what
/// is wrong (TOML errors carry line and column).
pub fn load(path: &Path) -> Result<Settings, Vec<String>> {
    let text = heron_sys::files::read_settings_text(path).map_err(|e| vec![e])?;
    let base = path.parent().unwrap_or(Path::new("."));
    match every_error::parse(&text) {
        Ok(file) => from_file(file, base, path),
        Err(problems) => {
            let mut errors: Vec<String> = (problems.errors.iter())
                .map(|e| format!("{}: {e}", path.display()))
                .collect();
            // The sections that did read are checked too, in the same run.
            if let Some(Err(more)) = problems.rest.map(|rest| from_file(*rest, base, path)) {
                errors.extend(more);
            }
            Err(errors)
        }
    }
}

/// Errors found while a file is resolved, each prefixed with the file's
/// path, so that every check reports the same way and all are reported.
struct Problems<'a> {
    path: &'a Path,
    errors: Vec<String>,
}

impl Problems<'_> {
    fn add(&mut self, error: impl std::fmt::Display) {
        self.errors
            .push(format!("{}: {error}", self.path.display()));
    }

    fn extend<E: std::fmt::Display>(&mut self, errors: impl IntoIterator<Item = E>) {
        errors.into_iter().for_each(|e| self.add(e));
    }

    /// The value, or `fallback` with the errors recorded.
    fn or<T, E: std::fmt::Display>(&mut self, result: Result<T, Vec<E>>, fallback: T) -> T {
        result.unwrap_or_else(|e| {
            self.extend(e);
            fallback
        })
    }
}

/// The sections besides zones and keys, each read and checked on its own.
struct Sections {
    xdp: Option<XdpConfig>,
    rrl: Option<heron_server::rrl::RrlSettings>,
    cookies: heron_proto::cookie::CookieSettings,
    dnstap: Option<dnstap::Dnstap>,
    tls: Option<TlsListen>,
    xot: Option<TlsClients>,
    metrics: Option<metrics::MetricsSettings>,
}

fn from_file(file: ConfigFile, base: &Path, path: &Path) -> Result<Settings, Vec<String>> {
    let restart_only = RestartOnly::of_sections(&file);
    let mut live = RestartOnly::of_live_sections(&file);
    let mut problems = Problems {
        path,
        errors: Vec::new(),
    };
    let (keys, key_errors) = keys(&file.keys);
    problems.extend(key_errors);
    let (zones, single_zones, mut consumed) = read_zones(&file, &keys, base, &mut problems);
    let Zones {
        mut zones,
        mut secondaries,
        mut policies,
        query_acls,
        catalogs: generated,
    } = zones;
    let primaries = primary_origins(&zones, &secondaries);
    let generated = problems.or(generated.finish(&primaries), Vec::new());
    match sources::Sources::read(&file.xfr) {
        Ok(sources) => sources.apply(&mut secondaries, &mut policies, &mut consumed),
        Err(e) => problems.extend(e),
    }
    let mut warnings: Vec<String> = keep_shared_journals_in_memory(&single_zones, &mut policies)
        .into_iter()
        .map(|w| format!("{}: {w}", path.display()))
        .collect();
    problems.extend(check_unique_origins(&zones));
    let shared = check_shared_files(&zones, (&secondaries, &consumed), &generated, &policies);
    problems.extend(shared);
    let by = (&zones[..], &secondaries[..], &generated[..], &policies);
    problems.extend(written_where_they_may_not_be(by, &file, (base, path)));
    let control = file.server.control.as_ref().map(|p| base.join(p));
    problems.extend(control.as_deref().and_then(control_path_problem));
    warnings.extend(control.as_deref().and_then(control_folder_missing));
    warnings.extend(xdp_without_listen(&file, path));
    warnings.extend(no_zone_configured((&zones, &secondaries, &consumed), path));
    // A reload replaces the processor's query ACLs.
    live.add_hashed("zones' allow-query", &query_acl_lines(&query_acls));
    let shield = server_shield(&file.server, &keys, query_acls).unwrap_or_else(|e| {
        problems.extend(e.into_iter().map(|e| format!("[server] {e}")));
        Shield::default()
    });
    problems.extend(file.secondary.check());
    let sections = read_sections(&file, base, &mut problems);
    problems.extend(server_problems(&file, &sections, &secondaries));
    warnings.extend(sections.tls.as_ref().and_then(|t| t.kept.clone()));
    if !problems.errors.is_empty() {
        return Err(problems.errors);
    }
    if let Some(run_as) = &shield.run_as {
        let by = (&secondaries[..], &policies, &zones[..]);
        let unwritable = unwritable_folders(&file.server, base, by, run_as);
        warnings.extend(unwritable.map(|w| format!("{}: {w}", path.display())));
    }
    mark_used(&mut consumed, &zones, &policies, control.as_deref());
    let signed_secondaries = keep_zones_loaded_from_files(&mut zones, &secondaries, &generated);
    Ok(Settings {
        signed_secondaries,
        server: server_config(&file, sections.tls, sections.xdp, sections.rrl),
        zones,
        keys,
        policies,
        secondaries,
        catalogs: consumed,
        generated_catalogs: generated,
        control,
        max_zone_file_size: file.server.max_zone_file_size,
        secondary: file.secondary,
        xot: sections.xot.expect("no errors"),
        shield,
        warnings,
        restart_only,
        live,
        cookies: sections.cookies,
        dnstap: sections.dnstap,
        metrics: sections.metrics,
        log: file.log,
    })
}

/// Tells the consumed catalogs which files the configuration itself uses
/// (zone files, journals, the control socket): no member may take them.
fn mark_used(
    consumed: &mut [catalog::CatalogConfig],
    zones: &[ZoneSpec],
    policies: &HashMap<Name, ZonePolicy>,
    control: Option<&Path>,
) {
    let journals = policies.values().filter_map(|p| p.journal_file.as_deref());
    let used = (zones.iter().map(|z| z.file.as_path()))
        .chain(journals)
        .chain(control);
    catalog::mark_files_in_use(consumed, used);
}

/// The zones' own `allow-query` ACLs, one sorted line each.
fn query_acl_lines(query_acls: &HashMap<Name, Acl>) -> Vec<String> {
    let mut lines: Vec<String> = (query_acls.iter())
        .map(|(origin, acl)| format!("{origin} {acl:?}"))
        .collect();
    lines.sort_unstable();
    lines
}

/// Leaves out of `zones` those that are secondaries or generated
/// catalogs (not loaded from a file of their own); returns the
/// secondaries Heron signs (`dnssec-policy` with `primaries`), with how.
fn keep_zones_loaded_from_files(
    zones: &mut Vec<ZoneSpec>,
    secondaries: &[SecondaryZone],
    generated: &[GeneratedCatalog],
) -> Vec<(Name, std::sync::Arc<dnssec::Signing>)> {
    let mut secondary_origins: HashSet<&Name> = HashSet::with_capacity(secondaries.len());
    secondary_origins.extend(secondaries.iter().map(|s| &s.origin));
    let signed: Vec<(Name, std::sync::Arc<dnssec::Signing>)> = (zones.iter())
        .filter(|z| secondary_origins.contains(&z.origin))
        .filter_map(|z| Some((z.origin.clone(), z.signing.clone()?)))
        .collect();
    secondary_origins.extend(generated.iter().map(|c| &c.origin));
    zones.retain(|z| !secondary_origins.contains(&z.origin));
    // Kept as long as the server runs: not the room of 100,000 secondaries.
    zones.shrink_to_fit();
    signed
}

/// One `[[zone]]`: its file and signing, and its transfer and update
/// settings.
fn zone_entry(
    entry: &ZoneEntry,
    keys: &[Key],
    base: &Path,
    policies_by_name: &HashMap<String, std::sync::Arc<heron_dnssec::policy::Policy>>,
) -> Result<(ZoneSpec, ZoneSettings), String> {
    let mut options = entry.options();
    if !entry.allow_update.is_empty() && options.journal == Some(true) {
        // Kept for the updates, whoever may transfer the zone.
        options.journal = None;
    }
    let mut settings = zone_settings(options, keys)?;
    let mut spec = zone_spec(&entry.origin, &base.join(&entry.file))?;
    let policy = entry.dnssec_policy.as_deref();
    let dir = entry.key_directory.as_deref();
    spec.signing = dnssec::zone_signing(policy, dir, policies_by_name, base)?;
    dnssec::check_imported_keys(&spec.origin, spec.signing.as_deref())?;
    dnssec::check_nsec3_room(&spec.origin, spec.signing.as_deref())?;
    settings.policy.update = update_settings(&entry.update_options(), &spec, keys)?;
    Ok((spec, settings))
}

/// `[[zone]]`, `[[zone-group]]` and `[[catalog]]`: the zones, the origins
/// of the single zones, and the catalogs consumed.
fn read_zones(
    file: &ConfigFile,
    keys: &[Key],
    base: &Path,
    problems: &mut Problems,
) -> (Zones, Vec<Name>, Vec<CatalogConfig>) {
    let (policies, errors) = dnssec::policies_and_errors(&file.dnssec_policies);
    errors.into_iter().for_each(|e| problems.add(e));
    let policies_by_name = &policies;
    // A zone naming a policy whose section has errors: those errors say
    // it, not a "not defined" for each zone.
    let broken = |name: Option<&str>| {
        name.is_some_and(|n| !policies.contains_key(n))
            && (file.dnssec_policies.iter()).any(|p| Some(p.name.as_str()) == name)
    };
    let mut zones = Zones::default();
    let mut single_zones = Vec::with_capacity(file.zones.len());
    for entry in &file.zones {
        match zone_entry(entry, keys, base, policies_by_name) {
            Ok((spec, settings)) => {
                single_zones.push(spec.origin.clone());
                match catalogs::generated(entry, &spec, &settings) {
                    Ok(Some(all)) => zones.catalogs.add_catalog(&spec, all),
                    Ok(None) => {}
                    Err(e) => problems.add(format!("zone '{}': {e}", entry.origin)),
                }
                zones.add(spec, &settings)
            }
            Err(_) if broken(entry.dnssec_policy.as_deref()) => {}
            Err(e) => problems.add(format!("zone '{}': {e}", entry.origin)),
        }
    }
    for group in &file.zone_groups {
        let signing = dnssec::zone_signing(
            group.dnssec_policy.as_deref(),
            group.key_directory.as_deref(),
            policies_by_name,
            base,
        );
        let added = signing.and_then(|signing| zones.add_group(group, keys, base, signing));
        if let Err(e) = added
            && !broken(group.dnssec_policy.as_deref())
        {
            problems.add(format!("[[zone-group]]: {e}"));
        }
    }
    let mut consumed = Vec::with_capacity(file.catalogs.len());
    for entry in &file.catalogs {
        let resolved = entry.resolve(keys, base).and_then(|catalog| {
            let settings = zone_settings(entry.zone_options(), keys)?;
            Ok((
                catalog,
                settings,
                zone_spec(&entry.zone, &base.join(&entry.file))?,
            ))
        });
        match resolved {
            Ok((catalog, settings, spec)) => {
                zones.add(spec, &settings);
                consumed.push(catalog);
            }
            Err(e) => problems.add(format!("catalog '{}': {e}", entry.zone)),
        }
    }
    (zones, single_zones, consumed)
}

/// `[server]`'s limits, one row each.
/// The most octets of a Unix socket's path (`sun_path` less its NUL).
const MAX_SOCKET_PATH: usize = 107;

/// A control socket path no Unix socket can have.
fn control_path_problem(control: &Path) -> Option<String> {
    let len = control.as_os_str().len();
    (len > MAX_SOCKET_PATH).then(|| {
        format!(
            "[server] control {}: {len} octets, and a Unix socket's path holds at most {MAX_SOCKET_PATH}",
            control.display()
        )
    })
}

/// A control socket whose folder does not exist (yet: systemd's
/// RuntimeDirectory makes it at the start): said, not refused.
fn control_folder_missing(control: &Path) -> Option<String> {
    let folder = control.parent().filter(|f| !f.as_os_str().is_empty())?;
    (!folder.is_dir()).then(|| {
        format!(
            "[server] control {}: its folder {} does not exist; the server cannot start until it does",
            control.display(),
            folder.display()
        )
    })
}

fn check_server(server: &ServerSection) -> Vec<String> {
    let rules = [
        (
            server.listen.is_empty(),
            "[server] listen is empty".to_string(),
        ),
        (
            server.max_udp_payload < 512,
            format!(
                "[server] max-udp-payload {} is below the minimum of 512",
                server.max_udp_payload
            ),
        ),
        (
            server.max_udp_payload > MAX_UDP_PAYLOAD,
            format!(
                "[server] max-udp-payload {} is above {MAX_UDP_PAYLOAD}, the most one UDP \
                 datagram over IPv4 carries: a larger answer could not be sent at all",
                server.max_udp_payload
            ),
        ),
        (
            server.udp_coalesce_us > MAX_UDP_COALESCE_US,
            format!(
                "[server] udp-coalesce-us {} is above the maximum of {MAX_UDP_COALESCE_US}",
                server.udp_coalesce_us
            ),
        ),
        (
            server.max_zone_file_size == 0,
            "[server] max-zone-file-size must be at least 1".to_string(),
        ),
        (
            server.workers == Some(0),
            "[server] workers must be at least 1".to_string(),
        ),
    ];
    (rules.into_iter())
        .filter(|(broken, _)| *broken)
        .map(|(_, message)| message)
        .collect()
}

/// The sections read on their own: XDP, RRL, cookies, dnstap, TLS, the
/// transfer clients' TLS, metrics.
/// What is wrong in `[server]`, `[tcp]`, the listeners and XoT.
fn server_problems(
    file: &ConfigFile,
    sections: &Sections,
    secondaries: &[SecondaryZone],
) -> Vec<String> {
    let metrics_listen = sections.metrics.as_ref().map(|m| m.listen);
    let mut problems = check_tcp(&file.tcp);
    problems.extend(check_server(&file.server));
    problems.extend(xot_problems(&sections.xot, secondaries));
    problems.extend(listen_conflicts(
        &file.server.listen,
        &file.tls.listen,
        metrics_listen,
    ));
    problems
}

/// A listen address of port 0 (AL-12): each socket (one per worker) would
/// get another random port, and nobody could know where the server
/// answers. As `[xdp] listen`, the port must be 1 to 65535.
fn port_zero(key: &str, addr: &SocketAddr) -> Option<String> {
    (addr.port() == 0).then(|| format!("{key} {addr}: the port must be 1 to 65535"))
}

/// Addresses listeners cannot use: port 0 ([`port_zero`]), and those
/// two listeners would both bind, which `heron serve` fails on
/// at its start (black-box finding: check-config passed them, and under
/// `Restart=on-failure` the unit looped): a `[server] listen` address
/// twice, a `[tls] listen` one twice (bound twice by SO_REUSEPORT, each
/// socket taking half the connections: AL-4), one in `[tls] listen` too, or the `[metrics]` port on a DNS
/// address (TCP both; for metrics, which binds without SO_REUSEPORT, a
/// wildcard address covers the specific ones of its family on its port).
fn listen_conflicts(
    server: &[SocketAddr],
    tls: &[SocketAddr],
    metrics: Option<SocketAddr>,
) -> Vec<String> {
    let overlap = |a: &SocketAddr, b: &SocketAddr| {
        a.port() == b.port()
            && a.is_ipv4() == b.is_ipv4()
            && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
    };
    let mut problems = Vec::new();
    let metrics_listen = metrics.iter().map(|a| ("[metrics]", a));
    let every = (server.iter().map(|a| ("[server]", a)))
        .chain(tls.iter().map(|a| ("[tls]", a)))
        .chain(metrics_listen);
    problems.extend(every.filter_map(|(section, a)| port_zero(&format!("{section} listen"), a)));
    for (section, list) in [("[server]", server), ("[tls]", tls)] {
        for (i, a) in list.iter().enumerate() {
            if list[..i].contains(a) {
                problems.push(format!("{section} listen names {a} twice"));
            }
        }
    }
    // DNS and DoT sockets share ports by SO_REUSEPORT: only the same
    // address twice collides (0.0.0.0:P beside 127.0.0.1:P works).
    for t in tls {
        if let Some(s) = server.iter().find(|s| *s == t) {
            problems.push(format!(
                "[tls] listen {t} is also [server] listen {s}: TCP could not bind both"
            ));
        }
    }
    let dns = server
        .iter()
        .map(|a| ("[server]", a))
        .chain(tls.iter().map(|a| ("[tls]", a)));
    for (section, a) in dns {
        if let Some(m) = metrics.filter(|m| overlap(m, a)) {
            problems.push(format!("[metrics] listen {m} is also {section} listen {a}"));
        }
    }
    problems
}

/// A configuration of no zone at all (a truncated file?): a reload of it
/// stops serving every zone, and the secondaries' copies go unless
/// `[secondary] keep-removed` (black-box finding BQ-4: said nothing).
fn no_zone_configured(
    (zones, secondaries, consumed): (&[ZoneSpec], &[SecondaryZone], &[CatalogConfig]),
    path: &Path,
) -> Option<String> {
    let none = zones.is_empty() && secondaries.is_empty() && consumed.is_empty();
    none.then(|| format!(
        "{}: no zone is configured: a reload of this file stops serving every zone (and deletes the secondary zones' kept copies unless [secondary] keep-removed = true)",
        path.display()
    ))
}

/// An `[xdp]` section naming no interface is almost surely a mistake: the
/// section is there and AF_XDP is off (black-box findings BJ-8, BK-4).
fn xdp_without_listen(file: &ConfigFile, path: &Path) -> Option<String> {
    file.xdp.as_ref().filter(|x| x.listen.is_empty()).map(|_| {
        format!(
            "{}: [xdp] has no listen entry, so AF_XDP is off (UDP is served on sockets only)",
            path.display()
        )
    })
}

fn read_sections(file: &ConfigFile, base: &Path, problems: &mut Problems) -> Sections {
    let xdp = match &file.xdp {
        Some(section) => problems.or(section.config(), None),
        None => None,
    };
    let rrl = problems.or(
        file.rrl.as_ref().map(RrlSection::settings).transpose(),
        None,
    );
    let cookies = problems.or(file.cookies.settings(), Default::default());
    let dnstap = problems.or(
        file.dnstap.as_ref().map(|d| d.settings(base)).transpose(),
        None,
    );
    let tls = problems.or(file.tls.load(base).map_err(|e| vec![e]), None);
    let xot = problems.or(
        file.secondary
            .tls_clients(base)
            .map(Some)
            .map_err(|e| vec![e]),
        None,
    );
    let metrics = (file.metrics.settings()).map_err(|e| vec![format!("[metrics] {e}")]);
    let metrics = problems.or(metrics, None);
    Sections {
        xdp,
        rrl: rrl.flatten(),
        cookies,
        dnstap,
        tls,
        xot,
        metrics,
    }
}

/// Secondary zones with a primary to be reached with a checked
/// certificate while `[secondary] tls-ca` gives nothing to check with.
fn xot_problems(xot: &Option<TlsClients>, secondaries: &[SecondaryZone]) -> Vec<String> {
    let can_check = xot.as_ref().is_none_or(TlsClients::can_check_certificates);
    let strict = |u: &Upstream| matches!(u.tls, Some(XotTrust::Strict { .. }));
    (secondaries.iter())
        .filter(|z| !can_check && z.primaries.iter().any(strict))
        .map(|zone| {
            format!(
                "zone '{}': a primary with 'tls NAME' needs [secondary] tls-ca",
                zone.origin
            )
        })
        .collect()
}

/// Warnings for folders `[server] user` could not write to: kept copies,
/// journals, the control socket, and for zones Heron signs their key
/// directories and signed copies (`FILE.signed`, beside the zone file).
fn unwritable_folders<'a>(
    server: &ServerSection,
    base: &Path,
    (secondaries, policies, zones): (
        &'a [SecondaryZone],
        &'a HashMap<Name, ZonePolicy>,
        &'a [ZoneSpec],
    ),
    run_as: &RunAs,
) -> impl Iterator<Item = String> + use<'a> {
    let control = server.control.as_ref().map(|p| base.join(p));
    let kept: Vec<_> = secondaries.iter().map(|z| z.kept_path()).collect();
    let signed: Vec<PathBuf> = (zones.iter())
        .filter_map(|z| Some((&z.file, z.signing.as_ref()?)))
        .flat_map(|(file, signing)| {
            let copy = PathBuf::from(format!("{}.signed", file.display()));
            [copy, signing.key_directory.join("state")]
        })
        .collect();
    let written = (kept.iter().map(|p| &**p))
        .chain(policies.values().filter_map(|p| p.journal_file.as_deref()))
        .chain(signed.iter().map(|p| p.as_path()))
        .chain(control.as_deref());
    let groups = heron_sys::privileges::groups_of(&run_as.user, run_as.ids.gid).unwrap_or_default();
    privileges::unwritable_folders(written, run_as.ids, &groups).into_iter()
}

/// What the transports are given.
fn server_config(
    file: &ConfigFile,
    tls: Option<TlsListen>,
    xdp: Option<XdpConfig>,
    rrl: Option<heron_server::rrl::RrlSettings>,
) -> ServerConfig {
    let server = &file.server;
    ServerConfig {
        listen: server.listen.clone(),
        workers: server.workers.unwrap_or_else(default_workers),
        cpu_affinity: server.cpu_affinity.clone(),
        udp_coalesce: Duration::from_micros(server.udp_coalesce_us),
        udp_segmentation: server.udp_segmentation,
        tcp: TcpLimits {
            idle_timeout: Duration::from_secs(file.tcp.idle_timeout),
            message_timeout: Duration::from_secs(file.tcp.message_timeout),
            max_connections: file.tcp.max_connections,
            max_connections_per_client: file.tcp.max_connections_per_client,
            ipv4_client_prefix: file.tcp.ipv4_client_prefix,
            ipv6_client_prefix: file.tcp.ipv6_client_prefix,
            event_loop: file.tcp.event_loop,
        },
        answer: AnswerConfig {
            max_udp_payload: server.max_udp_payload,
            version: server.version.clone(),
            identity: server.identity.clone(),
        },
        tls,
        xdp,
        rrl,
    }
}

/// The origins of the zones loaded from files here (generated catalogs
/// are not loaded yet, secondaries are left out).
fn primary_origins(zones: &[ZoneSpec], secondaries: &[SecondaryZone]) -> Vec<Name> {
    let secondaries: HashSet<&Name> = secondaries.iter().map(|s| &s.origin).collect();
    (zones.iter())
        .filter(|z| !secondaries.contains(&z.origin))
        .map(|z| z.origin.clone())
        .collect()
}

/// Issue 25's `[server]` settings, read.
#[derive(Debug, Default)]
pub struct Shield {
    pub query_policy: QueryPolicy,
    /// Empty: no NSID.
    pub nsid: Vec<u8>,
    pub run_as: Option<RunAs>,
}

/// The user and group the server drops to after binding its sockets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunAs {
    pub user: String,
    /// None: the user's primary group.
    pub group: Option<String>,
    /// Both looked up.
    pub ids: Ids,
}

/// The longest NSID accepted: an option's data is at most 65,535 octets,
/// but an identifier is a name or a short code (BIND caps it likewise).
pub const MAX_NSID_LEN: usize = 512;

fn server_shield(
    server: &ServerSection,
    keys: &[Key],
    zone_allow_query: HashMap<Name, Acl>,
) -> Result<Shield, Vec<String>> {
    let mut errors = Vec::new();
    let mut blackhole = Vec::with_capacity(server.blackhole.len());
    for item in &server.blackhole {
        match item.parse() {
            Ok(prefix) => blackhole.push(prefix),
            Err(e) => errors.push(format!("blackhole '{item}': {e}")),
        }
    }
    let allow_query = server
        .allow_query
        .as_deref()
        .map(|list| parse_acl(list, "allow-query", keys))
        .transpose()
        .unwrap_or_else(|e| {
            errors.push(e);
            None
        });
    let nsid = nsid(server).unwrap_or_else(|e| {
        errors.push(e);
        Vec::new()
    });
    let run_as = match (&server.user, &server.group) {
        (Some(user), group) => match privileges::resolve(user, group.as_deref()) {
            Ok(ids) => Some(RunAs {
                user: user.clone(),
                group: group.clone(),
                ids,
            }),
            Err(e) => {
                errors.push(e);
                None
            }
        },
        (None, Some(_)) => {
            errors.push("group is set without user".into());
            None
        }
        (None, None) => None,
    };
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(Shield {
        query_policy: QueryPolicy {
            blackhole,
            allow_query,
            zone_allow_query,
        },
        nsid,
        run_as,
    })
}

/// `nsid = "text"` or `nsid-hex = "…"`, not both.
fn nsid(server: &ServerSection) -> Result<Vec<u8>, String> {
    let nsid = match (&server.nsid, &server.nsid_hex) {
        (Some(_), Some(_)) => return Err("nsid and nsid-hex are both set".into()),
        (Some(text), None) => text.as_bytes().to_vec(),
        (None, Some(hex)) => {
            decode_hex(hex).ok_or_else(|| format!("nsid-hex '{hex}' is not hex"))?
        }
        (None, None) => return Ok(Vec::new()),
    };
    if nsid.is_empty() || nsid.len() > MAX_NSID_LEN {
        return Err(format!(
            "nsid must be 1 to {MAX_NSID_LEN} octets, not {}",
            nsid.len()
        ));
    }
    Ok(nsid)
}

/// Pairs of hex digits; None for anything else.
fn decode_hex(text: &str) -> Option<Vec<u8>> {
    let digits = text.as_bytes();
    if !digits.len().is_multiple_of(2) || !digits.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect()
}

/// What of a configuration file only a restart applies (a reload applies
/// the primary zones and every zone's transfer settings), one fingerprint
/// per part, so that a reload can say which parts it left alone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RestartOnly(Vec<(&'static str, u64)>);

impl RestartOnly {
    fn of_sections(file: &ConfigFile) -> RestartOnly {
        let mut parts = RestartOnly::default();
        // Destructured, so that a new field must be placed here.
        let ServerSection {
            listen,
            workers,
            cpu_affinity,
            control,
            user,
            group,
            udp_coalesce_us,
            udp_segmentation,
            max_udp_payload,
            version,
            identity,
            nsid,
            nsid_hex,
            // A reload applies these (of_live_sections).
            allow_query: _,
            blackhole: _,
            max_zone_file_size,
        } = &file.server;
        parts.add("[server] listen", listen);
        parts.add("[server] workers", workers);
        parts.add("[server] cpu-affinity", cpu_affinity);
        parts.add("[server] control", control);
        parts.add("[server] user, group", &(user, group));
        // The rest of the section, named as a whole.
        parts.add(
            "[server] (answering settings)",
            &(
                (udp_coalesce_us, udp_segmentation),
                (max_udp_payload, max_zone_file_size),
                (version, identity, nsid, nsid_hex),
            ),
        );
        parts.add("[tcp]", &file.tcp);
        // The certificate and key are read again at each reload.
        parts.add("[tls] listen", &file.tls.listen);
        // An `[xdp]` with no entry is no XDP, as no section.
        let xdp = file.xdp.as_ref().filter(|x| !x.listen.is_empty());
        parts.add("[xdp]", &xdp);
        parts.add("[rrl]", &file.rrl);
        parts.add("[cookies]", &file.cookies);
        parts.add("[metrics]", &file.metrics);
        parts.add("[log] format", &file.log.format);
        parts
    }

    /// The sections a reload applies as a whole (not zone by zone), to
    /// say which a reload changed.
    fn of_live_sections(file: &ConfigFile) -> RestartOnly {
        let mut parts = RestartOnly::default();
        parts.add("[secondary]", &file.secondary);
        parts.add("[dnstap]", &file.dnstap);
        let server = &file.server;
        parts.add(
            "[server] allow-query, blackhole",
            &(&server.allow_query, &server.blackhole),
        );
        parts
    }

    /// A section, fingerprinted by its text form (sections are small).
    fn add(&mut self, part: &'static str, value: &impl std::fmt::Debug) {
        self.add_hashed(part, &format!("{value:?}"));
    }

    /// A part that may be large (100,000 secondary zones), hashed as it
    /// is: formatting it first cost 80 ms of a server's start.
    fn add_hashed(&mut self, part: &'static str, value: &impl std::hash::Hash) {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(value);
        self.0.push((part, hash));
    }

    /// The parts that differ from `before`.
    pub fn changed_since(&self, before: &RestartOnly) -> Vec<&'static str> {
        self.0
            .iter()
            .filter(|part| !before.0.contains(part))
            .map(|(name, _)| *name)
            .collect()
    }
}

/// What a `[[zone]]` or `[[zone-group]]` gives each of its zones.
struct ZoneSettings {
    policy: ZonePolicy,
    /// None unless the zones are secondaries; shared by the zones of a
    /// group.
    primaries: Primaries,
    keep_journal: bool,
    /// The zone's own `allow-query`, if it has one.
    allow_query: Option<Acl>,
    /// The generated catalog listing the zones, if any.
    catalog_member: Option<catalogs::Membership>,
    /// A group's file pattern, which its secondary zones share for their
    /// kept copies instead of a path each.
    kept_pattern: Option<KeptFile>,
}

fn zone_settings(options: ZoneOptions, keys: &[Key]) -> Result<ZoneSettings, String> {
    let primaries = upstreams(options.primaries, keys)?;
    Ok(ZoneSettings {
        catalog_member: catalogs::membership(
            options.catalog_member,
            options.catalog_group,
            options.catalog_id_generation,
        )?,
        allow_query: options
            .allow_query
            .map(|list| parse_acl(list, "allow-query", keys))
            .transpose()?,
        policy: zone_policy(&options, keys, &primaries)?,
        keep_journal: keeps_journal(&options)?,
        primaries: primaries.into(),
        kept_pattern: None,
    })
}

/// `[[zone]]` entries served from one zone file (parked domains, say)
/// would share its journal file, which holds one zone's history: theirs
/// stay in memory, and a warning says so. (The zones of a `[[zone-group]]`
/// each have their own file.)
fn keep_shared_journals_in_memory(
    origins: &[Name],
    policies: &mut HashMap<Name, ZonePolicy>,
) -> Vec<String> {
    let mut zones_of: HashMap<PathBuf, Vec<&Name>> = HashMap::new();
    for origin in origins {
        if let Some(file) = policies.get(origin).and_then(|p| p.journal_file.clone()) {
            zones_of.entry(file).or_default().push(origin);
        }
    }
    let mut warnings = Vec::new();
    for (file, zones) in zones_of.into_iter().filter(|(_, z)| z.len() > 1) {
        let names: Vec<String> = zones.iter().map(|z| z.to_string()).collect();
        warnings.push(format!(
            "zones {} would share the journal file {}, which holds one zone's history: their journals stay in memory (journal = false says so without this warning)",
            names.join(", "),
            file.display()
        ));
        for origin in zones {
            policies.get_mut(origin).expect("listed above").journal_file = None;
        }
    }
    warnings.sort();
    warnings
}

/// A zone's `allow-update` rules and `serial` policy. Every key a rule
/// names must be defined; a secondary zone takes no updates (they go to
/// its primary), and updates need the journal on disk, which is what
/// keeps them across restarts.
fn update_settings(
    entry: &UpdateOptions,
    spec: &ZoneSpec,
    keys: &[Key],
) -> Result<UpdateSettings, String> {
    let origin = &spec.origin;
    let forwarding = parse_acl(
        entry.allow_update_forwarding,
        "allow-update-forwarding",
        keys,
    )?;
    if !forwarding.is_empty() && !entry.secondary {
        return Err("allow-update-forwarding is for secondary zones (with primaries); a primary zone takes updates by allow-update".into());
    }
    let forwarding_key = forwarding_key(entry, &forwarding, keys)?;
    let mut rules = Vec::with_capacity(entry.allow_update.len());
    let zone = origin.to_string();
    let zone = match zone.trim_end_matches('.') {
        "" => ".",
        name => name,
    };
    for text in entry.allow_update {
        let rule = UpdateRule::parse(&text.replace(ZONE_PLACEHOLDER, zone), origin)
            .map_err(|e| format!("allow-update '{text}': {e}"))?;
        if let Some(key) = rule
            .key
            .as_ref()
            .filter(|k| !keys.iter().any(|d| d.name == **k))
        {
            return Err(format!(
                "allow-update '{text}': key {key} is not defined in a [[key]] section"
            ));
        }
        rules.push(rule);
    }
    let serial = match entry.serial {
        Some(text) => text.parse()?,
        None => SerialPolicy::default(),
    };
    if rules.is_empty() {
        return match (entry.serial, entry.zonefile_sync) {
            (None, None) => Ok(UpdateSettings {
                forwarding,
                forwarding_key,
                ..UpdateSettings::default()
            }),
            _ => Err(
                "serial or zonefile-sync is set, but allow-update is empty: only updates use them"
                    .into(),
            ),
        };
    }
    let write_back = match entry.zonefile_sync {
        None => Some(DEFAULT_ZONEFILE_SYNC),
        Some(toml::Value::String(never)) if never == "never" => None,
        Some(toml::Value::Integer(secs)) if (0..=86_400 * 7).contains(secs) => {
            Some(Duration::from_secs(*secs as u64))
        }
        Some(other) => {
            return Err(format!(
                "zonefile-sync = {other:?}: expected seconds (0 to 604800) or \"never\""
            ));
        }
    };
    if entry.secondary {
        return Err("allow-update on a secondary zone: updates go to its primary".into());
    }
    if entry.journal == Some(false) {
        return Err(
            "allow-update with journal = false: updates are kept across restarts by the journal on disk".into(),
        );
    }
    Ok(UpdateSettings {
        policy: UpdatePolicy::new(rules),
        serial,
        write_back: write_back.map(|after| (spec.file.clone(), after)),
        forwarding,
        forwarding_key,
    })
}

/// `update-forwarding-key`: a `[[key]]`'s name, for a zone that forwards
/// updates.
fn forwarding_key(
    entry: &UpdateOptions,
    forwarding: &Acl,
    keys: &[Key],
) -> Result<Option<Name>, String> {
    let Some(text) = entry.update_forwarding_key else {
        return Ok(None);
    };
    if forwarding.is_empty() {
        return Err(format!(
            "update-forwarding-key = \"{text}\", but allow-update-forwarding is empty: only forwarded updates are signed with it"
        ));
    }
    let name = Name::parse(text).map_err(|e| format!("update-forwarding-key = \"{text}\": {e}"))?;
    match keys.iter().find(|k| k.name == name) {
        Some(key) => Ok(Some(key.name.clone())),
        None => Err(format!(
            "update-forwarding-key = \"{text}\": no [[key]] of that name is defined"
        )),
    }
}

/// How long after an update a zone is written back to its file, unless
/// `zonefile-sync` says otherwise.
const DEFAULT_ZONEFILE_SYNC: Duration = Duration::from_secs(60);

/// Whether a zone's journal is kept in a file: unless `journal = false`.
/// There is a journal only for zones someone may transfer, so an explicit
/// `journal = true` without `allow-transfer` is a mistake.
fn keeps_journal(options: &ZoneOptions) -> Result<bool, String> {
    match options.journal {
        Some(true) if options.allow_transfer.is_empty() => Err(
            "journal = true, but allow-transfer is empty: a journal is kept only for zones others may transfer".into(),
        ),
        journal => Ok(journal.unwrap_or(true)),
    }
}

/// The zones configured so far.
#[derive(Default)]
struct Zones {
    zones: Vec<ZoneSpec>,
    secondaries: Vec<SecondaryZone>,
    policies: HashMap<Name, ZonePolicy>,
    /// Zones with an `allow-query` of their own.
    query_acls: HashMap<Name, Acl>,
    /// Catalogs to generate, and the zones that name one.
    catalogs: catalogs::Catalogs,
}

impl Zones {
    fn add(&mut self, spec: ZoneSpec, settings: &ZoneSettings) {
        let ZoneSettings {
            policy,
            primaries,
            keep_journal,
            allow_query,
            catalog_member,
            kept_pattern,
        } = settings;
        if let Some(membership) = catalog_member {
            self.catalogs.add_member(&spec.origin, membership);
        }
        if let Some(acl) = allow_query {
            self.query_acls.insert(spec.origin.clone(), acl.clone());
        }
        if *policy != ZonePolicy::default() {
            let mut policy = policy.clone();
            if *keep_journal && policy.keeps_history() {
                policy.journal_file = Some(journal_file::path_for(&spec.file));
            }
            self.policies.insert(spec.origin.clone(), policy);
        }
        if !primaries.is_empty() {
            // Listed in `zones` too, so origins are checked unique.
            let file = match kept_pattern {
                Some(shared) => shared.clone().or_own(&spec.origin, &spec.file),
                None => KeptFile::at(spec.file.clone()),
            };
            self.secondaries.push(SecondaryZone {
                origin: spec.origin.clone(),
                primaries: primaries.clone(),
                file,
                catalog: None,
            });
        }
        self.zones.push(spec);
    }

    /// Adds every zone of a group; its settings are checked once.
    fn add_group(
        &mut self,
        group: &ZoneGroup,
        keys: &[Key],
        base: &Path,
        signing: Option<std::sync::Arc<dnssec::Signing>>,
    ) -> Result<(), String> {
        if !group.file.contains(ZONE_PLACEHOLDER) {
            return Err(format!(
                "file '{}' has no {ZONE_PLACEHOLDER}: every zone would read the same file",
                group.file
            ));
        }
        let mut options = group.options();
        let updates = group.update_options();
        if !updates.allow_update.is_empty() && options.journal == Some(true) {
            // Kept for the updates, whoever may transfer the zones.
            options.journal = None;
        }
        let mut settings = zone_settings(options, keys)?;
        let pattern = base.join(&group.file);
        settings.kept_pattern = pattern.to_str().map(|p| KeptFile::pattern(p.into()));
        self.zones.reserve(group.origins.len());
        for origin in &group.origins {
            let mut spec = zone_spec(origin, &base.join(group.file_of(origin)))?;
            spec.signing = signing.clone();
            if !updates.is_empty() {
                // Each zone's own (its names, its file written back).
                settings.policy.update = update_settings(&updates, &spec, keys)
                    .map_err(|e| format!("zone '{origin}': {e}"))?;
            }
            self.add(spec, &settings);
        }
        Ok(())
    }
}

/// The primaries of a secondary zone.
fn upstreams(list: &[String], keys: &[Key]) -> Result<Vec<Upstream>, String> {
    list.iter()
        .map(|item| upstream(item, keys).map_err(|e| format!("primaries '{item}': {e}")))
        .collect()
}

/// `ADDRESS [key NAME] [tls [NAME]]`: a primary. With `tls` it is reached
/// over TLS (port 853 unless given), with any certificate; with `tls NAME`
/// its certificate must be valid for NAME and chain to `tls-ca`.
fn upstream(item: &str, keys: &[Key]) -> Result<Upstream, String> {
    let (item, source) = sources::take_via(item)?;
    let words: Vec<&str> = item.split_whitespace().collect();
    // A TSIG key may itself be named "tls".
    let is_tls = |(i, w): (usize, &&str)| *w == "tls" && (i == 0 || words[i - 1] != "key");
    let (words, tls) = match words.iter().enumerate().position(is_tls) {
        None => (&words[..], None),
        Some(at) => match &words[at + 1..] {
            [] => (&words[..at], Some(XotTrust::Opportunistic)),
            [name] => (&words[..at], Some(XotTrust::strict(name)?)),
            _ => return Err("expected 'tls' or 'tls NAME' at the end".into()),
        },
    };
    let head = words.join(" ");
    let (addr, key) = split_key(&head, keys)?;
    let port = if tls.is_some() { 853 } else { 53 };
    let addr = parse_target(addr, port)?;
    sources::check_family(source, addr)?;
    Ok(Upstream {
        addr,
        key,
        tls,
        source,
    })
}

/// The TSIG keys, each name once, each secret valid base64; and what is
/// wrong with the others. The valid ones are kept either way, so that an
/// ACL naming one is not also reported.
fn keys(entries: &[KeyEntry]) -> (Vec<Key>, Vec<String>) {
    let mut keys: Vec<Key> = Vec::new();
    let mut errors = Vec::new();
    for e in entries {
        if e.name.contains(char::is_whitespace) {
            errors.push(format!(
                "key '{}': a name with blanks cannot be named in an ACL or `primaries` (they split on blanks)",
                e.name
            ));
            continue;
        }
        let Some(algorithm) = Algorithm::from_text(&e.algorithm) else {
            errors.push(format!(
                "key '{}': unknown algorithm '{}' (hmac-sha256, hmac-sha384, hmac-sha512, hmac-sha224, hmac-sha1 or hmac-md5)",
                e.name, e.algorithm
            ));
            continue;
        };
        match Key::from_base64(&e.name, algorithm, &e.secret) {
            Ok(key) if keys.iter().any(|k| k.name == key.name) => {
                errors.push(format!("key '{}' is defined more than once", e.name))
            }
            Ok(key) => keys.push(key),
            Err(why) => errors.push(format!("key '{}': {why}", e.name)),
        }
    }
    (keys, errors)
}

/// A zone's ACLs and notify targets; every key named must be defined. A
/// secondary zone with no allow-notify takes NOTIFY from its primaries.
fn zone_policy(
    entry: &ZoneOptions,
    keys: &[Key],
    primaries: &[Upstream],
) -> Result<ZonePolicy, String> {
    let acl = |list: &[String], what: &str| parse_acl(list, what, keys);
    let notify = entry.notify.iter().map(|item| {
        let target = || {
            let (rest, source) = sources::take_via(item)?;
            let (addr, key) = split_key(&rest, keys)?;
            let addr = parse_target(addr, 53)?;
            sources::check_family(source, addr)?;
            Ok(NotifyTarget { addr, key, source })
        };
        target().map_err(|e: String| format!("notify '{item}': {e}"))
    });
    let mut allow_notify = acl(entry.allow_notify, "allow-notify")?;
    if allow_notify.is_empty() {
        let from_primaries = primaries.iter().map(|p| Rule {
            prefix: p
                .addr
                .ip()
                .to_string()
                .parse()
                .expect("an address is a prefix"),
            key: p.key.clone(),
        });
        allow_notify = Acl::new(from_primaries.collect());
    }
    Ok(ZonePolicy {
        allow_transfer: acl(entry.allow_transfer, "allow-transfer")?,
        allow_notify,
        notify: notify.collect::<Result<_, String>>()?,
        // Each zone's own, set when it is added.
        journal_file: None,
        // A `[[zone]]`'s own, set from its `allow-update`.
        update: Default::default(),
        // Found at a start, kept by a reconfigure: never configured.
        holds_updates: false,
    })
}

/// "PREFIX [key NAME]" entries (`allow-transfer`, `allow-notify`,
/// `allow-query`); every key named must be defined.
fn parse_acl(list: &[String], what: &str, keys: &[Key]) -> Result<Acl, String> {
    let rules = list.iter().map(|item| {
        let (prefix, key) = split_key(item, keys).map_err(|e| format!("{what} '{item}': {e}"))?;
        let prefix = prefix
            .parse()
            .map_err(|e| format!("{what} '{item}': {e}"))?;
        Ok(Rule { prefix, key })
    });
    Ok(Acl::new(rules.collect::<Result<_, String>>()?))
}

/// Splits "WHAT [key NAME]"; the key must be defined.
fn split_key<'a>(item: &'a str, keys: &[Key]) -> Result<(&'a str, Option<Name>), String> {
    let words: Vec<&str> = item.split_whitespace().collect();
    match words.as_slice() {
        [what] => Ok((what, None)),
        [what, "key", name] => {
            let name = Name::parse(name).map_err(|e| format!("bad key name: {e}"))?;
            if !keys.iter().any(|k| k.name == name) {
                return Err(format!("key {name} is not defined in a [[key]] section"));
            }
            Ok((what, Some(name)))
        }
        _ => Err("expected ADDRESS or ADDRESS key NAME".into()),
    }
}

/// An address with an optional port: `192.0.2.1`, `192.0.2.1:5300`,
/// `::1`, `[::1]:5300`.
fn parse_target(text: &str, default_port: u16) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    text.parse::<IpAddr>()
        .map(|ip| SocketAddr::new(ip, default_port))
        .map_err(|_| "not an address or address:port".into())
}

/// One worker per core.
pub fn default_workers() -> usize {
    heron_zone::cores()
}

pub fn zone_spec(origin: &str, file: &Path) -> Result<ZoneSpec, String> {
    let origin = Name::parse(origin).map_err(|e| format!("bad origin '{origin}': {e}"))?;
    Ok(ZoneSpec {
        origin,
        file: file.to_path_buf(),
        signing: None,
        kept: false,
    })
}

/// Parses `ORIGIN=FILE` from the command line.
pub fn parse_zone_arg(arg: &str) -> Result<ZoneSpec, String> {
    let (origin, file) = arg
        .split_once('=')
        .ok_or_else(|| format!("--zone '{arg}': expected ORIGIN=FILE"))?;
    zone_spec(origin, Path::new(file))
}

/// A file that a zone writes (a secondary's kept copy, a journal, the
/// file of a zone taking updates, the files beside it Heron keeps) and
/// another zone also uses, or one zone in two ways: see [`shared_files`].
fn check_shared_files(
    zones: &[ZoneSpec],
    (secondaries, consumed): (&[SecondaryZone], &[CatalogConfig]),
    catalogs: &[GeneratedCatalog],
    policies: &HashMap<Name, ZonePolicy>,
) -> Vec<String> {
    use shared_files::{TEMPORARY, Use, beside};
    let kept: HashSet<&Name> = secondaries.iter().map(|s| &s.origin).collect();
    let generated: HashSet<&Name> = catalogs.iter().map(|c| &c.origin).collect();
    let consumed: HashSet<&Name> = consumed.iter().map(|c| &c.zone).collect();
    let files = zones.iter().flat_map(|z| {
        let policy = policies.get(&z.origin);
        let updated = policy.is_some_and(|p| p.takes_updates());
        let what = if kept.contains(&z.origin) {
            Use::KeptCopy
        } else if generated.contains(&z.origin) {
            Use::GeneratedCatalog
        } else if updated {
            Use::UpdatedZoneFile
        } else {
            Use::ZoneFile
        };
        let journal = policy.and_then(|p| p.journal_file.as_deref());
        let own = std::iter::once((&z.origin, what, Cow::Borrowed(z.file.as_path())));
        let catalog_state = [".consumed", ".ceded", ".members-dirs"]
            .into_iter()
            .filter(|_| consumed.contains(&z.origin))
            .map(|suffix| {
                (
                    &z.origin,
                    Use::CatalogState,
                    Cow::Owned(beside(&z.file, suffix)),
                )
            });
        own.chain(files_beside(z, updated, journal))
            .chain(catalog_state)
    });
    let journals = policies.iter().flat_map(|(origin, policy)| {
        let file = policy.journal_file.as_deref();
        let seen = file.map(|f| {
            (
                origin,
                Use::SeenNotes,
                Cow::Owned(beside(f, shared_files::SEEN)),
            )
        });
        (file
            .map(|f| (origin, Use::Journal, Cow::Borrowed(f)))
            .into_iter())
        .chain(seen)
    });
    let uses: Vec<shared_files::FileUse> = files.chain(journals).collect();
    // Each file written whole is written to its `.tmp` first.
    let temporaries: Vec<shared_files::FileUse> = (uses.iter())
        .filter(|(_, what, _)| *what != Use::ZoneFile)
        .map(|(zone, _, path)| (*zone, Use::Temporary, Cow::Owned(beside(path, TEMPORARY))))
        .collect();
    shared_files::conflicts(uses.into_iter().chain(temporaries))
}

/// The files zones write whole (kept copies, generated catalogs, zone
/// files written back after updates, journals), with their zone.
fn written_files<'a>(
    zones: &'a [ZoneSpec],
    secondaries: &[SecondaryZone],
    catalogs: &[GeneratedCatalog],
    policies: &'a HashMap<Name, ZonePolicy>,
) -> Vec<(&'a Name, &'a Path)> {
    let kept: HashSet<&Name> = secondaries.iter().map(|s| &s.origin).collect();
    let generated: HashSet<&Name> = catalogs.iter().map(|c| &c.origin).collect();
    let updated = |o: &Name| policies.get(o).is_some_and(|p| p.takes_updates());
    let files = (zones.iter())
        .filter(|z| kept.contains(&z.origin) || generated.contains(&z.origin) || updated(&z.origin))
        .map(|z| (&z.origin, z.file.as_path()));
    let journals =
        (policies.iter()).filter_map(|(origin, p)| Some((origin, p.journal_file.as_deref()?)));
    files.chain(journals).collect()
}

/// The files the configuration names for other uses than zones: itself,
/// the TLS certificate and key, `[secondary] tls-ca`, the dnstap file or
/// socket, the control socket.
fn configured_files(file: &ConfigFile, path: &Path, base: &Path) -> Vec<(&'static str, PathBuf)> {
    let named = [
        ("[tls] certificate", file.tls.certificate.as_deref()),
        ("[tls] key", file.tls.key.as_deref()),
        ("[secondary] tls-ca", file.secondary.tls_ca.as_deref()),
        (
            "[dnstap] file",
            file.dnstap.as_ref().and_then(|d| d.file.as_deref()),
        ),
        (
            "[dnstap] socket",
            file.dnstap.as_ref().and_then(|d| d.socket.as_deref()),
        ),
        ("[server] control", file.server.control.as_deref()),
    ];
    let named = (named.into_iter()).filter_map(|(what, p)| Some((what, base.join(p?))));
    std::iter::once(("the configuration file", path.to_path_buf()))
        .chain(named)
        .collect()
}

/// Files zones write that would replace a file the configuration names
/// for something else, or that are in a key directory.
fn written_where_they_may_not_be(
    (zones, secondaries, generated, policies): ZonesBy,
    file: &ConfigFile,
    (base, path): (&Path, &Path),
) -> Vec<String> {
    let written = written_files(zones, secondaries, generated, policies);
    let configured = configured_files(file, path, base);
    let mut problems = written_in_key_directories(&written, &key_directories(zones, base));
    problems.extend(written_over_configured(written, &configured));
    problems
}

/// The zones of a configuration, by role, and their transfer policies.
type ZonesBy<'a> = (
    &'a [ZoneSpec],
    &'a [SecondaryZone],
    &'a [GeneratedCatalog],
    &'a HashMap<Name, ZonePolicy>,
);

/// Every zone's key directory, and the default one.
fn key_directories(zones: &[ZoneSpec], base: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = (zones.iter())
        .filter_map(|z| Some(z.signing.as_ref()?.key_directory.clone()))
        .chain(std::iter::once(base.join("keys")))
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

/// A file a zone writes in a key directory could replace a private key
/// or a zone's key state (regression hunt BR-16: a kept copy named as a
/// key file overwrote it, and the zone never loaded again).
fn written_in_key_directories(written: &[(&Name, &Path)], dirs: &[PathBuf]) -> Vec<String> {
    let dirs: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
    let folders =
        (written.iter()).filter_map(|(origin, file)| Some(((*origin, *file), file.parent()?)));
    (shared_files::among(folders, &dirs).into_iter())
        .map(|((origin, file), _, i)| {
            format!(
                "zone {origin}: {} is in the key directory {}, which holds keys only: give the zone a file elsewhere",
                file.display(),
                dirs[i].display()
            )
        })
        .collect()
}

/// A file a zone writes that is also one of `configured` would be
/// overwritten by the zone (black-box finding BQ-11: a kept copy named
/// as the configuration file replaced it, secrets and all, at the first
/// transfer).
fn written_over_configured(
    written: Vec<(&Name, &Path)>,
    configured: &[(&'static str, PathBuf)],
) -> Vec<String> {
    let others: Vec<&Path> = configured.iter().map(|(_, p)| p.as_path()).collect();
    (shared_files::among(written, &others).into_iter())
        .map(|(origin, file, i)| {
            format!(
                "zone {origin}: {} is also {}: the zone writes that file, which would replace it; give the zone another file",
                file.display(),
                configured[i].0
            )
        })
        .collect()
}

/// The files Heron writes beside a zone's file (or kept copy), `updated`
/// if the zone takes updates, `journal` its journal file if it has one.
fn files_beside<'a>(
    zone: &'a ZoneSpec,
    updated: bool,
    journal: Option<&'a Path>,
) -> impl Iterator<Item = shared_files::FileUse<'a>> {
    use shared_files::{CARRIED, FROZEN, KEY_NOTE, REJECTED, REUSED, SIGNED_COPY, Use, beside};
    let signed = zone.signing.is_some();
    let file = zone.file.as_path();
    let signed_files = [(Use::SignedCopy, SIGNED_COPY), (Use::KeyNote, KEY_NOTE)]
        .into_iter()
        .filter(move |_| signed)
        .map(move |(what, suffix)| (what, beside(file, suffix)));
    let carried = journal
        .filter(|_| signed)
        .map(|journal| (Use::Carried, beside(journal, CARRIED)));
    let reused = journal.map(|journal| (Use::ReusedMark, beside(journal, REUSED)));
    let updated_files = [(Use::Rejected, REJECTED), (Use::FreezeMark, FROZEN)]
        .into_iter()
        .filter(move |_| updated)
        .map(move |(what, suffix)| (what, beside(file, suffix)));
    (signed_files
        .chain(carried)
        .chain(reused)
        .chain(updated_files))
    .map(move |(what, path)| (&zone.origin, what, Cow::Owned(path)))
}

/// What is wrong with the zones `heron serve --zone` adds to those of
/// `settings` (black-box finding AL-6: a zone the file has, or one
/// given twice, was taken silently, the last one winning) and with its
/// `--listen` addresses (one given twice, or of port 0): each a sentence.
pub fn command_line_problems(
    settings: &Settings,
    added: &[ZoneSpec],
    listen: &[SocketAddr],
) -> Vec<String> {
    let mut problems = Vec::new();
    if !added.is_empty() {
        let mut seen: HashSet<&Name> = (settings.zones.iter().map(|z| &z.origin))
            .chain(settings.secondaries.iter().map(|z| &z.origin))
            .chain(settings.generated_catalogs.iter().map(|c| &c.origin))
            .collect();
        problems.extend(added.iter().filter(|z| !seen.insert(&z.origin)).map(|z| {
            format!(
                "--zone {}={}: zone {} is configured more than once (in the \
                 configuration file, or by --zone twice)",
                z.origin,
                z.file.display(),
                z.origin
            )
        }));
    }
    for (i, a) in listen.iter().enumerate() {
        if listen[..i].contains(a) {
            problems.push(format!("--listen names {a} twice"));
        }
        problems.extend(port_zero("--listen", a));
    }
    problems
}

fn check_unique_origins(zones: &[ZoneSpec]) -> Vec<String> {
    let mut seen = HashSet::with_capacity(zones.len());
    zones
        .iter()
        .filter(|z| !seen.insert(&z.origin))
        .map(|z| format!("zone {} is configured more than once", z.origin))
        .collect()
}

#[cfg(test)]
mod tests_support {
    use super::*;

    /// A configuration read as if from /etc/heron/heron.toml.
    pub(super) fn parse(text: &str) -> Result<Settings, Vec<String>> {
        let file: ConfigFile = toml::from_str(text).map_err(|e| vec![e.to_string()])?;
        from_file(file, Path::new("/etc/heron"), Path::new("heron.toml"))
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::parse;
    use super::*;
    use heron_xfr::secondary::kept_file::{LONGEST_SUFFIX, fitting_stem};

    #[test]
    fn query_acls_blackhole_and_nsid_are_read() {
        let s = parse(
            "[server]\nallow-query = [\"10.0.0.0/8\", \"::1 key k\"]\nblackhole = [\"192.0.2.0/24\"]\n\
             nsid-hex = \"6E7331\"\nuser = \"nobody\"\n\
             [[key]]\nname = \"k\"\nsecret = \"c2VjcmV0\"\n\
             [[zone]]\norigin = \"a.test\"\nfile = \"a\"\nallow-query = []\n\
             [[zone]]\norigin = \"b.test\"\nfile = \"b\"\n",
        )
        .unwrap();
        let policy = &s.shield.query_policy;
        assert!(policy.blackholes("192.0.2.9".parse().unwrap()));
        assert!(!policy.blackholes("192.0.3.1".parse().unwrap()));
        let server_wide = policy.allow_query.as_ref().unwrap();
        assert!(server_wide.check("10.1.2.3".parse().unwrap(), None).is_ok());
        assert!(server_wide.check("::1".parse().unwrap(), None).is_err());
        let a = Name::parse("a.test").unwrap();
        assert!(
            policy.zone_allow_query[&a].is_empty(),
            "nobody may query a.test"
        );
        assert_eq!(
            policy.zone_allow_query.len(),
            1,
            "b.test has no list of its own"
        );
        assert_eq!(s.shield.nsid, b"ns1");
        let run_as = s.shield.run_as.unwrap();
        assert_eq!((run_as.user.as_str(), run_as.group), ("nobody", None));
        assert!(parse("").unwrap().shield.query_policy.is_empty());
    }

    #[test]
    fn bad_query_acls_and_nsids_are_errors() {
        let long = "x".repeat(MAX_NSID_LEN + 1);
        let at_limit = "x".repeat(MAX_NSID_LEN);
        assert!(parse(&format!("[server]\nnsid = \"{at_limit}\"\n")).is_ok());
        for (server, want) in [
            ("nsid = \"a\"\nnsid-hex = \"61\"", "both set"),
            ("nsid-hex = \"6\"", "not hex"),
            ("nsid-hex = \"+6\"", "not hex"),
            ("nsid-hex = \"zz\"", "not hex"),
            ("nsid = \"\"", "1 to 512"),
            (&format!("nsid = \"{long}\""), "1 to 512"),
            ("blackhole = [\"10.0.0.0/33\"]", "blackhole"),
            ("allow-query = [\"10.0.0.1 key missing\"]", "not defined"),
            ("group = \"nogroup\"", "without user"),
        ] {
            let errors = parse(&format!("[server]\n{server}\n")).unwrap_err();
            assert!(
                errors.iter().any(|e| e.contains(want)),
                "{server}: {errors:?}"
            );
        }
        let zone = "[[zone]]\norigin = \"a.test\"\nfile = \"a\"\nallow-query = [\"nonsense\"]\n";
        let errors = parse(zone).unwrap_err();
        assert!(
            errors.iter().any(|e| e.contains("allow-query 'nonsense'")),
            "{errors:?}"
        );
    }

    #[test]
    fn a_generated_catalog_lists_the_zones_naming_it() {
        let s = parse(
            "[[zone]]\norigin = \"catalog.invalid\"\nfile = \"cat\"\ncatalog = \"generate\"\n\
             allow-transfer = [\"127.0.0.1\"]\n\
             [[zone]]\norigin = \"a.test\"\nfile = \"a\"\ncatalog-member = \"CATALOG.invalid\"\n\
             catalog-group = \"gold\"\ncatalog-id-generation = 2\n\
             [[zone-group]]\norigins = [\"b.test\", \"c.test\"]\nfile = \"{zone}\"\n\
             catalog-member = \"catalog.invalid\"\n\
             [[zone]]\norigin = \"d.test\"\nfile = \"d\"\n",
        )
        .unwrap();
        assert_eq!(s.generated_catalogs.len(), 1);
        let catalog = &s.generated_catalogs[0];
        assert_eq!(catalog.file, Path::new("/etc/heron/cat"));
        let members: Vec<(String, Option<&str>, u32)> = (catalog.members.iter())
            .map(|m| (m.zone.to_string(), m.group.as_deref(), m.generation))
            .collect();
        assert_eq!(
            members,
            [
                ("a.test.".into(), Some("gold"), 2),
                ("b.test.".into(), None, 0),
                ("c.test.".into(), None, 0)
            ]
        );
        let loaded: Vec<String> = s.zones.iter().map(|z| z.origin.to_string()).collect();
        assert_eq!(
            loaded,
            ["a.test.", "d.test.", "b.test.", "c.test."],
            "not the catalog"
        );
        let policy = &s.policies[&catalog.origin];
        assert!(
            policy.journal_file.is_some(),
            "transferable, with a journal"
        );
    }

    #[test]
    fn a_catalog_of_all_primary_zones_lists_them_but_not_secondaries_or_catalogs() {
        let s = parse(
            "[[zone]]\norigin = \"all.invalid\"\nfile = \"all\"\ncatalog = \"generate\"\n\
             catalog-members = \"all\"\n\
             [[zone]]\norigin = \"named.invalid\"\nfile = \"named\"\ncatalog = \"generate\"\n\
             [[zone]]\norigin = \"a.test\"\nfile = \"a\"\n\
             [[zone]]\norigin = \"b.test\"\nfile = \"b\"\ncatalog-member = \"all.invalid\"\n\
             catalog-group = \"x\"\n\
             [[zone]]\norigin = \"s.test\"\nfile = \"s\"\nprimaries = [\"192.0.2.1\"]\n\
             [[zone]]\norigin = \"c.test\"\nfile = \"c\"\ncatalog-member = \"named.invalid\"\n",
        )
        .unwrap();
        let listed = |i: usize| -> Vec<(String, Option<String>)> {
            (s.generated_catalogs[i].members.iter())
                .map(|m| (m.zone.to_string(), m.group.clone()))
                .collect()
        };
        assert_eq!(
            listed(0),
            [
                ("b.test.".to_string(), Some("x".to_string())),
                ("a.test.".to_string(), None)
            ]
        );
        // c.test names the other catalog: in that one alone.
        assert_eq!(listed(1), [("c.test.".to_string(), None)]);
    }

    /// Two catalogs of every zone would each claim every zone, with no
    /// coo: refused.
    #[test]
    fn one_catalog_at_most_lists_all_zones() {
        let all = |origin: &str| {
            format!(
                "[[zone]]\norigin = \"{origin}\"\nfile = \"{origin}\"\ncatalog = \"generate\"\n\
                 catalog-members = \"all\"\n"
            )
        };
        let errors = parse(&format!("{}{}", all("one.invalid"), all("two.invalid"))).unwrap_err();
        assert!(
            errors.iter().any(|e| e.contains("one at most may")),
            "{errors:?}"
        );
    }

    #[test]
    fn catalog_settings_that_cannot_work_are_errors() {
        let catalog = "[[zone]]\norigin = \"cat.test\"\nfile = \"cat\"\ncatalog = \"generate\"\n";
        let group_at_limit = "g".repeat(255);
        let ok = format!(
            "{catalog}[[zone]]\norigin = \"a.test\"\nfile = \"a\"\n\
             catalog-member = \"cat.test\"\ncatalog-group = \"{group_at_limit}\"\n"
        );
        assert!(parse(&ok).is_ok());
        let long_label = "a".repeat(61);
        let long_catalog = format!("{long_label}.{long_label}.{long_label}.{long_label}");
        for (text, want) in [
            (
                format!(
                    "{catalog}[[zone]]\norigin = \"a.test\"\nfile = \"a\"\ncatalog-member = \"other.test\"\n"
                ),
                "catalog-member 'other.test.' is not a [[zone]] with catalog",
            ),
            (
                format!(
                    "{catalog}[[zone]]\norigin = \"a.test\"\nfile = \"a\"\ncatalog-group = \"x\"\n"
                ),
                "need catalog-member",
            ),
            (
                format!(
                    "{catalog}[[zone]]\norigin = \"a.test\"\nfile = \"a\"\n\
                     catalog-member = \"cat.test\"\ncatalog-group = \"{group_at_limit}g\"\n"
                ),
                "1 to 255 octets, not 256",
            ),
            (
                format!(
                    "{catalog}[[zone]]\norigin = \"a.test\"\nfile = \"a\"\ncatalog-member = \"cat.test\"\ncatalog-group = \"\"\n"
                ),
                "1 to 255 octets, not 0",
            ),
            (
                format!(
                    "{catalog}[[zone]]\norigin = \"a.test\"\nfile = \"a\"\ncatalog-member = \"cat.test\"\ncatalog-group = \"gold plus\"\n"
                ),
                "holds whitespace",
            ),
            (
                "[[zone]]\norigin = \"a.test\"\nfile = \"a\"\ncatalog-members = \"all\"\n".into(),
                "catalog-members needs catalog",
            ),
            (
                format!("{catalog}catalog-members = \"some\"\n"),
                "\"named\" or \"all\"",
            ),
            (
                "[[zone]]\norigin = \"cat.test\"\nfile = \"cat\"\ncatalog = \"consume\"\n".into(),
                "the only value is \"generate\"",
            ),
            (
                format!("{catalog}primaries = [\"192.0.2.1\"]\n"),
                "it has primaries",
            ),
            (
                format!(
                    "[[zone]]\norigin = \"{long_catalog}\"\nfile = \"cat\"\ncatalog = \"generate\"\n"
                ),
                "too long for a catalog",
            ),
            (
                format!("{catalog}[[zone]]\norigin = \"a.test\"\nfile = \"cat\"\n"),
                "generated catalog",
            ),
        ] {
            let errors = parse(&text).unwrap_err();
            assert!(
                errors.iter().any(|e| e.contains(want)),
                "{text}: {errors:?}"
            );
        }
    }

    #[test]
    fn a_reload_names_the_parts_it_leaves_for_a_restart() {
        let zones = "[[zone]]\norigin = \"a.test\"\nfile = \"a\"\n";
        let base = parse(&format!("[server]\nworkers = 2\n{zones}")).unwrap();
        let more_zones = parse(&format!(
            "[server]\nworkers = 2\n{zones}[[zone]]\norigin = \"b.test\"\nfile = \"b\"\n\
             allow-transfer = [\"::1\"]\n"
        ))
        .unwrap();
        assert!(
            more_zones
                .restart_only
                .changed_since(&base.restart_only)
                .is_empty(),
            "zones and their transfer settings are applied by a reload"
        );
        let changed = parse(&format!(
            "[server]\nworkers = 3\n[tcp]\nidle-timeout = 5\n{zones}\
             [[zone]]\norigin = \"s.test\"\nfile = \"s\"\nprimaries = [\"192.0.2.1\"]\n"
        ))
        .unwrap();
        assert_eq!(
            changed.restart_only.changed_since(&base.restart_only),
            vec!["[server] workers", "[tcp]"],
            "secondary zones are applied by a reload"
        );
        // Issue 44: listen addresses wait for a restart, and say so;
        // [secondary] and [dnstap] are applied, and say that.
        let moved = parse(&format!(
            "[server]\nworkers = 2\nlisten = [\"127.0.0.1:5353\"]\n{zones}             [secondary]\nmax-refresh = 600\n[dnstap]\nfile = \"t\"\n"
        ))
        .unwrap();
        assert_eq!(
            moved.restart_only.changed_since(&base.restart_only),
            vec!["[server] listen"]
        );
        assert_eq!(
            moved.live.changed_since(&base.live),
            vec!["[secondary]", "[dnstap]"]
        );
    }

    #[test]
    fn full_config() {
        let s = parse(
            r#"
            [server]
            listen = ["127.0.0.1:53", "[::1]:53"]
            workers = 2
            version = "heron 0.1"
            [tcp]
            idle-timeout = 3
            max-connections = 50
            max-connections-per-client = 5
            [[zone]]
            origin = "example.com"
            file = "example.com.zone"
            "#,
        )
        .unwrap();
        assert_eq!(s.server.listen.len(), 2);
        assert_eq!(s.server.workers, 2);
        assert_eq!(s.server.tcp.idle_timeout, Duration::from_secs(3));
        assert_eq!(s.server.tcp.max_connections_per_client, 5);
        assert_eq!(s.server.tcp.message_timeout, Duration::from_secs(5));
        assert_eq!(s.server.tcp.ipv6_client_prefix, 56);
        assert_eq!(s.server.tcp.ipv4_client_prefix, 32);
        assert_eq!(s.server.answer.version.as_deref(), Some("heron 0.1"));
        assert_eq!(s.zones[0].file, Path::new("/etc/heron/example.com.zone"));
    }

    #[test]
    fn defaults() {
        let s = parse("").unwrap();
        assert_eq!(s.server.listen, default_listen());
        assert_eq!(s.server.answer.max_udp_payload, 1232);
        assert_eq!(s.server.udp_coalesce, Duration::ZERO);
        assert!(s.server.udp_segmentation);
        assert_eq!(s.max_zone_file_size, 16 << 30);
        assert!(s.zones.is_empty());
    }

    #[test]
    fn tcp_client_prefixes_and_message_timeout_are_checked() {
        let s =
            parse("[tcp]\nmessage-timeout = 2\nipv4-client-prefix = 24\nipv6-client-prefix = 64\n")
                .unwrap();
        assert_eq!(s.server.tcp.message_timeout, Duration::from_secs(2));
        assert_eq!(s.server.tcp.ipv4_client_prefix, 24);
        assert_eq!(s.server.tcp.ipv6_client_prefix, 64);
        let at_most = parse("[tcp]\nipv4-client-prefix = 32\nipv6-client-prefix = 128\n");
        assert!(at_most.is_ok(), "{at_most:?}");
        let errors = parse(
            "[tcp]\nmessage-timeout = 0\nipv4-client-prefix = 33\nipv6-client-prefix = 129\n",
        )
        .unwrap_err();
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(errors[0].ends_with("[tcp] message-timeout must be 1 to 86400 seconds, not 0"));
        assert!(errors[1].ends_with("[tcp] ipv4-client-prefix 33 is above 32"));
        assert!(errors[2].ends_with("[tcp] ipv6-client-prefix 129 is above 128"));
    }

    /// A timeout of zero closed every connection before its first query;
    /// one near 2^64 seconds overflowed the clock and killed the TCP
    /// threads. Both are refused, at and past each end.
    #[test]
    fn tcp_timeouts_are_one_second_to_a_day() {
        for key in ["idle-timeout", "message-timeout"] {
            for ok in [1, 86_400] {
                let fine = parse(&format!("[tcp]\n{key} = {ok}\n"));
                assert!(fine.is_ok(), "{key} = {ok}: {fine:?}");
            }
            for bad in [0, 86_401, u64::MAX] {
                let errors = parse(&format!("[tcp]\n{key} = {bad}\n")).unwrap_err();
                let said = format!("[tcp] {key} must be 1 to 86400 seconds, not {bad}");
                assert!(errors.iter().any(|e| e.ends_with(&said)), "{errors:?}");
            }
        }
    }

    /// Black-box finding AL-2: a limit of 0 passed and closed every TCP
    /// (and TLS) connection on accept.
    #[test]
    fn tcp_connection_limits_are_at_least_one() {
        for key in ["max-connections", "max-connections-per-client"] {
            let fine = parse(&format!("[tcp]\n{key} = 1\n"));
            assert!(fine.is_ok(), "{key} = 1: {fine:?}");
            let errors = parse(&format!("[tcp]\n{key} = 0\n")).unwrap_err();
            let said = format!("[tcp] {key} must be at least 1, not 0");
            assert!(errors.iter().any(|e| e.contains(&said)), "{errors:?}");
        }
    }

    #[test]
    fn udp_segmentation_can_be_turned_off() {
        let s = parse("[server]\nudp-segmentation = false\n").unwrap();
        assert!(!s.server.udp_segmentation);
        assert!(parse("[server]\nudp-segmentation = 1\n").is_err());
    }

    #[test]
    fn max_udp_payload_is_bounded_by_what_a_datagram_carries() {
        let s = parse("[server]\nmax-udp-payload = 65507\n").unwrap();
        assert_eq!(s.server.answer.max_udp_payload, 65_507);
        let err = parse("[server]\nmax-udp-payload = 65508\n").unwrap_err();
        assert!(
            err[0].contains("max-udp-payload 65508 is above 65507"),
            "{err:?}"
        );
    }

    #[test]
    fn udp_coalescing_can_be_turned_off_and_is_bounded() {
        let s = parse(
            "[server]
udp-coalesce-us = 0
",
        )
        .unwrap();
        assert_eq!(s.server.udp_coalesce, Duration::ZERO);
        let s = parse(
            "[server]
udp-coalesce-us = 1000
",
        )
        .unwrap();
        assert_eq!(s.server.udp_coalesce, Duration::from_millis(1));
        let err = parse(
            "[server]
udp-coalesce-us = 1001
",
        )
        .unwrap_err();
        assert!(err[0].contains("udp-coalesce-us 1001 is above"), "{err:?}");
    }

    const KEY: &str = "[[key]]\nname = \"xfr\"\nsecret = \"c2VjcmV0c2VjcmV0c2VjcmV0\"\n";

    #[test]
    fn keys_acls_and_notify_targets() {
        let s = parse(&format!(
            "{KEY}[[zone]]\norigin = \"a.test\"\nfile = \"a\"\n\
             allow-transfer = [\"127.0.0.0/8 key xfr\", \"::1\"]\n\
             notify = [\"127.0.0.2\", \"[::1]:5300 key xfr\"]\n\
             [[zone]]\norigin = \"b.test\"\nfile = \"b\"\n"
        ))
        .unwrap();
        assert_eq!(s.keys.len(), 1);
        assert_eq!(s.keys[0].algorithm, Algorithm::HmacSha256, "the default");
        let p = &s.policies[&Name::parse("a.test").unwrap()];
        let key = Name::parse("xfr").unwrap();
        let local: IpAddr = "127.0.0.1".parse().unwrap();
        assert!(p.allow_transfer.check(local, Some(&key)).is_ok());
        assert!(p.allow_transfer.check(local, None).is_err());
        assert!(p.allow_transfer.check("::1".parse().unwrap(), None).is_ok());
        assert_eq!(p.notify[0].addr, "127.0.0.2:53".parse().unwrap());
        assert_eq!(p.notify[1].addr, "[::1]:5300".parse().unwrap());
        assert_eq!(p.notify[1].key, Some(key));
        assert!(
            !s.policies.contains_key(&Name::parse("b.test").unwrap()),
            "no settings: closed"
        );
    }

    #[test]
    fn allow_update_rules_serial_and_their_journal() {
        let s = parse(&format!(
            "{KEY}[[zone]]\norigin = \"u.test\"\nfile = \"u\"\n\
             allow-update = [\"key xfr name _acme-challenge.u.test TXT\", \"127.0.0.0/8 zonesub ANY\"]\n\
             serial = \"dateserial\"\n"
        ))
        .unwrap();
        let p = &s.policies[&Name::parse("u.test").unwrap()];
        assert_eq!(p.update.policy.rules().len(), 2);
        assert_eq!(p.update.serial, SerialPolicy::DateSerial);
        assert!(p.takes_updates() && p.allow_transfer.is_empty());
        assert!(
            p.journal_path().is_some(),
            "updates are journaled without allow-transfer"
        );
        let (file, after) = p
            .update
            .write_back
            .clone()
            .expect("written back by default");
        assert_eq!(file.file_name().unwrap(), "u");
        assert_eq!(after, Duration::from_secs(60));
        let never = parse(&format!(
            "{KEY}[[zone]]\norigin = \"u.test\"\nfile = \"u\"\n\
             allow-update = [\"key xfr zonesub ANY\"]\nzonefile-sync = \"never\"\n"
        ))
        .unwrap();
        let u = Name::parse("u.test").unwrap();
        assert_eq!(never.policies[&u].update.write_back, None);
        let who = heron_xfr::update::Requester {
            ip: "192.0.2.1".parse().unwrap(),
            key: Some(&Name::parse("xfr").unwrap()),
        };
        let acme = Name::parse("_acme-challenge.u.test").unwrap();
        assert!(p.update.policy.allows(who, &acme, heron_proto::RType::TXT));
        assert!(!p.update.policy.allows(who, &acme, heron_proto::RType::A));
    }

    #[test]
    fn allow_update_forwarding_is_a_secondary_zone_acl() {
        let s = parse(&format!(
            "{KEY}[[zone]]\norigin = \"s.test\"\nfile = \"s\"\nprimaries = [\"192.0.2.1\"]\n\
             allow-update-forwarding = [\"192.0.2.0/24 key xfr\"]\n"
        ))
        .unwrap();
        let p = &s.policies[&Name::parse("s.test").unwrap()];
        let xfr = Name::parse("xfr").unwrap();
        let ip = "192.0.2.7".parse().unwrap();
        assert!(p.update.forwarding.check(ip, Some(&xfr)).is_ok());
        assert!(p.update.forwarding.check(ip, None).is_err());
        assert!(!p.takes_updates(), "forwarded, not taken");
        assert_eq!(
            p.update.forwarding_key, None,
            "kept as the client signed it"
        );
        let s = parse(&format!(
            "{KEY}[[zone]]\norigin = \"s.test\"\nfile = \"s\"\nprimaries = [\"192.0.2.1\"]\n\
             allow-update-forwarding = [\"192.0.2.0/24\"]\nupdate-forwarding-key = \"XFR.\"\n"
        ))
        .unwrap();
        let p = &s.policies[&Name::parse("s.test").unwrap()];
        assert_eq!(p.update.forwarding_key, Some(xfr));
    }

    #[test]
    fn allow_update_mistakes_are_reported() {
        let zone =
            |lines: &str| format!("{KEY}[[zone]]\norigin = \"u.test\"\nfile = \"u\"\n{lines}\n");
        for (text, says) in [
            (
                zone("allow-update = [\"key nokey zonesub ANY\"]"),
                "not defined",
            ),
            (zone("allow-update = [\"key xfr zonesub\"]"), "no types"),
            (
                zone("allow-update = [\"key xfr name www.other.test A\"]"),
                "outside the zone",
            ),
            (
                zone("allow-update = [\"key xfr everything A\"]"),
                "unknown rule kind",
            ),
            (
                zone("allow-update = [\"10.0.0.0/8 self A\"]"),
                "needs a key",
            ),
            (
                zone("allow-update = [\"key xfr zonesub ANY\"]\nserial = \"often\""),
                "serial",
            ),
            (zone("serial = \"unixtime\""), "allow-update is empty"),
            (zone("zonefile-sync = 5"), "allow-update is empty"),
            (
                zone("allow-update = [\"key xfr zonesub ANY\"]\nzonefile-sync = \"sometimes\""),
                "zonefile-sync",
            ),
            (
                zone("allow-update = [\"key xfr zonesub ANY\"]\nzonefile-sync = -1"),
                "zonefile-sync",
            ),
            (
                zone("allow-update = [\"key xfr zonesub ANY\"]\njournal = false"),
                "journal = false",
            ),
            (
                zone("allow-update = [\"key xfr zonesub ANY\"]\nprimaries = [\"192.0.2.1\"]"),
                "secondary zone",
            ),
            (
                zone("allow-update-forwarding = [\"127.0.0.1\"]"),
                "for secondary zones",
            ),
            (
                zone(
                    "allow-update-forwarding = [\"127.0.0.1 key nokey\"]\nprimaries = [\"192.0.2.1\"]",
                ),
                "allow-update-forwarding",
            ),
            (
                zone(
                    "allow-update-forwarding = [\"127.0.0.1\"]\nprimaries = [\"192.0.2.1\"]\nupdate-forwarding-key = \"nokey\"",
                ),
                "update-forwarding-key = \"nokey\": no [[key]]",
            ),
            (
                zone(
                    "allow-update-forwarding = [\"127.0.0.1\"]\nprimaries = [\"192.0.2.1\"]\nupdate-forwarding-key = \"bad..name\"",
                ),
                "update-forwarding-key = \"bad..name\"",
            ),
            (
                zone("primaries = [\"192.0.2.1\"]\nupdate-forwarding-key = \"xfr\""),
                "allow-update-forwarding is empty",
            ),
            (zone("update-forwarding-key = 5"), "update-forwarding-key"),
        ] {
            let errors = parse(&text).unwrap_err();
            assert!(
                errors.iter().any(|e| e.contains(says)),
                "{text}: {errors:?}"
            );
        }
    }

    #[test]
    fn source_addresses_serve_every_peer_of_their_family_unless_via_says_otherwise() {
        let s = parse(
            "[xfr]\nsource = [\"127.0.0.2\", \"::1\"]\nnotify-source = \"127.0.0.3\"\n\
             [[zone]]\norigin = \"s.test\"\nfile = \"s\"\n\
             primaries = [\"192.0.2.1\", \"2001:db8::1\", \"192.0.2.2 key via via 127.0.0.9\"]\n\
             [[key]]\nname = \"via\"\nsecret = \"AAAA\"\n\
             [[zone]]\norigin = \"p.test\"\nfile = \"p\"\n\
             notify = [\"192.0.2.7\", \"[2001:db8::7]:53\", \"192.0.2.8 via 127.0.0.4\"]\n",
        )
        .unwrap();
        let sources: Vec<String> = (s.secondaries[0].primaries.iter())
            .map(|p| format!("{:?}", p.source))
            .collect();
        assert_eq!(sources, ["Some(127.0.0.2)", "Some(::1)", "Some(127.0.0.9)"]);
        assert_eq!(
            s.secondaries[0].primaries[2].key,
            Some(Name::parse("via").unwrap())
        );
        let p = &s.policies[&Name::parse("p.test").unwrap()];
        let sources: Vec<String> = p.notify.iter().map(|t| format!("{:?}", t.source)).collect();
        assert_eq!(
            sources,
            ["Some(127.0.0.3)", "None", "Some(127.0.0.4)"],
            "no IPv6 notify-source"
        );

        let wrong_family = "[[zone]]\norigin = \"s.test\"\nfile = \"s\"\n\
                            primaries = [\"192.0.2.1 via ::1\"]\n";
        let errors = parse(wrong_family).unwrap_err();
        assert!(
            errors[0].contains("via ::1: not of the address family"),
            "{errors:?}"
        );
        let errors = parse("[xfr]\nsource = \"nowhere\"\n").unwrap_err();
        assert!(
            errors[0].contains("[xfr] source: nowhere is not"),
            "{errors:?}"
        );
    }

    #[test]
    fn secondary_zones_take_notify_from_their_primaries() {
        let s = parse(&format!(
            "{KEY}[[zone]]\norigin = \"s.test\"\nfile = \"kept/s.zone\"\n\
             primaries = [\"192.0.2.1:5300 key xfr\", \"192.0.2.2\"]\n"
        ))
        .unwrap();
        assert!(
            s.zones.is_empty(),
            "a secondary zone has no zone file to load"
        );
        let sec = &s.secondaries[0];
        assert_eq!(sec.kept_path(), Path::new("/etc/heron/kept/s.zone"));
        assert_eq!(sec.primaries[0].addr, "192.0.2.1:5300".parse().unwrap());
        assert_eq!(sec.primaries[1].addr, "192.0.2.2:53".parse().unwrap());
        let p = &s.policies[&Name::parse("s.test").unwrap()];
        let key = Name::parse("xfr").unwrap();
        assert!(
            p.allow_notify
                .check("192.0.2.1".parse().unwrap(), Some(&key))
                .is_ok()
        );
        assert!(
            p.allow_notify
                .check("192.0.2.1".parse().unwrap(), None)
                .is_err()
        );
        assert!(
            p.allow_notify
                .check("192.0.2.2".parse().unwrap(), None)
                .is_ok()
        );
        assert!(
            p.allow_notify
                .check("192.0.2.3".parse().unwrap(), None)
                .is_err()
        );
    }

    #[test]
    fn secondary_timer_bounds_are_checked_at_and_past_their_limits() {
        let secondary = |keys: &str| parse(&format!("[secondary]\n{keys}\n"));
        let defaults = secondary("").unwrap().secondary.bounds();
        assert_eq!(defaults.min_expire, Duration::from_secs(3_600));
        assert_eq!(defaults.max_expire, Duration::from_secs(31_536_000));
        let set = secondary("min-expire = 1\nmax-expire = 4294967295").unwrap();
        let bounds = set.secondary.bounds();
        assert_eq!(bounds.min_expire, Duration::from_secs(1));
        assert_eq!(bounds.max_expire, Duration::from_secs(4_294_967_295));
        let equal = secondary("min-expire = 600\nmax-expire = 600").unwrap();
        assert_eq!(
            equal.secondary.bounds().max_expire,
            Duration::from_secs(600)
        );
        for timer in ["refresh", "retry", "expire"] {
            for (keys, error) in [
                (
                    format!("min-{timer} = 0"),
                    format!("min-{timer} 0 must be at least 1"),
                ),
                (
                    format!("min-{timer} = 601\nmax-{timer} = 600"),
                    format!("min-{timer} 601 must be at least 1 and at most max-{timer} 600"),
                ),
                (
                    format!("max-{timer} = 4294967296"),
                    format!("max-{timer} 4294967296 is more than an SOA can say"),
                ),
            ] {
                let errors = secondary(&keys).unwrap_err();
                assert!(
                    errors.iter().any(|e| e.contains(&error)),
                    "{keys}: {errors:?}"
                );
            }
        }
    }

    #[test]
    fn transfer_limits_default_high_and_must_be_at_least_one() {
        let secondary = |keys: &str| parse(&format!("[secondary]\n{keys}\n"));
        let defaults = secondary("").unwrap().secondary.transfer_limits();
        assert_eq!(defaults, TransferLimits::default());
        assert_eq!(defaults.max_records, 50_000_000);
        let set =
            secondary("max-transfer-records = 1\nmax-transfer-bytes = 1\ntransfer-timeout = 1")
                .unwrap()
                .secondary
                .transfer_limits();
        let one = TransferLimits {
            max_records: 1,
            max_bytes: 1,
            max_time: Duration::from_secs(1),
        };
        assert_eq!(set, one);
        for key in [
            "max-transfer-records",
            "max-transfer-bytes",
            "transfer-timeout",
        ] {
            let errors = secondary(&format!("{key} = 0")).unwrap_err();
            let want = format!("[secondary] {key} must be at least 1");
            assert!(errors.iter().any(|e| e.contains(&want)), "{errors:?}");
        }
    }

    #[test]
    fn primaries_over_tls_default_to_port_853_and_may_be_checked() {
        let ca = std::env::temp_dir().join(format!("heron-config-ca-{}.pem", std::process::id()));
        let cert = rcgen::generate_simple_self_signed(vec!["ns1.example".into()]).unwrap();
        std::fs::write(&ca, cert.cert.pem()).unwrap();
        let zone = |primaries: &str| {
            format!(
                "{KEY}[secondary]\ntls-ca = \"{}\"\n\
                 [[zone]]\norigin = \"s.test\"\nfile = \"s\"\nprimaries = [{primaries}]\n",
                ca.display()
            )
        };
        let s = parse(&zone(
            "\"192.0.2.1 tls\", \"192.0.2.2:8853 key xfr tls ns1.example\", \"192.0.2.3 key xfr\"",
        ))
        .unwrap();
        let p = &s.secondaries[0].primaries;
        assert_eq!(p[0].addr, "192.0.2.1:853".parse().unwrap());
        assert_eq!(p[0].tls, Some(XotTrust::Opportunistic));
        assert_eq!(p[1].addr, "192.0.2.2:8853".parse().unwrap());
        assert_eq!(p[1].key, Some(Name::parse("xfr").unwrap()));
        let strict = XotTrust::Strict {
            name: "ns1.example".into(),
        };
        assert_eq!(p[1].tls, Some(strict));
        assert_eq!((p[2].addr.port(), &p[2].tls), (53, &None));
        // A key named "tls" is a key, and may still be followed by tls.
        let tls_key = "[[key]]\nname = \"tls\"\nsecret = \"c2VjcmV0c2VjcmV0\"\n";
        let named_tls = parse(&format!(
            "{tls_key}[[zone]]\norigin = \"t.test\"\nfile = \"t\"\n\
             primaries = [\"192.0.2.4 key tls\", \"192.0.2.5 key tls tls\"]\n"
        ))
        .unwrap();
        let q = &named_tls.secondaries[0].primaries;
        assert_eq!(q[0].key, Some(Name::parse("tls").unwrap()));
        assert_eq!((q[0].addr.port(), &q[0].tls), (53, &None));
        assert_eq!(q[1].key, Some(Name::parse("tls").unwrap()));
        assert_eq!(q[1].tls, Some(XotTrust::Opportunistic));
        assert!(s.xot.can_check_certificates());
        for (primaries, error) in [
            ("\"192.0.2.1 tls a b\"", "expected 'tls' or 'tls NAME'"),
            ("\"192.0.2.1 tls not..a..name\"", "not..a..name"),
            (
                "\"192.0.2.1 tls\" , \"tls\"",
                "primaries 'tls': expected ADDRESS",
            ),
        ] {
            let errors = parse(&zone(primaries)).unwrap_err();
            assert!(
                errors.iter().any(|e| e.contains(error)),
                "{primaries}: {errors:?}"
            );
        }
        // Strict needs a CA; a CA file must hold certificates.
        let no_ca = format!(
            "{KEY}[[zone]]\norigin = \"s.test\"\nfile = \"s\"\n\
             primaries = [\"192.0.2.1 tls ns1.example\"]\n"
        );
        let errors = parse(&no_ca).unwrap_err();
        assert!(
            errors
                .iter()
                .any(|e| e.contains("needs [secondary] tls-ca")),
            "{errors:?}"
        );
        std::fs::write(&ca, "no certificate here").unwrap();
        let errors = parse(&zone("\"192.0.2.1 tls\"")).unwrap_err();
        assert!(errors.iter().any(|e| e.contains("tls-ca")), "{errors:?}");
        std::fs::remove_file(&ca).unwrap();
    }

    #[test]
    fn key_and_acl_mistakes_are_reported() {
        let zone = |line: &str| format!("[[zone]]\norigin = \"a.test\"\nfile = \"a\"\n{line}\n");
        let cases = [
            (
                zone("allow-transfer = [\"10.0.0.0/8 key nokey\"]"),
                "not defined",
            ),
            (zone("allow-transfer = [\"10.0.0.0/40\"]"), "prefix length"),
            (zone("notify = [\"ns1.example\"]"), "not an address"),
            (zone("notify = [\"10.0.0.1 xfr\"]"), "expected ADDRESS"),
            (format!("{KEY}{KEY}"), "more than once"),
            (
                "[[key]]\nname = \"k\"\nalgorithm = \"hmac-sha999\"\nsecret = \"AAAA\"\n".into(),
                "unknown algorithm",
            ),
            (
                "[[key]]\nname = \"k\"\nsecret = \"not base64!\"\n".into(),
                "key 'k'",
            ),
        ];
        for (text, want) in cases {
            let err = parse(&text).unwrap_err();
            assert!(err.iter().any(|e| e.contains(want)), "{text}: {err:?}");
        }
    }

    /// A control socket path no Unix socket can have is an error at the
    /// check (serve failed on it after check-config said OK); one in a
    /// folder that does not exist yet is a warning.
    #[test]
    fn a_control_socket_path_too_long_is_an_error() {
        let long = format!("/run/{}/heron.sock", "d".repeat(100));
        let err = parse(&format!("[server]\ncontrol = \"{long}\"\n")).unwrap_err();
        assert!(err.iter().any(|e| e.contains("at most 107")), "{err:?}");
        let missing = "[server]\ncontrol = \"/nonexistent-heron/ctl.sock\"\n";
        let s = parse(missing).unwrap();
        assert!(
            s.warnings.iter().any(|w| w.contains("does not exist")),
            "{:?}",
            s.warnings
        );
    }

    /// A key defined twice is one error, not also an ACL naming a key
    /// "not defined"; a name with blanks could never be named at all.
    #[test]
    fn a_key_defined_twice_is_reported_once() {
        let twice = "[[key]]\nname = \"k\"\nsecret = \"AAAA\"\n\
                     [[key]]\nname = \"K.\"\nsecret = \"AAAA\"\n\
                     [[zone]]\norigin = \"a.test\"\nfile = \"a\"\n\
                     allow-transfer = [\"10.0.0.0/8 key k\"]\n";
        let err = parse(twice).unwrap_err();
        assert_eq!(err.len(), 1, "{err:?}");
        assert!(
            err[0].contains("key 'K.' is defined more than once"),
            "{err:?}"
        );
        let blanks = "[[key]]\nname = \"my key\"\nsecret = \"AAAA\"\n";
        let err = parse(blanks).unwrap_err();
        assert!(err[0].contains("blanks"), "{err:?}");
    }

    #[test]
    fn mistakes_are_reported() {
        let err = parse("[server]\nlisten = [\"nonsense\"]\n").unwrap_err();
        assert!(err[0].contains("line 2"), "{err:?}");
        let err = parse("[server]\nlisen = []\n").unwrap_err();
        assert!(err[0].contains("unknown field `lisen`"), "{err:?}");
        let err = parse(
            "[[zone]]\norigin = \"a.test\"\nfile = \"x\"\n[[zone]]\norigin = \"A.test.\"\nfile = \"y\"\n",
        )
        .unwrap_err();
        assert!(err[0].contains("more than once"), "{err:?}");
        let err = parse("[server]\nmax-udp-payload = 100\nworkers = 0\n").unwrap_err();
        assert_eq!(err.len(), 2, "{err:?}");
        // AL-6: a --zone the file has (a secondary too), or given twice.
        let file = parse(
            "[[zone]]\norigin = \"a.test\"\nfile = \"a\"\n\
             [[zone]]\norigin = \"s.test\"\nfile = \"s\"\nprimaries = [\"192.0.2.1\"]\n",
        )
        .unwrap();
        let added = |args: &[&str]| -> Vec<ZoneSpec> {
            args.iter().map(|a| parse_zone_arg(a).unwrap()).collect()
        };
        let none: &[SocketAddr] = &[];
        assert!(command_line_problems(&file, &added(&["b.test=b", "c.test=b"]), none).is_empty());
        for twice in [&["A.test=x"][..], &["s.test=x"], &["b.test=b", "b.TEST=c"]] {
            let problems = command_line_problems(&file, &added(twice), none);
            assert_eq!(problems.len(), 1, "{twice:?}: {problems:?}");
            assert!(
                problems[0].contains("is configured more than once"),
                "{problems:?}"
            );
        }
        let listen: SocketAddr = "127.0.0.1:53".parse().unwrap();
        assert_eq!(
            command_line_problems(&file, &[], &[listen, listen]),
            ["--listen names 127.0.0.1:53 twice"]
        );
        assert!(parse_zone_arg("example.com").is_err());
        assert!(parse_zone_arg("exa..mple=f").is_err());
        assert_eq!(
            parse_zone_arg("example.com=f.zone").unwrap().origin,
            Name::parse("example.com").unwrap()
        );
    }

    /// Listeners that would collide at the start are refused by the check
    /// (black-box finding: check-config passed, serve exited 1).
    #[test]
    fn listeners_that_would_collide_are_refused() {
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        let (dns, other) = (a("127.0.0.1:53"), a("127.0.0.2:53"));
        assert!(
            listen_conflicts(
                &[dns, other],
                &[a("127.0.0.1:853")],
                Some(a("127.0.0.1:9153"))
            )
            .is_empty()
        );
        assert!(
            listen_conflicts(&[dns], &[], Some(a("[::1]:53"))).is_empty(),
            "other family"
        );
        let said = |server: &[SocketAddr], tls: &[SocketAddr], m: Option<&str>| {
            listen_conflicts(server, tls, m.map(a)).join("; ")
        };
        assert!(said(&[dns, dns], &[], None).contains("names 127.0.0.1:53 twice"));
        let dot = a("127.0.0.1:853");
        assert_eq!(
            said(&[dns], &[dot, dot], None),
            "[tls] listen names 127.0.0.1:853 twice"
        );
        assert!(said(&[dns], &[dns], None).contains("[tls] listen 127.0.0.1:53 is also"));
        // A wildcard beside a specific address: both bind (regression hunt).
        assert_eq!(said(&[a("0.0.0.0:53")], &[dns], None), "");
        assert!(said(&[dns], &[], Some("127.0.0.1:53")).contains("[metrics] listen 127.0.0.1:53"));
        let zero = a("127.0.0.1:0");
        assert_eq!(
            said(&[zero], &[], Some("[::1]:0")),
            "[server] listen 127.0.0.1:0: the port must be 1 to 65535; \
             [metrics] listen [::1]:0: the port must be 1 to 65535"
        );
        assert!(said(&[a("0.0.0.0:53")], &[], Some("127.0.0.1:53")).contains("[metrics]"));
        let whole = parse(
            "[server]\nlisten = [\"127.0.0.1:5300\"]\n[metrics]\nlisten = \"127.0.0.1:5300\"\n",
        );
        assert!(whole.unwrap_err().join("; ").contains("[metrics] listen"));
    }

    /// BQ-11: a secondary's kept copy, or the file of a zone taking
    /// updates, named as the configuration file, the TLS key or
    /// certificate, the CA or the dnstap file is refused: the zone would
    /// write over it. Another path is fine.
    #[test]
    fn a_file_a_zone_writes_may_not_be_a_file_the_configuration_names() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("heron.toml");
        let load = |zone_file: &str, updates: bool| {
            let zone = match updates {
                false => "primaries = [\"192.0.2.1\"]",
                true => "allow-update = [\"127.0.0.1 zonesub ANY\"]",
            };
            let text = format!(
                "[tls]\nlisten = [\"127.0.0.1:8853\"]\ncertificate = \"tls/c.pem\"\nkey = \"tls/k.pem\"\n\
                 [dnstap]\nfile = \"q.dnstap\"\n[secondary]\ntls-ca = \"ca.pem\"\n\
                 [[zone]]\norigin = \"s.test\"\nfile = \"{zone_file}\"\n{zone}\n"
            );
            let file: ConfigFile = toml::from_str(&text).unwrap();
            from_file(file, dir.path(), &config)
                .err()
                .unwrap_or_default()
        };
        let said = |errors: Vec<String>, what: &str| {
            let want = format!("is also {what}: the zone writes that file");
            errors.iter().any(|e| e.contains(&want))
        };
        assert!(said(load("heron.toml", false), "the configuration file"));
        let errors = load("./tls/../heron.toml", true);
        assert!(said(errors.clone(), "the configuration file"), "{errors:?}");
        assert!(said(load("tls/k.pem", false), "[tls] key"));
        assert!(said(load("tls/c.pem", true), "[tls] certificate"));
        assert!(said(load("ca.pem", false), "[secondary] tls-ca"));
        assert!(said(load("q.dnstap", false), "[dnstap] file"));
        // BR-16: nor in a key directory, the default one included.
        let in_keys =
            |errors: Vec<String>| errors.iter().any(|e| e.contains("is in the key directory"));
        assert!(in_keys(load("keys/Ks.test+013+00001.csk.heron-key", false)));
        assert!(!in_keys(load("kept/s.zone", false)));
        // BR-4: the control socket too.
        let text = "[server]\ncontrol = \"ctl.sock\"\n\
                    [[zone]]\norigin = \"s.test\"\nfile = \"ctl.sock\"\nprimaries = [\"192.0.2.1\"]\n";
        let file: ConfigFile = toml::from_str(text).unwrap();
        let errors = from_file(file, dir.path(), &config)
            .err()
            .unwrap_or_default();
        assert!(said(errors, "[server] control"), "BR-4");
        assert!(!said(load("s.kept", false), "the configuration file"));
        assert!(!load("s.kept", false).iter().any(|e| e.contains("is also")));
    }

    #[test]
    fn xdp_listens_on_interface_and_port_in_the_mode_asked() {
        assert!(parse("").unwrap().server.xdp.is_none());
        let empty = parse("[xdp]\nlisten = []\n").unwrap();
        assert!(empty.server.xdp.is_none());
        let warned = |w: &String| {
            w.ends_with(
                "[xdp] has no listen entry, so AF_XDP is off (UDP is served on sockets only)",
            )
        };
        assert!(empty.warnings.iter().any(warned), "{:?}", empty.warnings);
        assert!(
            parse("[xdp]\nmode = \"native\"\n")
                .unwrap()
                .warnings
                .iter()
                .any(warned)
        );
        assert!(!parse("").unwrap().warnings.iter().any(warned));
        // BQ-4: a file of no zone at all is warned of.
        let nothing = |w: &String| w.contains("no zone is configured");
        assert!(parse("").unwrap().warnings.iter().any(nothing));
        let one = "[[zone]]\norigin = \"s.test\"\nfile = \"s.zone\"\nprimaries = [\"192.0.2.1\"]\n";
        assert!(!parse(one).unwrap().warnings.iter().any(nothing));
        let twice = parse("[xdp]\nlisten = [\"eth0@53\", \"eth0@053\"]\n").unwrap_err();
        let said = |e: &String| e.ends_with("[xdp] listen: eth0@53 is listed twice");
        assert!(twice.iter().any(said), "{twice:?}");
        let s = parse("[xdp]\nlisten = [\"eth0@53\", \"veth-a.1@65535\"]\n").unwrap();
        let xdp = s.server.xdp.unwrap();
        assert_eq!(xdp.mode, Mode::Auto);
        let want = |interface: &str, port| XdpListen {
            interface: interface.into(),
            port,
        };
        assert_eq!(xdp.listen, [want("eth0", 53), want("veth-a.1", 65535)]);
        for (mode, want) in [("native", Mode::Native), ("generic", Mode::Generic)] {
            let s = parse(&format!(
                "[xdp]\nlisten = [\"eth0@53\"]\nmode = \"{mode}\"\n"
            ));
            assert_eq!(s.unwrap().server.xdp.unwrap().mode, want);
        }
        // Interface names: at most 15 bytes (IFNAMSIZ less the NUL).
        assert!(parse("[xdp]\nlisten = [\"abcdefghijklmno@53\"]\n").is_ok());
        let bad = [
            ("abcdefghijklmnop@53", "1 to 15 characters"),
            ("@53", "1 to 15 characters"),
            ("eth0", "INTERFACE@PORT"),
            ("eth0@0", "1 to 65535"),
            ("eth0@65536", "1 to 65535"),
            ("eth0@dns", "1 to 65535"),
        ];
        for (listen, says) in bad {
            let err = parse(&format!("[xdp]\nlisten = [\"{listen}\"]\n")).unwrap_err();
            assert!(
                err[0].contains("[xdp] listen") && err[0].contains(says),
                "{listen}: {err:?}"
            );
        }
        let err = parse("[xdp]\nlisten = [\"eth0@53\"]\nmode = \"fast\"\n").unwrap_err();
        assert!(err[0].contains("\"fast\" is not one of"), "{err:?}");
        let err = parse("[xdp]\nlsten = []\n").unwrap_err();
        assert!(err[0].contains("unknown field `lsten`"), "{err:?}");
    }

    #[test]
    fn metrics_are_off_unless_an_address_is_given() {
        assert_eq!(parse("").unwrap().metrics, None);
        let on = parse("[metrics]\nlisten = \"127.0.0.1:9153\"\n").unwrap();
        let want = metrics::MetricsSettings {
            listen: "127.0.0.1:9153".parse().unwrap(),
            zone_metrics: true,
            allow: None,
        };
        assert_eq!(on.metrics, Some(want));
        let quiet = parse("[metrics]\nlisten = \"[::1]:9153\"\nzone-metrics = false\n").unwrap();
        assert!(!quiet.metrics.unwrap().zone_metrics);
        for bad in ["9153", "localhost:9153", "127.0.0.1", ""] {
            let err = parse(&format!("[metrics]\nlisten = \"{bad}\"\n")).unwrap_err();
            assert!(
                err[0].contains("[metrics] listen") && err[0].contains("ADDRESS:PORT"),
                "{err:?}"
            );
        }
        let err = parse("[metrics]\nport = 9153\n").unwrap_err();
        assert!(err[0].contains("unknown field `port`"), "{err:?}");
    }

    #[test]
    fn metrics_allow_takes_addresses_and_prefixes_up_to_their_length() {
        let allow = |list: &str| {
            parse(&format!(
                "[metrics]\nlisten = \"127.0.0.1:9153\"\nallow = [{list}]\n"
            ))
        };
        let at_limits = allow(
            "\"127.0.0.1\", \"10.0.0.0/8\", \"0.0.0.0/0\", \"192.0.2.1/32\", \"::1\", \"2001:db8::/128\"",
        );
        let prefixes = at_limits.unwrap().metrics.unwrap().allow.unwrap();
        let shown: Vec<String> = prefixes.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "127.0.0.1/32",
                "10.0.0.0/8",
                "0.0.0.0/0",
                "192.0.2.1/32",
                "::1/128",
                "2001:db8::/128"
            ]
        );
        for (bad, want) in [
            ("\"10.0.0.0/33\"", "prefix length must be 0 to 32"),
            ("\"2001:db8::/129\"", "prefix length must be 0 to 128"),
            ("\"10.0.0.0/-1\"", "prefix length"),
            ("\"localhost\"", "not an IP address or prefix"),
            ("\"127.0.0.1:9153\"", "not an IP address or prefix"),
            ("\"\"", "not an IP address or prefix"),
            ("9153", "string"),
        ] {
            let err = allow(&format!("\"127.0.0.1\", {bad}")).unwrap_err();
            assert!(err[0].contains("line 3"), "{bad}: {err:?}");
            assert!(err[0].contains(want), "{bad}: {err:?}");
        }
        let err = allow("").unwrap_err();
        assert!(err[0].contains("[metrics] allow = []"), "{err:?}");
    }

    #[test]
    fn a_zone_group_gives_each_origin_its_file_and_the_shared_settings() {
        let s = parse(&format!(
            "{KEY}[[zone]]\norigin = \"one.test\"\nfile = \"one\"\n\
             [[zone-group]]\norigins = [\"a.test\", \"B.test.\", \".\"]\n\
             file = \"zones/{{zone}}.zone\"\nallow-transfer = [\"10.0.0.0/8 key xfr\"]\n\
             [[zone-group]]\norigins = [\"s.test\"]\nfile = \"/var/kept/{{zone}}\"\n\
             primaries = [\"192.0.2.1\"]\n"
        ))
        .unwrap();
        let files: Vec<(String, &Path)> = s
            .zones
            .iter()
            .map(|z| (z.origin.to_string(), z.file.as_path()))
            .collect();
        assert_eq!(
            files,
            [
                ("one.test.".to_string(), Path::new("/etc/heron/one")),
                ("a.test.".into(), Path::new("/etc/heron/zones/a.test.zone")),
                ("B.test.".into(), Path::new("/etc/heron/zones/B.test.zone")),
                (".".into(), Path::new("/etc/heron/zones/root.zone")),
            ]
        );
        let key = Name::parse("xfr").unwrap();
        for origin in ["a.test", "b.test", "."] {
            let p = &s.policies[&Name::parse(origin).unwrap()];
            let ten: IpAddr = "10.1.2.3".parse().unwrap();
            assert!(p.allow_transfer.check(ten, Some(&key)).is_ok(), "{origin}");
        }
        assert!(!s.policies.contains_key(&Name::parse("one.test").unwrap()));
        assert_eq!(s.secondaries.len(), 1);
        assert_eq!(s.secondaries[0].kept_path(), Path::new("/var/kept/s.test"));
        assert_eq!(s.secondaries[0].primaries[0].addr.port(), 53);
    }

    /// A 247-octet origin (245 characters) in a pattern with a prefix and
    /// a suffix: its file name is shortened to fit NAME_MAX with every
    /// suffix of a file Heron writes beside it, readable and distinct;
    /// shorter names stay as they were, so kept copies made before load.
    /// A group's secondary zones share its pattern for their kept copies
    /// (100,000 zones kept a path each, 7.8 MB); a zone whose configured
    /// name reads otherwise than the name prints keeps the file named as
    /// configured, as before.
    #[test]
    fn a_groups_zones_share_its_file_pattern() {
        let s = parse(
            "[[zone-group]]\norigins = [\"a.test\", \"B.Test.\", \"\\\\099.test\"]\n\
             file = \"/var/kept/{zone}.zone\"\nprimaries = [\"192.0.2.1\"]\n",
        )
        .unwrap();
        let [a, b, c] = s.secondaries.as_slice() else {
            panic!("{:?}", s.secondaries)
        };
        assert_eq!(a.kept_path(), Path::new("/var/kept/a.test.zone"));
        assert_eq!(b.kept_path(), Path::new("/var/kept/B.Test.zone"));
        assert_eq!(c.kept_path(), Path::new("/var/kept/\\099.test.zone"));
        assert_eq!(a.file, b.file, "one pattern");
        assert_ne!(a.file, c.file, "a file of its own");
    }

    #[test]
    fn zone_group_file_names_too_long_for_the_file_system_are_hashed() {
        let long = |last: char| {
            format!(
                "{0}.{0}.{0}.{1}",
                "a".repeat(63),
                last.to_string().repeat(53)
            )
        };
        let (one, two) = (long('b'), long('c'));
        assert_eq!(Name::parse(&one).unwrap().as_wire().len(), 247);
        let fits = format!("{}.{}", "a".repeat(63), "b".repeat(63));
        let s = parse(&format!(
            "[[zone-group]]\norigins = [\"{one}\", \"{two}\", \"{fits}\", \"short.test\"]\n\
             file = \"kept/secondary-{{zone}}.zone\"\nprimaries = [\"192.0.2.1\"]\nallow-transfer = [\"::1\"]\n"
        ))
        .unwrap();
        let names: Vec<String> = s
            .secondaries
            .iter()
            .map(|z| {
                let path = z.kept_path();
                path.file_name().unwrap().to_str().unwrap().to_string()
            })
            .collect();
        assert_eq!(names[2], format!("secondary-{fits}.zone"), "unchanged");
        assert_eq!(names[3], "secondary-short.test.zone", "unchanged");
        assert_ne!(names[0], names[1]);
        let dir = tempfile::tempdir().unwrap();
        for name in &names[..2] {
            assert_eq!(name.len(), 255 - LONGEST_SUFFIX.len(), "{name}");
            assert!(
                name.starts_with(&format!("secondary-{}", "a".repeat(63))),
                "{name}"
            );
            assert!(name.ends_with(".zone"), "{name}");
            // The file and every file Heron writes beside it can be made.
            let beside = [
                "",
                ".tmp",
                ".jnl",
                ".jnl.tmp",
                ".jnl.reused.tmp",
                ".jnl.seen.tmp",
                ".jnl.carried.tmp",
                ".frozen.tmp",
                ".signed.tmp",
                ".rejected.tmp",
                ".key-directory.tmp",
                ".consumed.tmp",
                ".ceded.tmp",
                LONGEST_SUFFIX,
            ];
            for suffix in beside {
                std::fs::write(dir.path().join(format!("{name}{suffix}")), "").unwrap();
            }
        }
        // The same origin gets the same name every time.
        assert_eq!(fitting_stem(&one, 100), fitting_stem(&one, 100));
        assert_eq!(fitting_stem(&one, 100).len(), 100);
    }

    #[test]
    fn journals_are_kept_next_to_zone_files_unless_turned_off() {
        let s = parse(
            "[[zone]]\norigin = \"a.test\"\nfile = \"a.zone\"\nallow-transfer = [\"::1\"]\n\
             [[zone]]\norigin = \"off.test\"\nfile = \"off.zone\"\nallow-transfer = [\"::1\"]\njournal = false\n\
             [[zone]]\norigin = \"s.test\"\nfile = \"kept/s\"\nallow-transfer = [\"::1\"]\n\
             primaries = [\"192.0.2.1\"]\n\
             [[zone]]\norigin = \"closed.test\"\nfile = \"closed.zone\"\nnotify = [\"192.0.2.7\"]\n\
             [[zone-group]]\norigins = [\"g1.test\", \"g2.test\"]\nfile = \"g/{zone}\"\n\
             allow-transfer = [\"::1\"]\njournal = true\n",
        )
        .unwrap();
        let journal = |origin: &str| {
            s.policies[&Name::parse(origin).unwrap()]
                .journal_file
                .as_deref()
                .map(|p| p.display().to_string())
        };
        assert_eq!(journal("a.test").as_deref(), Some("/etc/heron/a.zone.jnl"));
        assert_eq!(journal("off.test"), None);
        assert_eq!(journal("s.test").as_deref(), Some("/etc/heron/kept/s.jnl"));
        assert_eq!(journal("closed.test"), None, "nobody may transfer it");
        assert_eq!(
            journal("g1.test").as_deref(),
            Some("/etc/heron/g/g1.test.jnl")
        );
        assert_eq!(
            journal("g2.test").as_deref(),
            Some("/etc/heron/g/g2.test.jnl")
        );
    }

    #[test]
    fn zones_that_share_a_zone_file_keep_their_journals_in_memory() {
        let zone = |origin: &str, file: &str| {
            format!(
                "[[zone]]\norigin = \"{origin}\"\nfile = \"{file}\"\nallow-transfer = [\"::1\"]\n"
            )
        };
        let s = parse(&[
            zone("a.test", "parked.zone"),
            zone("b.test", "parked.zone"),
            zone("c.test", "c.zone"),
            "[[zone-group]]\norigins = [\"d.test\"]\nfile = \"{zone}\"\nallow-transfer = [\"::1\"]\n".into(),
        ]
        .concat())
        .unwrap();
        let journal = |origin: &str| {
            s.policies[&Name::parse(origin).unwrap()]
                .journal_file
                .clone()
        };
        assert_eq!((journal("a.test"), journal("b.test")), (None, None));
        assert_eq!(journal("c.test"), Some("/etc/heron/c.zone.jnl".into()));
        assert_eq!(journal("d.test"), Some("/etc/heron/d.test.jnl".into()));
        assert_eq!(s.warnings.len(), 1, "{:?}", s.warnings);
        assert!(
            s.warnings[0].starts_with("heron.toml: zones a.test., b.test. would share the journal file /etc/heron/parked.zone.jnl"),
            "{:?}",
            s.warnings
        );
    }

    #[test]
    fn a_file_a_zone_writes_may_not_be_used_by_another_zone() {
        let zone = |origin: &str, file: &str, more: &str| {
            format!("[[zone]]\norigin = \"{origin}\"\nfile = \"{file}\"\n{more}\n")
        };
        let secondary =
            |origin: &str, file: &str| zone(origin, file, "primaries = [\"192.0.2.1\"]");
        let transfer = "allow-transfer = [\"::1\"]";
        let signed = "dnssec-policy = \"default\"";
        let cases = [
            (
                // The finding: a secondary kept in a primary zone's file.
                zone("c.test", "c.zone", "") + &secondary("e.test", "./sub/../c.zone"),
                "/etc/heron/c.zone is used by zone c.test. (zone file) and zone e.test. (kept copy",
            ),
            (
                secondary("s1.test", "kept/s") + &secondary("s2.test", "kept/s"),
                "/etc/heron/kept/s is used by zone s1.test. (kept copy (rewritten by every transfer)) and zone s2.test. (kept copy",
            ),
            (
                zone("a.test", "a.zone", transfer) + &zone("b.test", "a.zone.jnl", ""),
                "zone b.test. (zone file)",
            ),
            (
                zone("a.test", "a.zone", transfer) + &secondary("b.test", "a.zone.jnl"),
                "zone b.test. (kept copy",
            ),
            (
                "[[zone-group]]\norigins = [\"g.test\"]\nfile = \"{zone}\"\nprimaries = [\"192.0.2.1\"]\n".to_string()
                    + &zone("p.test", "g.test", ""),
                "/etc/heron/g.test is used by",
            ),
            (
                // AM-7: the zone taking updates is written back over the
                // other zone's file.
                zone("s.test", "z.zone", "")
                    + &zone("t.test", "z.zone", "allow-update = [\"127.0.0.1 zonesub ANY\"]"),
                "/etc/heron/z.zone is used by zone s.test. (zone file) and zone t.test. \
                 (zone file (written back after updates))",
            ),
            (
                // AM-8: signed zones sharing a file would share its
                // signed copy.
                zone("s.test", "z.zone", signed) + &zone("t.test", "z.zone", signed),
                "/etc/heron/z.zone.signed is used by zone s.test. (signed copy",
            ),
            (
                zone("s.test", "z.zone", signed) + &secondary("k.test", "z.zone.signed"),
                "zone k.test. (kept copy",
            ),
            (
                zone("s.test", "z.zone", signed) + &zone("k.test", "z.zone.key-directory", ""),
                "(key directory note",
            ),
            (
                // BF-5: a file named like a consumed catalog's state, or
                // like the temporary file of a file Heron writes.
                "[[catalog]]\nzone = \"cat.test\"\nfile = \"b.zone\"\nprimaries = [\"192.0.2.1\"]\nmembers-dir = \"m\"\n"
                    .to_string()
                    + &zone("q.test", "b.zone.ceded", ""),
                "(consumed catalog state",
            ),
            (
                secondary("b.test", "s.zone") + &zone("r.test", "s.zone.tmp", ""),
                "zone b.test. (temporary file",
            ),
            (
                zone("b.test", "t.zone", "primaries = [\"192.0.2.1\"]\nallow-transfer = [\"::1\"]")
                    + &zone("r.test", "t.zone.jnl.tmp", ""),
                "(temporary file",
            ),
            (
                zone("a.test", "a.zone", transfer) + &zone("b.test", "a.zone.jnl.seen", ""),
                "(updates answered",
            ),
        ];
        for (text, want) in cases {
            let errors = parse(&text).unwrap_err();
            assert!(
                errors.iter().any(|e| e.starts_with("heron.toml: ")
                    && e.contains(want)
                    && e.contains("give each its own file")),
                "{text}: {errors:?}"
            );
        }
        // Primary zones may share a zone file; different files are fine.
        let fine = zone("a.test", "same.zone", "")
            + &zone("b.test", "same.zone", "")
            + &secondary("s.test", "s.zone")
            + &zone("j.test", "j.zone", transfer)
            // A signed zone and an unsigned one may share a file too.
            + &zone("u.test", "signed.zone", "")
            + &zone("v.test", "signed.zone", signed);
        parse(&fine).unwrap();
    }

    #[test]
    fn a_journal_without_allow_transfer_is_a_mistake() {
        let err =
            parse("[[zone]]\norigin = \"a.test\"\nfile = \"a\"\njournal = true\n").unwrap_err();
        assert!(
            err.iter()
                .any(|e| e.contains("zone 'a.test'") && e.contains("allow-transfer is empty")),
            "{err:?}"
        );
        let err =
            parse("[[zone-group]]\norigins = [\"a.test\"]\nfile = \"{zone}\"\njournal = true\n")
                .unwrap_err();
        assert!(
            err.iter()
                .any(|e| e.contains("[[zone-group]]: journal = true")),
            "{err:?}"
        );
        let err = parse(
            "[[zone]]\norigin = \"a.test\"\nfile = \"a\"\nallow-transfer = [\"::1\"]\njournal = \"no\"\n",
        )
        .unwrap_err();
        assert!(
            err[0].contains("line 5") && err[0].contains("boolean"),
            "{err:?}"
        );
    }

    #[test]
    fn a_zone_group_gives_each_zone_its_own_update_rules() {
        let s = parse(&format!(
            "{KEY}[[zone-group]]\norigins = [\"a.test\", \"b.test\"]\nfile = \"z/{{zone}}.zone\"\n\
             allow-update = [\"key xfr name _acme-challenge.{{zone}} TXT\"]\nzonefile-sync = 5\n"
        ))
        .unwrap();
        let who = heron_xfr::update::Requester {
            ip: "192.0.2.1".parse().unwrap(),
            key: Some(&Name::parse("xfr").unwrap()),
        };
        for zone in ["a.test", "b.test"] {
            let p = &s.policies[&Name::parse(zone).unwrap()];
            let own = Name::parse(&format!("_acme-challenge.{zone}")).unwrap();
            assert!(p.update.policy.allows(who, &own, heron_proto::RType::TXT));
            let (file, after) = p.update.write_back.clone().unwrap();
            assert!(file.ends_with(format!("z/{zone}.zone")), "{file:?}");
            assert_eq!(after, Duration::from_secs(5));
            assert!(p.journal_path().is_some());
        }
        let secondaries = parse(&format!(
            "{KEY}[[zone-group]]\norigins = [\"c.test\"]\nfile = \"{{zone}}\"\n\
             primaries = [\"192.0.2.1\"]\nallow-update-forwarding = [\"127.0.0.1\"]\n"
        ))
        .unwrap();
        let p = &secondaries.policies[&Name::parse("c.test").unwrap()];
        assert!(
            p.update
                .forwarding
                .check("127.0.0.1".parse().unwrap(), None)
                .is_ok()
        );
        let err = parse(&format!(
            "{KEY}[[zone-group]]\norigins = [\"c.test\"]\nfile = \"{{zone}}\"\n\
             allow-update = [\"key xfr name www.other.test A\"]\n"
        ))
        .unwrap_err();
        assert!(
            err.iter()
                .any(|e| e.contains("zone 'c.test'") && e.contains("outside")),
            "{err:?}"
        );
    }

    #[test]
    fn zone_group_mistakes_are_reported() {
        let group = |origins: &str, file: &str| {
            format!(
                "[[zone]]\norigin = \"a.test\"\nfile = \"a\"\n[[zone-group]]\norigins = [{origins}]\nfile = \"{file}\"\n"
            )
        };
        let cases = [
            (group("\"b.test\"", "same.zone"), "has no {zone}"),
            (group("\"b..test\"", "{zone}"), "bad origin 'b..test'"),
            (
                group("\"A.TEST\"", "{zone}"),
                "zone A.TEST. is configured more than once",
            ),
            (
                group("\"b.test\"", "{zone}") + "allow-transfer = [\"10.0.0.0/8 key nokey\"]\n",
                "not defined",
            ),
        ];
        for (text, want) in cases {
            let err = parse(&text).unwrap_err();
            assert!(err.iter().any(|e| e.contains(want)), "{text}: {err:?}");
        }
    }
}

/// docs/configuration.md against the parser: every option the parser
/// takes is documented, and every option a section's table documents is
/// taken. The parser's own list comes from its answer to an unknown key.
#[cfg(test)]
mod documented {
    use std::collections::BTreeMap;

    const DOC: &str = include_str!("../../../../docs/configuration.md");
    /// Each section as written in a configuration file.
    const SECTIONS: [&str; 17] = [
        "",
        "[[dnssec-policy]]",
        "[server]",
        "[tcp]",
        "[tls]",
        "[[zone]]",
        "[[zone-group]]",
        "[[key]]",
        "[secondary]",
        "[[catalog]]",
        "[xdp]",
        "[xfr]",
        "[rrl]",
        "[cookies]",
        "[dnstap]",
        "[metrics]",
        "[log]",
    ];

    /// The keys `section` takes: the ones the parser lists when refusing
    /// an unknown one.
    fn taken(section: &str) -> Vec<String> {
        let text = format!("{section}\nzzz-unknown = 1\n");
        let err = toml::from_str::<super::ConfigFile>(&text)
            .err()
            .unwrap()
            .to_string();
        let (_, expected) = err
            .split_once("expected")
            .unwrap_or_else(|| panic!("{err}"));
        let expected = expected.lines().next().unwrap();
        let keys = expected.split('`').skip(1).step_by(2).map(str::to_string);
        keys.collect()
    }

    /// The keys in the first column of the first table under each
    /// section's own heading (`## \`[tcp]\``).
    fn documented_tables() -> BTreeMap<String, Vec<String>> {
        let mut tables: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut section = None;
        for line in DOC.lines() {
            let table_ended = section.as_ref().is_some_and(|s| tables.contains_key(s));
            if table_ended && !line.starts_with('|') {
                section = None;
            }
            if line.starts_with('#') {
                let heading = line.trim_start_matches('#').trim_start();
                section = (heading.strip_prefix('`'))
                    .and_then(|h| h.split('`').next())
                    .filter(|h| h.starts_with('['))
                    .map(str::to_string);
                continue;
            }
            let (Some(section), Some(row)) = (&section, line.strip_prefix("| `")) else {
                continue;
            };
            let first = row.split(" |").next().unwrap();
            let keys = first.split(", ").map(|k| k.trim_matches('`'));
            let keys = keys.map(|k| k.split(" =").next().unwrap().to_string());
            tables.entry(section.clone()).or_default().extend(keys);
        }
        tables
    }

    /// Whether the page names `key` of `section`: in backquotes (a
    /// section as `[key]`, `[[key]]` or `[section.key]`), or set in an
    /// example.
    fn mentioned(section: &str, key: &str) -> bool {
        let name = section.trim_matches(['[', ']']);
        let spellings = [
            format!("`{key}`"),
            format!("`[{key}]"),
            format!("`[[{key}]]`"),
            format!("`[{name}.{key}]`"),
        ];
        spellings.iter().any(|s| DOC.contains(s.as_str()))
            || DOC.lines().any(|l| {
                let l = l.trim_start_matches(['#', ' ']);
                l.starts_with(&format!("{key} =")) || l.starts_with(&format!("{key}="))
            })
    }

    #[test]
    fn every_option_taken_is_documented() {
        let missing: Vec<String> = (SECTIONS.iter())
            .flat_map(|section| taken(section).into_iter().map(move |k| (section, k)))
            .filter(|(section, key)| !mentioned(section, key))
            .map(|(section, key)| format!("{section} {key}"))
            .collect();
        assert!(
            missing.is_empty(),
            "not in docs/configuration.md: {missing:?}"
        );
        assert!(taken("[tcp]").contains(&"idle-timeout".to_string()));
    }

    #[test]
    fn every_option_a_section_documents_is_taken() {
        let tables = documented_tables();
        for section in ["[server]", "[tcp]", "[rrl]", "[[zone]]", "[[key]]", "[log]"] {
            assert!(tables.contains_key(section), "{section} has a table");
        }
        for (section, keys) in &tables {
            let taken = taken(section);
            let unknown: Vec<&String> = keys.iter().filter(|k| !taken.contains(k)).collect();
            assert!(
                unknown.is_empty(),
                "{section} documents {unknown:?}; takes {taken:?}"
            );
        }
    }
}
