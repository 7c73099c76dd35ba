use super::*;
use crate::journal::testing::{serials, soa, step};
use crate::journal::{DEFAULT_MAX_BYTES, diff_size};
use heron_proto::Name;
use proptest::prelude::*;

fn origin() -> Name {
    Name::parse("z.test").unwrap()
}

fn record(owner: &str, rtype: RType, rdata: &[u8]) -> DiffRecord {
    DiffRecord {
        owner: Name::parse(owner).unwrap(),
        rtype,
        ttl: 300,
        rdata: rdata.to_vec(),
    }
}

/// A step with records deleted and added, owners of several lengths.
fn rich_step(from: u32, to: u32) -> ZoneDiff {
    ZoneDiff {
        old_soa: soa(from),
        new_soa: soa(to),
        deleted: vec![
            record("www.z.test", RType::A, &[192, 0, 2, from as u8]),
            record("z.test", RType::TXT, b"\x05hello"),
        ],
        added: vec![
            record("www.z.test", RType::A, &[192, 0, 2, to as u8]),
            record("a.long.name.below.z.test", RType::AAAA, &[0x20; 16]),
            record("z.test", RType(65280), &[]),
        ],
    }
}

fn chain(steps: u32) -> Vec<Arc<ZoneDiff>> {
    (1..=steps).map(|s| Arc::new(rich_step(s, s + 1))).collect()
}

/// The bytes of a journal file holding `diffs`.
fn file_bytes(diffs: &[Arc<ZoneDiff>]) -> Vec<u8> {
    let mut out = header(&origin());
    for d in diffs {
        encode_entry(d, &mut out).unwrap();
    }
    out
}

/// Where each entry of `file_bytes(diffs)` starts.
fn entry_offsets(diffs: &[Arc<ZoneDiff>]) -> Vec<u64> {
    let mut at = header(&origin()).len() as u64;
    diffs
        .iter()
        .map(|d| {
            let start = at;
            at += entry_len(d);
            start
        })
        .collect()
}

/// Reads `bytes` as a journal file: its steps, and where and why reading
/// stopped early.
fn read(bytes: &[u8]) -> Result<(Vec<ZoneDiff>, Option<Damage>, u64), HeaderError> {
    let mut reader = JournalReader::new(bytes, bytes.len() as u64)?;
    let diffs: Vec<ZoneDiff> = (&mut reader).collect();
    Ok((diffs, reader.damage().cloned(), reader.good_len()))
}

fn owned(diffs: &[Arc<ZoneDiff>]) -> Vec<ZoneDiff> {
    diffs.iter().map(|d| (**d).clone()).collect()
}

#[test]
fn the_journal_file_sits_next_to_the_zone_file() {
    assert_eq!(
        path_for(Path::new("/var/lib/heron/example.com.zone")),
        Path::new("/var/lib/heron/example.com.zone.jnl")
    );
}

#[test]
fn steps_read_back_as_they_were_written() {
    let diffs = chain(3);
    let bytes = file_bytes(&diffs);
    let (read_back, damage, good) = read(&bytes).unwrap();
    assert_eq!(read_back, owned(&diffs));
    assert_eq!((damage, good), (None, bytes.len() as u64));
    let lens: u64 = diffs.iter().map(|d| entry_len(d)).sum();
    assert_eq!(lens + header(&origin()).len() as u64, bytes.len() as u64);
}

#[test]
fn appends_and_whole_files_read_back_through_restore() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("z.zone.jnl");
    let diffs = chain(4);
    // Only the first append makes the file (and changes its folder).
    assert!(!append(&path, &origin(), &diffs[..1]).unwrap(), "new");
    assert!(
        append(&path, &origin(), &diffs[1..]).unwrap(),
        "held entries"
    );
    let restored = restore(&path, &origin(), 5, DEFAULT_MAX_BYTES).unwrap();
    assert_eq!(
        serials(restored.journal.diffs()),
        [(1, 2), (2, 3), (3, 4), (4, 5)]
    );
    assert_eq!(restored.damage, None);
    assert_eq!(restored.good_len, std::fs::metadata(&path).unwrap().len());

    write_file(&path, &origin(), &diffs[2..]).unwrap();
    let restored = restore(&path, &origin(), 5, DEFAULT_MAX_BYTES).unwrap();
    assert_eq!(serials(restored.journal.diffs()), [(3, 4), (4, 5)]);
    assert_eq!(
        restored.journal.chain(3, 5).unwrap()[0].added,
        diffs[2].added
    );
}

#[test]
fn a_new_file_is_created_only_where_there_is_none() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("z.zone.jnl");
    let diffs = chain(2);
    create_file(&path, &origin(), &diffs).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), file_bytes(&diffs));
    let again = create_file(&path, &origin(), &diffs[..1]).unwrap_err();
    assert_eq!(again.kind(), io::ErrorKind::AlreadyExists);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        file_bytes(&diffs),
        "untouched"
    );
}

#[test]
fn a_torn_last_entry_is_dropped_and_cut_before_the_next_append() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("z.zone.jnl");
    let diffs = chain(3);
    let bytes = file_bytes(&diffs);
    let third = entry_offsets(&diffs)[2];
    // A crash in the middle of writing the third entry.
    std::fs::write(&path, &bytes[..bytes.len() - 5]).unwrap();
    let restored = restore(&path, &origin(), 3, DEFAULT_MAX_BYTES).unwrap();
    assert_eq!(serials(restored.journal.diffs()), [(1, 2), (2, 3)]);
    let damage = restored.damage.unwrap();
    assert_eq!((damage.offset, damage.what), (third, DamageKind::Torn));
    assert_eq!(restored.good_len, third);

    // Cut there, the next append is read again.
    File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(restored.good_len)
        .unwrap();
    append(&path, &origin(), &diffs[2..]).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    // The head alone of an entry is torn too.
    let (read_back, damage, _) = read(&bytes[..third as usize + 3]).unwrap();
    assert_eq!(read_back.len(), 2);
    assert_eq!(damage.unwrap().what, DamageKind::Torn);
}

#[test]
fn a_flipped_byte_stops_reading_at_its_entry() {
    let diffs = chain(3);
    let offsets = entry_offsets(&diffs);
    for (at, kept) in [
        (offsets[1] as usize + 20, 1), // body of the second entry
        (offsets[1] as usize + 5, 1),  // its checksum
        (offsets[2] as usize + 9, 2),  // body of the third
    ] {
        let mut bytes = file_bytes(&diffs);
        bytes[at] ^= 0x10;
        let (read_back, damage, good) = read(&bytes).unwrap();
        assert_eq!(read_back, owned(&diffs[..kept]), "flip at {at}");
        let damage = damage.unwrap();
        assert_eq!(damage.what, DamageKind::Checksum, "flip at {at}");
        assert_eq!((damage.offset, good), (offsets[kept], offsets[kept]));
    }
}

#[test]
fn a_truncated_header_is_no_journal() {
    let bytes = file_bytes(&chain(1));
    let header_len = header(&origin()).len();
    for len in [0, 5, 8, 10, header_len - 1] {
        assert!(
            matches!(read(&bytes[..len]), Err(HeaderError::Short)),
            "{len} octets"
        );
    }
    let (diffs, damage, _) = read(&bytes[..header_len]).unwrap();
    assert!(
        diffs.is_empty() && damage.is_none(),
        "a header alone is empty"
    );
}

#[test]
fn garbage_and_other_versions_are_no_journal() {
    let garbage = b"$ORIGIN z.test.\n@ SOA ns h 1 2 3 4 5\n".to_vec();
    assert!(matches!(read(&garbage), Err(HeaderError::Magic)));
    let mut next_version = file_bytes(&chain(1));
    next_version[9] = 2;
    assert!(matches!(read(&next_version), Err(HeaderError::Version(2))));
    let mut bad_origin = header(&origin());
    bad_origin[10] = 0xC0; // a compression pointer
    assert!(matches!(read(&bad_origin), Err(HeaderError::Origin)));
    // A label length of 63 over and over: stopped at 255 octets.
    let mut endless = MAGIC.to_vec();
    endless.extend_from_slice(&VERSION.to_be_bytes());
    endless.extend(std::iter::repeat_n(63, 10_000));
    assert!(matches!(read(&endless), Err(HeaderError::Origin)));
}

#[test]
fn lengths_past_the_end_of_the_file_or_the_limit_are_damage() {
    let diffs = chain(2);
    let second = entry_offsets(&diffs)[1] as usize;
    let mut bytes = file_bytes(&diffs);
    let set_len = |bytes: &mut Vec<u8>, len: u32| {
        bytes[second..second + 4].copy_from_slice(&len.to_be_bytes());
    };
    for (len, what) in [
        ((bytes.len() - second) as u32, DamageKind::Torn),
        (MAX_ENTRY_BYTES, DamageKind::Torn),
        (
            MAX_ENTRY_BYTES + 1,
            DamageKind::TooLong(MAX_ENTRY_BYTES + 1),
        ),
        (u32::MAX, DamageKind::TooLong(u32::MAX)),
    ] {
        set_len(&mut bytes, len);
        let (read_back, damage, good) = read(&bytes).unwrap();
        assert_eq!(read_back, owned(&diffs[..1]), "length {len}");
        assert_eq!(damage.unwrap().what, what, "length {len}");
        assert_eq!(good, second as u64);
    }
}

#[test]
fn counts_and_lengths_inside_an_entry_are_checked() {
    // A record count far beyond the entry, with a valid checksum.
    let mut body = Vec::new();
    put_record(&soa(1), &mut body).unwrap();
    put_record(&soa(2), &mut body).unwrap();
    body.extend_from_slice(&u32::MAX.to_be_bytes());
    body.extend_from_slice(&0u32.to_be_bytes());
    let entry = |body: &[u8]| {
        let mut out = header(&origin());
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(&checksum(body).to_be_bytes());
        out.extend_from_slice(body);
        out
    };
    let (_, damage, _) = read(&entry(&body)).unwrap();
    assert!(matches!(damage.unwrap().what, DamageKind::Malformed(_)));
    // A step whose first record is not an SOA.
    let mut body = Vec::new();
    put_record(&record("z.test", RType::A, &[192, 0, 2, 1]), &mut body).unwrap();
    put_record(&soa(2), &mut body).unwrap();
    body.extend_from_slice(&[0; 8]);
    let (_, damage, _) = read(&entry(&body)).unwrap();
    assert!(matches!(damage.unwrap().what, DamageKind::Malformed(_)));
    // An empty body.
    let (_, damage, _) = read(&entry(&[])).unwrap();
    assert!(matches!(damage.unwrap().what, DamageKind::Malformed(_)));
}

#[test]
fn a_history_that_does_not_end_at_the_served_serial_is_discarded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("z.zone.jnl");
    write_file(&path, &origin(), &chain(3)).unwrap();
    let ok = restore(&path, &origin(), 4, DEFAULT_MAX_BYTES).unwrap();
    assert_eq!(ok.journal.newest_serial(), Some(4));
    let err = restore(&path, &origin(), 5, DEFAULT_MAX_BYTES).unwrap_err();
    assert!(
        matches!(
            err,
            StartOver::Mismatch {
                newest: 4,
                served: 5,
                damage: None,
                past_served: false,
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "it ends at serial 4 but the zone is at serial 5"
    );
    let other = Name::parse("other.test").unwrap();
    assert!(matches!(
        restore(&path, &other, 4, DEFAULT_MAX_BYTES),
        Err(StartOver::OtherZone(_))
    ));
    // A step of another zone, in a file with this zone's header.
    let mut stray = rich_step(4, 5);
    stray.new_soa.owner = other.clone();
    let strayed = [chain(3), vec![Arc::new(stray)]].concat();
    write_file(&path, &origin(), &strayed).unwrap();
    let err = restore(&path, &origin(), 5, DEFAULT_MAX_BYTES).unwrap_err();
    assert_eq!(err.to_string(), "it holds the journal of other.test.");
    // A hole in the chain.
    let holed = vec![Arc::new(rich_step(1, 2)), Arc::new(rich_step(3, 4))];
    write_file(&path, &origin(), &holed).unwrap();
    let err = restore(&path, &origin(), 4, DEFAULT_MAX_BYTES).unwrap_err();
    assert!(
        matches!(
            err,
            StartOver::Gap {
                newest: 2,
                next_from: 3
            }
        ),
        "{err:?}"
    );
    // Not a journal.
    std::fs::write(&path, "hello").unwrap();
    let err = restore(&path, &origin(), 4, DEFAULT_MAX_BYTES).unwrap_err();
    assert!(
        matches!(err, StartOver::Unreadable(HeaderError::Short)),
        "{err:?}"
    );
}

#[test]
fn a_torn_tail_that_hides_the_served_serial_is_a_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("z.zone.jnl");
    let bytes = file_bytes(&chain(3));
    std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
    let err = restore(&path, &origin(), 4, DEFAULT_MAX_BYTES).unwrap_err();
    assert!(err.to_string().contains("reading stopped early"), "{err}");
}

/// Does to the file what the server's writer thread does, without its
/// batching and syncs.
fn apply(path: &Path, change: FileChange) {
    match change {
        FileChange::Append { step, .. } => {
            append(path, &origin(), &[step]).unwrap();
        }
        FileChange::Replace(diffs) if diffs.is_empty() => {
            let _ = std::fs::remove_file(path);
        }
        FileChange::Replace(diffs) => write_file(path, &origin(), &diffs).unwrap(),
        FileChange::Truncate(entries) => truncate(path, &origin(), entries).unwrap(),
    }
}

#[test]
fn compaction_keeps_exactly_the_bounded_history() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("z.zone.jnl");
    let one = entry_len(&step(1, 2, 10));
    let max_bytes = 4 * diff_size(&step(1, 2, 10));
    let mut journal = Journal::new(max_bytes);
    let mut size = FileSize::default();
    let mut longest = 0;
    let mut compactions = 0;
    for serial in 1..=100 {
        let d = Arc::new(step(serial, serial + 1, 10));
        let continued = journal.record(d.clone());
        let change = size.recorded(&journal, &d, continued, true);
        compactions += matches!(change, FileChange::Replace(ref v) if v.len() > 1) as u32;
        apply(&path, change);
        let len = std::fs::metadata(&path).unwrap().len();
        longest = longest.max(len);
        // What a restart would find: exactly what is kept in memory.
        let restored = restore(&path, &origin(), serial + 1, max_bytes).unwrap();
        assert_eq!(
            serials(restored.journal.diffs()),
            serials(journal.diffs()),
            "after step {serial}"
        );
        assert_eq!(restored.size, size, "after step {serial}");
    }
    assert_eq!(journal.len(), 4);
    assert!(compactions > 5, "{compactions}");
    let bound = header(&origin()).len() as u64 + 2 * max_bytes as u64 + one;
    assert!(longest <= bound, "{longest} > {bound}");
}

#[test]
fn a_restart_or_a_step_too_large_replaces_the_file() {
    let mut journal = Journal::new(4 * diff_size(&step(1, 2, 1)));
    let mut size = FileSize::default();
    let mut record = |d: ZoneDiff| {
        let d = Arc::new(d);
        let continued = journal.record(d.clone());
        size.recorded(&journal, &d, continued, true)
    };
    let replaced = |c: &FileChange| match c {
        FileChange::Replace(v) => serials(v.iter()),
        FileChange::Append { .. } | FileChange::Truncate(_) => panic!("{c:?}"),
    };
    assert_eq!(replaced(&record(step(1, 2, 1))), [(1, 2)], "a new history");
    assert!(matches!(record(step(2, 3, 1)), FileChange::Append { .. }));
    assert_eq!(replaced(&record(step(7, 8, 1))), [(7, 8)], "a gap");
    assert_eq!(replaced(&record(step(8, 9, 100))), [], "too large to keep");
    assert!(matches!(size.cleared(), FileChange::Replace(v) if v.is_empty()));
}

/// Re-encodes what a reader accepted: the same octets, so nothing it
/// accepts is read differently from what was written.
fn reencoded(origin: &Name, diffs: &[ZoneDiff]) -> Vec<u8> {
    let mut out = header(origin);
    for d in diffs {
        encode_entry(d, &mut out).unwrap();
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn any_bytes_are_read_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let mut input = header(&origin());
        input.extend_from_slice(&bytes);
        for data in [&bytes[..], &input[..]] {
            if let Ok(mut reader) = JournalReader::new(data, data.len() as u64) {
                let diffs: Vec<ZoneDiff> = (&mut reader).collect();
                let good = reader.good_len() as usize;
                prop_assert!(good <= data.len());
                prop_assert_eq!(reencoded(reader.origin(), &diffs), &data[..good]);
                prop_assert_eq!(reader.damage().is_none(), good == data.len());
            }
        }
    }

    #[test]
    fn damage_keeps_exactly_the_entries_before_it(
        steps in 1u32..6,
        at in any::<prop::sample::Index>(),
        flip in 1u8..=255,
        cut in any::<bool>(),
    ) {
        let diffs = chain(steps);
        let mut bytes = file_bytes(&diffs);
        let header_len = header(&origin()).len();
        let at = header_len + at.index(bytes.len() - header_len);
        if cut {
            bytes.truncate(at);
        } else {
            bytes[at] ^= flip;
        }
        let offsets = entry_offsets(&diffs);
        let hit = offsets.iter().rposition(|&o| o as usize <= at).unwrap();
        let (read_back, damage, good) = read(&bytes).unwrap();
        prop_assert_eq!(read_back, owned(&diffs[..hit]));
        prop_assert_eq!(good, offsets[hit]);
        // A cut right before an entry leaves a shorter, whole file.
        let whole = cut && at == offsets[hit] as usize;
        prop_assert_eq!(damage.map(|d| d.offset), (!whole).then_some(offsets[hit]));
    }
}

/// Writes the seeds of the `journal_file` fuzz target (fuzz/seeds/):
/// `cargo test -p heron-zone write_fuzz_seeds -- --ignored`. The first
/// octet is the target's mode: 1 sets the checksums before reading.
#[test]
#[ignore]
fn write_fuzz_seeds() {
    let whole = file_bytes(&chain(3));
    let second = entry_offsets(&chain(3))[1] as usize;
    let mut flipped = whole.clone();
    flipped[second + 12] ^= 0x40;
    let seeds: [(&str, u8, &[u8]); 6] = [
        ("three-steps", 0, &whole),
        ("three-steps-checksums-set", 1, &whole),
        ("torn", 0, &whole[..whole.len() - 7]),
        ("header-only", 0, &header(&origin())),
        ("flipped", 0, &flipped),
        ("flipped-checksums-set", 1, &flipped),
    ];
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/journal_file");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, mode, file) in seeds {
        std::fs::write(dir.join(name), [&[mode][..], file].concat()).unwrap();
    }
}
