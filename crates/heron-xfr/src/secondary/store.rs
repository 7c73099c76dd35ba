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

use heron_proto::RType;
use heron_zone::Zone;
use heron_zone::zone::LineWriter;

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
    write_file(zone, path, Form::Sealed)
}

/// [`write_zone_file`] without the seal: for a file an operator edits
/// (a zone written back after dynamic updates), where a seal's digest
/// would go stale at the first edit and say nothing.
pub fn write_plain_zone_file(zone: &Zone, path: &Path) -> io::Result<()> {
    write_file(zone, path, Form::Plain(&|_| false))
}

/// [`write_plain_zone_file`] of a zone a signer made, without what the
/// signer makes: the RRSIGs and the types `from_signer` names. The file
/// an operator edits of a zone the server signs holds the zone's own
/// data only: the signer makes the rest again when it is read, and a
/// stale signature, key or digest in it could outlive the signing.
pub fn write_unsigned_zone_file(
    zone: &Zone,
    path: &Path,
    from_signer: fn(RType) -> bool,
) -> io::Result<()> {
    write_file(
        zone,
        path,
        Form::Plain(&|t| t == RType::RRSIG || from_signer(t)),
    )
}

/// How a zone is written: sealed with every record, or plain with the
/// types the function names left out.
#[derive(Clone, Copy)]
enum Form<'f> {
    Sealed,
    Plain(&'f dyn Fn(RType) -> bool),
}

fn write_file(zone: &Zone, path: &Path, form: Form) -> io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = tmp_path(path);
    let kept = matches!(form, Form::Plain(_)).then(|| std::fs::metadata(path).ok());
    let result = write_synced(zone, &tmp, form)
        .and_then(|()| keep_attributes(kept.flatten(), &tmp))
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    sync_dir(path)
}

fn write_synced(zone: &Zone, tmp: &Path, form: Form) -> io::Result<()> {
    let mut out = BufWriter::new(File::create(tmp)?);
    match form {
        Form::Sealed => write_zone(zone, &mut out)?,
        Form::Plain(left_out) => {
            writeln!(out, "{}", first_line(zone))?;
            write_records(zone, &mut out, left_out)?;
        }
    }
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()
}

/// An operator's zone file written back keeps the mode, owner and group
/// it had (`old`: its metadata, if it was there): black-box finding, a
/// file kept from other users (640 root:daemon) became world-readable
/// (644 root:root) at the first update. Only root may give a file away:
/// where that fails the file stays ours, with the old mode.
fn keep_attributes(old: Option<std::fs::Metadata>, tmp: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let Some(old) = old else {
        return Ok(());
    };
    let _ = std::os::unix::fs::chown(tmp, Some(old.uid()), Some(old.gid()));
    std::fs::set_permissions(tmp, old.permissions())
}

/// Makes the rename durable.
fn sync_dir(path: &Path) -> io::Result<()> {
    File::open(folder(path))?.sync_all()
}

/// The zone as master-file text, sealed ([`seal`]): a copy the disk
/// garbled is not read back as the zone.
pub fn write_zone(zone: &Zone, out: &mut impl Write) -> io::Result<()> {
    seal::write_sealed(out, &first_line(zone), |out| {
        write_records(zone, out, &|_| false)
    })
}

fn first_line(zone: &Zone) -> String {
    format!("; zone {} serial {}", zone.origin(), zone.serial())
}

fn write_records(
    zone: &Zone,
    out: &mut dyn Write,
    left_out: &dyn Fn(RType) -> bool,
) -> io::Result<()> {
    writeln!(out, "$ORIGIN {}", zone.origin())?;
    let (mut lines, mut text) = (LineWriter::new(), Vec::new());
    let soa = zone.soa();
    lines.start(&zone.apex());
    lines.record(&mut text, RType::SOA, soa.ttl(), &soa.first_rdata());
    let apex = zone.apex().id();
    // The SOA is written first: the apex's is left out where it falls.
    let apex_left_out = |t: RType| t == RType::SOA || left_out(t);
    for node in zone.nodes_in_canonical_order() {
        match node.id() == apex {
            true => lines.node(&mut text, &node, &apex_left_out),
            false => lines.node(&mut text, &node, left_out),
        }
        if text.len() >= FLUSH_AT {
            out.write_all(&text)?;
            text.clear();
        }
    }
    out.write_all(&text)
}

/// Octets of lines gathered before they are written.
const FLUSH_AT: usize = 64 << 10;

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

    /// A zone file written back keeps the mode, and (as root) the owner
    /// and group, it had; a kept copy is ours (black-box finding: 640
    /// root:daemon became 644 root:root at the first update).
    #[test]
    fn a_written_back_file_keeps_its_mode_owner_and_group() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let origin = heron_proto::Name::parse("w.test").unwrap();
        let text = "$ORIGIN w.test.\n$TTL 60\n@ SOA ns h 7 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n";
        let zone = heron_zone::load_zone_str(text, "w.zone", &origin)
            .unwrap()
            .zone;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.zone");
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        // Only root may give a file away.
        let root = std::os::unix::fs::chown(&path, Some(0), Some(1)).is_ok();
        write_plain_zone_file(&zone, &path).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, 0o640);
        if root {
            assert_eq!((meta.uid(), meta.gid()), (0, 1));
        }
        assert!(
            std::fs::read_to_string(&path)
                .unwrap()
                .contains("192.0.2.1")
        );
    }

    /// The unsigned form keeps the zone's own data, delegation DS and
    /// glue included, and leaves out every signature and what the
    /// function names; the file reads back as a zone.
    #[test]
    fn an_unsigned_file_holds_the_data_without_the_signers_records() {
        let origin = heron_proto::Name::parse("w.test").unwrap();
        let text = "$ORIGIN w.test.\n$TTL 60\n@ SOA ns h 7 2 3 4 5\n@ NS ns\n\
            @ DNSKEY 257 3 13 AQID\n@ NSEC w.test. SOA NS DNSKEY NSEC RRSIG\n\
            @ RRSIG SOA 13 2 60 20300101000000 20200101000000 1 w.test. AQID\n\
            @ ZONEMD 7 1 1 000102030405060708090a0b0c0d0e0f000102030405060708090a0b0c0d0e0f000102030405060708090a0b0c0d0e0f\n\
            ns A 192.0.2.1\nns RRSIG A 13 2 60 20300101000000 20200101000000 1 w.test. AQID\n\
            sub NS ns.sub\nsub DS 1 13 2 000102030405060708090a0b0c0d0e0f000102030405060708090a0b0c0d0e0f\nns.sub A 192.0.2.2\n";
        let zone = heron_zone::load_zone_str(text, "w.zone", &origin)
            .unwrap()
            .zone;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.zone");
        let from_signer = |t| matches!(t, RType::DNSKEY | RType::NSEC | RType::ZONEMD);
        write_unsigned_zone_file(&zone, &path, from_signer).unwrap();
        let written = std::fs::read_to_string(&path).unwrap();
        for gone in ["DNSKEY", "NSEC", "RRSIG", "ZONEMD"] {
            assert!(!written.contains(gone), "{gone}: {written}");
        }
        for kept in [
            "SOA",
            "ns.w.test. 60 IN A",
            "sub.w.test. 60 IN DS",
            "ns.sub.w.test.",
        ] {
            assert!(written.contains(kept), "{kept}: {written}");
        }
        let back = heron_zone::load_zone_file(&path, &origin).unwrap().zone;
        assert_eq!(back.serial(), 7);
        assert_eq!(back.record_count(), 6, "{written}");
        // The plain form keeps everything.
        write_plain_zone_file(&zone, &path).unwrap();
        let plain = std::fs::read_to_string(&path).unwrap();
        assert!(plain.contains("RRSIG") && plain.contains("DNSKEY") && plain.contains("ZONEMD"));
    }
}
