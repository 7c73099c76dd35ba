//! One connection of the event loop: read what the socket holds, answer
//! every whole message in it, write the answers in one pass.

use super::*;

/// A plain or TLS connection between wake-ups. Idle, it holds no buffer
/// of ours (TLS keeps rustls's state).
pub(super) struct Conn {
    pub(super) stream: TcpStream,
    pub(super) peer: SocketAddr,
    local: Option<SocketAddr>,
    pub(super) tls: Option<Box<ServerConnection>>,
    partial: Unanswered,
    /// Framed answers the socket (or TLS) has not taken yet.
    out: Vec<u8>,
    /// Since when `out` has waited for the socket without the client
    /// taking any of it: a client that takes nothing for the idle timeout
    /// is closed.
    out_since: Option<Instant>,
    /// A transfer or UPDATE answer being made on the runtime; reading
    /// waits until it is written, as on the runtime's connections.
    pub(super) later: Option<Arc<Pipe>>,
    /// The socket may hold unread bytes (edge-triggered: a read that
    /// empties it clears this, the next event sets it).
    pub(super) may_read: bool,
    /// The client has closed its side (or sent close_notify).
    eof: bool,
    /// An event said the client closed its side: the socket is read
    /// until it says so too (a short read does not end reading then).
    pub(super) read_closed: bool,
    pub(super) deadline: Deadline,
    opened: Instant,
    /// TLS bytes have come from the client: its handshake is under way.
    /// Before the first, a TLS connection is as idle as a plain one
    /// between messages (silent connections to the TLS port were never
    /// shed and kept every TCP client out: black-box finding BH-2).
    heard: bool,
    _slot: Slot,
}

/// What to do with a connection after it was driven.
#[derive(Debug, PartialEq)]
pub(super) enum Next {
    /// Nothing to do until an event.
    Wait,
    /// More to read: driven again after the others had their turn.
    Again,
    /// Done: close it.
    Close,
}

impl Conn {
    pub(super) fn new(
        stream: TcpStream,
        peer: SocketAddr,
        tls: Option<Box<ServerConnection>>,
        slot: Slot,
        (now, idle): (Instant, Duration),
    ) -> Conn {
        Conn {
            local: stream.local_addr().ok(),
            stream,
            peer,
            tls,
            partial: Unanswered::new(now, idle),
            out: Vec::new(),
            out_since: None,
            later: None,
            may_read: false,
            eof: false,
            read_closed: false,
            deadline: Deadline::default(),
            opened: now,
            heard: false,
            _slot: slot,
        }
    }

    /// Reads, answers and writes as far as the socket allows, then sets
    /// the deadline for what the connection waits for.
    pub(super) fn drive(&mut self, cx: &LoopContext) -> io::Result<Next> {
        let next = self.progress(cx)?;
        self.deadline.at = self.deadline_now(cx);
        Ok(next)
    }

    fn progress(&mut self, cx: &LoopContext) -> io::Result<Next> {
        for _ in 0..READS_PER_ROUND {
            if !self.flush(cx.now, cx.timeouts())? {
                return Ok(Next::Wait); // the client has not taken the last
            }
            if let Some(pipe) = &self.later {
                match pipe.take(&mut self.out) {
                    Taken::Bytes => continue,
                    Taken::Nothing => return Ok(Next::Wait),
                    Taken::Finished => {
                        self.later = None;
                        self.partial.touch(cx.now, cx.shared.idle);
                        // Reads waited for it; events may have come since.
                        self.may_read = true;
                    }
                    Taken::Failed => return Err(io::Error::other("transfer not sent")),
                }
            }
            if self.partial.holds_whole_message() {
                // What the cap held back is answered before reading more.
                let (mut replies, from) = (Replies::new(), self.from());
                take_input(&[], &mut self.partial, &mut replies, from, &cx.shared)?;
                self.queue(replies, cx);
                continue;
            }
            if self.eof {
                return Ok(Next::Close);
            }
            if !self.may_read {
                return Ok(Next::Wait);
            }
            match self.tls.is_some() {
                false => self.read_plain(cx)?,
                true => self.read_tls(cx)?,
            }
        }
        Ok(Next::Again)
    }

    /// What a deadline that passed means for this connection: what it
    /// was waiting for.
    pub(super) fn timed_out(&self) -> Closed {
        if self.out_since.is_some() {
            Closed::WriteTimeout
        } else if self.tls.as_ref().is_some_and(|t| t.is_handshaking()) {
            Closed::HandshakeTimeout
        } else if self.partial.in_message() {
            Closed::MessageTimeout
        } else {
            Closed::IdleTimeout
        }
    }

    /// Why a drive that failed with `e` ends the connection.
    pub(super) fn failed(&self, e: &io::Error) -> Closed {
        match (e.kind(), &self.tls) {
            (io::ErrorKind::PermissionDenied, _) => Closed::Blackhole,
            (io::ErrorKind::InvalidData, Some(_))
                if e.get_ref().is_some_and(|e| e.is::<rustls::Error>()) =>
            {
                Closed::TlsError
            }
            _ => Closed::Error,
        }
    }

    /// Since when the connection has been idle: between messages, with
    /// nothing to write and no transfer or handshake under way. None:
    /// it is not.
    pub(super) fn idle_since(&self) -> Option<Instant> {
        let busy = !self.partial.bytes.is_empty()
            || self.partial.in_message()
            || !self.out.is_empty()
            || self.later.is_some()
            || (self.heard && self.tls.as_ref().is_some_and(|t| t.is_handshaking()));
        (!busy).then(|| self.partial.deadline())
    }

    /// When it may be closed to make room for a client holding fewer
    /// connections (it is busy, not idle): when it opened. None for a
    /// transfer or UPDATE under way, and for an address the per-client
    /// limit does not apply to (a secondary).
    pub(super) fn sheddable_since(&self) -> Option<Instant> {
        let exempt = matches!(self._slot.counted, super::super::limits::Counted::Exempt(_));
        (self.later.is_none() && !exempt).then_some(self.opened)
    }

    /// The client network the per-client limit counts this connection
    /// against; None for an address it does not apply to (a secondary).
    pub(super) fn counted_client(&self) -> Option<IpAddr> {
        match self._slot.counted {
            super::super::limits::Counted::Network(client) => Some(client),
            super::super::limits::Counted::Exempt(_) => None,
        }
    }

    fn from(&self) -> From {
        let transport = match self.tls {
            Some(_) => Transport::Tls,
            None => Transport::Tcp,
        };
        (self.peer, transport, self.local)
    }

    /// At its deadline, for a connection whose answers wait for the
    /// client: whether the client took some since (the kernel wakes a
    /// writer only once a third of the send buffer is free, so a client
    /// reading slowly but steadily may take answers with no event), or
    /// this was only a look during a transfer, before its time is up. If
    /// so, the deadline moves on.
    pub(super) fn still_taking(&mut self, cx: &LoopContext) -> bool {
        let Some(since) = self.out_since else {
            return false;
        };
        let took = match self.flush(cx.now, cx.timeouts()) {
            Ok(all) => all || self.out_since != Some(since),
            Err(_) => false,
        };
        let looked_early = self.later.is_some() && cx.now < since + cx.shared.idle;
        if took || looked_early {
            self.deadline.at = self.deadline_now(cx);
        }
        took || looked_early
    }

    /// When to give up on the connection, given what it waits for.
    fn deadline_now(&self, cx: &LoopContext) -> Option<Instant> {
        let idle = cx.shared.idle;
        if let Some(since) = self.out_since {
            // A client that does not read. During a transfer the loop
            // looks more often: the kernel's send buffer grows to
            // megabytes, and a slow reader frees too little of it within
            // the timeout to wake us, while the transfer's task waits on
            // the loop no longer than the timeout (black-box finding: an
            // AXFR to a steady 40 KB/s reader was cut).
            return match self.later {
                Some(_) => Some((since + idle).min(cx.now + idle / 4)),
                None => Some(since + idle),
            };
        }
        if self.later.is_some() {
            return None; // the runtime's task bounds its own waits
        }
        if self.tls.as_ref().is_some_and(|t| t.is_handshaking()) {
            // The whole handshake within the idle timeout; once its first
            // bytes came, within the message timeout of them too.
            return Some((self.opened + idle).min(self.partial.deadline()));
        }
        Some(self.partial.deadline())
    }

    /// Adds what answering asked to write; a transfer or UPDATE is handed
    /// to the runtime, and reading waits for it.
    fn queue(&mut self, replies: Replies, cx: &LoopContext) {
        let Replies { framed, transfers } = replies;
        if self.out.is_empty() {
            self.out = framed;
        } else {
            self.out.extend_from_slice(&framed);
            give_back(framed);
        }
        if !transfers.is_empty() {
            self.later = Some(cx.hand_to_runtime(transfers, self.peer));
        }
    }

    fn read_plain(&mut self, cx: &LoopContext) -> io::Result<()> {
        let mut replies = Replies::new();
        let from = self.from();
        with_read_buffer(|chunk| {
            let n = match (&self.stream).read(chunk) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.may_read = false;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
                Err(e) => return Err(e),
            };
            // A read that left room took all the kernel had.
            self.may_read = n == chunk.len() || self.read_closed;
            self.eof = n == 0;
            take_input(
                &chunk[..n],
                &mut self.partial,
                &mut replies,
                from,
                &cx.shared,
            )
        })?;
        self.queue(replies, cx);
        Ok(())
    }

    fn read_tls(&mut self, cx: &LoopContext) -> io::Result<()> {
        let from = self.from();
        let tls = self.tls.as_mut().expect("a TLS connection");
        let mut socket = Drains {
            stream: &self.stream,
            drained: false,
        };
        let took = match tls.read_tls(&mut socket) {
            Ok(0) => {
                self.eof = true;
                false
            }
            Ok(_) => {
                self.may_read = !socket.drained || self.read_closed;
                self.heard = true;
                true
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.may_read = false;
                return Ok(());
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
            Err(e) => return Err(e),
        };
        let was_handshaking = tls.is_handshaking();
        let state = match tls.process_new_packets() {
            Ok(state) => state,
            Err(e) => {
                let _ = tls.write_tls(&mut &self.stream); // the alert, best effort
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
        };
        if was_handshaking && !tls.is_handshaking() {
            count_handshake(tls, &cx.shared);
            self.partial.handshake_done(cx.now, cx.shared.idle);
        }
        self.eof |= state.peer_has_closed();
        if state.plaintext_bytes_to_read() == 0 {
            // A handshake under way is a message too: once its first bytes
            // came, it has the message timeout to finish (a ClientHello
            // trickled in held a slot for the whole idle timeout).
            if took && (tls.is_handshaking() || !was_handshaking) {
                self.partial.sealed_bytes(cx.now, cx.shared.message_timeout);
            }
            return Ok(());
        }
        let mut replies = Replies::new();
        let (partial, shared) = (&mut self.partial, &cx.shared);
        with_read_buffer(|chunk| {
            loop {
                match tls.reader().read(chunk) {
                    Ok(0) => return Ok(()),
                    Ok(n) => take_input(&chunk[..n], partial, &mut replies, from, shared)?,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                    Err(e) => return Err(e),
                }
            }
        })?;
        self.queue(replies, cx);
        Ok(())
    }

    /// Writes `out` (through TLS when there is TLS); true when all of it
    /// is written, false when the socket is full.
    fn flush(&mut self, now: Instant, (idle, message): (Duration, Duration)) -> io::Result<bool> {
        let waiting = self.out.len();
        let flushed = match &mut self.tls {
            None => write_plain(&self.stream, &mut self.out)?,
            Some(tls) => write_tls(&self.stream, tls, &mut self.out)?,
        };
        if !flushed {
            // The idle timeout runs from the client's last read: one that
            // reads slowly but steadily gets every answer.
            if self.out.len() < waiting || self.out_since.is_none() {
                self.out_since = Some(now);
            }
        } else {
            if self.out_since.take().is_some() {
                // Reading went on hold while the answers waited: a message
                // begun before gets its time from now (black-box finding:
                // a pipelining client reading steadily was cut).
                self.partial.resumed(now, message);
            }
            if waiting > 0 {
                self.partial.touch(now, idle); // the client took its answers
            }
            if self.out.capacity() > 0 {
                give_back(std::mem::take(&mut self.out));
            }
        }
        Ok(flushed)
    }

    /// The end of a connection: TLS says close_notify, best effort.
    pub(super) fn close(mut self) {
        if let Some(tls) = &mut self.tls
            && !tls.is_handshaking()
        {
            tls.send_close_notify();
            let _ = tls.write_tls(&mut &self.stream);
        }
        if let Some(pipe) = self.later.take() {
            pipe.abandon();
        }
    }
}

/// The socket as rustls reads it, telling whether a read left room (so
/// took all the kernel had, and the next waits for an event).
struct Drains<'a> {
    stream: &'a TcpStream,
    drained: bool,
}

impl Read for Drains<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.stream.read(buf)?;
        self.drained = n < buf.len();
        Ok(n)
    }
}

/// Writes what the socket takes of `out` and keeps the rest.
fn write_plain(mut stream: &TcpStream, out: &mut Vec<u8>) -> io::Result<bool> {
    let mut written = 0;
    while written < out.len() {
        match stream.write(&out[written..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    out.drain(..written);
    Ok(out.is_empty())
}

/// Hands `out` to TLS and writes what TLS has to send; rustls takes
/// plaintext only up to its own buffer's bound, so the rest waits in
/// `out`.
fn write_tls(
    stream: &TcpStream,
    tls: &mut ServerConnection,
    out: &mut Vec<u8>,
) -> io::Result<bool> {
    loop {
        if !out.is_empty() && !tls.is_handshaking() {
            let n = tls.writer().write(out)?;
            out.drain(..n);
        }
        while tls.wants_write() {
            match tls.write_tls(&mut &*stream) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if out.is_empty() || tls.is_handshaking() {
            return Ok(out.is_empty());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// A connection whose socket holds little, and the client's end.
    fn small_socket() -> (Conn, std::net::TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, peer) = listener.accept().unwrap();
        socket2::SockRef::from(&server)
            .set_send_buffer_size(4096)
            .unwrap();
        server.set_nonblocking(true).unwrap();
        let limiter = ConnectionLimiter::new(TcpLimits::default(), Vec::new());
        let slot = limiter.admit_or_why(peer.ip()).unwrap();
        let conn = Conn::new(
            TcpStream::from_std(server),
            peer,
            None,
            slot,
            (Instant::now(), Duration::from_secs(10)),
        );
        (conn, client)
    }

    /// Idle and message timeouts.
    const TIMEOUTS: (Duration, Duration) = (Duration::from_secs(10), Duration::from_secs(5));

    /// The wait for a client to take its answers runs from the last time
    /// it took any, not from when they began to wait: a slow reader keeps
    /// its connection, one that stops reading does not.
    #[test]
    fn the_write_wait_runs_from_the_clients_last_read() {
        let (mut conn, mut client) = small_socket();
        conn.out = vec![7; 1 << 20];
        let start = Instant::now();
        assert!(!conn.flush(start, TIMEOUTS).unwrap());
        std::thread::sleep(Duration::from_millis(100)); // what is in flight lands
        let settled = start + Duration::from_secs(1);
        conn.flush(settled, TIMEOUTS).unwrap();
        let since = conn.out_since.expect("answers waiting");
        // Nothing read: the wait keeps its start.
        assert!(
            !conn
                .flush(settled + Duration::from_secs(1), TIMEOUTS)
                .unwrap()
        );
        assert_eq!(conn.out_since, Some(since));
        // The client reads: the wait starts again.
        client.read_exact(&mut [0; 64 * 1024]).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let read_at = settled + Duration::from_secs(2);
        assert!(!conn.flush(read_at, TIMEOUTS).unwrap());
        assert_eq!(conn.out_since, Some(read_at));
    }
}
