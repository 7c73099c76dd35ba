//! What a connection of the event loop hands to the async runtime: the
//! transfers and UPDATE answers its queries asked for. They are made on
//! the runtime by the same code as on its own connections
//! ([`send_transfers`]), written into a [`Pipe`] instead of a socket; the
//! loop takes the bytes out when the socket has room, and is woken (its
//! `mio::Waker`) when there are new ones. So a transfer costs the loop a
//! cross-thread wake-up per chunk, and a query none.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use tokio::io::AsyncWrite;

/// Bytes a pipe holds before the runtime's writer waits for the loop.
pub(super) const PIPE_CAP: usize = 64 * 1024;

/// Bytes between a task on the runtime and a connection of the loop.
pub(super) struct Pipe {
    state: Mutex<PipeState>,
    /// Wakes the loop that reads the pipe.
    wake_loop: Arc<mio::Waker>,
}

#[derive(Default)]
struct PipeState {
    bytes: Vec<u8>,
    /// The writer is done (all it wrote is in `bytes`).
    finished: bool,
    /// The writer failed: the connection is to be closed.
    failed: bool,
    /// The loop's connection is gone: the writer stops.
    abandoned: bool,
    /// The writer, waiting for room.
    writer: Option<Waker>,
}

/// What the loop found in a pipe.
#[derive(Debug, PartialEq)]
pub(super) enum Taken {
    /// Bytes were appended.
    Bytes,
    /// Nothing yet: the loop is woken when there is.
    Nothing,
    /// The writer is done and everything was taken.
    Finished,
    /// The writer failed.
    Failed,
}

impl Pipe {
    pub(super) fn new(wake_loop: Arc<mio::Waker>) -> Arc<Pipe> {
        Arc::new(Pipe {
            state: Mutex::default(),
            wake_loop,
        })
    }

    /// Appends what the writer has written to `out` (the loop's side).
    pub(super) fn take(&self, out: &mut Vec<u8>) -> Taken {
        let mut state = self.state.lock().unwrap();
        if state.failed {
            return Taken::Failed;
        }
        if state.bytes.is_empty() {
            return match state.finished {
                true => Taken::Finished,
                false => Taken::Nothing,
            };
        }
        if out.is_empty() {
            std::mem::swap(out, &mut state.bytes);
        } else {
            out.append(&mut state.bytes);
        }
        if let Some(writer) = state.writer.take() {
            writer.wake();
        }
        Taken::Bytes
    }

    /// The connection is closed: the writer's next write fails.
    pub(super) fn abandon(&self) {
        let mut state = self.state.lock().unwrap();
        state.abandoned = true;
        if let Some(writer) = state.writer.take() {
            writer.wake();
        }
    }

    /// The writer's end: `ok` false closes the connection once the loop
    /// sees it.
    pub(super) fn finish(&self, ok: bool) {
        let mut state = self.state.lock().unwrap();
        state.finished = true;
        state.failed |= !ok;
        drop(state);
        self.wake();
    }

    fn wake(&self) {
        if let Err(e) = self.wake_loop.wake() {
            tracing::warn!("cannot wake a TCP event loop: {e}");
        }
    }
}

/// The runtime's end of a [`Pipe`], written as a socket would be.
pub(super) struct PipeWriter(pub(super) Arc<Pipe>);

impl AsyncWrite for PipeWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let pipe = &self.0;
        let mut state = pipe.state.lock().unwrap();
        if state.abandoned {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        let room = PIPE_CAP.saturating_sub(state.bytes.len());
        if room == 0 {
            state.writer = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let n = room.min(buf.len());
        let was_empty = state.bytes.is_empty();
        state.bytes.extend_from_slice(&buf[..n]);
        drop(state);
        if was_empty {
            pipe.wake(); // bytes the loop does not know of yet
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    fn pipe() -> (Arc<Pipe>, mio::Poll) {
        let poll = mio::Poll::new().unwrap();
        let waker = mio::Waker::new(poll.registry(), mio::Token(0)).unwrap();
        (Pipe::new(Arc::new(waker)), poll)
    }

    #[tokio::test]
    async fn bytes_pass_in_order_and_the_end_is_seen_once_taken() {
        let (pipe, _poll) = pipe();
        let mut writer = PipeWriter(pipe.clone());
        writer.write_all(b"abc").await.unwrap();
        writer.write_all(b"de").await.unwrap();
        pipe.finish(true);
        let mut out = b"x".to_vec();
        assert_eq!(pipe.take(&mut out), Taken::Bytes);
        assert_eq!(out, b"xabcde");
        assert_eq!(pipe.take(&mut out), Taken::Finished);
    }

    #[tokio::test]
    async fn a_writer_waits_at_the_cap_until_the_loop_takes() {
        let (pipe, _poll) = pipe();
        let mut writer = PipeWriter(pipe.clone());
        let big = vec![7u8; PIPE_CAP + 10];
        let task = tokio::spawn(async move { writer.write_all(&big).await });
        let mut out = Vec::new();
        let mut rounds = 0;
        while out.len() < PIPE_CAP + 10 {
            rounds += 1;
            assert!(rounds < 10_000, "the writer never finished");
            if pipe.take(&mut out) == Taken::Nothing {
                tokio::task::yield_now().await;
            }
            assert!(out.len() <= PIPE_CAP + 10);
        }
        task.await.unwrap().unwrap();
        assert_eq!(pipe.take(&mut out), Taken::Nothing, "not finished yet");
    }

    #[tokio::test]
    async fn an_abandoned_pipe_fails_its_writer_and_a_failed_one_its_reader() {
        let (pipe, _poll) = pipe();
        let mut writer = PipeWriter(pipe.clone());
        pipe.abandon();
        assert!(writer.write_all(b"a").await.is_err());
        pipe.finish(false);
        assert_eq!(pipe.take(&mut Vec::new()), Taken::Failed);
    }
}
