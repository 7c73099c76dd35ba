//! The Prometheus endpoint (`[metrics] listen`): `GET /metrics` answers
//! the OpenMetrics text format (which Prometheus reads), made with
//! `prometheus-client` from the same counters `heron ctl stats` shows.
//! Nothing is counted for it: each scrape sums the workers' cells
//! ([`heron_server::stats`]), reads the zones' state and the kernel's
//! counters ([`kernel`]), and encodes them.

pub use heron_server::http;
pub mod kernel;
mod process;
mod zone_failures;

use std::collections::{HashMap, HashSet};
use std::time::{SystemTime, UNIX_EPOCH};

use heron_proto::Name;
use heron_server::processor::Refusal;
use heron_server::processor::tap::TapTotals;
use heron_server::rrl::RrlCounters;
use heron_server::stats::{
    CLOSE_REASONS, CONNECTION_LIMITS, DROP_REASONS, HANDSHAKE_KINDS, LATENCY_BOUNDS_US, RCODES,
    SIZE_BOUNDS, TRANSPORTS, Totals, qtype_label,
};
use heron_xfr::stats::ZoneCounts;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

use crate::control::commands::Controller;

/// The content type of `/metrics` in OpenMetrics.
const OPEN_METRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of `/metrics` in Prometheus's text format.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// One zone's row.
#[derive(Debug)]
struct ZoneRow {
    zone: String,
    role: &'static str,
    serial: Option<u32>,
    /// Unix seconds of the last load (primary) or transfer (secondary).
    loaded_at: Option<u64>,
    counts: ZoneCounts,
    /// A secondary zone's health, from the refresh driver.
    health: Option<SecondaryHealth>,
    /// A zone from a file: whether its last load of the file failed.
    file_failed: Option<bool>,
    /// A consumed catalog zone: whether its newest version is rejected.
    catalog_rejected: Option<bool>,
    /// Its journal file, zone file (write-back) or kept copy cannot be
    /// written now (a full or read-only disk).
    write_failing: bool,
}

/// What an operator alerts on for a secondary zone.
#[derive(Debug, Default, Clone, Copy)]
struct SecondaryHealth {
    /// Unix seconds of the last check a primary answered.
    checked_at: Option<u64>,
    /// Unix seconds at which it expires unless a check succeeds.
    expire_at: Option<u64>,
    /// Checks failed in a row.
    failures: u32,
    /// The serial a primary last said it has.
    primary_serial: Option<u32>,
    /// The serial of the version transferred in, as the primary numbers
    /// it (a zone Heron signs serves a serial of its own).
    transferred_serial: Option<u32>,
}

/// The zones in each state an operator alerts on, counted: what
/// `heron_zones_unhealthy` says with or without the per-zone series.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct ZonesHealth {
    /// Configured and not answered from (a secondary before its first
    /// transfer or expired, a zone file that never loaded, a catalog
    /// member held back for its DS).
    not_served: u64,
    /// Zones from files whose last load failed, an older version served
    /// (one never loaded is `not_served` alone: a zone is never counted,
    /// nor alerted on, twice; black-box finding DE-6).
    file_load_failed: u64,
    /// Secondary zones whose last three checks or more failed.
    checks_failing: u64,
    /// Secondary zones failing checks that expire within a day.
    expiring: u64,
    /// Consumed catalogs whose newest version is rejected.
    catalog_rejected: u64,
    /// Zones whose journal file, zone file or kept copy cannot be written.
    write_failing: u64,
}

impl ZonesHealth {
    fn of(rows: &[ZoneRow], now: u64) -> ZonesHealth {
        let count = |f: &dyn Fn(&ZoneRow) -> bool| rows.iter().filter(|r| f(r)).count() as u64;
        let failing = |r: &ZoneRow, at_least: u32| r.health.is_some_and(|h| h.failures >= at_least);
        ZonesHealth {
            not_served: count(&|r| r.serial.is_none()),
            file_load_failed: count(&|r| r.file_failed == Some(true) && r.serial.is_some()),
            checks_failing: count(&|r| failing(r, 3)),
            expiring: count(&|r| {
                failing(r, 1)
                    && r.health
                        .and_then(|h| h.expire_at)
                        .is_some_and(|t| t < now + 86_400)
            }),
            catalog_rejected: count(&|r| r.catalog_rejected == Some(true)),
            write_failing: count(&|r| r.write_failing),
        }
    }

    fn encode(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let states = [
            ("not_served", self.not_served),
            ("file_load_failed", self.file_load_failed),
            ("checks_failing", self.checks_failing),
            ("expiring_within_a_day", self.expiring),
            ("catalog_rejected", self.catalog_rejected),
            ("write_failing", self.write_failing),
        ];
        let rows = states.map(|(state, n)| (label("state", state), ConstGauge::new(n as i64)));
        family(
            e,
            "heron_zones_unhealthy",
            "Zones in each state an operator acts on, counted (with or without zone-metrics): not_served (a catalog member held back for its DS too), file_load_failed (an older version served), checks_failing (three or more in a row), expiring_within_a_day (while checks fail), catalog_rejected, write_failing (its journal, zone file, kept or signed copy or generated catalog file cannot be written, or its updates cannot be signed: mostly a full or read-only disk)",
            MetricType::Gauge,
            rows,
        )
    }
}

/// What one scrape exports, read at once.
#[derive(Debug)]
struct Snapshot {
    totals: Totals,
    refusals: [u64; Refusal::KINDS],
    rrl: RrlCounters,
    /// The query log's counters, when `[dnstap]` is on.
    dnstap: Option<TapTotals>,
    connections_open: usize,
    zones: Option<Vec<ZoneRow>>,
    health: ZonesHealth,
    kernel: Vec<(&'static kernel::KernelCounter, Option<u64>)>,
    process: process::ProcessStats,
}

/// The body of a scrape of the server `controller` sees, in `format`, and
/// its content type.
pub(crate) async fn scrape(
    controller: &Controller,
    zone_metrics: bool,
    format: http::Format,
) -> (String, &'static str) {
    let body = snapshot(controller, zone_metrics).await;
    match format {
        http::Format::OpenMetrics => (body, OPEN_METRICS),
        http::Format::Text => (text_format(&body), TEXT_FORMAT),
    }
}

/// The OpenMetrics body of a scrape.
async fn snapshot(controller: &Controller, zone_metrics: bool) -> String {
    // Counted whether or not each zone's series go out: the alerts of a
    // server of very many zones need them most (black-box finding:
    // `zone-metrics = false` silenced every zone alert).
    let rows = zone_rows(controller).await;
    let health = ZonesHealth::of(&rows, unix_seconds(SystemTime::now()));
    let zones = zone_metrics.then_some(rows);
    let service = &controller.service;
    let snapshot = Snapshot {
        totals: service.stats.totals(),
        refusals: service.refusal_totals(),
        rrl: service.rrl.snapshot(),
        dnstap: service.processor.tap().map(|tap| tap.totals()),
        connections_open: controller.connections.open_connections(),
        zones,
        health,
        kernel: kernel::read(),
        process: process::read(),
    };
    encode(snapshot)
}

/// `open_metrics` (as prometheus-client writes it) in Prometheus's text
/// format 0.0.4, which `promtool check metrics` and scrapers that do not
/// ask for OpenMetrics read: a counter's HELP and TYPE name its samples
/// (`_total`), an info metric is a gauge named `_info`, and there is no
/// `# EOF`, `# UNIT` or `_created`.
fn text_format(open_metrics: &str) -> String {
    let mut kinds = HashMap::new();
    for line in open_metrics.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ")
            && let Some((name, kind)) = rest.split_once(' ')
        {
            kinds.insert(name, kind);
        }
    }
    let sample_name = |name: &str| match kinds.get(name) {
        Some(&"counter") => format!("{name}_total"),
        Some(&"info") => format!("{name}_info"),
        _ => name.to_string(),
    };
    let mut text = String::with_capacity(open_metrics.len());
    for line in open_metrics.lines() {
        let rewritten = if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            // OpenMetrics escapes `"` in HELP; the text format does not.
            let help = help.replace("\\\"", "\"");
            format!("# HELP {} {help}", sample_name(name))
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "unknown"));
            let kind = match kind {
                "counter" | "gauge" | "histogram" | "summary" => kind,
                "info" => "gauge",
                _ => "untyped",
            };
            format!("# TYPE {} {kind}", sample_name(name))
        } else if line.starts_with("# EOF")
            || line.starts_with("# UNIT ")
            || is_created_sample(line, &kinds)
        {
            continue;
        } else {
            line.to_string()
        };
        text.push_str(&rewritten);
        text.push('\n');
    }
    text
}

/// Whether `line` is the `_created` sample of a counter or histogram,
/// which the text format does not have.
fn is_created_sample(line: &str, kinds: &HashMap<&str, &str>) -> bool {
    let name = line.split(['{', ' ']).next().unwrap_or_default();
    name.strip_suffix("_created")
        .is_some_and(|family| matches!(kinds.get(family), Some(&"counter" | &"histogram")))
}

fn encode(snapshot: Snapshot) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(snapshot));
    registry.register_collector(Box::new(DsWaiting::read()));
    registry.register_collector(Box::new(zone_failures::ZoneFailures::zonemd()));
    registry.register_collector(Box::new(zone_failures::ZoneFailures::forward_tsig()));
    let mut body = String::new();
    prometheus_client::encoding::text::encode(&mut body, &registry)
        .expect("writing to a String does not fail");
    body
}

async fn zone_rows(controller: &Controller) -> Vec<ZoneRow> {
    // Looked up by origin, not searched: a scrape of 100,000 zones must
    // not compare every zone with every other.
    let mut counts: HashMap<Name, ZoneCounts> =
        controller.service.zones.snapshot().into_iter().collect();
    let mut transferred_at: HashMap<Name, Option<SystemTime>> = HashMap::new();
    let mut health: HashMap<Name, SecondaryHealth> = HashMap::new();
    for report in controller.secondary_reports().await {
        let origin = report.origin.to_lowercase();
        report
            .inbound
            .fill(counts.entry(origin.clone()).or_default());
        transferred_at.insert(origin.clone(), report.transferred_at);
        let zone_health = SecondaryHealth {
            checked_at: report.checked_at.map(unix_seconds),
            expire_at: report.expire_at.map(unix_seconds),
            failures: report.failures,
            primary_serial: report.primary_serial,
            transferred_serial: report.serial,
        };
        health.insert(origin, zone_health);
    }
    let rejected = catalog_rejections(controller);
    let catalog = controller.catalog.load();
    let secondaries = controller.secondaries.load_full();
    let files = controller.files.lock().unwrap_or_else(|e| e.into_inner());
    // Configured zones whose file never loaded are listed too, served 0:
    // that is what the alert on heron_zone_served looks for. A zone no
    // longer configured is not, whatever it counted before it went
    // (black-box finding: a removed zone stayed, not served, firing the
    // alerts).
    // A catalog member held back for its DS is listed, not served (black-
    // box finding BS-9: no metric said so).
    let held: HashSet<Name> = (crate::runtime::held_members::held_members().into_iter())
        .map(|(origin, _)| origin)
        .collect();
    let mut origins: Vec<_> = (catalog.zones().map(|z| z.origin().to_lowercase()))
        .chain(secondaries.iter().cloned())
        .chain(files.origins().map(Name::to_lowercase))
        .chain(held.iter().cloned())
        .collect();
    origins.sort_by_cached_key(|o| o.to_string());
    origins.dedup();
    origins
        .into_iter()
        .map(|origin| {
            let secondary = secondaries.contains(&origin) || held.contains(&origin);
            let loaded_at = match secondary {
                true => transferred_at.get(&origin).copied().flatten(),
                false => files.loaded_at(&origin).flatten(),
            };
            ZoneRow {
                zone: origin.to_string(),
                role: if secondary { "secondary" } else { "primary" },
                serial: catalog.get(&origin).map(|z| z.serial()),
                loaded_at: loaded_at.map(unix_seconds),
                counts: counts.get(&origin).cloned().unwrap_or_default(),
                health: health.get(&origin).copied(),
                file_failed: file_failed(controller, &files, &origin, secondary),
                catalog_rejected: rejected.get(&origin).copied(),
                write_failing: write_failing(controller, &origin),
            }
        })
        .collect()
}

/// Whether the last load of `origin`'s file failed (a primary zone), or
/// the last version received could not be signed (a secondary zone signed
/// here: an older version is served; black-box finding: no metric said
/// so); None for another zone.
fn file_failed(
    controller: &Controller,
    files: &crate::plan::zone_files::ZoneFiles,
    origin: &Name,
    secondary: bool,
) -> Option<bool> {
    let signed = &controller.transfers.signed_secondaries;
    match secondary {
        true => (signed.signing(origin).is_some()).then(|| signed.failure(origin).is_some()),
        false => (files.file_of(origin).is_some()).then(|| files.last_error(origin).is_some()),
    }
}

/// Whether a file of `origin` cannot be written now: its journal, its
/// zone file (updates written back) or its kept copy (black-box finding:
/// a full disk refused every update, and no metric said so); or its
/// updated version could not be signed (a full disk under its key
/// directory, regression hunt BR-10).
fn write_failing(controller: &Controller, origin: &Name) -> bool {
    let transfers = &controller.transfers;
    transfers.primary.journal_error_of(origin).is_some()
        || transfers.unwritten.write_error(origin).is_some()
        || heron_xfr::secondary::keeper::failing_copy_of(origin).is_some()
        || crate::runtime::update::signing_error_of(origin).is_some()
        || crate::plan::catalog_producer::write_error_of(origin).is_some()
}

/// Each consumed catalog zone, and whether its newest version is
/// rejected now.
fn catalog_rejections(controller: &Controller) -> HashMap<Name, bool> {
    let running = controller.transfers.secondaries.lock();
    let running = running.unwrap_or_else(|e| e.into_inner());
    let Some(running) = running.as_ref() else {
        return HashMap::new();
    };
    let rejected: HashSet<Name> = (running.catalog_rejections().into_iter())
        .map(|(origin, _)| origin.to_lowercase())
        .collect();
    (running.consumed_catalogs())
        .map(|origin| {
            (
                origin.to_lowercase(),
                rejected.contains(&origin.to_lowercase()),
            )
        })
        .collect()
}

fn unix_seconds(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Encodes one metric family: a descriptor, then a sample per row.
fn family<L: EncodeLabelSet, M: EncodeMetric>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    rows: impl IntoIterator<Item = (L, M)>,
) -> Result<(), std::fmt::Error> {
    let mut metric = encoder.encode_descriptor(name, help, None, kind)?;
    for (labels, value) in rows {
        value.encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

fn counters<L: EncodeLabelSet>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: impl IntoIterator<Item = (L, u64)>,
) -> Result<(), std::fmt::Error> {
    let rows = rows.into_iter().map(|(l, v)| (l, ConstCounter::new(v)));
    family(encoder, name, help, MetricType::Counter, rows)
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: f64,
) -> Result<(), std::fmt::Error> {
    let metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    ConstGauge::new(value).encode(metric)
}

fn histogram<const B: usize>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    histogram: &heron_server::stats::Histogram<B>,
    (bounds, per_unit): (&[u64], f64),
) -> Result<(), std::fmt::Error> {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
    let buckets = histogram.buckets_by_bound(bounds, per_unit);
    let sum = histogram.sum as f64 / per_unit;
    metric.encode_histogram::<NoLabelSet>(sum, histogram.count(), &buckets, None)
}

type Labels = Vec<(&'static str, String)>;

fn label(key: &'static str, value: impl ToString) -> Labels {
    vec![(key, value.to_string())]
}

fn encode_dnstap(e: &mut DescriptorEncoder, tap: &TapTotals) -> Result<(), std::fmt::Error> {
    let results = [("written", tap.written), ("dropped", tap.dropped)];
    counters(
        e,
        "heron_dnstap_messages",
        "dnstap messages written, or dropped (queue full, reader gone)",
        results.map(|(r, n)| (label("result", r), n)),
    )?;
    gauge(
        e,
        "heron_dnstap_queued_bytes",
        "Bytes of sampled exchanges waiting for the dnstap writer",
        tap.queued_bytes as f64,
    )
}

/// Each signed zone, 1 while a key rollover waits for the parent's DS
/// RRset to change (the operator's step), else 0.
#[derive(Debug)]
struct DsWaiting(Vec<(String, bool)>);

impl DsWaiting {
    fn read() -> DsWaiting {
        let all = crate::runtime::rollover::statuses()
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mut rows: Vec<(String, bool)> = (all.iter())
            .map(|(zone, status)| (zone.clone(), status.waiting.is_some()))
            .collect();
        rows.sort();
        DsWaiting(rows)
    }
}

impl Collector for DsWaiting {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let rows = (self.0.iter()).map(|(zone, waiting)| {
            (
                vec![("zone", zone.clone())],
                ConstGauge::new(i64::from(*waiting)),
            )
        });
        family(
            &mut encoder,
            "heron_dnssec_ds_waiting",
            "1 while a DNSSEC key rollover of the zone waits for its parent to add or remove a DS (see heron ctl zone-status), else 0",
            MetricType::Gauge,
            rows,
        )
    }
}

impl Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let e = &mut encoder;
        self.encode_queries(e)?;
        self.encode_connections_and_refusals(e)?;
        self.health.encode(e)?;
        if let Some(zones) = &self.zones {
            encode_zones(e, zones)?;
        }
        if let Some(tap) = &self.dnstap {
            encode_dnstap(e, tap)?;
        }
        self.encode_process(e)
    }
}

impl Snapshot {
    fn encode_queries(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let t = &self.totals;
        let queries = (TRANSPORTS.iter().enumerate()).flat_map(|(via, transport)| {
            (t.queries[via].iter().enumerate())
                .filter(|(_, n)| **n > 0)
                .map(move |(q, &n)| {
                    let labels = vec![
                        ("transport", transport.to_string()),
                        ("qtype", qtype_label(q).to_string()),
                    ];
                    (labels, n)
                })
        });
        counters(
            e,
            "heron_queries",
            "DNS messages received, by transport and query type (OTHER: any other, or unreadable)",
            queries,
        )?;
        let rcodes = (RCODES.iter().zip(t.responses)).filter(|(_, n)| *n > 0);
        counters(
            e,
            "heron_responses",
            "Responses sent, by RCODE with the OPT record's extended bits (BADVERS, BADCOOKIE)",
            rcodes.map(|(r, n)| (label("rcode", r), n)),
        )?;
        let truncated = e.encode_descriptor(
            "heron_responses_truncated",
            "Responses sent with the TC bit: too large for the client's UDP size (the client asks again over TCP), RRL slips included",
            None,
            MetricType::Counter,
        )?;
        ConstCounter::new(t.truncated).encode(truncated)?;
        histogram(
            e,
            "heron_response_size_bytes",
            "Size of the responses sent",
            &t.response_bytes,
            (&SIZE_BOUNDS, 1.0),
        )?;
        histogram(
            e,
            "heron_answer_latency_seconds",
            "From receiving a query to sending its response; on UDP measured once per batch",
            &t.latency_us,
            (&LATENCY_BOUNDS_US, 1e6),
        )
    }

    fn encode_connections_and_refusals(
        &self,
        e: &mut DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        let t = &self.totals;
        gauge(
            e,
            "heron_tcp_connections_open",
            "TCP and TLS connections open",
            self.connections_open as f64,
        )?;
        let accepted = (TRANSPORTS.iter().zip(t.accepted)).take(3).skip(1);
        counters(
            e,
            "heron_tcp_connections_accepted",
            "TCP and TLS connections accepted",
            accepted.map(|(v, n)| (label("transport", v), n)),
        )?;
        let refused = CONNECTION_LIMITS.iter().zip(t.refused_connections);
        counters(
            e,
            "heron_tcp_connections_refused",
            "TCP and TLS connections closed at accept, by the limit reached",
            refused.map(|(l, n)| (label("limit", l), n)),
        )?;
        let shed = e.encode_descriptor(
            "heron_tcp_idle_connections_shed",
            "Idle TCP and TLS connections closed at max-connections to make room for a new one",
            None,
            MetricType::Counter,
        )?;
        ConstCounter::new(t.shed).encode(shed)?;
        let shed_busy = e.encode_descriptor(
            "heron_tcp_busy_connections_shed",
            "Busy TCP and TLS connections (a message begun) of the client holding the most closed at max-connections for a client holding fewer",
            None,
            MetricType::Counter,
        )?;
        ConstCounter::new(t.shed_busy).encode(shed_busy)?;
        let closed = CLOSE_REASONS.iter().zip(t.closed);
        counters(
            e,
            "heron_tcp_connections_closed",
            "TCP and TLS connections the event loops took in that ended, by why: the client closed, a timeout, a TLS error, another error",
            closed.map(|(r, n)| (label("reason", r), n)),
        )?;
        let dropped = DROP_REASONS.iter().zip(t.dropped);
        counters(
            e,
            "heron_udp_datagrams_dropped",
            "UDP datagrams dropped unread (sockets and XDP): from a port no client sends from, and on the XDP path what the kernel would drop (a martian source, a bad checksum, malformed)",
            dropped.map(|(r, n)| (label("reason", r), n)),
        )?;
        let handshakes = HANDSHAKE_KINDS.iter().zip(t.handshakes);
        counters(
            e,
            "heron_tls_handshakes",
            "TLS handshakes completed, a new session (full) or a resumed one",
            handshakes.map(|(k, n)| (label("kind", k), n)),
        )?;
        let reasons = Refusal::KIND_NAMES.iter().zip(self.refusals);
        counters(
            e,
            "heron_requests_refused",
            "Requests refused or failed by policy (ACL, TSIG), by reason",
            reasons.map(|(r, n)| (label("reason", r), n)),
        )?;
        let rrl = [
            ("dropped", self.rrl.dropped),
            ("slipped", self.rrl.slipped),
            ("log_only", self.rrl.log_only),
        ];
        counters(
            e,
            "heron_rrl_responses",
            "Responses response rate limiting dropped, slipped (sent truncated) or would have (log-only)",
            rrl.map(|(a, n)| (label("action", a), n)),
        )
    }

    fn encode_process(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let build =
            e.encode_descriptor("heron_build", "This build of Heron", None, MetricType::Info)?;
        Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]).encode(build)?;
        let p = &self.process;
        let gauges = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                p.resident_bytes.map(|b| b as f64),
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                p.virtual_bytes.map(|b| b as f64),
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since the Unix epoch in seconds",
                p.start_time_seconds,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors",
                p.open_fds.map(|n| n as f64),
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors",
                p.max_fds.map(|n| n as f64),
            ),
        ];
        for (name, help, value) in gauges {
            if let Some(value) = value {
                gauge(e, name, help, value)?;
            }
        }
        if let Some(seconds) = p.cpu_seconds {
            let metric = e.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                None,
                MetricType::Counter,
            )?;
            ConstCounter::new(seconds).encode(metric)?;
        }
        let mut names: Vec<&str> = self.kernel.iter().map(|(c, _)| c.metric).collect();
        names.dedup();
        for name in names {
            let of_name = self.kernel.iter().filter(|(c, _)| c.metric == name);
            let help = of_name.clone().next().map_or("", |(c, _)| c.help);
            let rows = of_name.filter_map(|(c, v)| Some((label("ip", c.ip), (*v)?)));
            counters(e, name, help, rows)?;
        }
        Ok(())
    }
}

/// The series a secondary zone's freshness is alerted on.
fn encode_secondary_health(
    e: &mut DescriptorEncoder,
    zones: &[ZoneRow],
) -> Result<(), std::fmt::Error> {
    let healths = || {
        zones
            .iter()
            .filter_map(|z| Some((z.zone.clone(), z.health?)))
    };
    // Each a gauge per secondary zone, when known.
    type Of = fn(&SecondaryHealth) -> Option<i64>;
    let gauges: [(&str, &str, Of); 4] = [
        (
            "heron_zone_secondary_last_check_timestamp_seconds",
            "When a primary last answered a check of the secondary zone (its serial, or a transfer); after a restart, the kept copy's date until the next, Unix time",
            |h| h.checked_at.map(|t| t as i64),
        ),
        (
            "heron_zone_secondary_expiry_timestamp_seconds",
            "When the secondary zone expires (answers SERVFAIL) unless a check succeeds first, Unix time",
            |h| h.expire_at.map(|t| t as i64),
        ),
        (
            "heron_zone_secondary_primary_serial",
            "The serial a primary last said it has (ahead of heron_zone_secondary_transferred_serial while a newer version is not in yet)",
            |h| h.primary_serial.map(i64::from),
        ),
        (
            "heron_zone_secondary_transferred_serial",
            "The serial of the version last transferred in, as the primary numbers it (heron_zone_serial, unless Heron signs the zone with a serial of its own)",
            |h| h.transferred_serial.map(i64::from),
        ),
    ];
    for (name, help, value) in gauges {
        let rows = healths()
            .filter_map(|(zone, h)| Some((vec![("zone", zone)], ConstGauge::new(value(&h)?))));
        family(e, name, help, MetricType::Gauge, rows)?;
    }
    let failures =
        healths().map(|(zone, h)| (vec![("zone", zone)], ConstGauge::new(i64::from(h.failures))));
    family(
        e,
        "heron_zone_secondary_check_failures",
        "Checks of the secondary zone failed in a row (0 after one that worked)",
        MetricType::Gauge,
        failures,
    )
}

fn encode_zones(e: &mut DescriptorEncoder, zones: &[ZoneRow]) -> Result<(), std::fmt::Error> {
    let zone = |z: &ZoneRow| vec![("zone", z.zone.clone())];
    let serials = zones
        .iter()
        .filter_map(|z| Some((zone(z), ConstGauge::new(i64::from(z.serial?)))));
    family(
        e,
        "heron_zone_serial",
        "The SOA serial served",
        MetricType::Gauge,
        serials,
    )?;
    let roles = zones.iter().map(|z| {
        (
            vec![("zone", z.zone.clone()), ("role", z.role.to_string())],
            ConstGauge::new(1),
        )
    });
    family(
        e,
        "heron_zone_info",
        "One per configured zone, with its role",
        MetricType::Gauge,
        roles,
    )?;
    let loaded = zones
        .iter()
        .filter_map(|z| Some((zone(z), ConstGauge::new(z.loaded_at? as i64))));
    family(
        e,
        "heron_zone_loaded_timestamp_seconds",
        "When the zone was last loaded from its file (primary) or transferred in (secondary; after a restart, its kept copy's date), Unix time",
        MetricType::Gauge,
        loaded,
    )?;
    let served = zones
        .iter()
        .map(|z| (zone(z), ConstGauge::new(i64::from(z.serial.is_some()))));
    family(
        e,
        "heron_zone_served",
        "1 while the zone is answered from, 0 while it is not (a secondary before its first transfer or expired, a zone file that never loaded)",
        MetricType::Gauge,
        served,
    )?;
    let file_failed = zones
        .iter()
        .filter_map(|z| Some((zone(z), ConstGauge::new(i64::from(z.file_failed?)))));
    family(
        e,
        "heron_zone_file_load_failed",
        "1 while the last load of the zone's file failed (a version served is older than the file; heron ctl zone-status says why), or while the last version a secondary zone signed here received could not be signed (an older version served), 0 after one that worked; zones from files and secondary zones signed here",
        MetricType::Gauge,
        file_failed,
    )?;
    let rejected = zones
        .iter()
        .filter_map(|z| Some((zone(z), ConstGauge::new(i64::from(z.catalog_rejected?)))));
    family(
        e,
        "heron_catalog_rejected",
        "1 while the newest version of a consumed catalog zone is rejected (no member is added or removed until a version is taken; heron ctl zone-status says why), 0 otherwise; consumed catalogs only",
        MetricType::Gauge,
        rejected,
    )?;
    encode_secondary_health(e, zones)?;
    encode_zone_traffic(e, zones)
}

/// Each zone's transfers and NOTIFYs, both ways.
fn encode_zone_traffic(
    e: &mut DescriptorEncoder,
    zones: &[ZoneRow],
) -> Result<(), std::fmt::Error> {
    let zone = |z: &ZoneRow| vec![("zone", z.zone.clone())];
    let both_ways = |f: fn(&ZoneCounts) -> (u64, u64)| {
        zones.iter().flat_map(move |z| {
            let (out, into) = f(&z.counts);
            [("out", out), ("in", into)].map(|(way, n)| {
                (
                    vec![("zone", z.zone.clone()), ("direction", way.to_string())],
                    n,
                )
            })
        })
    };
    counters(
        e,
        "heron_zone_transfers",
        "Zone transfers (AXFR, IXFR) sent (out) or received (in), finished or not",
        both_ways(|c| (c.transfers_out, c.transfers_in)),
    )?;
    counters(
        e,
        "heron_zone_transfer_failures",
        "Zone transfers that failed",
        both_ways(|c| (c.transfers_out_failed, c.transfers_in_failed)),
    )?;
    let seconds = zones.iter().flat_map(|z| {
        [
            ("out", z.counts.transfer_out_seconds),
            ("in", z.counts.transfer_in_seconds),
        ]
        .map(|(way, s)| {
            (
                vec![("zone", z.zone.clone()), ("direction", way.to_string())],
                ConstCounter::new(s),
            )
        })
    });
    family(
        e,
        "heron_zone_transfer_seconds",
        "Time spent in zone transfers",
        MetricType::Counter,
        seconds,
    )?;
    counters(
        e,
        "heron_zone_notifies",
        "NOTIFYs accepted (in) or sent to secondaries (out)",
        both_ways(|c| (c.notifies_out, c.notifies_in)),
    )?;
    let failed = zones
        .iter()
        .map(|z| (zone(z), z.counts.notifies_out_failed));
    counters(
        e,
        "heron_zone_notify_failures",
        "NOTIFYs sent that no secondary acknowledged",
        failed,
    )?;
    let updates = zones.iter().flat_map(|z| {
        (0..heron_xfr::stats::UPDATE_RCODES)
            .filter(|&r| z.counts.updates[r] > 0)
            .map(|r| {
                let rcode = heron_proto::Rcode(r as u16).to_string();
                (
                    vec![("zone", z.zone.clone()), ("rcode", rcode)],
                    z.counts.updates[r],
                )
            })
    });
    counters(
        e,
        "heron_zone_updates",
        "Dynamic updates (RFC 2136) the update task answered, by answer code",
        updates,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot() -> Snapshot {
        let stats = heron_server::stats::Stats::default();
        let cells = stats.worker();
        cells.query(heron_server::stats::Via::Tcp, Some(28));
        let mut response = vec![0u8; 40];
        response[3] = 3;
        cells.response(&response);
        Snapshot {
            totals: stats.totals(),
            refusals: [0; Refusal::KINDS],
            rrl: RrlCounters::default(),
            dnstap: Some(TapTotals {
                written: 10,
                dropped: 4,
                queued: 1,
                queued_bytes: 60,
            }),
            connections_open: 2,
            zones: Some(vec![ZoneRow {
                zone: "example.com.".into(),
                role: "primary",
                serial: Some(7),
                loaded_at: Some(1_700_000_000),
                counts: ZoneCounts {
                    transfers_out: 3,
                    updates: [4, 0, 0, 0, 0, 2, 0, 0, 1, 0, 0],
                    ..ZoneCounts::default()
                },
                health: None,
                file_failed: Some(false),
                catalog_rejected: None,
                write_failing: false,
            }]),
            health: ZonesHealth::default(),
            kernel: kernel::read(),
            process: process::ProcessStats {
                resident_bytes: Some(4096),
                ..process::ProcessStats::default()
            },
        }
    }

    /// Each zone counts in each state it is in; a secondary failing its
    /// checks counts as expiring only within a day of its expiry.
    #[test]
    fn zones_are_counted_by_state() {
        let now = 1_000_000;
        let row = |serial: Option<u32>, failures: u32, expire_at: Option<u64>| ZoneRow {
            zone: "z.test.".into(),
            role: "secondary",
            serial,
            loaded_at: None,
            counts: ZoneCounts::default(),
            health: Some(SecondaryHealth {
                failures,
                expire_at,
                ..SecondaryHealth::default()
            }),
            file_failed: None,
            catalog_rejected: None,
            write_failing: false,
        };
        let rows = [
            row(Some(1), 0, Some(now + 10)),
            row(Some(1), 3, Some(now + 3600)),
            row(Some(1), 1, Some(now + 2 * 86_400)),
            row(None, 5, Some(now - 1)),
            ZoneRow {
                file_failed: Some(true),
                catalog_rejected: Some(true),
                health: None,
                ..row(Some(1), 0, None)
            },
            ZoneRow {
                write_failing: true,
                ..row(Some(1), 0, None)
            },
            // A file that never loaded: not served, and only that (DE-6).
            ZoneRow {
                file_failed: Some(true),
                health: None,
                ..row(None, 0, None)
            },
        ];
        let health = ZonesHealth::of(&rows, now);
        let want = ZonesHealth {
            not_served: 2,
            file_load_failed: 1,
            checks_failing: 2,
            expiring: 2,
            catalog_rejected: 1,
            write_failing: 1,
        };
        assert_eq!(health, want);
    }

    #[test]
    fn the_text_format_names_counters_by_their_samples() {
        let open = encode(snapshot());
        let text = text_format(&open);
        for line in [
            "# HELP heron_queries_total DNS messages received, by transport and query type (OTHER: any other, or unreadable)",
            "# TYPE heron_queries_total counter",
            "heron_queries_total{transport=\"tcp\",qtype=\"AAAA\"} 1",
            "# TYPE heron_build_info gauge",
            "heron_build_info{version=\"0.1.0\"} 1",
            "# TYPE heron_response_size_bytes histogram",
            "heron_response_size_bytes_bucket{le=\"+Inf\"} 1",
            "# TYPE process_resident_memory_bytes gauge",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "no line {line:?} in\n{text}"
            );
        }
        assert!(!text.contains("# EOF"), "{text}");
        assert!(!text.lines().any(|l| l == "# TYPE heron_queries counter"));
        // Every sample line of the original is kept, in order.
        let samples = |body: &str| -> Vec<String> {
            body.lines()
                .filter(|l| !l.starts_with('#'))
                .map(str::to_string)
                .collect()
        };
        assert_eq!(samples(&text), samples(&open));
    }

    #[test]
    fn the_text_format_drops_what_it_does_not_have() {
        let open = "# HELP a_thing A \\\"quoted\\\" thing.\n# TYPE a_thing counter\n# UNIT a_thing seconds\n\
            a_thing_total 3\na_thing_created 1700000000\n# TYPE odd stateset\nodd{odd=\"x\"} 1\n# EOF\n";
        assert_eq!(
            text_format(open),
            "# HELP a_thing_total A \"quoted\" thing.\n# TYPE a_thing_total counter\na_thing_total 3\n\
             # TYPE odd untyped\nodd{odd=\"x\"} 1\n"
        );
    }

    /// Issue 44: the buckets were made cumulative before the encoder,
    /// which adds them up again (3 responses read as `le="+Inf"` 30).
    #[test]
    fn histograms_count_each_observation_once() {
        let stats = heron_server::stats::Stats::default();
        let cells = stats.worker();
        for size in [40, 64, 65, 300, 300, 1232, 1400, 20_000] {
            cells.response(&vec![0u8; size]);
        }
        cells.answered(std::time::Duration::from_micros(30), 5);
        cells.answered(std::time::Duration::from_millis(3), 2);
        cells.answered(std::time::Duration::from_secs(2), 1);
        let body = encode(Snapshot {
            totals: stats.totals(),
            ..snapshot()
        });
        let lines = |prefix: &str| -> Vec<&str> {
            body.lines().filter(|l| l.starts_with(prefix)).collect()
        };
        assert_eq!(
            lines("heron_response_size_bytes"),
            [
                "heron_response_size_bytes_sum 23401.0",
                "heron_response_size_bytes_count 8",
                "heron_response_size_bytes_bucket{le=\"64.0\"} 2",
                "heron_response_size_bytes_bucket{le=\"128.0\"} 3",
                "heron_response_size_bytes_bucket{le=\"256.0\"} 3",
                "heron_response_size_bytes_bucket{le=\"512.0\"} 5",
                "heron_response_size_bytes_bucket{le=\"1024.0\"} 5",
                "heron_response_size_bytes_bucket{le=\"1232.0\"} 6",
                "heron_response_size_bytes_bucket{le=\"1500.0\"} 7",
                "heron_response_size_bytes_bucket{le=\"4096.0\"} 7",
                "heron_response_size_bytes_bucket{le=\"16384.0\"} 7",
                "heron_response_size_bytes_bucket{le=\"+Inf\"} 8",
            ],
            "{body}"
        );
        let latency = lines("heron_answer_latency_seconds");
        assert!(
            latency.contains(&"heron_answer_latency_seconds_count 8"),
            "{body}"
        );
        assert!(
            latency.contains(&"heron_answer_latency_seconds_bucket{le=\"+Inf\"} 8"),
            "{body}"
        );
        let below = |le: &str| {
            let line = format!("heron_answer_latency_seconds_bucket{{le=\"{le}\"}} ");
            latency.iter().find_map(|l| l.strip_prefix(line.as_str()))
        };
        assert_eq!(below("0.00001"), Some("0"), "{body}");
        assert_eq!(below("0.00005"), Some("5"), "{body}");
        assert_eq!(below("0.005"), Some("7"), "{body}");
        assert_eq!(below("1.0"), Some("7"), "{body}");
    }

    #[test]
    fn counters_and_zones_are_in_the_text_format() {
        let body = encode(snapshot());
        for line in [
            "# TYPE heron_queries counter",
            "heron_queries_total{transport=\"tcp\",qtype=\"AAAA\"} 1",
            "heron_responses_total{rcode=\"NXDOMAIN\"} 1",
            "heron_response_size_bytes_bucket{le=\"64.0\"} 1",
            "heron_response_size_bytes_count 1",
            "heron_tcp_connections_open 2.0",
            "heron_zone_serial{zone=\"example.com.\"} 7",
            "heron_zone_transfers_total{zone=\"example.com.\",direction=\"out\"} 3",
            "heron_zone_updates_total{zone=\"example.com.\",rcode=\"NOERROR\"} 4",
            "heron_zone_updates_total{zone=\"example.com.\",rcode=\"REFUSED\"} 2",
            "heron_zone_updates_total{zone=\"example.com.\",rcode=\"NXRRSET\"} 1",
            "process_resident_memory_bytes 4096.0",
            "heron_build_info{version=\"0.1.0\"} 1",
            "heron_dnstap_messages_total{result=\"written\"} 10",
            "heron_dnstap_messages_total{result=\"dropped\"} 4",
            "heron_dnstap_queued_bytes 60.0",
        ] {
            assert!(
                body.lines().any(|l| l == line),
                "no line {line:?} in\n{body}"
            );
        }
        assert!(body.contains("heron_kernel_udp_receive_buffer_errors_total{ip=\"4\"} "));
        assert!(body.contains("heron_kernel_tcp_listen_overflows_total{ip=\"any\"} "));
        assert!(body.ends_with("# EOF\n"));
    }
}
