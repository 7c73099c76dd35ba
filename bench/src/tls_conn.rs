//! The cost of a DNS-over-TLS connection, from our own client: new
//! connections at a fixed rate, each a TLS handshake (a new session, or
//! one resumed with the ticket an earlier connection got), a few queries
//! one after another, and a close. dnsperf's `num-queries-per-conn` makes
//! connections too, but whether it resumes is OpenSSL's choice and not
//! reported; here it is set and counted.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::client::Resumption;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, HandshakeKind};

use crate::blast::QuerySet;
use crate::sys;

/// Bound on each connect, read and write.
const WAIT: Duration = Duration::from_secs(2);

/// At most this many seconds of load.
const MAX_SECONDS: f64 = 600.0;

#[derive(Clone, Debug)]
pub struct TlsConnOpts {
    pub target: SocketAddr,
    /// New connections a second, over all threads.
    pub rate: f64,
    pub duration: Duration,
    /// Queries on each connection, one after another (at least 1).
    pub queries_per_conn: usize,
    /// Resume sessions (each thread keeps its tickets) or make every
    /// handshake a new session.
    pub resume: bool,
    /// Threads, each with one connection at a time.
    pub threads: usize,
}

/// What a run did; `cpu_s` is the client threads' own CPU time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TlsConnResult {
    pub connections: u64,
    /// Of `connections`, those whose session was resumed.
    pub resumed: u64,
    pub answered: u64,
    /// Connections that failed (connect, handshake, a wrong answer).
    pub failed: u64,
    pub run_s: f64,
    pub cpu_s: f64,
}

impl TlsConnResult {
    fn add(&mut self, other: &TlsConnResult) {
        self.connections += other.connections;
        self.resumed += other.resumed;
        self.answered += other.answered;
        self.failed += other.failed;
        self.run_s = self.run_s.max(other.run_s);
        self.cpu_s += other.cpu_s;
    }

    pub fn offered_cps(&self) -> f64 {
        (self.connections + self.failed) as f64 / self.run_s.max(1e-9)
    }
}

/// Opens connections at `opts.rate` for `opts.duration`, on every thread.
pub fn run(queries: &QuerySet, opts: &TlsConnOpts) -> io::Result<TlsConnResult> {
    if queries.is_empty() || opts.rate <= 0.0 || opts.queries_per_conn == 0 {
        return Err(io::Error::other(
            "a rate, queries and queries per connection",
        ));
    }
    let threads = opts.threads.max(1);
    let duration = opts.duration.min(Duration::from_secs_f64(MAX_SECONDS));
    let interval = Duration::from_secs_f64(threads as f64 / opts.rate);
    let started = Instant::now();
    let results = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                // Threads start spread over one interval, not at once.
                let first = started + interval.mul_f64(t as f64 / threads as f64);
                let client = Client::new(opts, queries, t * 7919);
                scope.spawn(move || client.run(first, interval, started + duration))
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a client thread"))
            .collect::<Vec<_>>()
    });
    let mut total = TlsConnResult::default();
    results.iter().for_each(|r| total.add(r));
    Ok(total)
}

/// One thread's connections, one at a time.
struct Client<'a> {
    config: Arc<ClientConfig>,
    target: SocketAddr,
    queries: &'a QuerySet,
    per_conn: usize,
    /// The next query of the set to ask.
    next: usize,
}

impl<'a> Client<'a> {
    fn new(opts: &TlsConnOpts, queries: &'a QuerySet, first_query: usize) -> Client<'a> {
        let mut config = crate::phases::idle_tls::client_config();
        if !opts.resume {
            config.resumption = Resumption::disabled();
        }
        Client {
            config: Arc::new(config),
            target: opts.target,
            queries,
            per_conn: opts.queries_per_conn,
            next: first_query % queries.len(),
        }
    }

    fn run(mut self, first: Instant, interval: Duration, end: Instant) -> TlsConnResult {
        let cpu0 = sys::thread_cpu_seconds();
        let mut out = TlsConnResult::default();
        let mut due = first;
        while due < end {
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            match self.connection() {
                Ok((kind, answered)) => {
                    out.connections += 1;
                    out.resumed += u64::from(kind == HandshakeKind::Resumed);
                    out.answered += answered;
                }
                Err(_) => out.failed += 1,
            }
            // Behind schedule (the server is slower than the rate): the
            // missed starts are not made up in a burst.
            due = (due + interval).max(Instant::now().min(end));
        }
        out.run_s = first.elapsed().as_secs_f64();
        out.cpu_s = sys::thread_cpu_seconds() - cpu0;
        out
    }

    /// One connection: handshake, the queries, close_notify.
    fn connection(&mut self) -> io::Result<(HandshakeKind, u64)> {
        let tcp = TcpStream::connect_timeout(&self.target, WAIT)?;
        tcp.set_read_timeout(Some(WAIT))?;
        tcp.set_write_timeout(Some(WAIT))?;
        tcp.set_nodelay(true)?;
        let name = ServerName::IpAddress(self.target.ip().into());
        let tls = ClientConnection::new(self.config.clone(), name).map_err(io::Error::other)?;
        let mut conn = rustls::StreamOwned::new(tls, tcp);
        let mut answered = 0;
        for i in 0..self.per_conn {
            let query = self.queries.get(self.next);
            self.next = (self.next + 1) % self.queries.len();
            ask(&mut conn, query, i as u16)?;
            answered += 1;
        }
        let kind = conn.conn.handshake_kind().unwrap_or(HandshakeKind::Full);
        conn.conn.send_close_notify();
        let _ = conn.flush();
        Ok((kind, answered))
    }
}

/// Sends `query` with `id` and reads its answer.
fn ask(conn: &mut impl ReadWrite, query: &[u8], id: u16) -> io::Result<()> {
    let mut framed = Vec::with_capacity(query.len() + 2);
    framed.extend_from_slice(&(query.len() as u16).to_be_bytes());
    framed.extend_from_slice(&id.to_be_bytes());
    framed.extend_from_slice(&query[2..]);
    conn.write_all(&framed)?;
    conn.flush()?;
    let mut len = [0u8; 2];
    conn.read_exact(&mut len)?;
    let mut answer = vec![0u8; u16::from_be_bytes(len) as usize];
    conn.read_exact(&mut answer)?;
    match answer.len() >= 12 && answer[..2] == id.to_be_bytes() && answer[2] & 0x80 != 0 {
        true => Ok(()),
        false => Err(io::Error::other("not an answer to the query")),
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_proto::{Name, RType};

    /// The TLS floor (Heron's TLS settings) and a query for it.
    fn floor(tag: &str) -> (SocketAddr, QuerySet) {
        let dir = std::env::temp_dir().join(format!("heron-bench-{tag}-{}", std::process::id()));
        let tls = crate::servers::TlsFiles::self_signed(&dir).expect("a certificate");
        let floor = crate::tls_floor::spawn_for_test(&tls.cert, &tls.key);
        let _ = std::fs::remove_dir_all(&dir);
        let questions = [(Name::parse("a.test").unwrap(), RType::A)];
        (floor, QuerySet::of_questions(&questions))
    }

    fn opts(target: SocketAddr, resume: bool) -> TlsConnOpts {
        TlsConnOpts {
            target,
            rate: 200.0,
            duration: Duration::from_millis(300),
            queries_per_conn: 3,
            resume,
            threads: 2,
        }
    }

    #[test]
    fn connections_resume_only_when_asked() {
        let (floor, queries) = floor("tls-resume");
        let resumed = run(&queries, &opts(floor, true)).unwrap();
        assert!(resumed.connections >= 10, "{resumed:?}");
        assert_eq!(resumed.failed, 0);
        assert_eq!(resumed.answered, 3 * resumed.connections);
        // Each thread's first handshake is a new session.
        assert_eq!(resumed.resumed, resumed.connections - 2, "{resumed:?}");
        let full = run(&queries, &opts(floor, false)).unwrap();
        assert!(full.connections >= 10, "{full:?}");
        assert_eq!((full.resumed, full.failed), (0, 0));
    }

    #[test]
    fn nothing_listening_counts_failures_and_stops_on_time() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = closed.local_addr().unwrap();
        drop(closed);
        let questions = [(Name::parse("a.test").unwrap(), RType::A)];
        let queries = QuerySet::of_questions(&questions);
        let started = Instant::now();
        let r = run(&queries, &opts(addr, true)).unwrap();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!((r.connections, r.answered), (0, 0));
        assert!(r.failed > 0);
    }
}
