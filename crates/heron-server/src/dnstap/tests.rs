use std::io::Read;
use std::os::unix::net::UnixListener;
use std::process::Command;

use super::*;
use crate::processor::Transport;
use crate::processor::tap::TapSink;

const DNSTAP_READ: &str = "/usr/bin/dnstap-read";

/// A query for `www.example.` A, id 0x1234, and a response to it.
fn exchange(transport: Transport) -> Exchange {
    let mut query = vec![0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    query.extend_from_slice(b"\x03www\x07example\x00\x00\x01\x00\x01");
    let mut response = query.clone();
    response[2] = 0x84;
    Exchange {
        transport,
        peer: "127.0.0.1:40000".parse().unwrap(),
        local: Some("127.0.0.1:53".parse().unwrap()),
        query_time: Duration::new(1_700_000_000, 1),
        time: Duration::new(1_700_000_000, 5),
        zone: Some(Box::from(&b"\x07example\x00"[..])),
        query: query.into(),
        response: Some(response.into()),
    }
}

fn settings(output: Output) -> Settings {
    Settings {
        output,
        identity: b"test-id".to_vec(),
        version: b"heron-test".to_vec(),
        queue_messages: 100,
        queue_bytes: 1 << 20,
    }
}

#[test]
fn a_file_is_read_back_by_dnstap_read() {
    if !std::path::Path::new(DNSTAP_READ).exists() {
        panic!("{DNSTAP_READ} is missing: apt-get install bind9-dnsutils");
    }
    let dir = std::env::temp_dir().join(format!("heron-dnstap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("file.dnstap");
    let writer = Writer::start(settings(Output::File(path.clone()))).unwrap();
    writer.offer(exchange(Transport::Udp));
    writer.offer(exchange(Transport::Tcp));
    writer.offer(exchange(Transport::Tls));
    writer.finish();
    assert_eq!(writer.totals().written, 6);
    let out = Command::new(DNSTAP_READ).arg(&path).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 6, "{text}");
    assert!(
        lines[0].contains(" AQ 127.0.0.1:40000 -> 127.0.0.1:53 UDP"),
        "{text}"
    );
    assert!(
        lines[1].contains(" AR 127.0.0.1:40000 <- 127.0.0.1:53 UDP"),
        "{text}"
    );
    assert!(
        lines[2].contains(" AQ ") && lines[2].contains(" TCP "),
        "{text}"
    );
    // BIND 9.18 prints DOT (3, which the socket test decodes) as UDP.
    assert!(lines[5].contains(" AR "), "{text}");
    assert!(
        lines.iter().all(|l| l.contains("www.example/IN/A")),
        "{text}"
    );
    let yaml = Command::new(DNSTAP_READ)
        .arg("-y")
        .arg(&path)
        .output()
        .unwrap();
    let yaml = String::from_utf8_lossy(&yaml.stdout);
    assert!(yaml.contains("identity: test-id"), "{yaml}");
    assert!(yaml.contains("version: heron-test"), "{yaml}");
    assert!(yaml.contains("type: AUTH_RESPONSE"), "{yaml}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Reads Frame Streams data frames until STOP; returns their payloads.
fn read_data_frames(stream: &mut UnixStream) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    loop {
        let mut len = [0u8; 4];
        stream.read_exact(&mut len).unwrap();
        let len = u32::from_be_bytes(len) as usize;
        if len == 0 {
            let mut rest = [0u8; 8];
            stream.read_exact(&mut rest).unwrap();
            assert_eq!(rest, [0, 0, 0, 4, 0, 0, 0, 3], "STOP");
            return frames;
        }
        let mut payload = vec![0u8; len];
        stream.read_exact(&mut payload).unwrap();
        frames.push(payload);
    }
}

/// Ends `writer` while its reader on `stream` reads to STOP and answers
/// FINISH; the data frames it read.
fn finish_with(writer: &Arc<Writer>, stream: &mut UnixStream) -> Vec<Vec<u8>> {
    let finisher = std::thread::spawn({
        let writer = writer.clone();
        move || writer.finish()
    });
    let frames = read_data_frames(stream);
    let mut finish = Vec::new();
    frame::control(ControlType::Finish, None, &mut finish);
    stream.write_all(&finish).unwrap();
    finisher.join().unwrap();
    frames
}

/// A connection from the writer, handshake made.
fn accept_writer(listener: &UnixListener) -> UnixStream {
    let (mut stream, _) = listener.accept().unwrap();
    let timeout = Some(Duration::from_secs(10));
    stream.set_read_timeout(timeout).unwrap();
    frame::accept(&mut stream).unwrap();
    stream
}

#[test]
fn a_socket_reader_gets_the_handshake_the_frames_and_stop() {
    let dir = std::env::temp_dir().join(format!("heron-dnstap-sock-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("reader.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let writer = Writer::start(settings(Output::Socket(path))).unwrap();
    let mut stream = accept_writer(&listener);
    writer.offer(exchange(Transport::Tls));
    let frames = finish_with(&writer, &mut stream);
    assert_eq!(frames.len(), 2);
    let top = encode::decode::fields(&frames[1]);
    let encode::decode::Value::Bytes(message) = &top[&14] else {
        panic!("no message");
    };
    let message = encode::decode::fields(message);
    assert_eq!(
        message[&1],
        encode::decode::Value::Varint(2),
        "AUTH_RESPONSE"
    );
    assert_eq!(message[&3], encode::decode::Value::Varint(3), "DOT");
    assert_eq!(writer.totals().written, 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_queue_is_bounded_in_exchanges_and_in_bytes() {
    // Nobody listens: nothing leaves the queue.
    let nowhere = std::env::temp_dir().join("heron-dnstap-nobody-listens.sock");
    let mut s = settings(Output::Socket(nowhere.clone()));
    s.queue_messages = 3;
    let writer = Writer::start(s.clone()).unwrap();
    for _ in 0..10 {
        writer.offer(exchange(Transport::Udp));
    }
    let totals = writer.totals();
    assert_eq!((totals.queued, totals.dropped), (3, 14));
    writer.finish();

    let size = exchange(Transport::Udp).size();
    s.queue_messages = 100;
    s.queue_bytes = 2 * size;
    let writer = Writer::start(s).unwrap();
    for _ in 0..5 {
        writer.offer(exchange(Transport::Udp));
    }
    let totals = writer.totals();
    assert_eq!(totals.queued, 2, "at the byte limit");
    assert_eq!(totals.queued_bytes, 2 * size as u64);
    assert_eq!(totals.dropped, 6);
    writer.finish();
}

#[test]
fn a_reader_that_refuses_our_content_type_is_not_written_to() {
    let dir = std::env::temp_dir().join(format!("heron-dnstap-refuse-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("reader.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let writer = Writer::start(settings(Output::Socket(path))).unwrap();
    let (mut stream, _) = listener.accept().unwrap();
    frame::read(&mut stream).unwrap();
    let mut accept = Vec::new();
    frame::control(ControlType::Accept, Some(b"protobuf:other"), &mut accept);
    stream.write_all(&accept).unwrap();
    // The writer hangs up rather than sending START.
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "{rest:?}");
    writer.finish();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_reader_that_never_accepts_is_given_up_on_and_the_queue_counted_dropped() {
    let dir = tempfile_dir("deaf");
    let path = dir.join("reader.sock");
    let _deaf = heron_testkit::deaf_unix_listener(&path);
    let refused = connect_by(&path, Instant::now() + Duration::from_millis(300));
    assert_eq!(refused.unwrap_err().kind(), io::ErrorKind::TimedOut);

    let writer = Writer::start(settings(Output::Socket(path))).unwrap();
    for _ in 0..5 {
        writer.offer(exchange(Transport::Udp));
    }
    let (done, finished) = std::sync::mpsc::channel();
    let finishing = writer.clone();
    std::thread::spawn(move || {
        finishing.finish();
        done.send(())
    });
    // Fails rather than hangs if finish is not bounded.
    finished.recv_timeout(Duration::from_secs(20)).unwrap();
    let totals = writer.totals();
    assert_eq!((totals.written, totals.queued), (0, 0));
    assert_eq!(totals.dropped, 10, "each query and response");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Each read is within its own timeout, but the handshake as a whole is
/// not: the reader's ACCEPT, a byte every 200 ms, takes seconds.
#[test]
fn a_handshake_trickled_a_byte_at_a_time_is_given_up_on() {
    let dir = tempfile_dir("trickle");
    let path = dir.join("reader.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let reader = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        frame::read(&mut stream).unwrap();
        let mut accept = Vec::new();
        frame::control(ControlType::Accept, Some(CONTENT_TYPE), &mut accept);
        for byte in accept {
            if stream.write_all(&[byte]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    let result = handshake(&path, Instant::now() + IO_TIMEOUT);
    assert!(
        result.is_err(),
        "the reader took longer than {IO_TIMEOUT:?}"
    );
    reader.join().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A fresh folder for one test's sockets.
fn tempfile_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("heron-dnstap-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Reads `n` data frames (after the handshake); their payloads.
fn read_frames(stream: &mut UnixStream, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|_| {
            let mut len = [0u8; 4];
            stream.read_exact(&mut len).unwrap();
            let len = u32::from_be_bytes(len) as usize;
            assert_ne!(len, 0, "a data frame, not a control frame");
            let mut payload = vec![0u8; len];
            stream.read_exact(&mut payload).unwrap();
            payload
        })
        .collect()
}

/// Issue 44: during a collector outage, what the writer was writing when
/// the reader went away was lost with it though the queue had room. It
/// is written again to the next reader, and nothing is dropped.
#[test]
fn a_reader_gone_for_a_while_loses_nothing_the_queue_had_room_for() {
    let dir = tempfile_dir("outage");
    let path = dir.join("reader.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let writer = Writer::start(settings(Output::Socket(path.clone()))).unwrap();
    let mut stream = accept_writer(&listener);
    writer.offer(exchange(Transport::Udp));
    assert_eq!(read_frames(&mut stream, 2).len(), 2);
    // The collector goes away.
    drop((stream, listener));
    std::fs::remove_file(&path).unwrap();
    for _ in 0..3 {
        writer.offer(exchange(Transport::Tcp));
        std::thread::sleep(Duration::from_millis(150));
    }
    // And comes back at its path.
    let listener = UnixListener::bind(&path).unwrap();
    let mut stream = accept_writer(&listener);
    let frames = finish_with(&writer, &mut stream);
    assert!(
        frames.len() >= 6,
        "{} frames after the outage",
        frames.len()
    );
    let totals = writer.totals();
    assert_eq!(totals.dropped, 0, "{totals:?}");
    assert_eq!(totals.written, 8, "{totals:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 44: the file could not be rotated. After logrotate renames it,
/// `reopen` ends the renamed file (STOP) and writes on in a new one at
/// the path; with the file still at its path, it writes on in it and
/// empties nothing.
#[test]
fn a_rotated_file_is_ended_and_a_new_one_started_at_its_path() {
    let dir = tempfile_dir("rotate");
    let path = dir.join("queries.dnstap");
    let writer = Writer::start(settings(Output::File(path.clone()))).unwrap();
    let until_written = |n: u64| {
        for _ in 0..500 {
            if writer.totals().written >= n {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("{:?}", writer.totals());
    };
    writer.offer(exchange(Transport::Udp));
    until_written(2);
    // Not moved: a reopen changes nothing.
    writer.reopen();
    writer.offer(exchange(Transport::Udp));
    until_written(4);
    let rotated = dir.join("queries.dnstap.1");
    std::fs::rename(&path, &rotated).unwrap();
    writer.reopen();
    writer.offer(exchange(Transport::Tcp));
    until_written(6);
    writer.finish();
    let read = |file: &std::path::Path| {
        let out = Command::new(DNSTAP_READ).arg(file).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let (old, new) = (read(&rotated), read(&path));
    assert_eq!(
        old.lines().count(),
        4,
        "both exchanges before the move:\n{old}"
    );
    assert!(old.lines().all(|l| l.contains(" UDP ")), "{old}");
    assert_eq!(new.lines().count(), 2, "the one after:\n{new}");
    assert!(new.lines().all(|l| l.contains(" TCP ")), "{new}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Black-box finding: `heron ctl dnstap-reopen` said "reopened" when no
/// new file could be started (a folder at the path), and logrotate would
/// then compress the file still being written. The wait says why now;
/// the moved file is written on; once the path is free, a reopen works.
#[test]
fn a_reopen_that_cannot_start_a_new_file_says_why() {
    let dir = tempfile_dir("reopen-fails");
    let path = dir.join("queries.dnstap");
    let writer = Writer::start(settings(Output::File(path.clone()))).unwrap();
    assert_eq!(
        writer.reopen_and_wait(Duration::from_secs(5)),
        Ok(()),
        "not moved"
    );
    std::fs::rename(&path, dir.join("queries.dnstap.1")).unwrap();
    std::fs::create_dir(&path).unwrap();
    let failed = writer.reopen_and_wait(Duration::from_secs(5)).unwrap_err();
    assert!(
        failed.contains("cannot start") && failed.contains("moved file"),
        "{failed}"
    );
    std::fs::remove_dir(&path).unwrap();
    assert_eq!(writer.reopen_and_wait(Duration::from_secs(5)), Ok(()));
    assert!(path.is_file());
    writer.finish();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Lines `dnstap-read` prints for `file` (it must read it whole).
fn dnstap_read(file: &std::path::Path) -> Vec<String> {
    let out = Command::new(DNSTAP_READ).arg(file).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().map(str::to_string).collect()
}

/// Writes `transports`' exchanges into the file at `path` with a writer
/// of its own, and ends it.
fn write_session(path: &std::path::Path, transports: &[Transport]) {
    let writer = Writer::start(settings(Output::File(path.to_path_buf()))).unwrap();
    transports.iter().for_each(|&t| writer.offer(exchange(t)));
    writer.finish();
    assert_eq!(writer.totals().written, 2 * transports.len() as u64);
}

/// Issue 44: every start emptied the file. A second writer (a restart)
/// continues the first one's file: `dnstap-read` reads both sessions.
#[test]
fn a_restart_continues_the_file_it_finds() {
    let dir = tempfile_dir("restart");
    let path = dir.join("queries.dnstap");
    write_session(&path, &[Transport::Udp]);
    write_session(&path, &[Transport::Tcp, Transport::Tcp]);
    let lines = dnstap_read(&path);
    assert_eq!(lines.len(), 6, "{lines:#?}");
    assert!(lines[..2].iter().all(|l| l.contains(" UDP ")), "{lines:#?}");
    assert!(lines[2..].iter().all(|l| l.contains(" TCP ")), "{lines:#?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A file cut short by a crash (no STOP, half a frame) is continued after
/// its last whole frame.
#[test]
fn a_file_cut_short_is_continued_after_its_last_whole_frame() {
    let dir = tempfile_dir("crash");
    let path = dir.join("queries.dnstap");
    write_session(&path, &[Transport::Udp, Transport::Udp]);
    let whole = std::fs::read(&path).unwrap();
    // Drop the STOP (12 bytes) and 5 bytes of the last response's frame.
    std::fs::write(&path, &whole[..whole.len() - 12 - 5]).unwrap();
    write_session(&path, &[Transport::Tcp]);
    let lines = dnstap_read(&path);
    assert_eq!(lines.len(), 5, "3 whole ones kept, 2 new: {lines:#?}");
    assert!(lines[3].contains(" AQ ") && lines[3].contains(" TCP "));
    // Only a STOP missing: nothing lost.
    std::fs::write(&path, &whole[..whole.len() - 12]).unwrap();
    write_session(&path, &[Transport::Tcp]);
    assert_eq!(dnstap_read(&path).len(), 6);
    // Zeros where the STOP was, or after it (what a power loss can leave):
    // cut off, and the file continued.
    for tail in [&whole[..whole.len() - 12], &whole[..]] {
        let mut zeroed = tail.to_vec();
        zeroed.extend_from_slice(&[0; 4096]);
        std::fs::write(&path, &zeroed).unwrap();
        write_session(&path, &[Transport::Tcp]);
        assert_eq!(dnstap_read(&path).len(), 6);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A file that is not dnstap (a wrong path in the configuration), or one
/// with bytes after its STOP, is neither emptied nor written to.
#[test]
fn a_file_that_is_not_dnstap_is_left_alone() {
    let dir = tempfile_dir("foreign");
    let path = dir.join("heron.toml");
    std::fs::write(&path, "[server]\nlisten = [\"127.0.0.1:53\"]\n").unwrap();
    let error = Writer::start(settings(Output::File(path.clone())))
        .err()
        .unwrap();
    assert!(error.to_string().contains("not a dnstap file"), "{error}");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("[server]"), "{text}");
    let tap = dir.join("two.dnstap");
    write_session(&tap, &[Transport::Udp]);
    let mut bytes = std::fs::read(&tap).unwrap();
    bytes.extend_from_slice(b"more");
    std::fs::write(&tap, &bytes).unwrap();
    assert!(Writer::start(settings(Output::File(tap.clone()))).is_err());
    assert_eq!(std::fs::read(&tap).unwrap(), bytes);
    // Malformed starts of every length: refused or continued, no panic.
    let mut frames = Vec::new();
    frame::control(ControlType::Start, Some(CONTENT_TYPE), &mut frames);
    frame::data(b"payload", &mut frames);
    for cut in 0..frames.len() {
        for flip in [None, Some(cut)] {
            let mut bytes = frames[..cut].to_vec();
            if let Some(at) = flip.filter(|&at| at < bytes.len()) {
                bytes[at] ^= 0xff;
            }
            std::fs::write(&tap, &bytes).unwrap();
            let _ = Writer::start(settings(Output::File(tap.clone()))).map(|w| w.finish());
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A tmpfs of `size` mounted at `dir` for a test, unmounted at the end.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    /// None where this process may not mount (not root).
    fn mount(dir: &std::path::Path, size: &str) -> Option<SmallDisk> {
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .ok()?;
        status.success().then(|| SmallDisk(dir.to_path_buf()))
    }

    fn grow(&self, size: &str) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Offers 50 exchanges `rounds` times, 60 ms apart; how many.
fn offer_rounds(writer: &Writer, rounds: usize) -> u64 {
    for _ in 0..rounds {
        for _ in 0..50 {
            writer.offer(exchange(Transport::Udp));
        }
        std::thread::sleep(Duration::from_millis(60));
    }
    50 * rounds as u64
}

/// A writer to a file on a tmpfs of 16 KiB that its exchanges have
/// filled (some dropped); None where no tmpfs can be mounted.
fn filled_small_disk(
    tag: &str,
) -> Option<(
    SmallDisk,
    std::path::PathBuf,
    std::path::PathBuf,
    Arc<Writer>,
    u64,
)> {
    let dir = tempfile_dir(tag);
    let Some(disk) = SmallDisk::mount(&dir, "16k") else {
        eprintln!("skipped: cannot mount a tmpfs here");
        return None;
    };
    let path = dir.join("queries.dnstap");
    let writer = Writer::start(settings(Output::File(path.clone()))).unwrap();
    let offered = offer_rounds(&writer, 6);
    assert!(writer.totals().dropped > 0, "the disk is full by now");
    Some((disk, dir, path, writer, offered))
}

/// A file whose disk fills: what the file took of a write stays, the rest
/// is written from there once there is room, so the file holds whole
/// frames, and each message is counted written or dropped once, as the
/// file says (black-box finding BB-8: messages in the file were counted
/// dropped, and nothing was said).
#[test]
fn a_full_disk_keeps_the_file_whole_and_counts_each_message_once() {
    let Some((disk, dir, path, writer, mut offered)) = filled_small_disk("full-disk") else {
        return;
    };
    disk.grow("1m");
    offered += offer_rounds(&writer, 2);
    writer.finish();
    let totals = writer.totals();
    assert_eq!(totals.written + totals.dropped, 2 * offered);
    let lines = dnstap_read(&path);
    assert_eq!(lines.len() as u64, totals.written, "{totals:?}");
    drop(disk);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A file cut by a full disk and then ended while the disk is still full
/// (rotated and reopened, or the server stopping): the cut frame is taken
/// off, so the file ends in whole frames and its STOP, and the messages
/// it holds whole are counted written (black-box finding BD-1: half a
/// frame, no STOP, and every message of the cut write counted dropped).
#[test]
fn a_file_ended_while_its_disk_is_full_ends_in_whole_frames() {
    for rotate in [true, false] {
        let tag = if rotate { "full-rotate" } else { "full-stop" };
        let Some((disk, dir, path, writer, offered)) = filled_small_disk(tag) else {
            return;
        };
        let moved = dir.join("queries.dnstap.1");
        if rotate {
            std::fs::rename(&path, &moved).unwrap();
            // Room for the new file's start, not for the rest.
            disk.grow("20k");
            writer.reopen_and_wait(Duration::from_secs(5)).unwrap();
        }
        writer.finish();
        let totals = writer.totals();
        assert_eq!(totals.written + totals.dropped, 2 * offered, "{totals:?}");
        let ended = if rotate { &moved } else { &path };
        let lines = dnstap_read(ended).len() as u64;
        let in_new = if rotate {
            dnstap_read(&path).len() as u64
        } else {
            0
        };
        assert_eq!(
            lines + in_new,
            totals.written,
            "rotate {rotate}: {totals:?}"
        );
        let bytes = std::fs::read(ended).unwrap();
        let stop = [0u8, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 3];
        assert!(bytes.ends_with(&stop), "rotate {rotate}: ends in its STOP");
        drop(disk);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// A reader that refuses the handshake is said to in words: the content
/// types it accepts as text (black-box finding DE-3: a debug dump of
/// their bytes).
#[test]
fn a_refused_handshake_names_the_content_types_as_text() {
    let accept = |types: &[&[u8]]| frame::Control {
        kind: ControlType::Accept,
        content_types: types.iter().map(|t| t.to_vec()).collect(),
    };
    assert_eq!(
        refused_handshake(&accept(&[b"protobuf:other"])),
        "the reader accepts protobuf:other, not protobuf:dnstap.Dnstap"
    );
    let said = refused_handshake(&accept(&[]));
    assert_eq!(
        said,
        "the reader accepts no content type, not protobuf:dnstap.Dnstap"
    );
    let finish = frame::Control {
        kind: ControlType::Finish,
        content_types: Vec::new(),
    };
    assert!(refused_handshake(&finish).contains("not ACCEPT"));
}

/// A write the reader does not take within the bound says the reader is
/// too slow, not "Resource temporarily unavailable" (black-box finding
/// DE-4).
#[test]
fn a_reader_that_takes_nothing_is_said_too_slow() {
    let (ours, _reader) = UnixStream::pair().unwrap();
    // The socket's buffer full first, so that the bounded write times
    // out having written nothing.
    ours.set_nonblocking(true).unwrap();
    while (&ours).write(&[0; 4096]).is_ok() {}
    ours.set_nonblocking(false).unwrap();
    let mut bounded = Bounded {
        stream: &ours,
        until: Instant::now() + Duration::from_millis(200),
    };
    let error = bounded.write(&[0; 4096]).unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::TimedOut, "{error}");
    assert!(
        error.to_string().contains("the reader is too slow"),
        "{error}"
    );
}
