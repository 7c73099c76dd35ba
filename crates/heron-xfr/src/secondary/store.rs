//! A received zone on disk, so that a restart serves it without a transfer.
//!
//! The zone is written as an RFC 1035 master file that
//! [`heron_zone::load_zone_file`] reads back to the same zone: `$ORIGIN`,
//! then one record a line with an absolute owner, TTL, class, type and
//! presentation RDATA ([`rdata::format_text`], RFC 3597 `\#` form for types
//! it does not know); the SOA first, the rest in canonical order.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use heron_proto::name::canonical_cmp;
use heron_proto::{RType, rdata};
use heron_zone::Zone;
use heron_zone::zone::Node;

/// Writes `zone` to `path` atomically: to `path.tmp` first, synced, then
/// renamed over `path` (its folder created if need be), and the folder
/// synced, so that after a crash `path` holds either the old file or the
/// whole new one.
pub fn write_zone_file(zone: &Zone, path: &Path) -> io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = tmp_path(path);
    let result = write_synced(zone, &tmp).and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    sync_dir(path)
}

pub(crate) fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".tmp");
    PathBuf::from(name)
}

fn write_synced(zone: &Zone, tmp: &Path) -> io::Result<()> {
    let mut out = BufWriter::new(File::create(tmp)?);
    write_zone(zone, &mut out)?;
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()
}

/// Makes the rename durable (a no-op where directories cannot be opened).
fn sync_dir(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    #[cfg(unix)]
    File::open(dir)?.sync_all()?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// The zone as master-file text.
pub fn write_zone(zone: &Zone, out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "; zone {} serial {}", zone.origin(), zone.serial())?;
    writeln!(out, "$ORIGIN {}", zone.origin())?;
    let soa = zone.soa();
    write_record(out, zone.apex(), RType::SOA, soa.ttl(), &soa.first_rdata())?;
    let apex_len = zone.origin().wire_len();
    let mut nodes: Vec<(u64, Node)> = zone
        .nodes()
        .map(|n| (order_key(n.key(), apex_len), n))
        .collect();
    // Canonical order, most comparisons settled by the key: a sort by
    // names alone took most of a 2M-record secondary's CPU.
    nodes.sort_unstable_by(|(ka, a), (kb, b)| {
        ka.cmp(kb)
            .then_with(|| canonical_cmp(a.owner_wire(), b.owner_wire()))
    });
    let nodes = nodes.into_iter().map(|(_, n)| n);
    let apex = zone.apex().id();
    for node in nodes {
        let at_apex = node.id() == apex;
        for set in node.rrsets() {
            if !(at_apex && set.rtype == RType::SOA) {
                for rd in set.rdatas() {
                    write_record(out, node, set.rtype, set.ttl(), &rd)?;
                }
            }
            for rd in set.sigs() {
                write_record(out, node, RType::RRSIG, set.sig_ttl(), &rd)?;
            }
        }
    }
    Ok(())
}

/// The first 8 octets of the label just below the apex (lower-cased wire
/// `key`, zero-padded; 0 for the apex): ordering by it agrees with
/// canonical order (RFC 4034 6.1) wherever two keys differ.
fn order_key(key: &[u8], apex_len: usize) -> u64 {
    let relative = &key[..key.len() - apex_len];
    let mut at = 0;
    let mut last = None;
    while at < relative.len() {
        last = Some(at);
        at += 1 + relative[at] as usize;
    }
    let Some(label) = last else { return 0 };
    let label = &relative[label + 1..];
    let mut bytes = [0u8; 8];
    let n = label.len().min(8);
    bytes[..n].copy_from_slice(&label[..n]);
    // The apex (no label) sorts first; labels start at 1.
    u64::from_be_bytes(bytes).saturating_add(1)
}

fn write_record(
    out: &mut impl Write,
    node: Node,
    rtype: RType,
    ttl: u32,
    rd: &[u8],
) -> io::Result<()> {
    let mut text = String::new();
    rdata::format_text(rtype, rd, &mut text);
    writeln!(out, "{} {ttl} IN {rtype} {text}", node.owner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_proto::Name;

    #[test]
    fn order_keys_agree_with_canonical_order() {
        let names = [
            "z.test",
            "test",
            "a.test",
            "ab.test",
            "abcdefghij.test",
            "abcdefghi.test",
            "b.a.test",
            "\\000.test",
            "a\\000.test",
            "yljkjljk.a.test",
            "zabc.test",
        ];
        let apex = Name::parse("test").unwrap();
        let mut wires: Vec<Vec<u8>> = names
            .iter()
            .map(|n| Name::parse(n).unwrap().as_wire().to_vec())
            .collect();
        let mut by_key = wires.clone();
        by_key.sort_by(|a, b| {
            order_key(a, apex.wire_len())
                .cmp(&order_key(b, apex.wire_len()))
                .then_with(|| canonical_cmp(a, b))
        });
        wires.sort_by(|a, b| canonical_cmp(a, b));
        assert_eq!(by_key, wires);
    }
}
