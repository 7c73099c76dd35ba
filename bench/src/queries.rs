//! Query files in dnsperf's format ("NAME TYPE" per line), one per
//! workload, in random order. `blast` reads the same files, and also
//! "NAME TYPE DO" (the `signed` workload's, which dnsperf cannot read).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use crate::prng::Rng;
use crate::zones::{self, EDGE_ORIGIN};

/// The "40% error" mix: QTYPE shares in percent.
pub const MIX40_TYPES: [(&str, usize); 6] = [
    ("A", 60),
    ("CNAME", 20),
    ("SRV", 10),
    ("MX", 4),
    ("TXT", 3),
    ("NS", 3),
];
/// Share of names in the mix that do not exist (NXDOMAIN), in percent, the
/// same within every QTYPE.
pub const MIX40_NX_PERCENT: usize = 40;

pub type Query = (String, &'static str);

/// Random names under random TLDs of the root-like zone: each is answered
/// with a referral.
pub fn root_queries(seed: u64, tlds: usize, count: usize) -> Vec<Query> {
    let names = zones::root_tlds(seed, tlds);
    let mut rng = Rng::new(seed ^ 0x0A11);
    (0..count)
        .map(|_| {
            let tld = &names[rng.below(names.len() as u64) as usize];
            let len = rng.range(3, 12) as usize;
            (format!("{}.{tld}.", rng.label(len)), "A")
        })
        .collect()
}

/// The root-like queries, every other one asking for DNSSEC records
/// (type field `A DO`: EDNS with the DO bit; only `blast` reads it).
pub fn signed_root_queries(seed: u64, tlds: usize, count: usize) -> Vec<Query> {
    let mut out = root_queries(seed, tlds, count);
    for q in out.iter_mut().step_by(2) {
        q.1 = "A DO";
    }
    out
}

/// Existing names of an A-record zone, drawn uniformly with replacement.
pub fn a_zone_queries(seed: u64, origin: &str, records: usize, count: usize) -> Vec<Query> {
    let mut rng = Rng::new(seed ^ 0x0A22);
    (0..count)
        .map(|_| {
            let i = rng.below(records as u64);
            (format!("{}.{origin}", zones::host_label(seed, i)), "A")
        })
        .collect()
}

/// Negative answers from an A-record zone, in random order: half for
/// names it does not hold (NXDOMAIN; its host labels start with h, these
/// with x), half for its names with type AAAA, which it has none of
/// (NODATA).
pub fn negative_queries(seed: u64, origin: &str, records: usize, count: usize) -> Vec<Query> {
    let mut rng = Rng::new(seed ^ 0x0A55);
    let mut out: Vec<Query> = (0..count)
        .map(|k| match k % 2 {
            0 => (format!("x{}.{origin}", rng.label(8)), "A"),
            _ => {
                let i = rng.below(records as u64);
                (format!("{}.{origin}", zones::host_label(seed, i)), "AAAA")
            }
        })
        .collect();
    rng.shuffle(&mut out);
    out
}

/// `www.ZONE A` for zones drawn uniformly from the many-zones set.
pub fn many_zone_queries(seed: u64, zones_count: usize, count: usize) -> Vec<Query> {
    let mut rng = Rng::new(seed ^ 0x0A33);
    (0..count)
        .map(|_| {
            let i = rng.below(zones_count as u64) as usize;
            (format!("www.{}", zones::many_zone_origin(seed, i)), "A")
        })
        .collect()
}

/// The 40%-error mix against the edge zone, exactly per [`MIX40_TYPES`]
/// and [`MIX40_NX_PERCENT`]; `count` must be a multiple of 1000 so every
/// share is a whole number of queries.
pub fn mix40_queries(seed: u64, count: usize) -> Vec<Query> {
    assert!(
        count.is_multiple_of(1000) && count > 0,
        "the 40% mix needs a multiple of 1000 queries"
    );
    let mut rng = Rng::new(seed ^ 0x0A44);
    let mut out = Vec::with_capacity(count);
    for (qtype, pct) in MIX40_TYPES {
        let n = count * pct / 100;
        let nx = n * MIX40_NX_PERCENT / 100;
        for k in 0..n {
            let name = if k < nx {
                let fake = format!("x{}", rng.label(9));
                if qtype == "SRV" {
                    format!("_sip._tcp.{fake}.{EDGE_ORIGIN}")
                } else {
                    format!("{fake}.{EDGE_ORIGIN}")
                }
            } else {
                let pick = |rng: &mut Rng, n: usize| rng.below(n as u64);
                match qtype {
                    "A" => format!("h{}.{EDGE_ORIGIN}", pick(&mut rng, zones::EDGE_HOSTS)),
                    "CNAME" => format!("c{}.{EDGE_ORIGIN}", pick(&mut rng, zones::EDGE_CNAMES)),
                    "SRV" => format!(
                        "_sip._tcp.s{}.{EDGE_ORIGIN}",
                        pick(&mut rng, zones::EDGE_SRV)
                    ),
                    "MX" => format!("m{}.{EDGE_ORIGIN}", pick(&mut rng, zones::EDGE_MX)),
                    "TXT" => format!("t{}.{EDGE_ORIGIN}", pick(&mut rng, zones::EDGE_TXT)),
                    _ => format!("d{}.{EDGE_ORIGIN}", pick(&mut rng, zones::EDGE_DELEGATIONS)),
                }
            };
            out.push((name, qtype));
        }
    }
    rng.shuffle(&mut out);
    out
}

pub fn write_queries(path: &Path, queries: &[Query]) -> io::Result<()> {
    let mut w = BufWriter::with_capacity(1 << 20, File::create(path)?);
    for (name, qtype) in queries {
        writeln!(w, "{name} {qtype}")?;
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn mix40_is_exact() {
        let q = mix40_queries(zones::DEFAULT_SEED, 100_000);
        assert_eq!(q.len(), 100_000);
        let mut by_type: HashMap<&str, (usize, usize)> = HashMap::new();
        for (name, t) in &q {
            let e = by_type.entry(t).or_default();
            e.0 += 1;
            // Nonexistent names start with x (or _sip._tcp.x).
            if name.starts_with('x') || name.starts_with("_sip._tcp.x") {
                e.1 += 1;
            }
        }
        for (t, pct) in MIX40_TYPES {
            let (n, nx) = by_type[t];
            assert_eq!(n, 100_000 * pct / 100, "{t}");
            assert_eq!(nx * 100, n * MIX40_NX_PERCENT, "{t}");
        }
        let nx_total: usize = by_type.values().map(|v| v.1).sum();
        assert_eq!(nx_total, 40_000);
        // Shuffled: the first 1000 are not all one type.
        let first: std::collections::HashSet<_> = q[..1000].iter().map(|x| x.1).collect();
        assert!(first.len() >= 4);
    }

    #[test]
    fn names_exist_in_generated_zones() {
        let q = a_zone_queries(3, "s.test.", 50, 200);
        let labels: std::collections::HashSet<_> = (0..50)
            .map(|i| format!("{}.s.test.", zones::host_label(3, i)))
            .collect();
        assert!(q.iter().all(|(n, _)| labels.contains(n)));
        let negative = negative_queries(3, "s.test.", 50, 200);
        let nodata = negative
            .iter()
            .filter(|(n, t)| *t == "AAAA" && labels.contains(n));
        let nxdomain = negative
            .iter()
            .filter(|(n, t)| *t == "A" && n.starts_with('x'));
        assert_eq!((nodata.count(), nxdomain.count()), (100, 100));
        let tlds = zones::root_tlds(5, 40);
        for (n, _) in root_queries(5, 40, 100) {
            let tld = n.trim_end_matches('.').rsplit('.').next().unwrap();
            assert!(tlds.iter().any(|t| t == tld));
        }
    }
}
