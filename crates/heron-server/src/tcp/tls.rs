//! A DNS-over-TLS connection under the same framing as a plain one.

use super::*;

/// A connection with TLS under the same framing. Between reads it holds
/// no buffer of ours, only rustls's state: it waits for the socket to be
/// readable, then takes all the plaintext TLS has at once into the
/// thread's read buffer (reads polled once, never awaited), so nothing is left in
/// TLS's buffers while it waits again.
pub(super) async fn tls_connection(
    tls: TlsAcceptor,
    stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) -> io::Result<()> {
    set_nodelay(&stream, &shared)?;
    let local = stream.local_addr().ok();
    let mut stream = timeout(shared.idle, tls.accept(stream))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))??;
    count_handshake(stream.get_ref().1, &shared);
    let mut partial = Unanswered::new(Instant::now(), shared.idle);
    let mut ended = false;
    // Whether the socket woke the loop: a wake that makes no plaintext
    // brought TLS bytes of a message begun.
    let mut woken = false;
    let stop = shutdown.changed();
    let timer = tokio::time::sleep(shared.idle);
    tokio::pin!(stop, timer);
    while !ended {
        let mut replies = Replies::new();
        let from = (peer, Transport::Tls, local);
        let drained = if partial.holds_whole_message() {
            // What the cap held back is answered before anything more is
            // read (the rest waits in TLS's bounded buffers or the socket).
            take_input(&[], &mut partial, &mut replies, from, &shared)?;
            false
        } else {
            // A client that keeps sending is answered every few reads, or
            // sooner once the answers reach the cap.
            let reader = Reader {
                from,
                woken,
                shared: &shared,
            };
            let drained;
            (ended, drained) = reader.read_rounds(&mut stream, &mut partial, &mut replies)?;
            drained
        };
        woken = false;
        let answered = !replies.framed.is_empty() || !replies.transfers.is_empty();
        respond(&mut stream, replies, peer, &shared).await?;
        if answered {
            // Between messages, idle counts from the answers written.
            partial.touch(Instant::now(), shared.idle);
        }
        if ended {
            break;
        }
        if !drained {
            // Plaintext may still wait in TLS: read again before waiting.
            continue;
        }
        let deadline = partial.deadline();
        if !wait_readable(stream.get_ref().0, deadline, timer.as_mut(), stop.as_mut()).await? {
            break; // idle, a message not completed in time, or shutdown
        }
        woken = true;
    }
    // Our close_notify, best effort: the client may be gone.
    let _ = timeout(shared.idle, stream.shutdown()).await;
    Ok(())
}

/// What one connection's reads need to know besides the stream.
struct Reader<'a> {
    from: (SocketAddr, Transport, Option<SocketAddr>),
    /// Whether the socket woke the loop (see `tls_connection`).
    woken: bool,
    shared: &'a Shared,
}

impl Reader<'_> {
    /// Up to `READS_PER_ROUND` reads of plaintext into the thread's read
    /// buffer, taken in as they come: whether the client ended, and
    /// whether TLS had nothing more (drained).
    fn read_rounds<S: AsyncRead + Unpin>(
        &self,
        stream: &mut S,
        partial: &mut Unanswered,
        replies: &mut Replies,
    ) -> io::Result<(bool, bool)> {
        let (mut ended, mut drained) = (false, false);
        with_read_buffer(|chunk| {
            for round in 0..READS_PER_ROUND {
                drained = false;
                match read_now(stream, chunk) {
                    Poll::Ready(Ok(0)) => ended = true,
                    Poll::Ready(Ok(n)) => {
                        take_input(&chunk[..n], partial, replies, self.from, self.shared)?;
                        if partial.holds_whole_message() || !replies.transfers.is_empty() {
                            break;
                        }
                        continue;
                    }
                    Poll::Ready(Err(e)) => return Err(e),
                    Poll::Pending => {
                        drained = true;
                        if round == 0 && self.woken {
                            // Woken by bytes that made no plaintext.
                            partial.sealed_bytes(Instant::now(), self.shared.message_timeout);
                        }
                    }
                }
                break;
            }
            Ok(())
        })?;
        Ok((ended, drained))
    }
}

/// One read of whatever TLS can give now, without waiting: Pending when
/// the socket has nothing more (its readiness is then cleared, so the
/// next `readable()` waits for new data).
pub(super) fn read_now<S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut [u8],
) -> Poll<io::Result<usize>> {
    let mut cx = Context::from_waker(Waker::noop());
    let mut read = ReadBuf::new(buf);
    match Pin::new(stream).poll_read(&mut cx, &mut read) {
        Poll::Ready(Ok(())) => Poll::Ready(Ok(read.filled().len())),
        Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
        Poll::Pending => Poll::Pending,
    }
}

/// Counts a completed handshake as a new session or a resumed one.
pub(super) fn count_handshake(tls: &rustls::ServerConnection, shared: &Shared) {
    let resumed = tls.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
    (shared.service.stats).with_thread_cells(|c| c.handshake(resumed));
}
