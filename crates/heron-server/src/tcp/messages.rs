//! Framing: the whole messages of a read answered up to the cap, the
//! rest kept; responses and transfers written.

use super::*;
use crate::processor::log_limit;

/// Answers what a read brought after what was kept from before, up to
/// the cap on queued answers; keeps what it did not answer.
pub(super) fn take_input(
    data: &[u8],
    partial: &mut Unanswered,
    replies: &mut Replies,
    from: From,
    shared: &Shared,
) -> io::Result<()> {
    let service = &*shared.service;
    let kept = &mut partial.bytes;
    let consumed = if kept.is_empty() {
        answer_and_keep_rest(data, kept, replies, from, service)?
    } else {
        kept.extend_from_slice(data);
        let input = std::mem::take(kept);
        answer_and_keep_rest(&input, kept, replies, from, service)?
    };
    let timeouts = (shared.idle, shared.message_timeout);
    partial.restart_deadline(consumed > 0, timeouts, Instant::now());
    Ok(())
}

/// What answering some input asks to write: framed responses, then the
/// transfers they asked for.
pub(super) struct Replies {
    pub(super) framed: Vec<u8>,
    pub(super) transfers: Vec<Later>,
}

/// What is written after the responses of a read: a transfer, or the
/// answer to an UPDATE once the update task gives it.
pub(super) enum Later {
    Transfer(Box<Transfer>),
    Update(oneshot::Receiver<Vec<u8>>),
}

thread_local! {
    /// A buffer for framed responses that the last connection on this
    /// thread wrote and gave back: the next one builds in it instead of
    /// growing a new one from nothing on every read.
    static SPARE_FRAMED: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

impl Replies {
    pub(super) fn new() -> Replies {
        Replies {
            framed: SPARE_FRAMED.take(),
            transfers: Vec::new(),
        }
    }
}

/// Keeps `framed`, once written, for the next [`Replies`] on this thread.
/// It holds at most [`QUEUED_ANSWERS_CAP`] and a message.
pub(super) fn give_back(mut framed: Vec<u8>) {
    framed.clear();
    SPARE_FRAMED.set(framed);
}

/// What a connection has read and not answered: the start of a message,
/// or whole messages the cap on queued answers held back; and until when
/// it may wait for more.
pub(super) struct Unanswered {
    pub(super) bytes: Vec<u8>,
    /// When to give up: within a message, its deadline (from its first
    /// byte); between messages, the idle timeout from the connection's
    /// last progress (opened or its TLS handshake done, a message's bytes
    /// taken, answers written). A wake that brings no byte of a message
    /// (an urgent byte, TLS bytes that make no plaintext) moves neither.
    until: Instant,
    /// Whether `until` is a message's deadline: a message has begun, in
    /// `bytes` or in TLS bytes that made no plaintext yet (a client
    /// trickling a TLS record held its slot forever).
    in_message: bool,
}

impl Unanswered {
    /// Whether it begins with a whole length-prefixed message.
    pub(super) fn holds_whole_message(&self) -> bool {
        let bytes = &self.bytes;
        bytes.len() >= 2 && bytes.len() - 2 >= u16::from_be_bytes([bytes[0], bytes[1]]) as usize
    }

    /// Nothing read yet, on a connection opened at `now`.
    pub(super) fn new(now: Instant, idle: Duration) -> Unanswered {
        Unanswered {
            bytes: Vec::new(),
            until: now + idle,
            in_message: false,
        }
    }

    /// Until when to wait for more data.
    pub(super) fn deadline(&self) -> Instant {
        self.until
    }

    /// Whether a message has begun and not been answered.
    pub(super) fn in_message(&self) -> bool {
        self.in_message
    }

    /// After input was taken at `now`: between messages the idle timeout
    /// starts again; a message begun since a message was `answered` gets
    /// a new deadline; one still incomplete keeps its own.
    pub(super) fn restart_deadline(
        &mut self,
        answered: bool,
        (idle, message): (Duration, Duration),
        now: Instant,
    ) {
        if self.bytes.is_empty() {
            (self.until, self.in_message) = (now + idle, false);
        } else if answered || !self.in_message {
            (self.until, self.in_message) = (now + message, true);
        }
    }

    /// The client took its answers at `now`: between messages, the idle
    /// timeout counts from here.
    pub(super) fn touch(&mut self, now: Instant, idle: Duration) {
        if !self.in_message {
            self.until = now + idle;
        }
    }

    /// Reading resumes at `now` after it waited for the client to take
    /// its answers: a message begun before gets the message timeout from
    /// here (the rest of it may have been in the socket all along; the
    /// wait was bounded by the idle timeout on the client's reads).
    pub(super) fn resumed(&mut self, now: Instant, message: Duration) {
        if self.in_message {
            self.until = self.until.max(now + message);
        }
    }

    /// The TLS handshake finished at `now`: the message it was (its
    /// first bytes started the message timeout) is over.
    pub(super) fn handshake_done(&mut self, now: Instant, idle: Duration) {
        (self.until, self.in_message) = (now + idle, false);
    }

    /// TLS took bytes at `now` that made no plaintext: a message has
    /// begun, unless one already had.
    pub(super) fn sealed_bytes(&mut self, now: Instant, message: Duration) {
        if !self.in_message {
            (self.until, self.in_message) = (now + message, true);
        }
    }
}

/// Writes the responses of one read, then the transfers they asked for
/// (the idle timeout bounds each write, not the whole transfer).
pub(super) async fn respond<S: AsyncWrite + Unpin>(
    stream: &mut S,
    replies: Replies,
    peer: SocketAddr,
    shared: &Shared,
) -> io::Result<()> {
    let Replies { framed, transfers } = replies;
    if !framed.is_empty() {
        write_all(stream, &framed, shared.idle).await?;
    }
    give_back(framed);
    if !transfers.is_empty() {
        // Boxed: transfers are rare, and inline their state would size
        // every connection's task for them.
        Box::pin(send_transfers(stream, transfers, peer, shared)).await?;
    }
    // TLS may hold the end of what was written until flushed.
    timeout(shared.idle, stream.flush())
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "write timed out"))?
}

/// Writes `bytes`, each part within `limit` of the one before, so that a
/// client that stops reading cannot hold its task forever and one that
/// reads slowly but steadily gets all of it.
pub(super) async fn write_all<S: AsyncWrite + Unpin>(
    stream: &mut S,
    mut bytes: &[u8],
    limit: Duration,
) -> io::Result<()> {
    while !bytes.is_empty() {
        let written = timeout(limit, stream.write(bytes))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "write timed out"))??;
        if written == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        bytes = &bytes[written..];
    }
    Ok(())
}

/// Waits for an UPDATE's answer, up to [`UPDATE_WAIT`], and writes it;
/// one not given in time (or dropped at shutdown) gets none.
async fn send_update_answer<S: AsyncWrite + Unpin>(
    stream: &mut S,
    answer: oneshot::Receiver<Vec<u8>>,
    shared: &Shared,
) -> io::Result<()> {
    let Ok(Ok(response)) = timeout(UPDATE_WAIT, answer).await else {
        return Ok(());
    };
    let mut framed = Vec::with_capacity(response.len() + 2);
    framed.extend_from_slice(&(response.len() as u16).to_be_bytes());
    framed.extend_from_slice(&response);
    write_all(stream, &framed, shared.idle).await
}

/// How long a connection waits for the update task's answer to an
/// UPDATE (a journal write, a sync); the task answers far sooner.
const UPDATE_WAIT: Duration = Duration::from_secs(30);

pub(super) async fn send_transfers<S: AsyncWrite + Unpin>(
    stream: &mut S,
    transfers: Vec<Later>,
    peer: SocketAddr,
    shared: &Shared,
) -> io::Result<()> {
    for later in transfers {
        match later {
            Later::Transfer(transfer) => send_transfer(stream, *transfer, peer, shared).await?,
            Later::Update(answer) => send_update_answer(stream, answer, shared).await?,
        }
    }
    Ok(())
}

/// The log target of transfers sent: with those received, under
/// `heron_xfr`, as `[log] targets` documents.
pub(crate) const XFR_LOG: &str = "heron_xfr::out";

/// Pulls the messages of a transfer one at a time and writes each as it
/// is made, so the transfer holds one message in memory; logs it.
pub(super) async fn send_transfer<S: AsyncWrite + Unpin>(
    stream: &mut S,
    mut transfer: Transfer,
    peer: SocketAddr,
    shared: &Shared,
) -> io::Result<()> {
    let _turn = shared.service.transfer_slot().await;
    let started = Instant::now();
    let (zone, kind) = (transfer.zone().clone(), transfer.kind());
    let mut messages = if transfer.is_large() {
        off_the_runtime(|| transfer.messages())
    } else {
        transfer.messages()
    };
    let mut out = Vec::with_capacity(u16::MAX as usize);
    let mut framed = Vec::with_capacity(u16::MAX as usize + 2);
    let sent = async {
        while messages
            .next(&mut out, unix_now())
            .map_err(|_| io::Error::other("a record does not fit in a message"))?
        {
            framed.clear();
            framed.extend_from_slice(&(out.len() as u16).to_be_bytes());
            framed.extend_from_slice(&out);
            write_all(stream, &framed, shared.idle).await?;
        }
        Ok::<_, io::Error>(())
    }
    .await;
    (shared.service.zones).transfer_out(zone.origin(), started.elapsed(), sent.is_ok());
    let (made, records) = messages.made();
    if let Err(e) = sent {
        // The secondary has only part of the zone: say so, as a transfer
        // sent whole is said; at most a few lines per interval, the rest
        // counted (black-box finding BN-3: a client breaking off its
        // transfers wrote a line each).
        let now = unix_now();
        if let Some(due) = UNFINISHED_LOG.admit(0, now) {
            let more = due.tail();
            tracing::warn!(
                target: XFR_LOG,
                zone = %zone.origin(),
                %peer,
                "{kind} of {} serial {} to {peer} not finished: {e} ({records} records in {made} messages made, {} ms){more}",
                zone.origin(),
                zone.serial(),
                started.elapsed().as_millis()
            );
        }
        return Err(e);
    }
    let sent = made;
    tracing::info!(
        target: XFR_LOG,
        zone = %zone.origin(),
        %peer,
        "{kind} of {} serial {} to {peer}: {records} records in {sent} messages, {} ms",
        zone.origin(),
        zone.serial(),
        started.elapsed().as_millis()
    );
    Ok(())
}

/// Lines of transfers not finished, per interval ([`log_limit::LOG_INTERVAL`]).
static UNFINISHED_LOG: std::sync::LazyLock<log_limit::LogLimiter<1>> =
    std::sync::LazyLock::new(|| log_limit::LogLimiter::with_lines(log_limit::LOG_INTERVAL, 10));

/// Runs `f` on this thread after handing its other tasks to another
/// runtime thread (a runtime with one thread, as in tests, just runs it).
pub(super) fn off_the_runtime<T>(f: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Where a connection's messages come from: the client, the transport,
/// and our own address (for dnstap).
pub(super) type From = (SocketAddr, Transport, Option<SocketAddr>);

/// Answers the whole messages in `input` up to the cap, appending the
/// framed responses to `replies`; what is left is copied to `rest`.
/// Returns the bytes answered.
pub(super) fn answer_and_keep_rest(
    input: &[u8],
    rest: &mut Vec<u8>,
    replies: &mut Replies,
    from: From,
    service: &Service,
) -> io::Result<usize> {
    let consumed = RESPONSE.with_borrow_mut(|response| {
        let mut out = Output {
            response,
            framed: &mut replies.framed,
            transfers: &mut replies.transfers,
        };
        answer_complete_messages(input, from, service, &mut out)
    })?;
    rest.extend_from_slice(&input[consumed..]);
    Ok(consumed)
}

thread_local! {
    /// Where each response is built before it is framed into the output;
    /// one per runtime thread, reused by every connection.
    static RESPONSE: std::cell::RefCell<Vec<u8>> =
        std::cell::RefCell::new(Vec::with_capacity(u16::MAX as usize));
}

/// Where [`answer_complete_messages`] puts its results.
pub(super) struct Output<'a> {
    /// Scratch space for one response.
    pub(super) response: &'a mut Vec<u8>,
    /// Framed responses, ready to write.
    pub(super) framed: &'a mut Vec<u8>,
    /// Transfers (and UPDATE answers) to send once the responses are
    /// written.
    pub(super) transfers: &'a mut Vec<Later>,
}

/// Answers the whole length-prefixed messages at the front of `input`,
/// appending framed responses to `out`, until the framed responses reach
/// [`QUEUED_ANSWERS_CAP`] or a transfer is asked for (it is sent before
/// the queries after it are answered); returns the bytes consumed.
pub(super) fn answer_complete_messages(
    input: &[u8],
    (peer, transport, local): From,
    service: &Service,
    out: &mut Output,
) -> io::Result<usize> {
    let mut at = 0;
    let now = unix_now();
    let received_at = Instant::now();
    let mut answered = 0;
    let via = match transport {
        Transport::Tls => Via::Tls,
        _ => Via::Tcp,
    };
    let mut events: Vec<Event> = Vec::new();
    let stats = &service.stats;
    while input.len() - at >= 2 && out.framed.len() < QUEUED_ANSWERS_CAP && out.transfers.is_empty()
    {
        let len = u16::from_be_bytes([input[at], input[at + 1]]) as usize;
        if len == 0 {
            if at > 0 {
                break; // the messages before it are answered first
            }
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "zero-length message",
            ));
        }
        if input.len() - at - 2 < len {
            break;
        }
        let req = Request {
            bytes: &input[at + 2..at + 2 + len],
            peer,
            transport,
            now,
            local,
            received: received_at,
        };
        stats.with_thread_cells(|c| c.query(via, qtype_of(req.bytes)));
        match service.processor.process(&req, out.response, &mut events) {
            Outcome::Response => {
                stats.with_thread_cells(|c| c.response(out.response));
                answered += 1;
                let len = out.response.len() as u16;
                out.framed.extend_from_slice(&len.to_be_bytes());
                out.framed.extend_from_slice(out.response);
            }
            Outcome::Nothing
                if events.last()
                    == Some(&Event::Refused(crate::processor::Refusal::Blackholed)) =>
            {
                // A `blackhole` prefix added since the connection opened.
                service.dispatch(&mut events);
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "the client's address is blackholed now",
                ));
            }
            Outcome::Nothing => {}
            Outcome::Transfer(transfer) => out.transfers.push(Later::Transfer(transfer)),
            Outcome::Update(request) => {
                let (answer, answered) = oneshot::channel();
                service.submit_update(request, Reply::Stream(answer));
                out.transfers.push(Later::Update(answered));
            }
        }
        at += 2 + len;
    }
    if answered > 0 {
        stats.with_thread_cells(|c| c.answered(received_at.elapsed(), answered));
    }
    service.dispatch(&mut events);
    Ok(at)
}
