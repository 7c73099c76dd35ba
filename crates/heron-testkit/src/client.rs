//! A minimal DNS client: build a query, send it over UDP or TCP.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use heron_proto::message::{HEADER_LEN, Header, flags};
use heron_proto::{Class, Name, Opcode, RType};

/// How long to wait for a response (per UDP try, per TCP read).
pub const TIMEOUT: Duration = Duration::from_secs(2);
/// UDP tries in all (the first and one retry).
pub const UDP_TRIES: u32 = 2;

/// The OPT record of a query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EdnsOpts {
    pub udp_size: u16,
    pub do_bit: bool,
    pub version: u8,
}

impl Default for EdnsOpts {
    fn default() -> Self {
        EdnsOpts {
            udp_size: 1232,
            do_bit: false,
            version: 0,
        }
    }
}

/// Header fields and EDNS of a query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueryOpts {
    pub id: u16,
    /// Recursion desired.
    pub rd: bool,
    pub edns: Option<EdnsOpts>,
    pub opcode: Opcode,
    pub qclass: Class,
}

impl Default for QueryOpts {
    fn default() -> Self {
        QueryOpts {
            id: 0,
            rd: false,
            edns: None,
            opcode: Opcode::QUERY,
            qclass: Class::IN,
        }
    }
}

/// A query for `qname` (written uncompressed, its case as given) and
/// `qtype`, with an OPT record if `opts.edns` says so.
pub fn build_query(qname: &Name, qtype: RType, opts: &QueryOpts) -> Vec<u8> {
    let mut f = (opts.opcode.0 as u16 & 0xF) << 11;
    if opts.rd {
        f |= flags::RD;
    }
    let header = Header {
        id: opts.id,
        flags: f,
        qdcount: 1,
        ancount: 0,
        nscount: 0,
        arcount: opts.edns.is_some() as u16,
    };
    let mut out = vec![0u8; HEADER_LEN];
    header.write(&mut out);
    out.extend_from_slice(qname.as_wire());
    out.extend_from_slice(&qtype.0.to_be_bytes());
    out.extend_from_slice(&opts.qclass.0.to_be_bytes());
    if let Some(e) = opts.edns {
        let ttl = ((e.version as u32) << 16) | if e.do_bit { 0x8000 } else { 0 };
        out.push(0);
        out.extend_from_slice(&RType::OPT.0.to_be_bytes());
        out.extend_from_slice(&e.udp_size.to_be_bytes());
        out.extend_from_slice(&ttl.to_be_bytes());
        out.extend_from_slice(&0u16.to_be_bytes());
    }
    out
}

fn query_id(query: &[u8]) -> io::Result<u16> {
    Header::read(query)
        .map(|h| h.id)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "query shorter than a header"))
}

/// Whether `resp` answers a query with this ID (header only; the rest is
/// for the caller to judge).
fn answers(resp: &[u8], id: u16) -> bool {
    Header::read(resp).is_some_and(|h| h.id == id && h.has(flags::QR))
}

/// The serial `addr` answers for `zone` over UDP, if it answers with an
/// SOA.
pub fn soa_serial(addr: SocketAddr, zone: &str) -> Option<u32> {
    let query = build_query(&Name::parse(zone).ok()?, RType::SOA, &QueryOpts::default());
    let message = heron_proto::message::Message::parse(&try_query_udp(addr, &query).ok()?).ok()?;
    let soa = message.answers.iter().find(|r| r.rtype == RType::SOA)?;
    let at = soa.rdata.len().checked_sub(20)?;
    Some(u32::from_be_bytes(soa.rdata[at..at + 4].try_into().ok()?))
}

/// Sends `query` over UDP and returns the response with its ID; waits
/// [`TIMEOUT`], then tries once more.
pub fn try_query_udp(addr: SocketAddr, query: &[u8]) -> io::Result<Vec<u8>> {
    let local: IpAddr = if addr.is_ipv4() {
        Ipv4Addr::LOCALHOST.into()
    } else {
        Ipv6Addr::LOCALHOST.into()
    };
    try_query_udp_from(local, addr, query)
}

/// [`try_query_udp`] from the address `local` (another loopback address,
/// to be a client that access lists do not know).
pub fn try_query_udp_from(local: IpAddr, addr: SocketAddr, query: &[u8]) -> io::Result<Vec<u8>> {
    let id = query_id(query)?;
    let sock = UdpSocket::bind((local, 0))?;
    sock.connect(addr)?;
    let mut buf = vec![0u8; 65535];
    for _ in 0..UDP_TRIES {
        sock.send(query)?;
        let deadline = Instant::now() + TIMEOUT;
        // Bounded: each pass consumes a datagram or ends at the deadline.
        for _ in 0..1000 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            sock.set_read_timeout(Some(left))?;
            match sock.recv(&mut buf) {
                Ok(n) if answers(&buf[..n], id) => return Ok(buf[..n].to_vec()),
                Ok(_) => continue,
                Err(e) if is_timeout(&e) => break,
                // A signal to the test process cut the wait short.
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
    Err(io::Error::new(
        io::ErrorKind::TimedOut,
        format!("no UDP response from {addr} after {UDP_TRIES} tries of {TIMEOUT:?}"),
    ))
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

fn tcp_connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let stream = TcpStream::connect_timeout(&addr, TIMEOUT)?;
    stream.set_read_timeout(Some(TIMEOUT))?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

pub(crate) fn framed(query: &[u8]) -> io::Result<Vec<u8>> {
    let len = u16::try_from(query.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "query over 65535 octets"))?;
    let mut out = Vec::with_capacity(query.len() + 2);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(query);
    Ok(out)
}

pub(crate) fn read_framed(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 2];
    stream.read_exact(&mut len)?;
    let mut msg = vec![0u8; u16::from_be_bytes(len) as usize];
    stream.read_exact(&mut msg)?;
    Ok(msg)
}

/// Sends `query` over a fresh TCP connection and reads one response.
pub fn try_query_tcp(addr: SocketAddr, query: &[u8]) -> io::Result<Vec<u8>> {
    let id = query_id(query)?;
    let mut stream = tcp_connect(addr)?;
    stream.write_all(&framed(query)?)?;
    let resp = read_framed(&mut stream)?;
    if !answers(&resp, id) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "TCP response does not answer the query (ID or QR)",
        ));
    }
    Ok(resp)
}

/// How long [`answers_on`] waits for a response.
const ANSWER_WAIT: Duration = Duration::from_secs(3);

/// Whether the server answers `query` on `conn`, an open connection: the
/// query is sent and one response to it read. False if the connection is
/// closed, reset or silent for [`ANSWER_WAIT`]: how the tests of
/// connection limits tell an admitted connection from a refused one.
pub fn answers_on(conn: &mut TcpStream, query: &[u8]) -> bool {
    let Ok(id) = query_id(query) else {
        return false;
    };
    conn.set_read_timeout(Some(ANSWER_WAIT)).is_ok()
        && framed(query).and_then(|f| conn.write_all(&f)).is_ok()
        && read_framed(conn).is_ok_and(|response| answers(&response, id))
}

/// Writes every query on one TCP connection, then reads as many responses;
/// returns them in the order of the queries (matched by ID, which must be
/// distinct).
pub fn try_query_tcp_pipelined(addr: SocketAddr, queries: &[Vec<u8>]) -> io::Result<Vec<Vec<u8>>> {
    let mut index = HashMap::new();
    for (i, q) in queries.iter().enumerate() {
        if index.insert(query_id(q)?, i).is_some() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "pipelined queries need distinct IDs",
            ));
        }
    }
    let mut stream = tcp_connect(addr)?;
    let mut out = Vec::new();
    for q in queries {
        out.extend_from_slice(&framed(q)?);
    }
    stream.write_all(&out)?;
    let mut responses: Vec<Option<Vec<u8>>> = vec![None; queries.len()];
    for _ in 0..queries.len() {
        let resp = read_framed(&mut stream)?;
        let id = Header::read(&resp).map(|h| h.id);
        let slot = id.and_then(|id| index.remove(&id)).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("pipelined response with unexpected or repeated ID {id:?}"),
            )
        })?;
        responses[slot] = Some(resp);
    }
    Ok(responses
        .into_iter()
        .map(Option::unwrap_or_default)
        .collect())
}

/// [`try_query_udp`], panicking on failure.
pub fn query_udp(addr: SocketAddr, query: &[u8]) -> Vec<u8> {
    try_query_udp(addr, query).unwrap_or_else(|e| panic!("UDP query to {addr}: {e}"))
}

/// [`try_query_tcp`], panicking on failure.
pub fn query_tcp(addr: SocketAddr, query: &[u8]) -> Vec<u8> {
    try_query_tcp(addr, query).unwrap_or_else(|e| panic!("TCP query to {addr}: {e}"))
}

/// [`try_query_tcp_pipelined`], panicking on failure.
pub fn query_tcp_pipelined(addr: SocketAddr, queries: &[Vec<u8>]) -> Vec<Vec<u8>> {
    try_query_tcp_pipelined(addr, queries)
        .unwrap_or_else(|e| panic!("pipelined TCP queries to {addr}: {e}"))
}

/// What a flood of identical queries got back.
#[derive(Clone, Copy, Debug)]
pub struct Flood {
    pub sent: usize,
    /// Whole seconds it took, rounded up.
    pub seconds: usize,
    pub answered: usize,
    /// Truncated (slipped) responses.
    pub truncated: usize,
}

impl Flood {
    /// Asserts what RRL at `rate` responses a second with `slip = 2`
    /// does: the bucket's `rate`, then `rate` a second at most, about
    /// half the rest truncated. The bounds come from the time taken, so
    /// that the machine's load can not break them.
    pub fn assert_limited(&self, rate: usize) {
        let Flood {
            answered,
            truncated,
            seconds,
            ..
        } = *self;
        assert!(
            (rate..=rate + rate * seconds).contains(&answered),
            "{answered} answered in < {seconds} s"
        );
        let rest = self.sent - answered;
        assert!(
            (rest * 35 / 100..=rest * 65 / 100).contains(&truncated),
            "{truncated} of {rest} limited truncated"
        );
    }
}

/// A flood of `count` identical queries (www.edge.test. A) from `from`
/// to `server`, about 2,000 a second (at least `count / 2` ms), and what
/// came back. For rate limiting's tests.
pub fn flood_udp(from: IpAddr, server: SocketAddr, count: usize) -> Flood {
    let name: Name = "www.edge.test.".parse().unwrap();
    let query = build_query(&name, RType::A, &QueryOpts::default());
    flood_udp_with(from, server, count, |_| query.clone())
}

/// [`flood_udp`] of the queries `query` makes (the `i`th of `count`):
/// answered are the responses with records in their answer section,
/// truncated those with TC set.
pub fn flood_udp_with(
    from: IpAddr,
    server: SocketAddr,
    count: usize,
    query: impl FnMut(usize) -> Vec<u8>,
) -> Flood {
    let started = Instant::now();
    let (mut answered, mut truncated) = (0, 0);
    flood_udp_each(from, server, count, query, |response| {
        if response[2] & 0x02 != 0 {
            truncated += 1;
        } else if u16::from_be_bytes([response[6], response[7]]) > 0 {
            answered += 1;
        }
    });
    Flood {
        sent: count,
        seconds: started.elapsed().as_secs() as usize + 1,
        answered,
        truncated,
    }
}

/// Sends `count` queries (the `i`th made by `query`) from `from` to
/// `server`, about 2,000 a second, and hands every response at least a
/// header long to `seen`; waits half a second for the last ones.
pub fn flood_udp_each(
    from: IpAddr,
    server: SocketAddr,
    count: usize,
    mut query: impl FnMut(usize) -> Vec<u8>,
    mut seen: impl FnMut(&[u8]),
) {
    let socket = UdpSocket::bind((from, 0)).unwrap();
    socket.connect(server).unwrap();
    socket.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 4096];
    let mut drain = |seen: &mut dyn FnMut(&[u8])| {
        while let Ok(n) = socket.recv(&mut buf) {
            if n >= HEADER_LEN {
                seen(&buf[..n]);
            }
        }
    };
    for i in 0..count {
        let _ = socket.send(&query(i));
        if i % 2 == 1 {
            std::thread::sleep(Duration::from_millis(1));
            drain(&mut seen);
        }
    }
    // The last responses: they come within a few milliseconds.
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(25));
        drain(&mut seen);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_proto::message::parse_query;

    /// A server that answers the first query on each connection (with
    /// the query's ID and QR set) if `answer`, else closes at once.
    fn one_shot_server(answer: bool) -> SocketAddr {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for mut conn in listener.incoming().flatten() {
                if !answer {
                    continue;
                }
                if let Ok(mut query) = read_framed(&mut conn) {
                    query[2] |= 0x80;
                    let _ = conn.write_all(&framed(&query).unwrap());
                }
            }
        });
        addr
    }

    #[test]
    fn answers_on_tells_an_answering_connection_from_a_closed_one() {
        let query = build_query(
            &Name::parse("a.test").unwrap(),
            RType::SOA,
            &QueryOpts::default(),
        );
        let mut open = TcpStream::connect(one_shot_server(true)).unwrap();
        assert!(answers_on(&mut open, &query));
        let mut closed = TcpStream::connect(one_shot_server(false)).unwrap();
        assert!(!answers_on(&mut closed, &query));
        assert!(!answers_on(&mut open, b"\0"), "not a query");
    }

    #[test]
    fn query_round_trips_through_the_parser() {
        let name = Name::parse("WwW.Example.COM").unwrap();
        let opts = QueryOpts {
            id: 0xBEEF,
            rd: true,
            edns: Some(EdnsOpts {
                udp_size: 1232,
                do_bit: true,
                version: 1,
            }),
            ..QueryOpts::default()
        };
        let q = build_query(&name, RType::MX, &opts);
        let parsed = parse_query(&q).unwrap();
        assert_eq!(parsed.header.id, 0xBEEF);
        assert!(parsed.header.has(flags::RD));
        assert_eq!(&q[parsed.qname.clone()], b"\x03WwW\x07Example\x03COM\x00");
        assert_eq!(parsed.qtype, RType::MX);
        let e = parsed.edns.unwrap();
        assert_eq!((e.udp_size, e.do_bit, e.version), (1232, true, 1));

        let plain = build_query(&name, RType::A, &QueryOpts::default());
        let parsed = parse_query(&plain).unwrap();
        assert!(parsed.edns.is_none() && !parsed.header.has(flags::RD));
        let notify = QueryOpts {
            opcode: Opcode(9),
            ..QueryOpts::default()
        };
        let parsed = parse_query(&build_query(&name, RType::A, &notify)).unwrap();
        assert_eq!(parsed.header.opcode(), Opcode(9));
    }
}
