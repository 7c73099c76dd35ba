//! The TLS path's floor: a DNS-over-TLS "server" that does no DNS work.
//! Each worker thread runs one epoll loop (mio) over its own
//! `SO_REUSEPORT` listener; every connection is a rustls server session
//! with Heron's own TLS settings ([`heron_server::tls::server_config`]),
//! and every length-prefixed message read is written back with QR set.
//! What it costs per query is what the kernel and rustls cost, the least
//! a DoT server on this path can pay.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use rustls::{ServerConfig, ServerConnection};

static STOP: AtomicBool = AtomicBool::new(false);
const LISTENER: Token = Token(usize::MAX);
/// Longest a worker waits in epoll before it looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(200);

/// Serves until SIGTERM or SIGINT, `workers` threads.
pub fn run(listen: SocketAddr, cert: &Path, key: &Path, workers: usize) -> io::Result<()> {
    heron_sys::process::set_on_termination(&STOP)?;
    let config = heron_server::tls::server_config_from_files(cert, key)
        .map_err(io::Error::other)?
        .0;
    let mut threads = Vec::new();
    for i in 0..workers.max(1) {
        let listener = bind(listen)?;
        let config = config.clone();
        threads.push(
            std::thread::Builder::new()
                .name(format!("tls-floor-{i}"))
                .spawn(move || serve(listener, config))?,
        );
    }
    eprintln!("TLS floor answering on {listen}");
    for t in threads {
        if let Ok(Err(e)) = t.join() {
            eprintln!("TLS floor worker: {e}");
        }
    }
    Ok(())
}

fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    s.bind(&addr.into())?;
    s.listen(4096)?;
    s.set_nonblocking(true)?;
    Ok(TcpListener::from_std(s.into()))
}

struct Conn {
    stream: TcpStream,
    tls: ServerConnection,
    /// Plaintext read and not yet a whole message.
    pending: Vec<u8>,
}

/// One worker's loop; connections in a slab indexed by token.
fn serve(mut listener: TcpListener, config: Arc<ServerConfig>) -> io::Result<()> {
    let mut poll = Poll::new()?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    let mut events = Events::with_capacity(256);
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut plain = vec![0u8; 65_536];
    while !STOP.load(Ordering::Relaxed) {
        if let Err(e) = poll.poll(&mut events, Some(STOP_POLL)) {
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        for event in events.iter() {
            if event.token() == LISTENER {
                accept_all(&listener, &poll, &config, &mut conns, &mut free);
                continue;
            }
            let i = event.token().0;
            let Some(conn) = conns.get_mut(i).and_then(Option::as_mut) else {
                continue;
            };
            if !conn.pump(&mut plain) {
                let _ = poll.registry().deregister(&mut conn.stream);
                conns[i] = None;
                free.push(i);
            } else if conn.tls.wants_write() {
                let _ = poll.registry().reregister(
                    &mut conn.stream,
                    Token(i),
                    Interest::READABLE | Interest::WRITABLE,
                );
            }
        }
    }
    Ok(())
}

fn accept_all(
    listener: &TcpListener,
    poll: &Poll,
    config: &Arc<ServerConfig>,
    conns: &mut Vec<Option<Conn>>,
    free: &mut Vec<usize>,
) {
    // Bounded by the listener's backlog: it ends at WouldBlock.
    while let Ok((mut stream, _)) = listener.accept() {
        let _ = stream.set_nodelay(true);
        let Ok(tls) = ServerConnection::new(config.clone()) else {
            continue;
        };
        let i = free.pop().unwrap_or(conns.len());
        if poll
            .registry()
            .register(&mut stream, Token(i), Interest::READABLE)
            .is_err()
        {
            continue;
        }
        let conn = Conn {
            stream,
            tls,
            pending: Vec::new(),
        };
        match i == conns.len() {
            true => conns.push(Some(conn)),
            false => conns[i] = Some(conn),
        }
    }
}

impl Conn {
    /// Reads all that is there, answers every whole message, writes what
    /// TLS has to send. False: the connection is over.
    fn pump(&mut self, plain: &mut [u8]) -> bool {
        loop {
            match self.tls.read_tls(&mut self.stream) {
                Ok(0) => return false,
                Ok(_) => {
                    if self.tls.process_new_packets().is_err() {
                        let _ = self.tls.write_tls(&mut self.stream);
                        return false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return false,
            }
        }
        loop {
            match self.tls.reader().read(plain) {
                Ok(0) => break,
                Ok(n) => self.pending.extend_from_slice(&plain[..n]),
                Err(_) => break,
            }
        }
        if !self.echo() {
            return false;
        }
        while self.tls.wants_write() {
            match self.tls.write_tls(&mut self.stream) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => return false,
            }
        }
        true
    }

    /// Writes back every whole message of `pending` with QR set.
    fn echo(&mut self) -> bool {
        let mut at = 0;
        while self.pending.len() >= at + 2 {
            let len = u16::from_be_bytes([self.pending[at], self.pending[at + 1]]) as usize;
            let end = at + 2 + len;
            if self.pending.len() < end {
                break;
            }
            if len >= 12 {
                self.pending[at + 4] |= 0x80;
            }
            if self.tls.writer().write_all(&self.pending[at..end]).is_err() {
                return false;
            }
            at = end;
        }
        self.pending.drain(..at);
        true
    }
}

/// A floor of one worker on a free loopback port, for the tests of the
/// TLS clients; it serves until the test process ends.
#[cfg(test)]
pub(crate) fn spawn_for_test(cert: &Path, key: &Path) -> SocketAddr {
    let (config, _) =
        heron_server::tls::server_config_from_files(cert, key).expect("test TLS files");
    let listener = bind(SocketAddr::from(([127, 0, 0, 1], 0))).expect("bind");
    let addr = listener.local_addr().expect("local address");
    std::thread::spawn(move || serve(listener, config));
    addr
}
