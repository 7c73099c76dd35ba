//! dnstap output: the processor's tap layer (`processor::tap`) offers
//! copies of sampled exchanges; [`Writer`] queues them (bounded in
//! messages and bytes, never blocking the offering worker: what does not
//! fit is dropped and counted) and a thread of its own encodes them
//! ([`encode`]) and writes them as Frame Streams ([`frame`]) to a file
//! or to a reader's Unix socket, reconnecting with back-off when the
//! reader goes away.

pub mod encode;
pub mod frame;

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::processor::tap::{Exchange, TapSink, TapTotals};
use encode::{Kind, Record};
use frame::{CONTENT_TYPE, ControlType};

/// Where the frames go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// A file, written from its start: START, data frames, STOP.
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

/// Longest a write or a handshake read may take before the reader is
/// taken as gone.
const IO_TIMEOUT: Duration = Duration::from_secs(1);
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
}

/// The dnstap sink: a bounded queue and the thread that drains it.
pub struct Writer {
    queue: SyncSender<Exchange>,
    max_bytes: usize,
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Writer {
    /// Starts the writer's thread. A file that cannot be created is an
    /// error; a socket nobody listens on yet is not (it is retried).
    pub fn start(settings: Settings) -> io::Result<Arc<Writer>> {
        let sink = match &settings.output {
            Output::File(path) => {
                let mut file = BufWriter::new(File::create(path)?);
                let mut start = Vec::new();
                frame::control(ControlType::Start, Some(CONTENT_TYPE), &mut start);
                file.write_all(&start)?;
                file.flush()?;
                Sink::File(file)
            }
            Output::Socket(path) => Sink::Socket(Connection::new(path.clone())),
        };
        let (queue, receiver) = sync_channel(settings.queue_messages.max(1));
        let shared = Arc::new(Shared::default());
        let mut drain = Drain {
            receiver,
            shared: shared.clone(),
            sink,
            frames: Frames::new(settings.identity, settings.version),
        };
        let thread = std::thread::Builder::new()
            .name("dnstap".into())
            .spawn(move || drain.run())?;
        Ok(Arc::new(Writer {
            queue,
            max_bytes: settings.queue_bytes,
            shared,
            thread: Mutex::new(Some(thread)),
        }))
    }

    /// Writes what is queued, ends the stream (STOP; over a socket, waits
    /// a moment for FINISH) and waits for the thread.
    pub fn finish(&self) {
        self.shared.stopping.store(true, Ordering::Relaxed);
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(thread) = thread {
            let _ = thread.join();
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
                time: e.time,
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
            if !self.sink.ready() {
                if stopping {
                    break;
                }
                self.sink.connect();
                continue;
            }
            if !busy {
                if stopping && self.shared.queued.load(Ordering::Relaxed) == 0 {
                    break;
                }
                std::thread::sleep(DRAIN_EVERY);
            }
            buffer.clear();
            let (mut exchanges, mut messages) = (0, 0);
            for e in self.receiver.try_iter().take(MAX_WRITE) {
                self.shared.queued.fetch_sub(1, Ordering::Relaxed);
                (self.shared.queued_bytes).fetch_sub(e.size(), Ordering::Relaxed);
                exchanges += 1;
                messages += e.messages();
                self.frames.append(&e, &mut buffer);
            }
            busy = exchanges == MAX_WRITE;
            if exchanges == 0 {
                continue;
            }
            let counter = match self.sink.write(&buffer) {
                Ok(()) => &self.shared.written,
                Err(_) => &self.shared.dropped,
            };
            counter.fetch_add(messages, Ordering::Relaxed);
        }
        self.sink.close();
    }
}

/// Where the frames are written.
enum Sink {
    File(BufWriter<File>),
    Socket(Connection),
}

impl Sink {
    fn ready(&self) -> bool {
        match self {
            Sink::File(_) => true,
            Sink::Socket(c) => c.stream.is_some(),
        }
    }

    /// For a socket: waits out the back-off, then connects.
    fn connect(&mut self) {
        if let Sink::Socket(c) = self {
            c.connect();
        }
    }

    fn write(&mut self, frames: &[u8]) -> io::Result<()> {
        match self {
            Sink::File(f) => {
                f.write_all(frames)?;
                f.flush()
            }
            Sink::Socket(c) => c.write(frames),
        }
    }

    fn close(&mut self) {
        match self {
            Sink::File(f) => {
                let mut stop = Vec::new();
                frame::control(ControlType::Stop, None, &mut stop);
                if let Err(e) = f.write_all(&stop).and_then(|()| f.flush()) {
                    tracing::warn!("dnstap: cannot end the file: {e}");
                }
            }
            Sink::Socket(c) => c.close(),
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
    /// is due, then makes it.
    fn connect(&mut self) {
        let now = Instant::now();
        if now < self.next_attempt {
            std::thread::sleep((self.next_attempt - now).min(IDLE_WAKE));
            return;
        }
        match handshake(&self.path) {
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

    fn write(&mut self, frames: &[u8]) -> io::Result<()> {
        let stream = self.stream.as_mut().ok_or(io::ErrorKind::NotConnected)?;
        let written = stream.write_all(frames);
        if let Err(e) = &written {
            // A partial frame may have gone: this stream is done.
            self.failed(e);
        }
        written
    }

    /// STOP, then FINISH awaited for a moment.
    fn close(&mut self) {
        let Some(mut stream) = self.stream.take() else {
            return;
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
/// READY, ACCEPT (naming our content type), START.
fn handshake(path: &std::path::Path) -> io::Result<UnixStream> {
    let mut stream = UnixStream::connect(path)?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    let mut out = Vec::new();
    frame::control(ControlType::Ready, Some(CONTENT_TYPE), &mut out);
    stream.write_all(&out)?;
    let accept = frame::read(&mut stream)?;
    if accept.kind != ControlType::Accept || !accept.offers(CONTENT_TYPE) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the reader answered {accept:?} to READY"),
        ));
    }
    out.clear();
    frame::control(ControlType::Start, Some(CONTENT_TYPE), &mut out);
    stream.write_all(&out)?;
    Ok(stream)
}

#[cfg(test)]
mod tests;
