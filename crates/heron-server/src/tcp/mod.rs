//! DNS over TCP (RFC 7766).
//!
//! Each connection reads whatever the client has sent, answers the
//! complete queries in it, and writes the responses in one write, so a
//! client that pipelines gets its answers without waiting for each other.
//! At most [`QUEUED_ANSWERS_CAP`] bytes of answers are built before they
//! are written: the queries past the cap wait, unread ones in the socket,
//! until the client has taken what is queued, so a client that sends and
//! never reads holds little memory. Between reads a connection keeps only
//! what it has not answered (an incomplete message, or whole ones the cap
//! held back: at most a message and a read), and its task is kept small (transfers and TLS live elsewhere), so an
//! idle connection costs about 1.4 KB besides its socket (`heron-bench`,
//! docs/benchmarks: "Idle TCP connections").
//!
//! A connection is closed when no message begins within the idle timeout,
//! or when a message begun is not complete within the message timeout:
//! bytes that trickle in do not keep it open. Once a peak of connections
//! has passed, the heap they freed is handed back to the kernel
//! ([`release_memory_after_peaks`]): the allocator would keep it.
//!
//! A listener given TLS settings serves DNS over TLS (RFC 7858) and zone
//! transfers over TLS (RFC 9103) the same way, after the handshake.
//!
//! The parts, one concern each: [`limits`] (connections per client and
//! in all, accept back-off, memory handed back after a peak), the plain
//! connection's read loop (`connection.rs`), the TLS connection's
//! (`tls.rs`), and the framing both share: messages in, answers and
//! transfers out (`messages.rs`). Policy is the processor's; these only
//! move bytes.
//!
//! That is TCP on the async runtime, with `[tcp] event-loop = false`. By
//! default the same framing, limits and timeouts run on event loops of
//! Heron's own, one per worker thread ([`event_loop`]), which hand
//! transfers and UPDATE answers to the runtime code here.

mod connection;
pub mod event_loop;
mod limits;
mod messages;
mod tls;

use connection::*;
pub use limits::{
    AcceptFailures, ConnectionLimiter, RELEASE_AFTER_PEAK, RELEASE_AT_MOST_EVERY, Slot,
    log_refused_left_over, next_connection, release_memory_after_peaks,
};
use messages::*;
use tls::*;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockRef, Socket, Type};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, Interest, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};
use tokio::time::{Sleep, timeout};

use heron_proto::prefix::Prefix;

use crate::TcpLimits;
use crate::processor::{Event, Outcome, Request, Transfer, Transport};
use crate::service::{Service, unix_now};
use crate::stats::{Closed, Limit, Via, qtype_of};
use crate::tls::TlsAcceptor;
use crate::update::Reply;

/// Bytes read per system call, into the thread's [`READ_BUFFER`].
const READ_CHUNK: usize = 8192;
/// Reads a TLS connection takes before it writes what they answered.
const READS_PER_ROUND: usize = 8;
/// Bytes of answers a connection builds before it writes them; the next
/// query is answered only after they are written. One response may take
/// it past the cap, by at most a message.
pub const QUEUED_ANSWERS_CAP: usize = 64 * 1024;
/// Pending listen queue asked of the kernel (which cuts it to
/// `net.core.somaxconn`; `heron doctor` checks that).
pub const LISTEN_BACKLOG: i32 = 1024;

/// Binds a TCP listener (with `SO_REUSEADDR`, so restarts do not wait for
/// TIME_WAIT) for use on the current tokio runtime.
pub fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    TcpListener::from_std(socket.into())
}

/// Accepts connections until `shutdown` turns true; with `tls`, each
/// begins with a TLS handshake.
pub async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    service: Arc<Service>,
    limiter: Arc<ConnectionLimiter>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut failures = AcceptFailures::default();
    let shared = Arc::new(Shared {
        service,
        idle: limiter.limits.idle_timeout,
        message_timeout: limiter.limits.message_timeout,
        nodelay_inherited: nodelay_for_accepted(&listener),
    });
    while let Some((stream, peer)) = next_connection(&listener, &mut shutdown, &mut failures).await
    {
        let stats = &shared.service.stats;
        if shared.service.processor.blackholes(peer.ip()) {
            stats.with_thread_cells(|c| c.refused(Limit::Blackhole));
            continue; // `blackhole`: closed unanswered
        }
        let slot = match limiter.admit_or_why(peer.ip()) {
            Ok(slot) => slot,
            Err(limit) => {
                stats.with_thread_cells(|c| c.refused(limit));
                limits::log_refused(peer, limit);
                continue; // dropping the stream closes it
            }
        };
        let via = if tls.is_some() { Via::Tls } else { Via::Tcp };
        stats.with_thread_cells(|c| c.accepted(via));
        let (shared, shutdown) = (shared.clone(), shutdown.clone());
        // Spawned apart, so a plain connection's task is not sized for the
        // TLS state it never has: the task is what an idle connection
        // costs. Each connection future is made inside its task's block,
        // not passed in, or the task would hold it twice (rustc #62958).
        match &tls {
            None => tokio::spawn(plain_task(stream, peer, shared, shutdown, slot)),
            Some(tls) => {
                let tls = tls.clone();
                tokio::spawn(async move {
                    let ended = tls_connection(tls, stream, peer, shared, shutdown).await;
                    log_end(peer, ended);
                    drop(slot);
                })
            }
        };
    }
}

/// The task of a plain DNS-over-TCP connection, which frees its slot at
/// the end.
async fn plain_task(
    stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
    slot: Slot,
) {
    log_end(peer, connection(stream, peer, shared, shutdown).await);
    drop(slot);
}

fn log_end(peer: SocketAddr, ended: io::Result<()>) {
    if let Err(e) = ended {
        tracing::debug!("TCP connection from {peer} ended: {e}");
    }
}

/// What every connection task shares.
struct Shared {
    service: Arc<Service>,
    /// Longest wait for a message to begin.
    idle: Duration,
    /// Longest time from a message's first byte to its last.
    message_timeout: Duration,
    /// Whether accepted sockets come with `TCP_NODELAY` from the listener.
    nodelay_inherited: bool,
}

/// Sets `TCP_NODELAY` on `listener`, which Linux copies to every socket
/// it accepts: one system call per listener instead of one per
/// connection. False when it could not be set; each connection then sets
/// its own.
fn nodelay_for_accepted(listener: &TcpListener) -> bool {
    SockRef::from(listener).set_nodelay(true).is_ok()
}

/// Gives `stream` `TCP_NODELAY` unless it has it from the listener, so
/// that no answer waits for the client's acknowledgement of the last.
fn set_nodelay(stream: &TcpStream, shared: &Shared) -> io::Result<()> {
    if shared.nodelay_inherited {
        return Ok(());
    }
    stream.set_nodelay(true)
}

#[cfg(test)]
mod tests;
