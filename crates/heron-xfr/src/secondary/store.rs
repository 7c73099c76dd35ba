//! A received zone on disk, so that a restart serves it without a transfer.
//!
//! The zone is written as an RFC 1035 master file that
//! [`heron_zone::load_zone_file`] reads back to the same zone: `$ORIGIN`,
//! then one record a line with an absolute owner, TTL, class, type and
//! presentation RDATA ([`rdata::format_text`], RFC 3597 `\#` form for types
//! it does not know); the SOA first, the rest in canonical order; sealed
//! ([`seal`]) by a digest on its last line.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use heron_proto::{RType, rdata};
use heron_zone::Zone;
use heron_zone::zone::Node;

use crate::disk::{folder, keep_existing, tmp_path};
use crate::secondary::seal;

/// Which of `files` exist, in their order; a folder holding many of them
/// is listed once rather than asked about file by file (100,000 zones with
/// no kept copies yet would cost 100,000 failed lookups at startup).
pub fn which_exist(files: &[&Path]) -> Vec<bool> {
    let mut exists = vec![false; files.len()];
    let numbered: Vec<(usize, &Path)> = files.iter().copied().enumerate().collect();
    for (i, _) in keep_existing(numbered, |(_, path)| path) {
        exists[i] = true;
    }
    exists
}

/// Writes `zone` to `path` atomically: to `path.tmp` first, synced, then
/// renamed over `path` (its folder created if need be), and the folder
/// synced, so that after a crash `path` holds either the old file or the
/// whole new one.
pub fn write_zone_file(zone: &Zone, path: &Path) -> io::Result<()> {
    write_file(zone, path, true)
}

/// [`write_zone_file`] without the seal: for a file an operator edits
/// (a zone written back after dynamic updates), where a seal's digest
/// would go stale at the first edit and say nothing.
pub fn write_plain_zone_file(zone: &Zone, path: &Path) -> io::Result<()> {
    write_file(zone, path, false)
}

fn write_file(zone: &Zone, path: &Path, sealed: bool) -> io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = tmp_path(path);
    let result = write_synced(zone, &tmp, sealed).and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    sync_dir(path)
}

fn write_synced(zone: &Zone, tmp: &Path, sealed: bool) -> io::Result<()> {
    let mut out = BufWriter::new(File::create(tmp)?);
    match sealed {
        true => write_zone(zone, &mut out)?,
        false => {
            writeln!(out, "{}", first_line(zone))?;
            write_records(zone, &mut out)?;
        }
    }
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()
}

/// Makes the rename durable.
fn sync_dir(path: &Path) -> io::Result<()> {
    File::open(folder(path))?.sync_all()
}

/// The zone as master-file text, sealed ([`seal`]): a copy the disk
/// garbled is not read back as the zone.
pub fn write_zone(zone: &Zone, out: &mut impl Write) -> io::Result<()> {
    seal::write_sealed(out, &first_line(zone), |out| write_records(zone, out))
}

fn first_line(zone: &Zone) -> String {
    format!("; zone {} serial {}", zone.origin(), zone.serial())
}

fn write_records(zone: &Zone, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "$ORIGIN {}", zone.origin())?;
    let soa = zone.soa();
    write_record(out, zone.apex(), RType::SOA, soa.ttl(), &soa.first_rdata())?;
    let nodes = zone.nodes_in_canonical_order();
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

fn write_record(
    out: &mut dyn Write,
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

    #[test]
    fn which_exist_answers_in_order_whether_listed_or_looked_up() {
        let dir = tempfile::tempdir().unwrap();
        // Enough in one folder to be listed, and one alone to be looked up.
        let many: Vec<_> = (0..40).map(|i| dir.path().join(format!("z{i}"))).collect();
        let alone = dir.path().join("sub/alone");
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        for p in many.iter().step_by(3).chain([&alone]) {
            std::fs::write(p, "").unwrap();
        }
        let mut files: Vec<&Path> = many.iter().map(|p| p.as_path()).collect();
        files.insert(7, &alone);
        let expected: Vec<bool> = files.iter().map(|p| p.exists()).collect();
        assert_eq!(which_exist(&files), expected);
        assert_eq!(expected.iter().filter(|&&e| e).count(), 15);
        assert!(which_exist(&[]).is_empty());
    }
}
