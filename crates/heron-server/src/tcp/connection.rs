//! A plain DNS-over-TCP connection: wait, read, answer, write.

use super::*;

pub(super) async fn connection(
    mut stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) -> io::Result<()> {
    set_nodelay(&stream, &shared)?;
    // Only what is not answered is kept between reads: an idle connection
    // holds no buffers at all.
    let mut partial = Unanswered::new(Instant::now(), shared.idle);
    let from = (peer, Transport::Tcp, stream.local_addr().ok());
    let stop = shutdown.changed();
    let timer = tokio::time::sleep(shared.idle);
    tokio::pin!(stop, timer);
    loop {
        // What the cap held back is answered before anything more is read.
        while partial.holds_whole_message() {
            let mut replies = Replies::new();
            take_input(&[], &mut partial, &mut replies, from, &shared)?;
            respond_plain(&mut stream, replies, peer, &shared).await?;
            partial.touch(Instant::now(), shared.idle);
        }
        let deadline = partial.deadline();
        if !wait_readable(&stream, deadline, timer.as_mut(), stop.as_mut()).await? {
            return Ok(()); // idle, a message not completed in time, or shutdown
        }
        let mut replies = Replies::new();
        let read = with_read_buffer(|chunk| {
            let n = read_available(&stream, chunk)?;
            if let Some(n @ 1..) = n {
                take_input(&chunk[..n], &mut partial, &mut replies, from, &shared)?;
            }
            Ok::<_, io::Error>(n)
        })?;
        match read {
            None => continue, // readiness was stale
            Some(0) => return Ok(()),
            Some(_) => {
                respond_plain(&mut stream, replies, peer, &shared).await?;
                // Between messages, idle counts from the answers written.
                partial.touch(Instant::now(), shared.idle);
            }
        }
    }
}

/// [`respond`] for a plain connection: the answers are written at once
/// when the socket takes them, as it nearly always does, so that only a
/// client that does not read makes the task wait (in a boxed future: the
/// wait's state would otherwise size every connection's task).
pub(super) async fn respond_plain(
    stream: &mut TcpStream,
    replies: Replies,
    peer: SocketAddr,
    shared: &Shared,
) -> io::Result<()> {
    let Replies { framed, transfers } = replies;
    let written = write_now(stream, &framed)?;
    if written < framed.len() {
        Box::pin(write_all(stream, &framed[written..], shared.idle)).await?;
    }
    give_back(framed);
    if !transfers.is_empty() {
        Box::pin(send_transfers(stream, transfers, peer, shared)).await?;
    }
    Ok(())
}

/// Writes what the socket takes of `bytes` without waiting; returns how
/// much that was.
pub(super) fn write_now(stream: &TcpStream, bytes: &[u8]) -> io::Result<usize> {
    let mut written = 0;
    while written < bytes.len() {
        match stream.try_write(&bytes[written..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(written)
}

/// Waits until `stream` may be read: true then, false once `deadline`
/// has passed or `stop` has completed. `timer` stays armed from one call
/// to the next and is moved only when it would fire after the deadline;
/// when it fires before it (the deadline moved on since), it is armed
/// again. So a busy connection re-arms its timer about once per idle
/// timeout, not once per read, and `stop` is registered once.
pub(super) async fn wait_readable(
    stream: &TcpStream,
    deadline: Instant,
    mut timer: Pin<&mut Sleep>,
    mut stop: Pin<&mut impl Future>,
) -> io::Result<bool> {
    let deadline = tokio::time::Instant::from_std(deadline);
    if deadline < timer.deadline() {
        timer.as_mut().reset(deadline);
    }
    loop {
        tokio::select! {
            biased;
            ready = std::future::poll_fn(|cx| stream.poll_read_ready(cx)) => {
                ready?;
                return Ok(true);
            }
            _ = stop.as_mut() => return Ok(false),
            () = timer.as_mut() => {
                if tokio::time::Instant::now() >= deadline {
                    return Ok(false);
                }
                timer.as_mut().reset(deadline);
            }
        }
    }
}

thread_local! {
    /// Where reads land, one per runtime thread, reused by every
    /// connection: a chunk on the stack was zeroed, 8 KiB written, on
    /// every read (more than half of a lone query's user-space
    /// instructions, docs/benchmarks/tcp.md).
    static READ_BUFFER: RefCell<Box<[u8; READ_CHUNK]>> =
        RefCell::new(Box::new([0; READ_CHUNK]));
}

/// Runs `f` with this thread's read buffer. `f` cannot await, so the
/// buffer is never held across a task switch nor saved in a task.
pub(super) fn with_read_buffer<T>(f: impl FnOnce(&mut [u8]) -> T) -> T {
    READ_BUFFER.with_borrow_mut(|chunk| f(&mut chunk[..]))
}

/// Reads what `stream` holds into `chunk`; None when it holds nothing
/// (the readiness was stale). A read that leaves room in `chunk` took all
/// the kernel had, so the readiness is cleared then, and the next wait
/// goes to epoll rather than to one more read that would only return
/// WouldBlock: bytes arriving after this read raise a new edge-triggered
/// event, and tokio clears only the readiness this read was made on.
pub(super) fn read_available(stream: &TcpStream, chunk: &mut [u8]) -> io::Result<Option<usize>> {
    use std::io::Read;
    let mut drained = 0;
    let read = stream.try_io(Interest::READABLE, || {
        let socket = SockRef::from(stream);
        let n = (&*socket).read(chunk)?;
        if n == 0 || n == chunk.len() {
            return Ok(n);
        }
        drained = n;
        Err(io::ErrorKind::WouldBlock.into())
    });
    match read {
        Ok(n) => Ok(Some(n)),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok((drained > 0).then_some(drained)),
        Err(e) => Err(e),
    }
}
