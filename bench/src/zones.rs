//! Zone generators for the benchmark workloads. Every generator is
//! deterministic for a seed, and the query generators in `queries` derive
//! the same names from the same functions instead of reading zone files.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::prng::Rng;

/// The seed every workload uses unless told otherwise.
pub const DEFAULT_SEED: u64 = 0x4845_524F_4E21; // "HERON!"

/// Delegations in the root-like zone (the NSD benchmark used the root zone,
/// about 500 TLDs at the time).
pub const ROOT_TLDS: usize = 500;
/// A records in the large zone (the Windows DNS benchmark).
pub const BIG_RECORDS: usize = 2_000_000;
/// A records in the small zone the large-zone and many-zones figures are
/// compared with.
pub const SMALL_RECORDS: usize = 1_000;
/// Zones in the many-zones workload (a hosting provider).
pub const MANY_ZONES: usize = 100_000;
/// Zones in the workload the throughput target names (10,000 zones
/// within 5% of the small zone): the first of the many zones.
pub const SOME_ZONES: usize = 10_000;
/// Records in each of them.
pub const MANY_ZONE_RECORDS: usize = 4;

/// Sizes of the edge zone used by the 40%-error mix.
pub const EDGE_HOSTS: usize = 20_000;
pub const EDGE_CNAMES: usize = 10_000;
pub const EDGE_SRV: usize = 5_000;
pub const EDGE_MX: usize = 2_000;
pub const EDGE_TXT: usize = 2_000;
pub const EDGE_DELEGATIONS: usize = 1_000;

pub const ROOT_ORIGIN: &str = ".";
pub const SMALL_ORIGIN: &str = "small.test.";
pub const BIG_ORIGIN: &str = "big.test.";
pub const EDGE_ORIGIN: &str = "edge.test.";

/// What one generator wrote: (origin, file) pairs and record counts.
#[derive(Clone, Debug, Default)]
pub struct Generated {
    pub zones: Vec<(String, PathBuf)>,
    /// Records written, all zones together.
    pub records: usize,
    /// Records of the type the workload is about (A for the A zones,
    /// delegations for the root-like zone).
    pub main_records: usize,
}

/// Well-known generic TLDs first, so the root-like zone looks like one.
const GTLDS: &[&str] = &[
    "com", "net", "org", "info", "biz", "edu", "gov", "mil", "int", "arpa", "name", "pro", "aero",
    "coop", "museum", "mobi", "asia", "tel", "travel", "jobs", "cat", "xxx", "post",
];

/// The TLDs of the root-like zone for `seed`: the gTLDs above, then
/// pseudo-random two-letter (60%) and 3–10 letter names, all distinct.
pub fn root_tlds(seed: u64, count: usize) -> Vec<String> {
    let mut rng = Rng::new(seed ^ 0x7001);
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(count);
    for t in GTLDS.iter().take(count) {
        seen.insert(t.to_string());
        out.push(t.to_string());
    }
    // Bounded: there are far more candidate names than `count`.
    let mut tries = 0usize;
    while out.len() < count && tries < count * 1000 {
        tries += 1;
        let len = if rng.below(10) < 6 {
            2
        } else {
            rng.range(3, 10) as usize
        };
        let mut t = String::with_capacity(len);
        for _ in 0..len {
            t.push((b'a' + rng.below(26) as u8) as char);
        }
        if seen.insert(t.clone()) {
            out.push(t);
        }
    }
    out
}

/// Name servers of TLD number `i` (2 to 6 of them), for `seed`.
pub fn tld_ns_count(seed: u64, i: usize) -> usize {
    let mut rng = Rng::new(seed ^ 0x5EED ^ (i as u64).wrapping_mul(0x9E37_79B9));
    rng.range(2, 6) as usize
}

/// The root-like zone: SOA, 13 root servers with glue, and `tlds`
/// delegations, each with 2–6 in-bailiwick name servers with A and AAAA
/// glue.
pub fn write_root(dir: &Path, seed: u64, tlds: usize) -> io::Result<Generated> {
    let path = dir.join("root.zone");
    let mut w = BufWriter::new(File::create(&path)?);
    let mut records = 0;
    writeln!(w, "$TTL 86400")?;
    writeln!(
        w,
        ". 86400 IN SOA a.root-servers.net. nstld.verisign-grs.com. 2024010100 1800 900 604800 86400"
    )?;
    records += 1;
    for c in b'a'..=b'm' {
        let c = c as char;
        writeln!(w, ". 518400 IN NS {c}.root-servers.net.")?;
        records += 1;
    }
    for (k, c) in (b'a'..=b'm').enumerate() {
        let c = c as char;
        writeln!(w, "{c}.root-servers.net. 518400 IN A 198.41.0.{}", k + 1)?;
        writeln!(
            w,
            "{c}.root-servers.net. 518400 IN AAAA 2001:db8:ffff::{:x}",
            k + 1
        )?;
        records += 2;
    }
    let mut addr = 0u32;
    let names = root_tlds(seed, tlds);
    for (i, tld) in names.iter().enumerate() {
        for k in 1..=tld_ns_count(seed, i) {
            writeln!(w, "{tld}. 172800 IN NS ns{k}.nic.{tld}.")?;
            records += 1;
        }
        for k in 1..=tld_ns_count(seed, i) {
            addr += 1;
            writeln!(
                w,
                "ns{k}.nic.{tld}. 172800 IN A 198.18.{}.{}",
                (addr >> 8) & 0xFF,
                addr & 0xFF
            )?;
            writeln!(w, "ns{k}.nic.{tld}. 172800 IN AAAA 2001:db8:1::{addr:x}")?;
            records += 2;
        }
    }
    w.flush()?;
    Ok(Generated {
        zones: vec![(ROOT_ORIGIN.to_string(), path)],
        records,
        main_records: names.len(),
    })
}

/// The root-like zone of [`write_root`], signed, for the `signed`
/// workload: every other TLD has a DS RRset (so referrals with DO carry
/// a DS and its RRSIG, or an NSEC proving there is none), and the zone is
/// signed by `ldns-signzone` (Debian's ldnsutils) with an ECDSA P-256
/// KSK and ZSK and an NSEC chain, so that every server serves the same
/// signed file and none of them is the signer being measured.
pub fn write_signed_root(dir: &Path, seed: u64, tlds: usize) -> io::Result<Generated> {
    let work = dir.join("signed-root.work");
    fs::create_dir_all(&work)?;
    let g = write_root(&work, seed, tlds)?;
    let unsigned = g.zones[0].1.clone();
    let mut ds = fs::OpenOptions::new().append(true).open(&unsigned)?;
    let mut rng = Rng::new(seed ^ 0xD5);
    for tld in root_tlds(seed, tlds).iter().step_by(2) {
        let digest: String = (0..32).map(|_| format!("{:02X}", rng.below(256))).collect();
        writeln!(ds, "{tld}. 86400 IN DS {} 13 2 {digest}", rng.below(65536))?;
    }
    drop(ds);
    let ksk = ldns(&work, "ldns-keygen", &["-a", "ECDSAP256SHA256", "-k", "."])?;
    let zsk = ldns(&work, "ldns-keygen", &["-a", "ECDSAP256SHA256", "."])?;
    let path = dir.join("root.signed.zone");
    let out = path.to_string_lossy().into_owned();
    let zone = unsigned.to_string_lossy().into_owned();
    // Far-off expiration: the files outlive many benchmark runs.
    let args = ["-e", "20500101000000", "-f", &out, &zone, &ksk, &zsk];
    ldns(&work, "ldns-signzone", &args)?;
    fs::remove_dir_all(&work)?;
    Ok(Generated {
        zones: vec![(ROOT_ORIGIN.to_string(), path)],
        records: g.records + tlds.div_ceil(2),
        main_records: g.main_records,
    })
}

/// Runs an ldns tool in `dir`; its first line of output (ldns-keygen
/// prints the key's base name).
fn ldns(dir: &Path, tool: &str, args: &[&str]) -> io::Result<String> {
    let out = std::process::Command::new(tool)
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| io::Error::other(format!("{tool} (Debian's ldnsutils): {e}")))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(io::Error::other(format!("{tool} failed: {err}")));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let base = text.lines().next().unwrap_or("").trim();
    Ok(dir.join(base).to_string_lossy().into_owned())
}

/// Label of host `i` in an A-record zone: "h" and 8 base-32 characters of
/// a bijection of `i` on 40 bits, so labels are distinct and unordered.
pub fn host_label(seed: u64, i: u64) -> String {
    const MASK: u64 = (1 << 40) - 1;
    const B32: &[u8] = b"abcdefghijklmnopqrstuvwxyz234567";
    let x = (i.wrapping_mul(0x9E37_79B9_7F4B) ^ seed).wrapping_add(seed >> 3) & MASK;
    let x = x.wrapping_mul(0xD6E8_FEB8_6659_FD93 | 1) & MASK; // odd: a bijection mod 2^40
    let mut s = String::with_capacity(9);
    s.push('h');
    for k in (0..8).rev() {
        s.push(B32[((x >> (k * 5)) & 31) as usize] as char);
    }
    s
}

/// A zone of `count` A records (plus SOA, NS and the name server's A).
pub fn write_a_zone(dir: &Path, origin: &str, seed: u64, count: usize) -> io::Result<Generated> {
    let path = dir.join(format!("{}zone", origin));
    let mut w = BufWriter::with_capacity(1 << 20, File::create(&path)?);
    writeln!(w, "$ORIGIN {origin}\n$TTL 3600")?;
    writeln!(
        w,
        "@ IN SOA ns1 hostmaster 2024010100 7200 3600 1209600 3600\n@ IN NS ns1\nns1 IN A 192.0.2.53"
    )?;
    for i in 0..count as u64 {
        writeln!(
            w,
            "{} IN A 10.{}.{}.{}",
            host_label(seed, i),
            (i >> 16) & 0xFF,
            (i >> 8) & 0xFF,
            i & 0xFF
        )?;
    }
    w.flush()?;
    Ok(Generated {
        zones: vec![(origin.to_string(), path)],
        records: count + 3,
        main_records: count,
    })
}

/// Origin of zone `i` of the many-zones set: a random-looking but unique
/// second-level name under com, net or org.
pub fn many_zone_origin(seed: u64, i: usize) -> String {
    let mut rng = Rng::new(seed ^ 0x2000 ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let tld = ["com", "net", "org"][rng.below(3) as usize];
    let len = rng.range(4, 10) as usize;
    format!("{}{i}.{tld}.", rng.label(len))
}

/// `count` minimal zones in `dir/zones/` (a hosting provider's parked
/// domains): SOA, two NS and a `www` A record each, the A record being what
/// the workload queries.
pub fn write_many_zones(dir: &Path, seed: u64, count: usize) -> io::Result<Generated> {
    let zdir = dir.join("zones");
    fs::create_dir_all(&zdir)?;
    let mut zones = Vec::with_capacity(count);
    for i in 0..count {
        let origin = many_zone_origin(seed, i);
        let path = zdir.join(format!("{origin}zone"));
        let (a, b, c) = ((i >> 16) & 0xFF, (i >> 8) & 0xFF, i & 0xFF);
        let text = format!(
            "$ORIGIN {origin}\n$TTL 3600\n\
             @ IN SOA ns1.hosting.test. hostmaster.hosting.test. 2024010100 7200 3600 1209600 3600\n\
             @ IN NS ns1.hosting.test.\n@ IN NS ns2.hosting.test.\n\
             www IN A 10.{a}.{b}.{c}\n"
        );
        fs::write(&path, text)?;
        zones.push((origin, path));
    }
    Ok(Generated {
        zones,
        records: count * MANY_ZONE_RECORDS,
        main_records: count,
    })
}

/// The edge zone of the 40%-error mix: hosts (A), aliases (CNAME),
/// services (SRV), mail domains (MX), TXT names and delegations (NS + glue).
/// Every generated label starts with h, c, _sip, m, t or d; nonexistent
/// query names start with x.
pub fn write_edge(dir: &Path) -> io::Result<Generated> {
    let path = dir.join(format!("{EDGE_ORIGIN}zone"));
    let mut w = BufWriter::new(File::create(&path)?);
    writeln!(w, "$ORIGIN {EDGE_ORIGIN}\n$TTL 3600")?;
    writeln!(
        w,
        "@ IN SOA ns1 hostmaster 2024010100 7200 3600 1209600 3600\n@ IN NS ns1\n@ IN NS ns2\nns1 IN A 192.0.2.1\nns2 IN A 192.0.2.2"
    )?;
    let mut records = 5;
    for i in 0..EDGE_HOSTS {
        writeln!(
            w,
            "h{i} IN A 10.{}.{}.{}",
            (i >> 16) & 0xFF,
            (i >> 8) & 0xFF,
            i & 0xFF
        )?;
    }
    for i in 0..EDGE_CNAMES {
        writeln!(w, "c{i} IN CNAME h{i}")?;
    }
    for i in 0..EDGE_SRV {
        writeln!(w, "_sip._tcp.s{i} IN SRV 10 60 5060 h{i}")?;
    }
    for i in 0..EDGE_MX {
        writeln!(w, "m{i} IN MX 10 h{i}")?;
    }
    for i in 0..EDGE_TXT {
        writeln!(w, "t{i} IN TXT \"v=spf1 ip4:10.0.0.0/8 -all\" \"id={i}\"")?;
    }
    for i in 0..EDGE_DELEGATIONS {
        writeln!(
            w,
            "d{i} IN NS ns1.d{i}\nd{i} IN NS ns2.d{i}\nns1.d{i} IN A 10.200.{}.{}\nns2.d{i} IN A 10.201.{}.{}",
            (i >> 8) & 0xFF,
            i & 0xFF,
            (i >> 8) & 0xFF,
            i & 0xFF
        )?;
    }
    records += EDGE_HOSTS + EDGE_CNAMES + EDGE_SRV + EDGE_MX + EDGE_TXT + 4 * EDGE_DELEGATIONS;
    w.flush()?;
    Ok(Generated {
        zones: vec![(EDGE_ORIGIN.to_string(), path)],
        records,
        main_records: records,
    })
}

/// Counts the records (non-directive, non-blank lines) in a generated file.
#[cfg(test)]
pub fn count_records(path: &Path, rtype: Option<&str>) -> usize {
    let text = fs::read_to_string(path).unwrap();
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('$'))
        .filter(|l| rtype.is_none_or(|t| l.split_whitespace().any(|w| w == t)))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("heron-bench-{tag}-{}", std::process::id()));
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn root_zone_has_500_delegations_with_glue() {
        let d = tmp("root");
        let g = write_root(&d, DEFAULT_SEED, ROOT_TLDS).unwrap();
        assert_eq!(g.main_records, 500);
        let tlds = root_tlds(DEFAULT_SEED, ROOT_TLDS);
        let unique: std::collections::HashSet<_> = tlds.iter().collect();
        assert_eq!(unique.len(), 500);
        let path = &g.zones[0].1;
        let ns = count_records(path, Some("NS"));
        let expected_ns: usize = 13
            + (0..500)
                .map(|i| tld_ns_count(DEFAULT_SEED, i))
                .sum::<usize>();
        assert_eq!(ns, expected_ns);
        // One A and one AAAA glue record per delegation name server.
        assert_eq!(count_records(path, Some("A")), expected_ns);
        assert_eq!(count_records(path, Some("AAAA")), expected_ns);
        assert_eq!(count_records(path, None), g.records);
        fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn a_zone_counts_and_distinct_labels() {
        let d = tmp("a");
        let g = write_a_zone(&d, "t.test.", 1, 20_000).unwrap();
        assert_eq!(count_records(&g.zones[0].1, Some("A")), 20_000 + 1);
        assert_eq!(count_records(&g.zones[0].1, None), g.records);
        let labels: std::collections::HashSet<_> = (0..20_000).map(|i| host_label(1, i)).collect();
        assert_eq!(labels.len(), 20_000);
        fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn many_zones_and_edge_counts() {
        let d = tmp("many");
        let g = write_many_zones(&d, DEFAULT_SEED, 300).unwrap();
        assert_eq!(g.zones.len(), 300);
        let origins: std::collections::HashSet<_> = g.zones.iter().map(|z| &z.0).collect();
        assert_eq!(origins.len(), 300);
        assert_eq!(count_records(&g.zones[7].1, None), MANY_ZONE_RECORDS);
        let e = write_edge(&d).unwrap();
        assert_eq!(count_records(&e.zones[0].1, None), e.records);
        assert_eq!(count_records(&e.zones[0].1, Some("CNAME")), EDGE_CNAMES);
        fs::remove_dir_all(d).unwrap();
    }
}
