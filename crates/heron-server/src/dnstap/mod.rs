//! dnstap output: the processor's tap layer (`processor::tap`) offers
//! copies of sampled exchanges; [`Writer`] queues them (bounded in
//! messages and bytes, never blocking the offering worker: what does not
//! fit is dropped and counted) and a thread of its own encodes them
//! ([`encode`]) and writes them as Frame Streams ([`frame`]) to a file
//! or to a reader's Unix socket, reconnecting with back-off when the
//! reader goes away. Whatever the reader does, each connect, handshake
//! and write ends within [`IO_TIMEOUT`], and at shutdown the writer has
//! [`FLUSH_BUDGET`] before what it still holds is dropped.

pub mod encode;
mod file;
pub use file::check_continuable;
pub mod frame;

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::processor::tap::{Exchange, TapSink, TapTotals};
use encode::{Kind, Record};
use frame::{CONTENT_TYPE, ControlType};

/// Where the frames go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// A file: START, data frames, STOP. One already there is continued
    /// (its STOP cut off), never emptied ([`file`]).
    File(PathBuf),
    /// A reader's Unix socket, with the bidirectional handshake.
    Socket(PathBuf),
}

/// The writer's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    pub output: Output,
    /// `Dnstap.identity` and `.version` (empty: left out).
    pub identity: Vec<u8>,
    pub version: Vec<u8>,
    /// The queue's bounds: exchanges, and their bytes.
    pub queue_messages: usize,
    pub queue_bytes: usize,
}

/// Longest a connect, a handshake, or one write of what was queued may
/// take in all (a reader that takes a little at a time does not stretch
/// it) before the reader is taken as gone.
pub const IO_TIMEOUT: Duration = Duration::from_secs(1);
/// At shutdown, how long the writer has to write what is queued and end
/// the stream; what is left then is dropped, and the thread left behind
/// if it is not done [`IO_TIMEOUT`] later.
pub const FLUSH_BUDGET: Duration = Duration::from_secs(2);
/// How often a connect is tried again, within [`IO_TIMEOUT`], while the
/// reader's backlog is full (it listens but does not accept).
const CONNECT_RETRY: Duration = Duration::from_millis(10);
/// First wait before connecting again, doubled up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// How often the writer takes what is queued.
const DRAIN_EVERY: Duration = Duration::from_millis(50);
/// Exchanges written at most in one write.
const MAX_WRITE: usize = 1024;
/// Longest sleep while waiting to connect again (so a stop is seen).
const IDLE_WAKE: Duration = Duration::from_millis(100);

/// What the workers and the writer's thread share.
#[derive(Default)]
struct Shared {
    queued: AtomicUsize,
    queued_bytes: AtomicUsize,
    written: AtomicU64,
    dropped: AtomicU64,
    stopping: AtomicBool,
    /// A file to end and open again at its path ([`Writer::reopen`]).
    reopen: AtomicBool,
    /// Reopens done, for [`Writer::reopen_and_wait`].
    reopened: AtomicU64,
    /// Why the last reopen could not start a new file (None: it did).
    reopen_failed: std::sync::Mutex<Option<String>>,
    /// When the writer must be done, set by [`Writer::finish`].
    flush_by: OnceLock<Instant>,
}

impl Shared {
    /// When an operation that starts now must end: [`IO_TIMEOUT`] from
    /// now, or the shutdown's deadline if that comes first.
    fn io_deadline(&self) -> Instant {
        let usual = Instant::now() + IO_TIMEOUT;
        self.flush_by.get().map_or(usual, |&by| usual.min(by))
    }

    fn out_of_time(&self) -> bool {
        self.flush_by.get().is_some_and(|&by| Instant::now() >= by)
    }
}

/// The dnstap sink: a bounded queue and the thread that drains it.
pub struct Writer {
    queue: SyncSender<Exchange>,
    max_bytes: usize,
    to_file: bool,
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Writer {
    /// Starts the writer's thread. A file that cannot be created is an
    /// error; a socket nobody listens on yet is not (it is retried).
    pub fn start(settings: Settings) -> io::Result<Arc<Writer>> {
        let sink = match &settings.output {
            Output::File(path) => Sink::File(FileSink::new(file::open(path)?, path.clone())),
            Output::Socket(path) => Sink::Socket(Connection::new(path.clone())),
        };
        let (queue, receiver) = sync_channel(settings.queue_messages.max(1));
        let shared = Arc::new(Shared::default());
        let mut drain = Drain {
            receiver,
            shared: shared.clone(),
            sink,
            frames: Frames::new(settings.identity, settings.version),
            unsent: (Vec::new(), 0),
            cut: false,
            cut_frame: (0, 0),
        };
        let thread = std::thread::Builder::new()
            .name("dnstap".into())
            .spawn(move || drain.run())?;
        Ok(Arc::new(Writer {
            queue,
            max_bytes: settings.queue_bytes,
            to_file: matches!(settings.output, Output::File(_)),
            shared,
            thread: Mutex::new(Some(thread)),
        }))
    }

    /// Ends the file (STOP) and starts a new one at its path, once what is
    /// queued now is written: after a rotation (logrotate renamed it) the
    /// writer goes on in a new file, not in the renamed one. Nothing for a
    /// socket.
    pub fn reopen(&self) {
        self.shared.reopen.store(true, Ordering::Relaxed);
    }

    /// [`Writer::reopen`], and waits (at most `within`) until it is done:
    /// Ok once the new file is there, else why not (the writer then goes
    /// on in the moved file). For `heron ctl dnstap-reopen`, which
    /// logrotate's `postrotate` runs and which must neither return before
    /// the new file is there nor say it is when it is not.
    pub fn reopen_and_wait(&self, within: Duration) -> Result<(), String> {
        let before = self.shared.reopened.load(Ordering::Acquire);
        self.reopen();
        let give_up = Instant::now() + within;
        while Instant::now() < give_up {
            if self.shared.reopened.load(Ordering::Acquire) != before {
                let failed = self.shared.reopen_failed.lock();
                return match failed.unwrap_or_else(|p| p.into_inner()).clone() {
                    Some(why) => Err(why),
                    None => Ok(()),
                };
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Err(format!(
            "the dnstap writer did not reopen its file within {} s",
            within.as_secs()
        ))
    }

    /// Whether the log goes to a file (which [`Writer::reopen`] reopens).
    pub fn writes_a_file(&self) -> bool {
        self.to_file
    }

    /// Writes what is queued, ends the stream (STOP; over a socket, waits
    /// a moment for FINISH) and waits for the thread, all within
    /// [`FLUSH_BUDGET`]: what is not written by then is dropped. A thread
    /// still busy [`IO_TIMEOUT`] later is left behind (it is bounded, and
    /// the process is ending).
    pub fn finish(&self) {
        let _ = self.shared.flush_by.set(Instant::now() + FLUSH_BUDGET);
        self.shared.stopping.store(true, Ordering::Relaxed);
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        let Some(thread) = thread else { return };
        let give_up = Instant::now() + FLUSH_BUDGET + IO_TIMEOUT;
        while !thread.is_finished() && Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(10));
        }
        if thread.is_finished() {
            let _ = thread.join();
        } else {
            tracing::warn!("dnstap: the writer is not done after its shutdown budget: left behind");
        }
    }

    fn drop_one(&self, exchange: &Exchange) {
        (self.shared.dropped).fetch_add(exchange.messages(), Ordering::Relaxed);
    }
}

impl TapSink for Writer {
    fn offer(&self, exchange: Exchange) {
        let size = exchange.size();
        let before = self.shared.queued_bytes.fetch_add(size, Ordering::Relaxed);
        if before + size > self.max_bytes {
            self.shared.queued_bytes.fetch_sub(size, Ordering::Relaxed);
            return self.drop_one(&exchange);
        }
        self.shared.queued.fetch_add(1, Ordering::Relaxed);
        if let Err(TrySendError::Full(e) | TrySendError::Disconnected(e)) =
            self.queue.try_send(exchange)
        {
            self.shared.queued.fetch_sub(1, Ordering::Relaxed);
            self.shared.queued_bytes.fetch_sub(size, Ordering::Relaxed);
            self.drop_one(&e);
        }
    }

    fn totals(&self) -> TapTotals {
        let s = &self.shared;
        TapTotals {
            written: s.written.load(Ordering::Relaxed),
            dropped: s.dropped.load(Ordering::Relaxed),
            queued: s.queued.load(Ordering::Relaxed) as u64,
            queued_bytes: s.queued_bytes.load(Ordering::Relaxed) as u64,
        }
    }
}

/// Encodes exchanges as data frames.
struct Frames {
    identity: Vec<u8>,
    version: Vec<u8>,
    scratch: Vec<u8>,
    payload: Vec<u8>,
}

impl Frames {
    fn new(identity: Vec<u8>, version: Vec<u8>) -> Frames {
        Frames {
            identity,
            version,
            scratch: Vec::new(),
            payload: Vec::new(),
        }
    }

    /// Appends the exchange's frames (query, then response) to `out`.
    fn append(&mut self, e: &Exchange, out: &mut Vec<u8>) {
        let messages = [
            (
                Kind::AuthQuery,
                Some(&e.query[..]).filter(|q| !q.is_empty()),
            ),
            (Kind::AuthResponse, e.response.as_deref()),
        ];
        for (kind, message) in messages {
            let Some(message) = message else { continue };
            let record = Record {
                kind,
                transport: e.transport,
                peer: e.peer,
                local: e.local,
                query_time: e.query_time,
                time: e.time,
                zone: e.zone.as_deref(),
                message,
            };
            self.payload.clear();
            encode::dnstap(
                &self.identity,
                &self.version,
                &record,
                &mut self.scratch,
                &mut self.payload,
            );
            frame::data(&self.payload, out);
        }
    }
}

/// The writer's thread.
struct Drain {
    receiver: Receiver<Exchange>,
    shared: Arc<Shared>,
    sink: Sink,
    frames: Frames,
    /// Frames a write failed to deliver (the reader went away, the
    /// file's disk filled), and the messages they hold: written again
    /// before anything newer, instead of being lost with it. To a socket
    /// whole, on the next connection; to a file from where the write
    /// stopped, so that its frames stay whole and each message is counted
    /// once.
    unsent: (Vec<u8>, u64),
    /// `unsent` begins in the middle of a frame the file holds the start
    /// of: it belongs to that file only.
    cut: bool,
    /// While `cut`: the octets of that frame the file holds (taken off
    /// the file if it is ended before the rest can be written), and those
    /// still to write, at the head of `unsent`.
    cut_frame: (usize, usize),
}

impl Drain {
    /// Every [`DRAIN_EVERY`] (at once while the queue keeps it busy),
    /// writes what is queued; the workers never wake this thread, so a
    /// sampled exchange costs them no system call.
    fn run(&mut self) {
        let mut buffer = Vec::new();
        let mut busy = false;
        loop {
            let stopping = self.shared.stopping.load(Ordering::Relaxed);
            if stopping && self.shared.out_of_time() {
                break;
            }
            if !self.sink.ready() {
                if stopping {
                    break;
                }
                self.sink.connect(self.shared.io_deadline());
                continue;
            }
            if !busy {
                let queued = self.shared.queued.load(Ordering::Relaxed);
                if stopping && queued == 0 && self.unsent.1 == 0 {
                    break;
                }
                std::thread::sleep(DRAIN_EVERY);
            }
            if self.shared.reopen.swap(false, Ordering::Relaxed) {
                self.reopen();
            }
            let messages = match self.unsent.1 {
                0 => self.take_queued(&mut buffer, &mut busy),
                // What the last reader did not take goes first, alone.
                _ => {
                    std::mem::swap(&mut buffer, &mut self.unsent.0);
                    std::mem::take(&mut self.unsent.1)
                }
            };
            if messages == 0 {
                continue;
            }
            match self.sink.write(&buffer, self.shared.io_deadline()) {
                Ok(()) => {
                    (self.cut, self.cut_frame) = (false, (0, 0));
                    (self.shared.written).fetch_add(messages, Ordering::Relaxed)
                }
                // Kept for the next reader, or for the file from where the
                // write stopped (a full disk took part of it: black-box
                // finding BB-8, messages in the file were counted dropped);
                // the queue holds the rest, and drops what does not fit.
                // The frames the file took whole are written (BD-1).
                Err(delivered) => {
                    let (done, cut) = self.delivered(&buffer, delivered);
                    (self.shared.written).fetch_add(done, Ordering::Relaxed);
                    buffer.drain(..delivered);
                    std::mem::swap(&mut buffer, &mut self.unsent.0);
                    self.unsent.1 = messages - done;
                    (self.cut, self.cut_frame) = (cut.0 > 0, cut);
                    0
                }
            };
        }
        let unsent = std::mem::take(&mut self.unsent.1);
        (self.shared.dropped).fetch_add(unsent, Ordering::Relaxed);
        self.drop_queued();
        let cut_off = self.cut.then_some(self.cut_frame.0);
        self.sink.close_cut(self.shared.io_deadline(), cut_off);
    }

    /// A reopen asked for ([`Writer::reopen`]): the file started again
    /// at its path, the moved one ended.
    fn reopen(&mut self) {
        // A frame cut in the moved file is taken off it, so that it
        // ends in whole frames and its STOP (black-box finding BD-1: half
        // a frame and no STOP); its rest would start the new file with
        // half a frame: that one message is dropped, the frames after it
        // go to the new file.
        let cut_off = self.cut.then_some(self.cut_frame.0);
        let reopened = self.sink.reopen(self.shared.io_deadline(), cut_off);
        if reopened == Ok(true) && self.cut {
            let rest = self.cut_frame.1.min(self.unsent.0.len());
            self.unsent.0.drain(..rest);
            self.unsent.1 = self.unsent.1.saturating_sub(1);
            (self.shared.dropped).fetch_add(1, Ordering::Relaxed);
            (self.cut, self.cut_frame) = (false, (0, 0));
        }
        let outcome = reopened.err();
        *self
            .shared
            .reopen_failed
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = outcome;
        self.shared.reopened.fetch_add(1, Ordering::Release);
    }

    /// Of `frames` (the unsent frames first, beginning with the rest of a
    /// cut frame if `cut`), the first `delivered` octets written: the
    /// frames that ends whole, and the octets of the frame it cuts that
    /// the file holds and that are left.
    fn delivered(&self, frames: &[u8], delivered: usize) -> (u64, (usize, usize)) {
        let (mut at, mut done, mut start) = (0, 0, 0);
        if self.cut {
            let (held, left) = self.cut_frame;
            if delivered < left {
                return (0, (held + delivered, left - delivered));
            }
            (at, done) = (left, 1);
        }
        while at < delivered {
            start = at;
            let Some(len) = frames.get(at..at + 4) else {
                break;
            };
            let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
            at += 4 + len;
            if at <= delivered {
                done += 1;
                start = at;
            }
        }
        match at > delivered {
            true => (done, (delivered - start, at - delivered)),
            false => (done, (0, 0)),
        }
    }

    /// Frames up to [`MAX_WRITE`] queued exchanges into `buffer`; the
    /// messages they hold. `busy`: the queue may hold more.
    fn take_queued(&mut self, buffer: &mut Vec<u8>, busy: &mut bool) -> u64 {
        buffer.clear();
        let (mut exchanges, mut messages) = (0, 0);
        for e in self.receiver.try_iter().take(MAX_WRITE) {
            self.shared.queued.fetch_sub(1, Ordering::Relaxed);
            (self.shared.queued_bytes).fetch_sub(e.size(), Ordering::Relaxed);
            exchanges += 1;
            messages += e.messages();
            self.frames.append(&e, buffer);
        }
        *busy = exchanges == MAX_WRITE;
        messages
    }

    /// Counts what is still queued as dropped: nothing will write it.
    fn drop_queued(&self) {
        for e in self.receiver.try_iter() {
            self.shared.queued.fetch_sub(1, Ordering::Relaxed);
            (self.shared.queued_bytes).fetch_sub(e.size(), Ordering::Relaxed);
            (self.shared.dropped).fetch_add(e.messages(), Ordering::Relaxed);
        }
    }
}

/// Where the frames are written.
enum Sink {
    File(FileSink),
    Socket(Connection),
}

/// A dnstap file, and whether its last write failed (said once per
/// outage, and its end said too).
struct FileSink {
    file: BufWriter<File>,
    path: PathBuf,
    failing: bool,
}

impl FileSink {
    fn new(file: BufWriter<File>, path: PathBuf) -> FileSink {
        FileSink {
            file,
            path,
            failing: false,
        }
    }

    /// Writes `frames`; Err: the octets of them the file took before it
    /// failed.
    fn write(&mut self, frames: &[u8]) -> Result<(), usize> {
        let written = write_counted(&mut self.file, frames);
        match (&written, self.failing) {
            (Ok(()), true) => {
                tracing::info!("dnstap: {} is written again", self.path.display());
                self.failing = false;
            }
            (Err((_, e)), false) => {
                tracing::error!(
                    "dnstap: cannot write {} ({e}); what is cut is written once it can \
                     be, and what does not fit the queue meanwhile is dropped",
                    self.path.display()
                );
                self.failing = true;
            }
            _ => {}
        }
        written.map_err(|(delivered, _)| delivered)
    }
}

/// Writes `frames` after what `file` buffers; Err: the octets of
/// `frames` written before the error, and the error.
fn write_counted(file: &mut BufWriter<File>, frames: &[u8]) -> Result<(), (usize, io::Error)> {
    file.flush().map_err(|e| (0, e))?;
    let mut done = 0;
    while done < frames.len() {
        match file.get_mut().write(&frames[done..]) {
            Ok(0) => return Err((done, io::ErrorKind::WriteZero.into())),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err((done, e)),
        }
    }
    Ok(())
}

impl Sink {
    fn ready(&self) -> bool {
        match self {
            Sink::File(..) => true,
            Sink::Socket(c) => c.stream.is_some(),
        }
    }

    /// For a socket: waits out the back-off, then connects, by `until`.
    fn connect(&mut self, until: Instant) {
        if let Sink::Socket(c) = self {
            c.connect(until);
        }
    }

    /// Writes `frames`; to a socket, by `until` (a file is not waited
    /// on). Err: the octets delivered before the failure (none to a
    /// socket: a frame cut there is sent again whole, on a new one).
    fn write(&mut self, frames: &[u8], until: Instant) -> Result<(), usize> {
        match self {
            Sink::File(f) => f.write(frames),
            Sink::Socket(c) => c.write(frames, until).map_err(|_| 0),
        }
    }

    /// A file moved away (rotated) ended, and one opened at its path (a
    /// new one, or one put there, continued). A file still at its path is
    /// written on. Ok(true): a new file was started. Err: no new file
    /// could be started (the moved one is written on), and why.
    fn reopen(&mut self, until: Instant, cut_off: Option<usize>) -> Result<bool, String> {
        use std::os::unix::fs::MetadataExt;
        let Sink::File(FileSink { file, path, .. }) = self else {
            return Ok(false);
        };
        let same =
            |a: std::fs::Metadata, b: std::fs::Metadata| a.dev() == b.dev() && a.ino() == b.ino();
        let ours = file.get_ref().metadata();
        if let (Ok(ours), Ok(there)) = (ours, std::fs::metadata(&*path))
            && same(ours, there)
        {
            return Ok(false);
        }
        // The new file first: should it fail, the old one is written on
        // rather than ended.
        match file::open(path) {
            Ok(new) => {
                let path = path.clone();
                self.close_cut(until, cut_off);
                *self = Sink::File(FileSink::new(new, path));
                Ok(true)
            }
            Err(e) => {
                let why = format!(
                    "cannot start {} again: {e}; writing on in the moved file",
                    path.display()
                );
                tracing::warn!("dnstap: {why}");
                Err(why)
            }
        }
    }

    /// [`Sink::close`], a file first cut back by the `cut_off` octets of
    /// a frame it holds the start of, so that it ends in whole frames.
    fn close_cut(&mut self, until: Instant, cut_off: Option<usize>) {
        if let (Sink::File(FileSink { file, path, .. }), Some(cut)) = (&mut *self, cut_off) {
            let cut_back = |f: &mut File| -> io::Result<()> {
                use std::io::{Seek, SeekFrom};
                let len = f.metadata()?.len();
                f.set_len(len.saturating_sub(cut as u64))?;
                f.seek(SeekFrom::End(0)).map(drop)
            };
            if let Err(e) = file.flush().and_then(|()| cut_back(file.get_mut())) {
                tracing::warn!(
                    "dnstap: cannot take the cut frame off {}: {e}",
                    path.display()
                );
            }
        }
        self.close(until);
    }

    fn close(&mut self, until: Instant) {
        match self {
            Sink::File(FileSink { file, .. }) => {
                let mut stop = Vec::new();
                frame::control(ControlType::Stop, None, &mut stop);
                if let Err(e) = file.write_all(&stop).and_then(|()| file.flush()) {
                    tracing::warn!("dnstap: cannot end the file: {e}");
                }
            }
            Sink::Socket(c) => c.close(until),
        }
    }
}

/// A connection to a reader's socket, and when to try again.
struct Connection {
    path: PathBuf,
    stream: Option<UnixStream>,
    next_attempt: Instant,
    backoff: Duration,
    /// Whether the last failure was logged (once per outage).
    warned: bool,
}

impl Connection {
    fn new(path: PathBuf) -> Connection {
        Connection {
            path,
            stream: None,
            next_attempt: Instant::now(),
            backoff: FIRST_BACKOFF,
            warned: false,
        }
    }

    /// Sleeps (in short steps, so a stop is seen) until the next attempt
    /// is due, then makes it, by `until`.
    fn connect(&mut self, until: Instant) {
        let now = Instant::now();
        if now < self.next_attempt {
            std::thread::sleep((self.next_attempt - now).min(IDLE_WAKE));
            return;
        }
        match handshake(&self.path, until) {
            Ok(stream) => {
                tracing::info!("dnstap: connected to {}", self.path.display());
                self.stream = Some(stream);
                self.backoff = FIRST_BACKOFF;
                self.warned = false;
            }
            Err(e) => self.failed(&e),
        }
    }

    fn failed(&mut self, e: &io::Error) {
        if !self.warned {
            tracing::warn!(
                "dnstap: reader at {} unavailable ({e}); retrying, dropping what does not fit the queue",
                self.path.display()
            );
            self.warned = true;
        }
        self.stream = None;
        self.next_attempt = Instant::now() + self.backoff;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
    }

    fn write(&mut self, frames: &[u8], until: Instant) -> io::Result<()> {
        let stream = self.stream.as_ref().ok_or(io::ErrorKind::NotConnected)?;
        let written = Bounded { stream, until }.write_all(frames);
        if let Err(e) = &written {
            // A partial frame may have gone: this stream is done.
            self.failed(e);
        }
        written
    }

    /// STOP, then FINISH awaited, by `until`.
    fn close(&mut self, until: Instant) {
        let Some(stream) = self.stream.take() else {
            return;
        };
        let mut stream = Bounded {
            stream: &stream,
            until,
        };
        let mut stop = Vec::new();
        frame::control(ControlType::Stop, None, &mut stop);
        if stream.write_all(&stop).is_ok() {
            match frame::read(&mut stream) {
                Ok(c) if c.kind == ControlType::Finish => {}
                Ok(c) => tracing::debug!("dnstap: {:?} where FINISH was due", c.kind),
                Err(e) => tracing::debug!("dnstap: no FINISH: {e}"),
            }
        }
    }
}

/// Connects to `path` and makes the writer's half of the handshake:
/// READY, ACCEPT (naming our content type), START, all by `until`.
fn handshake(path: &Path, until: Instant) -> io::Result<UnixStream> {
    let connected = connect_by(path, until)?;
    let mut stream = Bounded {
        stream: &connected,
        until,
    };
    let mut out = Vec::new();
    frame::control(ControlType::Ready, Some(CONTENT_TYPE), &mut out);
    stream.write_all(&out)?;
    let accept = frame::read(&mut stream)?;
    if accept.kind != ControlType::Accept || !accept.offers(CONTENT_TYPE) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            refused_handshake(&accept),
        ));
    }
    out.clear();
    frame::control(ControlType::Start, Some(CONTENT_TYPE), &mut out);
    stream.write_all(&out)?;
    Ok(connected)
}

/// Why a reader's answer to READY ends the handshake, in words: its
/// content types as text, not a debug dump of bytes (black-box finding
/// DE-3).
fn refused_handshake(answer: &frame::Control) -> String {
    let ours = String::from_utf8_lossy(CONTENT_TYPE);
    if answer.kind != ControlType::Accept {
        return format!(
            "the reader answered READY with {:?}, not ACCEPT",
            answer.kind
        );
    }
    let theirs: Vec<String> = (answer.content_types.iter())
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    match theirs.is_empty() {
        true => format!("the reader accepts no content type, not {ours}"),
        false => format!("the reader accepts {}, not {ours}", theirs.join(", ")),
    }
}

/// Connects to `path` without blocking: to a reader whose backlog is
/// full (it listens but does not accept) a blocking `connect` would
/// wait for ever; this one fails with EAGAIN, and is tried again until
/// `until`.
fn connect_by(path: &Path, until: Instant) -> io::Result<UnixStream> {
    use socket2::{Domain, SockAddr, Socket, Type};
    let address = SockAddr::unix(path)?;
    loop {
        let socket = Socket::new(Domain::UNIX, Type::STREAM, None)?;
        socket.set_nonblocking(true)?;
        match socket.connect(&address) {
            Ok(()) => {
                socket.set_nonblocking(false)?;
                return Ok(UnixStream::from(OwnedFd::from(socket)));
            }
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => return Err(e),
            Err(_) if Instant::now() + CONNECT_RETRY >= until => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "it does not accept connections (its backlog is full)",
                ));
            }
            Err(_) => std::thread::sleep(CONNECT_RETRY),
        }
    }
}

/// A socket timeout (EAGAIN) said as what it means: the reader did not
/// keep up within the bound (black-box finding DE-4: "Resource temporarily
/// unavailable (os error 11)").
fn too_slow(e: io::Error) -> io::Error {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "the reader is too slow: it took nothing within {} s",
                IO_TIMEOUT.as_secs()
            ),
        ),
        _ => e,
    }
}

/// A stream whose reads and writes must all end by `until`: each system
/// call is given what time is left as its timeout, so that a reader who
/// takes a little at a time cannot stretch the whole.
struct Bounded<'a> {
    stream: &'a UnixStream,
    until: Instant,
}

impl Bounded<'_> {
    fn time_left(&self) -> io::Result<Duration> {
        match self.until.saturating_duration_since(Instant::now()) {
            Duration::ZERO => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the reader is too slow",
            )),
            left => Ok(left),
        }
    }
}

impl Read for Bounded<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.set_read_timeout(Some(self.time_left()?))?;
        (&mut &*self.stream).read(buf).map_err(too_slow)
    }
}

impl Write for Bounded<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.set_write_timeout(Some(self.time_left()?))?;
        (&mut &*self.stream).write(buf).map_err(too_slow)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
