//! The workloads: zones and query files, generated into one folder.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::queries;
use crate::zones::{self, Generated};

/// Sizes of everything generated (full mode uses the defaults).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Sizes {
    pub tlds: usize,
    pub small_records: usize,
    pub big_records: usize,
    pub many_zones: usize,
    /// Zones of the `zones10k` workload (10,000 in full mode).
    #[serde(default = "some_zones")]
    pub some_zones: usize,
    /// Queries per file (the large zone's file has `big_queries`).
    pub queries: usize,
    pub big_queries: usize,
}

impl Default for Sizes {
    fn default() -> Self {
        Sizes {
            tlds: zones::ROOT_TLDS,
            small_records: zones::SMALL_RECORDS,
            big_records: zones::BIG_RECORDS,
            many_zones: zones::MANY_ZONES,
            some_zones: zones::SOME_ZONES,
            queries: 200_000,
            big_queries: 1_000_000,
        }
    }
}

fn some_zones() -> usize {
    zones::SOME_ZONES
}

/// Every workload, in report order.
pub const ALL: [&str; 9] = [
    "root", "mix40", "small", "negative", "big", "zones10k", "many", "tcp", "signed",
];

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Workload {
    pub id: String,
    pub title: String,
    pub tcp: bool,
    pub zones: Vec<(String, PathBuf)>,
    /// Origins whose SOA must answer before the server counts as ready.
    pub ready: Vec<String>,
    pub queries: PathBuf,
    pub records: usize,
    /// Records of the kind the workload is about (A records, delegations).
    pub main_records: usize,
}

pub fn title(id: &str, sizes: &Sizes) -> String {
    match id {
        "root" => format!("root-like zone, {} TLD delegations, UDP", sizes.tlds),
        "mix40" => "40% NXDOMAIN mix (A 60, CNAME 20, SRV 10, MX 4, TXT 3, NS 3), UDP".into(),
        "small" => format!("small zone, {} A records, UDP", sizes.small_records),
        "negative" => format!(
            "the small zone's negative answers: half NXDOMAIN (names not in it), half NODATA \
             (its names, type AAAA), UDP; against `small` it shows what a negative answer \
             costs next to a positive one ({} A records)",
            sizes.small_records
        ),
        "big" => format!("large zone, {} A records, UDP", sizes.big_records),
        "zones10k" => format!(
            "{} zones loaded, the first of the many-zone workload's (SOA, 2 NS and a www A \
             record each), UDP",
            sizes.some_zones
        ),
        "many" => format!(
            "{} zones loaded (SOA, 2 NS and a www A record each), UDP; every \
             configuration lists each zone, Heron's in one `[[zone-group]]` with a file \
             pattern, the peers' in one entry per zone",
            sizes.many_zones
        ),
        "signed" => format!(
            "the root-like zone signed (ldns-signzone, ECDSA P-256, NSEC, a DS at every \
             other TLD), half the queries with the DO bit, UDP, blast only ({} delegations)",
            sizes.tlds
        ),
        "tcp" => format!(
            "root-like zone over TCP, 1,000 clients, pipelined ({} delegations)",
            sizes.tlds
        ),
        _ => id.to_string(),
    }
}

fn ready_of(g: &Generated) -> Vec<String> {
    let n = g.zones.len();
    let mut idx = vec![0, n / 2, n - 1];
    idx.dedup();
    idx.into_iter().map(|i| g.zones[i].0.clone()).collect()
}

/// Generates the zones and query files of `ids` into `dir`.
/// With `write_queries` false only the zones are written (and the
/// returned query paths do not exist); with `write_zones` false only the
/// query files are (zones are generated into a scratch folder and removed).
pub fn generate(
    dir: &Path,
    seed: u64,
    sizes: &Sizes,
    ids: &[String],
    write_zones: bool,
    write_queries: bool,
) -> io::Result<Vec<Workload>> {
    fs::create_dir_all(dir.join("queries"))?;
    let zone_dir = if write_zones {
        dir.to_path_buf()
    } else {
        dir.join(".scratch-zones")
    };
    fs::create_dir_all(&zone_dir)?;
    let dir_q = dir;
    let dir = zone_dir.as_path();
    let mut out = Vec::new();
    let mut root: Option<Generated> = None;
    for id in ids {
        let qfile = dir_q.join("queries").join(format!("{id}.txt"));
        let (g, qs) = match id.as_str() {
            "root" | "tcp" => {
                if root.is_none() {
                    root = Some(zones::write_root(dir, seed, sizes.tlds)?);
                }
                let qs = queries::root_queries(seed, sizes.tlds, sizes.queries);
                (root.clone().unwrap(), qs)
            }
            "signed" => (
                zones::write_signed_root(dir, seed, sizes.tlds)?,
                queries::signed_root_queries(seed, sizes.tlds, sizes.queries),
            ),
            "mix40" => (
                zones::write_edge(dir)?,
                queries::mix40_queries(seed, sizes.queries / 1000 * 1000),
            ),
            "small" => (
                zones::write_a_zone(dir, zones::SMALL_ORIGIN, seed, sizes.small_records)?,
                queries::a_zone_queries(
                    seed,
                    zones::SMALL_ORIGIN,
                    sizes.small_records,
                    sizes.queries,
                ),
            ),
            "negative" => (
                zones::write_a_zone(dir, zones::SMALL_ORIGIN, seed, sizes.small_records)?,
                queries::negative_queries(
                    seed,
                    zones::SMALL_ORIGIN,
                    sizes.small_records,
                    sizes.queries,
                ),
            ),
            "big" => (
                zones::write_a_zone(dir, zones::BIG_ORIGIN, seed, sizes.big_records)?,
                queries::a_zone_queries(
                    seed,
                    zones::BIG_ORIGIN,
                    sizes.big_records,
                    sizes.big_queries,
                ),
            ),
            "many" => (
                zones::write_many_zones(dir, seed, sizes.many_zones)?,
                queries::many_zone_queries(seed, sizes.many_zones, sizes.queries),
            ),
            // The same files as the first of `many` (same names, same text).
            "zones10k" => (
                zones::write_many_zones(dir, seed, sizes.some_zones)?,
                queries::many_zone_queries(seed, sizes.some_zones, sizes.queries),
            ),
            other => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("unknown workload {other}; known: {}", ALL.join(", ")),
                ));
            }
        };
        if write_queries {
            queries::write_queries(&qfile, &qs)?;
        }
        out.push(Workload {
            id: id.clone(),
            title: title(id, sizes),
            tcp: id == "tcp",
            ready: ready_of(&g),
            zones: g.zones.clone(),
            queries: qfile,
            records: g.records,
            main_records: g.main_records,
        });
    }
    if !write_zones {
        fs::remove_dir_all(&zone_dir)?;
        for w in &mut out {
            w.zones.clear();
        }
    }
    Ok(out)
}
