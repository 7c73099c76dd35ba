//! Talking to primaries over TCP: SOA checks and transfers.
//!
//! SOA checks go over one long-lived pipelined connection per primary
//! ([`super::pipelined`]), many in flight at once. A transfer takes a
//! connection of its own; after it completes cleanly the connection goes
//! back to an idle pool per primary, so a secondary of many zones does not
//! open (and leave in TIME_WAIT) one connection per transfer. Exchanges in
//! flight are bounded by a semaphore. A primary may be reached over TLS
//! ([`super::tls`]); its connections are pooled the same way. A primary
//! that cannot be reached is left alone for a while ([`super::backoff`]):
//! exchanges with it fail at once, without a connection.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use heron_proto::edns::{OPT_LEN, OPTION_HEADER_LEN, code, opt_record};
use heron_proto::message::{Header, Message, flags};
use heron_proto::tsig::{self, Key, KeyRing, ResponseVerifier, TsigError};
use heron_proto::writer::{Section, Writer};
use heron_proto::{Class, Name, RType, Rcode, rdata};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, timeout};

use super::backoff::{LeftAlone, PrimaryHealth};
use super::pipelined::{Line, LineError};
use super::receive::{Exceeded, Outcome, Receiver, Request, TransferLimits, XfrError};
use super::tls::{Stream, TlsClients, XotTrust};
use crate::keys::SharedKeys;
use heron_proto::message::random_id;
use heron_proto::time::unix_now;

/// The UDP payload size our queries' OPT record states; they go over TCP,
/// where it means nothing (RFC 6891 6.2.3), but the field must hold one.
const QUERY_UDP_SIZE: u16 = 1232;

/// A primary to pull a zone from, the key to sign requests with,
/// whether to reach it over TLS, and the local address to reach it from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Upstream {
    pub addr: SocketAddr,
    pub key: Option<Name>,
    pub tls: Option<XotTrust>,
    /// The source address of SOA queries and transfers (None: the
    /// kernel's choice).
    pub source: Option<IpAddr>,
}

/// What a pooled connection was made for: connections to one address
/// are shared only under the same trust and from the same source, so a
/// connection checked for one name (or not checked at all) never serves
/// a primary that asks for another check, and a primary whose ACL allows
/// one source address is never asked from another.
type Route = (SocketAddr, Option<XotTrust>, Option<IpAddr>);

/// New connections to one primary that it has not answered on yet. A
/// cold start wants a connection for every slot at once (32), but Knot
/// listens with a backlog of 10, as BIND does by default
/// (`tcp-listen-queue`): a SYN past a full backlog is dropped and sent
/// again a second later, and the transfers waiting on it took 1,024 ms
/// instead of a few (seen against a Knot primary, one cold start in three
/// at 10,000 zones). A connection leaves the backlog when the primary
/// accepts it, not when our connect returns: a busy primary accepts late,
/// so the turn is held until its first answer on the connection (a turn
/// released at connect still let two cold starts in five stall on a
/// machine busy with a test run). Connections, once made, are kept and reused, so the pool still
/// fills within a few round trips.
pub const CONNECTS_PER_PRIMARY: usize = 8;

fn route(up: &Upstream) -> Route {
    (up.addr, up.tls.clone(), up.source)
}

/// A TCP connection to `addr`, from `source` if given. The socket is
/// bound with port 0 and `IP_BIND_ADDRESS_NO_PORT`, so the kernel picks
/// the port at connect, for the 4-tuple: one source address reaches any
/// number of primaries without holding a port of its own per connection
/// from bind on (on kernels without the option, bind picks the port).
pub async fn connect_from(addr: SocketAddr, source: Option<IpAddr>) -> io::Result<TcpStream> {
    let Some(source) = source else {
        return TcpStream::connect(addr).await;
    };
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    let _ = heron_sys::socket::bind_address_no_port(&socket);
    socket.bind(SocketAddr::new(source, 0)).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot bind source address {source}: {e}"),
        )
    })?;
    socket.connect(addr).await
}

/// Why an exchange with a primary failed.
#[derive(Debug)]
pub enum ClientError {
    Io(io::Error),
    Timeout,
    Tsig(TsigError),
    /// The configured key is not in the key ring.
    NoKey(Name),
    Transfer(XfrError),
    /// The SOA answer was not usable.
    BadAnswer(String),
    /// A signed exchange answered with an error the primary did not
    /// sign (as one that does not know the key answers NOTAUTH with
    /// BADKEY, RFC 8945 5.3.2): its RCODE and the TSIG error it set.
    Answered {
        rcode: Rcode,
        tsig_error: Option<TsigError>,
    },
    /// Not tried: the primary failed lately and is left alone.
    PrimaryDown(LeftAlone),
}

/// Why `answer` to a signed request did not verify (`e`): an error
/// answer the primary did not sign says more as its RCODE (with the TSIG
/// error it set, which the verifier reads: "NOTAUTH: ... (BADKEY)", it
/// does not know the key) than as "not signed".
fn unverified(answer: &[u8], e: TsigError) -> ClientError {
    match Header::read(answer).map_or(0, |h| h.rcode()) {
        0 => ClientError::Tsig(e),
        rcode => ClientError::Answered {
            rcode: Rcode(rcode),
            tsig_error: (e != TsigError::Unsigned).then_some(e),
        },
    }
}

impl ClientError {
    /// Whether the primary answered (what it answered would not do, or
    /// would not do for us: a limit of ours, a key it does not know): it
    /// is up, and the error says why the exchange failed all the same.
    pub fn primary_answered(&self) -> bool {
        match self {
            ClientError::Tsig(_)
            | ClientError::Transfer(_)
            | ClientError::BadAnswer(_)
            | ClientError::Answered { .. } => true,
            ClientError::Io(_)
            | ClientError::Timeout
            | ClientError::NoKey(_)
            | ClientError::PrimaryDown(_) => false,
        }
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Io(e) => write!(f, "{e}"),
            ClientError::Timeout => f.write_str("timed out"),
            ClientError::Tsig(e) => write!(f, "TSIG: {e}"),
            ClientError::NoKey(k) => write!(f, "no TSIG key named {k}"),
            ClientError::Transfer(e) => write!(f, "{e}"),
            ClientError::BadAnswer(why) => f.write_str(why),
            ClientError::Answered { rcode, tsig_error } => {
                write!(f, "the primary answered {rcode}")?;
                match tsig_error {
                    Some(error) => write!(f, ": {error}"),
                    None => Ok(()),
                }
            }
            ClientError::PrimaryDown(left) => {
                let wait = left.until.saturating_duration_since(Instant::now());
                write!(
                    f,
                    "not tried: it failed lately ({}); next try in {} ms",
                    left.cause,
                    wait.as_millis()
                )
            }
        }
    }
}

impl From<io::Error> for ClientError {
    fn from(e: io::Error) -> Self {
        ClientError::Io(e)
    }
}

/// What a reload may change of [`Connections`] (`[secondary]`).
pub struct Reconfigured {
    pub concurrency: usize,
    pub io_timeout: Duration,
    pub limits: TransferLimits,
    pub tls: TlsClients,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

tokio::task_local! {
    /// Set for an exchange that a NOTIFY from its primary asked for while
    /// that primary is left alone after failing: it is tried all the
    /// same (its SOA query and its connection), one a second at most
    /// (`backoff::PrimaryHealth::notified`); and for the exchanges of a
    /// check an operator waits for (`heron ctl refresh`, `retransfer`).
    pub static PROBE: bool;
}

/// The pool of connections to primaries, shared by every secondary zone.
pub struct Connections {
    /// One pipelined line per primary for SOA checks.
    soa_lines: Mutex<HashMap<Route, SoaSlot>>,
    idle: Mutex<HashMap<Route, Vec<Stream>>>,
    /// Replaced by a reload that reads another `tls-ca`.
    tls: ArcSwap<TlsClients>,
    /// Counts the reloads that replaced `tls`: a TLS connection made or
    /// taken before one is not pooled again, since it was checked against
    /// the trust the reload replaced.
    trust_generation: AtomicU64,
    slots: Arc<Semaphore>,
    /// How many `slots` there are meant to be (a reload changes it).
    concurrency: AtomicUsize,
    /// Idle connections kept per primary: as many as may be busy at once,
    /// so a burst of exchanges (a cold start) reuses the same few
    /// connections instead of closing and reopening them.
    idle_per_primary: usize,
    keys: Arc<SharedKeys>,
    /// Bound on connecting and on each read or write, in milliseconds.
    io_timeout_ms: AtomicU64,
    transfer_limits: Mutex<TransferLimits>,
    opened: std::sync::atomic::AtomicUsize,
    health: PrimaryHealth,
    /// Turns to connect, by primary ([`CONNECTS_PER_PRIMARY`]).
    connecting: Mutex<HashMap<SocketAddr, Arc<Semaphore>>>,
    /// Each primary's share of `slots` ([`per_primary`]), with the share
    /// it was made for: one slow primary leaves the others slots.
    shares: Mutex<HashMap<SocketAddr, (usize, Arc<Semaphore>)>>,
}

/// The slots one primary may hold of `concurrency`: all but a quarter,
/// so that a primary that answers slowly (or drips a transfer for an
/// hour) never holds every SOA check and transfer of the other
/// primaries' zones; at least one.
pub fn per_primary(concurrency: usize) -> usize {
    (concurrency - concurrency / 4).max(1)
}

impl Connections {
    pub fn new(keys: Arc<Vec<Key>>, concurrency: usize, io_timeout: Duration) -> Connections {
        Connections {
            soa_lines: Mutex::new(HashMap::new()),
            idle: Mutex::new(HashMap::new()),
            slots: Arc::new(Semaphore::new(concurrency)),
            concurrency: AtomicUsize::new(concurrency),
            idle_per_primary: concurrency,
            keys: SharedKeys::new(keys),
            io_timeout_ms: AtomicU64::new(millis(io_timeout)),
            transfer_limits: Mutex::new(TransferLimits::default()),
            opened: Default::default(),
            health: PrimaryHealth::default(),
            connecting: Mutex::default(),
            shares: Mutex::default(),
            tls: ArcSwap::from_pointee(TlsClients::new(None).expect("no CA to read")),
            trust_generation: AtomicU64::new(0),
        }
    }

    /// What TLS connections to primaries are made with (by default,
    /// opportunistic ones only).
    pub fn with_tls(self, tls: TlsClients) -> Connections {
        self.tls.store(Arc::new(tls));
        self
    }

    /// Bounds on each incoming transfer (by default [`TransferLimits::default`]).
    pub fn with_transfer_limits(self, limits: TransferLimits) -> Connections {
        *self
            .transfer_limits
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = limits;
        self
    }

    /// A reload's new `[secondary]` settings: they apply to each exchange
    /// that starts from now on (those under way finish with the old).
    /// Fewer exchanges at once take effect as those in flight end.
    pub fn reconfigure(&self, settings: Reconfigured) {
        self.tls.store(Arc::new(settings.tls));
        self.forget_tls_connections();
        *self
            .transfer_limits
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = settings.limits;
        (self.io_timeout_ms).store(millis(settings.io_timeout), Ordering::Relaxed);
        let wanted = settings.concurrency.max(1);
        let before = self.concurrency.swap(wanted, Ordering::Relaxed);
        if wanted > before {
            self.slots.add_permits(wanted - before);
        } else if wanted < before {
            let slots = self.slots.clone();
            let fewer = (before - wanted) as u32;
            // Taken as exchanges in flight give theirs back, then never
            // given back.
            tokio::spawn(async move {
                if let Ok(taken) = slots.acquire_many_owned(fewer).await {
                    taken.forget();
                }
            });
        }
    }

    fn io_timeout(&self) -> Duration {
        Duration::from_millis(self.io_timeout_ms.load(Ordering::Relaxed))
    }

    fn transfer_limits(&self) -> TransferLimits {
        *self
            .transfer_limits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Signs with `keys`, which the server replaces when a reload reads
    /// new ones (shared with the query processor).
    pub fn with_keys(mut self, keys: Arc<SharedKeys>) -> Connections {
        self.keys = keys;
        self
    }

    /// TCP connections opened so far (reuse keeps this low).
    pub fn opened(&self) -> usize {
        self.opened.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Which primaries failed lately.
    pub fn health(&self) -> &PrimaryHealth {
        &self.health
    }

    /// Fails at once if `up` is left alone after failing, unless this is
    /// a probe ([`PROBE`]).
    pub fn admit(&self, up: &Upstream) -> Result<(), ClientError> {
        if PROBE.try_with(|probe| *probe).unwrap_or(false) {
            return Ok(());
        }
        self.health
            .admit(up.addr, Instant::now())
            .map_err(ClientError::PrimaryDown)
    }

    /// `up` could not be reached (`e`): it is left alone for a while.
    fn unreachable(&self, up: &Upstream, e: ClientError) -> ClientError {
        self.health.failed(up.addr, Instant::now(), &e.to_string());
        e
    }

    /// An exchange with `up` that `began` then failed (`e`): `up` is left
    /// alone for a while unless it answered another since.
    fn failed_since(&self, up: &Upstream, began: Instant, e: ClientError) -> ClientError {
        (self.health).failed_since(up.addr, began, Instant::now(), &e.to_string());
        e
    }

    /// The serial of `origin` at the primary, and the EDNS EXPIRE it told
    /// (RFC 7314), asked on the primary's pipelined line: the SOA checks of
    /// many zones share one connection, many in flight at once.
    pub async fn soa_serial(
        &self,
        up: &Upstream,
        origin: &Name,
    ) -> Result<(u32, Option<u32>), ClientError> {
        let _share = self.share_of(up.addr).await?;
        let _slot = self
            .slots
            .acquire()
            .await
            .map_err(|_| ClientError::Timeout)?;
        // Checked once the slot is ours: while queued for it, the primary
        // may have been found down.
        self.admit(up)?;
        let key = self.key_for(up)?;
        let query = self.query(origin, RType::SOA, None);
        for attempt in 0..2 {
            let line = self.soa_line(up).await?;
            let mut verifier = None;
            let sign = |q: &mut Vec<u8>| {
                if let Some(k) = &key {
                    let mac = tsig::sign_request(q, k, unix_now(), tsig::DEFAULT_FUDGE);
                    verifier = Some(ResponseVerifier::new(k, mac));
                }
            };
            let began = Instant::now();
            let answer = match line.exchange(query.clone(), sign, self.io_timeout()).await {
                Ok(answer) => answer,
                // A line the primary closed while idle: once more, anew.
                Err(LineError::Closed) if attempt == 0 => continue,
                Err(LineError::Closed) => {
                    let closed = io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed");
                    let closed = ClientError::Io(closed);
                    return Err(self.unreachable(up, closed));
                }
                Err(LineError::Io(e)) => return Err(self.unreachable(up, ClientError::Io(e))),
                // Other zones' answers on the same line since: the
                // primary is up, only this query went unanswered.
                Err(LineError::Timeout) => {
                    return Err(self.failed_since(up, began, ClientError::Timeout));
                }
            };
            self.health.answered(up.addr);
            if let Some(v) = verifier.as_mut() {
                let unverified = |e| unverified(&answer, e);
                v.verify(&answer, unix_now()).map_err(unverified)?;
                v.finish().map_err(unverified)?;
            }
            return serial_in_answer(&answer, origin);
        }
        unreachable!("the second attempt returns")
    }

    /// The pipelined line to `up`, connected if there is none open.
    async fn soa_line(&self, up: &Upstream) -> Result<Arc<Line>, ClientError> {
        let slot = self
            .soa_lines
            .lock()
            .unwrap()
            .entry(route(up))
            .or_default()
            .clone();
        let mut line = slot.lock().await;
        if let Some(open) = line.as_ref().filter(|l| l.is_open()) {
            return Ok(open.clone());
        }
        // One line per route: it needs no turn past its connect.
        let (stream, _turn) = self.connect(up).await?;
        let fresh = Arc::new(Line::start(stream));
        *line = Some(fresh.clone());
        Ok(fresh)
    }

    fn key_for(&self, up: &Upstream) -> Result<Option<Key>, ClientError> {
        match &up.key {
            Some(name) => (self.keys.load())
                .key(name)
                .cloned()
                .map(Some)
                .ok_or_else(|| ClientError::NoKey(name.clone())),
            None => Ok(None),
        }
    }

    /// Transfers `origin`: IXFR from the version in `request`, or AXFR;
    /// with the EDNS EXPIRE the primary told (RFC 7314).
    pub async fn transfer(
        &self,
        up: &Upstream,
        origin: &Name,
        request: Request,
    ) -> Result<(Outcome, Option<u32>), ClientError> {
        let query = match &request {
            Request::Axfr => self.query(origin, RType::AXFR, None),
            Request::Ixfr { have } => {
                let soa = have.soa();
                self.query(origin, RType::IXFR, Some((soa.ttl(), &soa.first_rdata())))
            }
        };
        let limits = self.transfer_limits();
        let mut receiver =
            (Receiver::new(origin.clone(), request).with_primary(up.addr)).with_limits(limits);
        // From the first message: waiting for a connection slot or the
        // primary's first answer is bounded elsewhere. With a read timeout
        // on each message, the whole takes at most max_time plus one.
        let mut first_message: Option<Instant> = None;
        self.exchange(up, query, |msg| {
            let started = *first_message.get_or_insert_with(Instant::now);
            if started.elapsed() > limits.max_time {
                let late = XfrError::Limit(Exceeded::Time(limits.max_time));
                return Err(ClientError::Transfer(late));
            }
            receiver.feed(msg).map_err(ClientError::Transfer)
        })
        .await?;
        let primary_expire = receiver.primary_expire();
        let outcome = receiver.finish().map_err(ClientError::Transfer)?;
        Ok((outcome, primary_expire))
    }

    /// A query for `origin`; for IXFR, our SOA goes in the authority
    /// section (RFC 1995 3). An OPT record asks for EXPIRE (RFC 7314 2),
    /// so that a zone transferred from another secondary expires with
    /// that secondary's copy.
    fn query(&self, origin: &Name, qtype: RType, soa: Option<(u32, &[u8])>) -> Vec<u8> {
        let mut out = Vec::new();
        let mut w = Writer::new(&mut out, u16::MAX as usize);
        w.question(origin.as_wire(), qtype, Class::IN);
        if let Some((ttl, rdata)) = soa {
            w.section(Section::Authority);
            let _ = w.record(origin.as_wire(), RType::SOA, Class::IN, ttl, rdata);
        }
        w.section(Section::Additional);
        let mut opt = opt_record(QUERY_UDP_SIZE, 0, false).to_vec();
        opt[OPT_LEN - 1] = OPTION_HEADER_LEN as u8; // RDLENGTH
        opt.extend_from_slice(&code::EXPIRE.to_be_bytes());
        opt.extend_from_slice(&[0, 0]); // empty in a query
        let _ = w.raw_record(&opt);
        w.finish(random_id(), 0, 1);
        out
    }

    /// Sends `query` (signed if the upstream has a key) and hands each
    /// response message, TSIG-verified, to `on_message` until it says the
    /// exchange is complete. A pooled connection that turns out closed is
    /// replaced by a new one, once.
    async fn exchange(
        &self,
        up: &Upstream,
        query: Vec<u8>,
        mut on_message: impl FnMut(&[u8]) -> Result<bool, ClientError>,
    ) -> Result<(), ClientError> {
        let _share = self.share_of(up.addr).await?;
        let _slot = self
            .slots
            .acquire()
            .await
            .map_err(|_| ClientError::Timeout)?;
        self.admit(up)?;
        let key = self.key_for(up)?;
        let trust = self.trust_generation.load(Ordering::Acquire);
        let pooled = self.take_idle(route(up));
        let reused = pooled.is_some();
        let (mut stream, turn) = match pooled {
            Some(s) => (s, None),
            None => self.connect(up).await.map(|(s, turn)| (s, Some(turn)))?,
        };
        let mut attempt = self
            .run(&mut stream, turn, &query, key.as_ref(), &mut on_message)
            .await;
        if reused && matches!(attempt, Err(Attempt::BeforeAnswer(_) | Attempt::Stale(_))) {
            let turn;
            (stream, turn) = self.connect(up).await?;
            attempt = self
                .run(
                    &mut stream,
                    Some(turn),
                    &query,
                    key.as_ref(),
                    &mut on_message,
                )
                .await;
        }
        match attempt {
            Ok(()) => {
                self.health.answered(up.addr);
                let trusted =
                    up.tls.is_none() || trust == self.trust_generation.load(Ordering::Acquire);
                if trusted {
                    self.give_back(route(up), stream);
                }
                Ok(())
            }
            Err(Attempt::During(e) | Attempt::Stale(e)) => {
                self.health.answered(up.addr);
                Err(e)
            }
            Err(Attempt::BeforeAnswer(e)) => Err(self.unreachable(up, e)),
        }
    }

    /// A new connection to `up`, the TLS handshake done if it takes TLS;
    /// the whole within the I/O timeout. With it comes its turn at the
    /// primary's gate ([`CONNECTS_PER_PRIMARY`]), to hold until the
    /// primary first answers on it.
    async fn connect(&self, up: &Upstream) -> Result<(Stream, OwnedSemaphorePermit), ClientError> {
        let gate = self.connect_gate(up.addr);
        let turn = gate
            .acquire_owned()
            .await
            .map_err(|_| ClientError::Timeout)?;
        // Those that waited while another connect to `up` failed.
        self.admit(up)?;
        let connect = async {
            let tcp = connect_from(up.addr, up.source).await?;
            tcp.set_nodelay(true)?;
            match &up.tls {
                None => Ok(Stream::Tcp(tcp)),
                Some(trust) => {
                    let tls = self.tls.load_full();
                    tls.connect(tcp, up.addr.ip(), trust).await
                }
            }
        };
        let stream = timeout(self.io_timeout(), connect)
            .await
            .map_err(|_| ClientError::Timeout)
            .and_then(|connected| connected.map_err(ClientError::Io))
            .map_err(|e| match &e {
                // A certificate that is not for the zone's name: the
                // zone's failure, not the primary's.
                ClientError::Io(io) if super::tls::is_zone_setting_error(io) => e,
                _ => self.unreachable(up, e),
            })?;
        self.opened
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok((stream, turn))
    }

    /// A turn within the share of slots of the primary at `addr`, taken
    /// before a slot: waiting for it holds no slot another primary needs.
    async fn share_of(&self, addr: SocketAddr) -> Result<OwnedSemaphorePermit, ClientError> {
        let share = per_primary(self.concurrency.load(Ordering::Relaxed));
        let gate = {
            let mut shares = self.shares.lock().unwrap_or_else(|e| e.into_inner());
            let entry = shares
                .entry(addr)
                .or_insert_with(|| (share, Arc::new(Semaphore::new(share))));
            // A reload changed `concurrency`: a new share from now on
            // (exchanges under way finish in the old one).
            if entry.0 != share {
                *entry = (share, Arc::new(Semaphore::new(share)));
            }
            entry.1.clone()
        };
        gate.acquire_owned().await.map_err(|_| ClientError::Timeout)
    }

    /// The turns to connect to the primary at `addr`.
    fn connect_gate(&self, addr: SocketAddr) -> Arc<Semaphore> {
        let mut gates = self.connecting.lock().unwrap_or_else(|e| e.into_inner());
        let gate = gates.entry(addr);
        gate.or_insert_with(|| Arc::new(Semaphore::new(CONNECTS_PER_PRIMARY)))
            .clone()
    }

    /// One request and its responses on `stream`; a new connection's
    /// `turn` at the primary's gate goes back with the first response.
    async fn run(
        &self,
        stream: &mut Stream,
        mut turn: Option<OwnedSemaphorePermit>,
        query: &[u8],
        key: Option<&Key>,
        on_message: &mut impl FnMut(&[u8]) -> Result<bool, ClientError>,
    ) -> Result<(), Attempt> {
        let mut query = query.to_vec();
        let id = Header::read(&query).map_or(0, |h| h.id);
        let mut verifier = key.map(|k| {
            let mac = tsig::sign_request(&mut query, k, unix_now(), tsig::DEFAULT_FUDGE);
            ResponseVerifier::new(k, mac)
        });
        let mut framed = (query.len() as u16).to_be_bytes().to_vec();
        framed.extend_from_slice(&query);
        let send = async {
            stream.write_all(&framed).await?;
            stream.flush().await // TLS holds what it has not sent
        };
        self.timed(send).await.map_err(Attempt::BeforeAnswer)?;
        let mut first = true;
        loop {
            let msg = match self.read_message(stream).await {
                Ok(m) => m,
                Err(e) if first => return Err(Attempt::BeforeAnswer(e)),
                Err(e) => return Err(Attempt::During(e)),
            };
            let was_first = std::mem::replace(&mut first, false);
            drop(turn.take());
            let header = Header::read(&msg)
                .ok_or_else(|| Attempt::During(ClientError::BadAnswer("short message".into())))?;
            if header.id != id || !header.has(flags::QR) {
                let e = ClientError::BadAnswer("answer with a wrong ID".into());
                return Err(match was_first {
                    true => Attempt::Stale(e),
                    false => Attempt::During(e),
                });
            }
            if let Some(v) = verifier.as_mut() {
                v.verify(&msg, unix_now())
                    .map_err(|e| Attempt::During(unverified(&msg, e)))?;
            }
            if on_message(&msg).map_err(Attempt::During)? {
                if let Some(v) = &verifier {
                    v.finish()
                        .map_err(|e| Attempt::During(ClientError::Tsig(e)))?;
                }
                return Ok(());
            }
        }
    }

    async fn read_message(&self, stream: &mut Stream) -> Result<Vec<u8>, ClientError> {
        let mut len = [0u8; 2];
        self.timed(stream.read_exact(&mut len)).await?;
        let mut msg = vec![0u8; u16::from_be_bytes(len) as usize];
        self.timed(stream.read_exact(&mut msg)).await?;
        Ok(msg)
    }

    async fn timed<T>(&self, f: impl Future<Output = io::Result<T>>) -> Result<T, ClientError> {
        timeout(self.io_timeout(), f)
            .await
            .map_err(|_| ClientError::Timeout)?
            .map_err(ClientError::Io)
    }

    /// TLS connections made under the trust a reload replaced go: the
    /// idle ones and the SOA lines now, those in use when they end.
    fn forget_tls_connections(&self) {
        self.trust_generation.fetch_add(1, Ordering::AcqRel);
        let tls = |route: &Route| route.1.is_some();
        self.idle.lock().unwrap().retain(|route, _| !tls(route));
        self.soa_lines
            .lock()
            .unwrap()
            .retain(|route, _| !tls(route));
    }

    fn take_idle(&self, addr: Route) -> Option<Stream> {
        self.idle.lock().unwrap().get_mut(&addr)?.pop()
    }

    fn give_back(&self, addr: Route, stream: Stream) {
        let mut idle = self.idle.lock().unwrap();
        let list = idle.entry(addr).or_default();
        if list.len() < self.idle_per_primary {
            list.push(stream);
        }
    }
}

/// Where a primary's pipelined line lives; connecting holds the lock so
/// that checks arriving meanwhile wait for that line instead of opening
/// their own.
type SoaSlot = Arc<tokio::sync::Mutex<Option<Arc<Line>>>>;

/// The serial in an SOA answer for `origin`, and its EDNS EXPIRE.
fn serial_in_answer(answer: &[u8], origin: &Name) -> Result<(u32, Option<u32>), ClientError> {
    let m = Message::parse(answer).map_err(|e| ClientError::BadAnswer(e.to_string()))?;
    if !m.header.has(flags::QR) {
        return Err(ClientError::BadAnswer("not an answer".into()));
    }
    if m.rcode() != Rcode::NOERROR {
        return Err(ClientError::BadAnswer(format!(
            "SOA query answered {}",
            m.rcode()
        )));
    }
    // A server that does not hold the zone (a cache, a forwarder, a
    // primary that lost it) answers without AA: its serial says nothing.
    if !m.header.has(flags::AA) {
        return Err(ClientError::BadAnswer(
            "a non-authoritative answer (no AA) to the SOA query".into(),
        ));
    }
    let serial = m
        .answers
        .iter()
        .find(|r| r.rtype == RType::SOA && r.name == *origin)
        .and_then(|r| rdata::soa_serial(&r.rdata))
        .ok_or_else(|| ClientError::BadAnswer("no SOA in the answer".into()))?;
    Ok((serial, m.edns.and_then(|e| e.options.expire_seconds)))
}

/// How an attempt on one connection failed: before any answer (a pooled
/// connection the primary closed: worth one retry), with a first message
/// that is not the answer (on a pooled connection, what a primary sent
/// after the end of the last transfer: worth one retry too), or during it.
enum Attempt {
    BeforeAnswer(ClientError),
    Stale(ClientError),
    During(ClientError),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An SOA answer without AA (a server that does not hold the zone)
    /// gives no serial to act on; with AA it does.
    #[test]
    fn a_non_authoritative_soa_answer_is_refused() {
        let origin = Name::parse("z.test").unwrap();
        let answer = |flags: u16| {
            let mut m = vec![0x12, 0x34];
            m.extend_from_slice(&flags.to_be_bytes());
            m.extend_from_slice(&[0, 1, 0, 1, 0, 0, 0, 0]);
            m.extend_from_slice(origin.as_wire());
            m.extend_from_slice(&[0, 6, 0, 1]);
            m.extend_from_slice(&[0xC0, 12, 0, 6, 0, 1, 0, 0, 0, 60]);
            let rdata = [&[0u8][..], &[0], &7u32.to_be_bytes(), &[0; 16]].concat();
            m.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
            m.extend_from_slice(&rdata);
            m
        };
        let (qr, aa) = (0x8000, 0x0400);
        assert_eq!(serial_in_answer(&answer(qr | aa), &origin).unwrap().0, 7);
        let refused = serial_in_answer(&answer(qr), &origin);
        assert!(
            matches!(&refused, Err(ClientError::BadAnswer(why)) if why.contains("no AA")),
            "{refused:?}"
        );
    }

    /// One primary holds at most its share of the slots: the SOA checks
    /// and transfers of another primary's zones still get theirs.
    #[tokio::test]
    async fn one_primary_leaves_the_others_a_share_of_the_slots() {
        assert_eq!(
            (per_primary(32), per_primary(4), per_primary(1)),
            (24, 3, 1)
        );
        let conns = Connections::new(Arc::default(), 4, Duration::from_secs(10));
        let slow: SocketAddr = "192.0.2.1:53".parse().unwrap();
        let other: SocketAddr = "192.0.2.2:53".parse().unwrap();
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(conns.share_of(slow).await.unwrap());
        }
        let wait = Duration::from_millis(100);
        assert!(
            timeout(wait, conns.share_of(slow)).await.is_err(),
            "a fourth turn of the same primary waits"
        );
        assert!(timeout(wait, conns.share_of(other)).await.is_ok());
        held.pop();
        assert!(timeout(wait, conns.share_of(slow)).await.is_ok());
    }

    /// A reload's `[secondary]`: more slots at once, fewer as those in
    /// flight end; the timeout and limits for the next exchange.
    #[tokio::test]
    async fn a_reload_changes_the_slots_the_timeout_and_the_limits() {
        let conns = Connections::new(Arc::default(), 4, Duration::from_secs(10));
        let settings = |concurrency, secs, records| Reconfigured {
            concurrency,
            io_timeout: Duration::from_secs(secs),
            limits: TransferLimits {
                max_records: records,
                ..TransferLimits::default()
            },
            tls: TlsClients::new(None).unwrap(),
        };
        conns.reconfigure(settings(6, 3, 7));
        assert_eq!(conns.slots.available_permits(), 6);
        assert_eq!(conns.io_timeout(), Duration::from_secs(3));
        assert_eq!(conns.transfer_limits().max_records, 7);
        let busy = conns.slots.clone().acquire_many_owned(5).await.unwrap();
        conns.reconfigure(settings(2, 3, 7));
        tokio::task::yield_now().await;
        assert_eq!(conns.slots.available_permits(), 0, "1 free, taken");
        drop(busy);
        for _ in 0..100 {
            if conns.slots.available_permits() == 2 {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(conns.slots.available_permits(), 2);
        conns.reconfigure(settings(0, 3, 7));
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert_eq!(conns.slots.available_permits(), 1, "never below one");
    }

    /// SOA checks of many zones and their transfers, from a source
    /// address: every request comes from it, over a few pooled
    /// connections (the checks share one line).
    #[tokio::test]
    async fn checks_and_transfers_come_from_the_source_address_over_pooled_connections() {
        let origins: Vec<String> = (0..200).map(|i| format!("z{i}.test")).collect();
        let names: Vec<&str> = origins.iter().map(String::as_str).collect();
        let primary = heron_testkit::FakePrimary::start(&names, 7);
        for source in ["127.0.0.2", "127.0.0.3"] {
            let up = Upstream {
                addr: primary.addr(),
                key: None,
                tls: None,
                source: Some(source.parse().unwrap()),
            };
            let conns = Arc::new(Connections::new(Arc::default(), 8, Duration::from_secs(10)));
            let mut checks = tokio::task::JoinSet::new();
            for origin in &origins {
                let (conns, up) = (conns.clone(), up.clone());
                let origin = Name::parse(origin).unwrap();
                checks.spawn(async move {
                    let (serial, _expire) = conns.soa_serial(&up, &origin).await.unwrap();
                    let (got, _expire) = conns.transfer(&up, &origin, Request::Axfr).await.unwrap();
                    (serial, matches!(got, Outcome::Full(_)))
                });
            }
            for result in checks.join_all().await {
                assert_eq!(result, (7, true));
            }
            // One line for the checks, at most `concurrency` for transfers.
            assert!(conns.opened() <= 1 + 8, "{} connections", conns.opened());
        }
        let seen = primary.seen();
        assert_eq!(seen.len(), 2 * 2 * origins.len());
        let from = |ip: &str| {
            let ip: IpAddr = ip.parse().unwrap();
            seen.iter().filter(|s| s.from.unwrap().ip() == ip).count()
        };
        assert_eq!(from("127.0.0.2"), 2 * origins.len());
        assert_eq!(from("127.0.0.3"), 2 * origins.len());
    }

    /// An AXFR answer to `query` (whose question is kept): SOA, NS, SOA
    /// of `t.test`, with the message ID `id`.
    fn axfr_answer(query: &[u8], id: u16) -> Vec<u8> {
        let question_end = 12 + query[12..].iter().position(|&b| b == 0).unwrap() + 5;
        let mut m = id.to_be_bytes().to_vec();
        m.extend_from_slice(&[0x84, 0, 0, 1, 0, 3, 0, 0, 0, 0]);
        m.extend_from_slice(&query[12..question_end]);
        let origin = Name::parse("t.test").unwrap();
        let ns = Name::parse("ns.t.test").unwrap();
        let soa = [
            ns.as_wire(),
            ns.as_wire(),
            &[0, 0, 0, 7, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0],
        ]
        .concat();
        for (rtype, rdata) in [(6u16, &soa[..]), (2, ns.as_wire()), (6, &soa[..])] {
            m.extend_from_slice(origin.as_wire());
            m.extend_from_slice(&rtype.to_be_bytes());
            m.extend_from_slice(&[0, 1, 0, 0, 0, 60]);
            m.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
            m.extend_from_slice(rdata);
        }
        [&(m.len() as u16).to_be_bytes()[..], &m].concat()
    }

    /// A primary that sends a message more after the end of the first
    /// transfer on each connection: the next transfer on that pooled
    /// connection would read it first. It is taken for stale, and the
    /// transfer goes again on a new connection.
    #[tokio::test]
    async fn a_message_left_after_a_transfer_sends_the_next_one_to_a_new_connection() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut first = true;
                    loop {
                        let mut len = [0u8; 2];
                        if conn.read_exact(&mut len).await.is_err() {
                            return;
                        }
                        let mut query = vec![0u8; u16::from_be_bytes(len) as usize];
                        conn.read_exact(&mut query).await.unwrap();
                        let id = u16::from_be_bytes([query[0], query[1]]);
                        let mut out = axfr_answer(&query, id);
                        if std::mem::replace(&mut first, false) {
                            out.extend(axfr_answer(&query, id.wrapping_add(1)));
                        }
                        conn.write_all(&out).await.unwrap();
                    }
                });
            }
        });
        let conns = pool_of_32();
        let up = plain_upstream(addr);
        let origin = Name::parse("t.test").unwrap();
        for _ in 0..2 {
            let got = conns.transfer(&up, &origin, Request::Axfr).await;
            assert!(matches!(got, Ok((Outcome::Full(_), _))), "{:?}", got.err());
        }
        assert_eq!(conns.opened(), 2, "the stale connection was left");
    }

    /// A primary at `addr` over plain TCP, without a key.
    fn plain_upstream(addr: SocketAddr) -> Upstream {
        Upstream {
            addr,
            key: None,
            tls: None,
            source: None,
        }
    }

    fn pool_of_32() -> Arc<Connections> {
        Arc::new(Connections::new(
            Arc::default(),
            32,
            Duration::from_secs(10),
        ))
    }

    /// Past [`CONNECTS_PER_PRIMARY`] connects in flight to one primary
    /// (a backlog of 10 would drop the SYNs past it), the next waits for
    /// a turn; connects to another primary do not.
    #[tokio::test]
    async fn connects_to_one_primary_wait_their_turn_past_the_limit() {
        let busy = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let other = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream = plain_upstream;
        let conns = pool_of_32();
        let gate = conns.connect_gate(busy.local_addr().unwrap());
        let in_flight = gate.clone().acquire_many_owned(CONNECTS_PER_PRIMARY as u32);
        let in_flight = in_flight.await.unwrap();
        let up = upstream(busy.local_addr().unwrap());
        let waiting = tokio::spawn({
            let conns = conns.clone();
            async move { conns.connect(&up).await.map(|_| ()) }
        });
        // Another primary is not held up.
        let other = upstream(other.local_addr().unwrap());
        assert!(conns.connect(&other).await.is_ok());
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "connected past the limit");
        drop(in_flight);
        assert!(waiting.await.unwrap().is_ok());
        assert_eq!(gate.available_permits(), CONNECTS_PER_PRIMARY);
    }

    /// A connection the primary has not answered on may still sit in its
    /// listen backlog: its turn is kept until the first answer, so a
    /// primary slow to answer has at most [`CONNECTS_PER_PRIMARY`] of our
    /// new connections waiting.
    #[tokio::test]
    async fn a_new_connection_keeps_its_turn_until_the_primary_answers_on_it() {
        let primary = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = primary.local_addr().unwrap();
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (answer, answers) = tokio::sync::watch::channel(false);
        tokio::spawn({
            let accepted = accepted.clone();
            async move {
                while let Ok((mut tcp, _)) = primary.accept().await {
                    accepted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let mut answers = answers.clone();
                    tokio::spawn(async move {
                        let mut len = [0u8; 2];
                        tcp.read_exact(&mut len).await.unwrap();
                        let mut msg = vec![0u8; u16::from_be_bytes(len) as usize];
                        tcp.read_exact(&mut msg).await.unwrap();
                        answers.wait_for(|go| *go).await.unwrap();
                        msg[2] |= 0x80; // QR: the query echoed is its answer
                        tcp.write_all(&len).await.unwrap();
                        tcp.write_all(&msg).await.unwrap();
                    });
                }
            }
        });
        let up = plain_upstream(addr);
        let conns = pool_of_32();
        let origin = Name::parse("example.").unwrap();
        let exchanges: Vec<_> = (0..CONNECTS_PER_PRIMARY + 1)
            .map(|_| {
                let (conns, up) = (conns.clone(), up.clone());
                let query = conns.query(&origin, RType::SOA, None);
                tokio::spawn(async move { conns.exchange(&up, query, |_| Ok(true)).await })
            })
            .collect();
        let count = || accepted.load(std::sync::atomic::Ordering::SeqCst);
        for _ in 0..500 {
            if count() == CONNECTS_PER_PRIMARY {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(count(), CONNECTS_PER_PRIMARY, "connected past the limit");
        answer.send(true).unwrap();
        for exchange in exchanges {
            exchange.await.unwrap().unwrap();
        }
        assert_eq!(count(), CONNECTS_PER_PRIMARY + 1);
        let gate = conns.connect_gate(addr);
        assert_eq!(gate.available_permits(), CONNECTS_PER_PRIMARY);
    }

    /// The zone `origin` served at `up`, by AXFR through `conns`.
    async fn axfr_of(conns: &Connections, up: &Upstream, origin: &Name) -> Arc<heron_zone::Zone> {
        match conns.transfer(up, origin, Request::Axfr).await.unwrap().0 {
            Outcome::Full(zone) => Arc::new(zone),
            other => panic!("{other:?}"),
        }
    }

    /// From a primary that sends one record per message (BIND's
    /// `transfer-format one-answer`), an IXFR's first message holds the
    /// newest SOA alone: the transfer goes on to its end, so the serial
    /// moves, and the connection goes back to the pool with nothing
    /// unread: the next exchanges on it work (an IXFR in AXFR form too).
    #[tokio::test]
    async fn a_transfer_of_one_record_per_message_is_read_to_its_end_before_the_pool_reuses_it() {
        let primary = heron_testkit::FakePrimary::start(&["one.test"], 1);
        primary.set_one_answer(true);
        primary.set_ixfr(heron_testkit::IxfrAnswer::Step);
        let up = plain_upstream(primary.addr());
        let conns = pool_of_32();
        let origin = Name::parse("one.test").unwrap();
        let mut have = axfr_of(&conns, &up, &origin).await;
        for serial in [2, 3] {
            primary.set_serial(serial);
            let request = Request::Ixfr { have: have.clone() };
            match conns.transfer(&up, &origin, request).await.unwrap().0 {
                Outcome::Incremental { zone, .. } => have = Arc::new(zone),
                other => panic!("serial {serial}: {other:?}"),
            }
            assert_eq!(have.serial(), serial);
        }
        primary.set_ixfr(heron_testkit::IxfrAnswer::Axfr);
        primary.set_serial(4);
        let got = conns.transfer(&up, &origin, Request::Ixfr { have }).await;
        match got.unwrap().0 {
            Outcome::Full(zone) => assert_eq!(zone.serial(), 4),
            other => panic!("{other:?}"),
        }
        assert_eq!(conns.opened(), 1, "one connection, reused");
    }

    /// A transfer that fails part-way (past a limit, the rest of the zone
    /// unread) or that its caller abandons (the request sent, the answer
    /// not read) takes its connection with it: the next exchange gets a
    /// new one, and works.
    #[tokio::test]
    async fn a_transfer_failed_or_abandoned_part_way_never_goes_back_to_the_pool() {
        let primary = heron_testkit::FakePrimary::start(&["cut.test"], 1);
        let up = plain_upstream(primary.addr());
        let limits = TransferLimits {
            max_records: 2_000,
            ..TransferLimits::default()
        };
        let conns = Connections::new(Arc::default(), 32, Duration::from_secs(10))
            .with_transfer_limits(limits);
        let origin = Name::parse("cut.test").unwrap();
        axfr_of(&conns, &up, &origin).await;
        assert_eq!(conns.opened(), 1);

        primary.set_padding(10_000);
        match conns.transfer(&up, &origin, Request::Axfr).await {
            Err(ClientError::Transfer(XfrError::Limit(Exceeded::Records(2_000)))) => {}
            other => panic!("{other:?}"),
        }
        primary.set_padding(0);
        axfr_of(&conns, &up, &origin).await;
        assert_eq!(
            conns.opened(),
            2,
            "the failed transfer's connection dropped"
        );

        primary.set_hold(Duration::from_millis(500));
        let abandoned = conns.transfer(&up, &origin, Request::Axfr);
        let waited = tokio::time::timeout(Duration::from_millis(100), abandoned).await;
        assert!(waited.is_err(), "answered within the hold");
        primary.set_hold(Duration::ZERO);
        axfr_of(&conns, &up, &origin).await;
        axfr_of(&conns, &up, &origin).await;
        assert_eq!(
            conns.opened(),
            3,
            "the abandoned one dropped, the next reused"
        );
        assert_eq!(primary.connections(), 3);
    }

    #[tokio::test]
    async fn a_source_address_of_another_family_or_not_ours_fails_with_the_reason() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let not_ours: IpAddr = "192.0.2.77".parse().unwrap();
        let e = connect_from(addr, Some(not_ours)).await.unwrap_err();
        assert!(
            e.to_string()
                .contains("cannot bind source address 192.0.2.77"),
            "{e}"
        );
        let v6: IpAddr = "::1".parse().unwrap();
        assert!(connect_from(addr, Some(v6)).await.is_err());
    }

    #[test]
    fn pooled_connections_are_shared_only_under_the_same_trust() {
        let up = |tls: Option<XotTrust>| Upstream {
            addr: "192.0.2.1:853".parse().unwrap(),
            key: None,
            tls,
            source: None,
        };
        let strict = |name: &str| Some(XotTrust::strict(name).unwrap());
        let routes = [
            route(&up(None)),
            route(&up(Some(XotTrust::Opportunistic))),
            route(&up(strict("ns1.example"))),
            route(&up(strict("ns2.example"))),
            route(&Upstream {
                source: Some("192.0.2.9".parse().unwrap()),
                ..up(None)
            }),
        ];
        for (i, a) in routes.iter().enumerate() {
            for b in &routes[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(route(&up(strict("ns1.example"))), routes[2]);
    }
}
