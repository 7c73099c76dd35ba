//! Signs a zone file with a new key and writes the signed zone as text:
//! `sign_zone ORIGIN IN OUT [13|15] [nsec|nsec3|optout] [IN2]`. For
//! checking the signer with other tools (`dnssec-verify`,
//! `ldns-verify-zone`) and timing it (`docs/benchmarks/signing.md`), as
//! an offline signer: `load_and_sign_to_text` writes each batch's lines as
//! it signs them (the server builds the signed zone it serves from the same
//! batches, `sign_zone_after`). With IN2, a new
//! version of the zone, IN2 is then signed as the server signs a reload
//! (the signatures over RRsets that did not change kept) and that is what
//! OUT gets; the CPU seconds of each step are printed.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Mutex, mpsc};
use std::time::Instant;

use heron_dnssec::keys::{Algorithm, KeyRole, SigningKey};
use heron_dnssec::sign::{
    Denial, SignConfig, SignError, Signed, ZoneKey, load_and_sign_to_text, sign_zone_after,
};
use heron_proto::{Name, RType};
use heron_zone::Zone;
use heron_zone::zone::{LineWriter, Node};

/// The allocator the server runs on, so that the figures are the server's.
#[global_allocator]
static ALLOCATOR: heron_sys::memory::ServerAllocator = heron_sys::memory::ServerAllocator;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: sign_zone ORIGIN IN OUT [13|15] [nsec|nsec3|optout] [IN2]");
        std::process::exit(2);
    }
    let origin = Name::parse(&args[1]).expect("an origin");
    let algorithm = args
        .get(4)
        .and_then(|a| a.parse().ok())
        .and_then(Algorithm::from_number)
        .unwrap_or(Algorithm::EcdsaP256Sha256);
    let denial = match args.get(5).map(String::as_str) {
        Some("nsec3") | Some("optout") => Denial::Nsec3 {
            iterations: 0,
            salt: Vec::new(),
            opt_out: args[5] == "optout",
        },
        _ => Denial::Nsec,
    };
    let (key, _) = SigningKey::generate(algorithm).expect("a key");
    let keys = vec![ZoneKey::new(key, KeyRole::Csk)];
    let config = SignConfig {
        denial,
        dnskey_ttl: 3600,
        validity: 14 * 86400,
        jitter: 5 * 86400,
        inception_offset: 3600,
        refresh: 5 * 86400,
        serial: None,
    };
    let sign = |file: &str, previous: Option<&Zone>| -> Signed {
        let started = (Instant::now(), cpu_seconds());
        let loaded = heron_zone::load_zone_file_to_sign(std::path::Path::new(file), &origin)
            .unwrap_or_else(|p| panic!("{p:?}"));
        let now = heron_proto::time::unix_now();
        let signed = sign_zone_after(loaded.zone, previous, &keys, &config, now);
        let signed = signed.expect("signed");
        eprintln!(
            "{file}: load+sign {:.3} s wall {:.2} s CPU: signatures {} kept {} records {}",
            started.0.elapsed().as_secs_f64(),
            cpu_seconds() - started.1,
            signed.signatures,
            signed.reused,
            signed.zone.record_count()
        );
        signed
    };
    let Some(next) = args.get(6) else {
        // A whole signing, written as it is made: what `kzonesign` and
        // the other offline signers are timed doing.
        let started = (Instant::now(), cpu_seconds());
        let mut out = std::io::BufWriter::new(std::fs::File::create(&args[3]).expect("OUT"));
        let load = || {
            let loaded =
                heron_zone::load_zone_file_to_sign(std::path::Path::new(&args[2]), &origin);
            loaded
                .map(|l| l.zone)
                .map_err(|p| SignError(format!("{p:?}")))
        };
        let now = heron_proto::time::unix_now();
        let written = load_and_sign_to_text(load, &keys, &config, now, &mut out);
        let written = written.expect("signed");
        eprintln!(
            "{}: load+sign+write {:.3} s wall {:.2} s CPU: signatures {} records {}",
            args[2],
            started.0.elapsed().as_secs_f64(),
            cpu_seconds() - started.1,
            written.signatures,
            written.records
        );
        eprintln!(
            "signed zone: {} octets of records in wire form (uncompressed)",
            written.wire_octets
        );
        return;
    };
    let signed = sign(&args[2], None);
    let signed = sign(next, Some(&signed.zone));
    let wire = write_text(&signed.zone, &args[3]);
    eprintln!("signed zone: {wire} octets of records in wire form (uncompressed)");
}

/// Writes `zone` as text to `path`; the octets of its records in wire
/// form, uncompressed (owner, type, class, TTL, RDATA length, RDATA).
/// Blocks of nodes are formatted on every core and written in order (on
/// one thread the text took a tenth of signing 200,000 records).
fn write_text(zone: &Zone, path: &str) -> usize {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).expect("OUT"));
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads == 1 || zone.node_count() <= PARALLEL_BLOCKS * NODES_PER_BLOCK {
        return write_in_order(zone, out);
    }
    let (jobs, next_job) = mpsc::sync_channel::<(usize, Vec<Node>)>(2 * threads);
    let next_job = Mutex::new(next_job);
    let (done, formatted) = mpsc::sync_channel::<(usize, Vec<u8>, usize)>(2 * threads);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let (next_job, done) = (&next_job, done.clone());
            scope.spawn(move || {
                while let Ok((seq, nodes)) = next_job.lock().expect("a job").recv() {
                    let (text, wire) = format_nodes(&nodes);
                    done.send((seq, text, wire)).expect("the writer waits");
                }
            });
        }
        drop(done);
        let writer = scope.spawn(move || {
            let (mut wire, mut waiting, mut next) = (0, BTreeMap::new(), 0);
            for (seq, text, octets) in formatted {
                waiting.insert(seq, (text, octets));
                while let Some((text, octets)) = waiting.remove(&next) {
                    out.write_all(&text).expect("write");
                    (wire, next) = (wire + octets, next + 1);
                }
            }
            out.flush().expect("write");
            wire
        });
        let mut nodes = zone.nodes_in_canonical_order().peekable();
        let mut seq = 0;
        while nodes.peek().is_some() {
            let block: Vec<Node> = nodes.by_ref().take(NODES_PER_BLOCK).collect();
            jobs.send((seq, block)).expect("a formatter waits");
            seq += 1;
        }
        drop(jobs);
        writer.join().expect("written")
    })
}

/// Nodes formatted at a time.
const NODES_PER_BLOCK: usize = 2048;

/// Zones of more blocks than this are formatted on every core. Below, the
/// threads cost more than they save: the root-like zone (3,000 nodes)
/// took 3.3 ms on two threads, 2.1 ms on one.
const PARALLEL_BLOCKS: usize = 8;

/// [`write_text`] on this thread alone.
fn write_in_order(zone: &Zone, mut out: impl Write) -> usize {
    let nodes: Vec<Node> = zone.nodes_in_canonical_order().collect();
    let mut wire = 0;
    for block in nodes.chunks(NODES_PER_BLOCK) {
        let (text, octets) = format_nodes(block);
        out.write_all(&text).expect("write");
        wire += octets;
    }
    out.flush().expect("write");
    wire
}

/// The text of `nodes`' records, and their octets in wire form.
fn format_nodes(nodes: &[Node]) -> (Vec<u8>, usize) {
    let (mut text, mut wire, mut lines) = (Vec::new(), 0, LineWriter::new());
    for node in nodes {
        let owner_len = node.owner_wire().len();
        lines.start(node);
        for rrset in node.rrsets() {
            let sigs = rrset
                .sigs()
                .map(|rdata| (RType::RRSIG, rrset.sig_ttl(), rdata));
            let records = rrset
                .rdatas()
                .map(|rdata| (rrset.rtype, rrset.ttl(), rdata));
            for (rtype, ttl, rdata) in records.chain(sigs) {
                wire += owner_len + 10 + rdata.len();
                lines.record(&mut text, rtype, ttl, &rdata);
            }
        }
    }
    (text, wire)
}

/// CPU seconds (user and system) this process has used, from
/// `/proc/self/stat` (clock ticks of 1/100 s); 0 where there is none.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    // After the command: state is field 3, utime 14 and stime 15.
    let ticks = |i: usize| fields.get(i - 3).and_then(|f| f.parse::<u64>().ok());
    (ticks(14).unwrap_or(0) + ticks(15).unwrap_or(0)) as f64 / 100.0
}
