//! The query pipeline for the messages the answer engine leaves to it
//! ([`Answered::Deferred`](heron_zone::Answered)): TSIG-signed queries,
//! zone transfers (AXFR, IXFR) and NOTIFY. These are rare next to plain
//! queries, so this path may allocate and parse whole messages.
//!
//! Order of checks: TSIG first (a bad signature gets a NOTAUTH with the
//! TSIG error, RFC 8945 5.2), then the zone, then the access list, then
//! the work. Every refusal is logged with the peer's address.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use heron_proto::message::{self, Header, Message, Query, Record, flags};
use heron_proto::rdata;
use heron_proto::tsig::{self, Key, ResponseSigner, TsigFailure, Verified};
use heron_proto::writer::Writer;
use heron_proto::{Opcode, RType, Rcode};
use heron_xfr::primary::transfer::{self, AxfrWriter, Packer, XfrRecord};
use heron_xfr::primary::{Primary, TransferPlan};
use heron_zone::{AnswerConfig, Catalog, Transport, Zone, answer_parsed};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{Semaphore, mpsc};

/// Outgoing transfers running at once; more wait their turn.
const MAX_TRANSFERS: usize = 64;

/// A NOTIFY that passed its checks: the zone and who sent it.
#[derive(Clone, Debug)]
pub struct NotifyReceived {
    pub origin: heron_proto::Name,
    pub from: SocketAddr,
    /// The serial in the NOTIFY's answer section, if it had one.
    pub serial: Option<u32>,
}

/// What the pipeline needs besides the catalog.
pub struct Pipeline {
    pub primary: Arc<Primary>,
    pub keys: Arc<Vec<Key>>,
    /// Where accepted NOTIFYs for secondary zones go; None when this
    /// server is secondary for nothing.
    pub notify_in: Option<mpsc::UnboundedSender<NotifyReceived>>,
    /// Zones this server is a secondary for (NOTIFY is only accepted for
    /// these).
    pub is_secondary: Box<dyn Fn(&heron_proto::Name) -> bool + Send + Sync>,
    transfers: Semaphore,
}

/// A deferred request that passed the TSIG check.
struct Request<'a> {
    raw: &'a [u8],
    q: Query,
    signed: Option<Verified>,
    peer: SocketAddr,
}

impl Pipeline {
    pub fn new(primary: Arc<Primary>, keys: Arc<Vec<Key>>) -> Pipeline {
        Pipeline {
            primary,
            keys,
            notify_in: None,
            is_secondary: Box::new(|_| false),
            transfers: Semaphore::new(MAX_TRANSFERS),
        }
    }

    /// Answers a deferred UDP message into `out`; false to send nothing.
    pub fn answer_udp(
        &self,
        catalog: &Catalog,
        config: &AnswerConfig,
        raw: &[u8],
        peer: SocketAddr,
        out: &mut Vec<u8>,
    ) -> bool {
        let req = match self.check(raw, peer, out) {
            Ok(Some(req)) => req,
            Ok(None) => return true,
            Err(()) => return false,
        };
        match (req.q.header.opcode(), req.q.qtype) {
            (Opcode::NOTIFY, _) => self.notify(&req, out),
            (_, RType::AXFR) => self.refuse(&req, Rcode::REFUSED, "AXFR over UDP", out),
            (_, RType::IXFR) => self.ixfr_over_udp(catalog, &req, out),
            _ => self.plain(catalog, config, &req, Transport::Udp, out),
        }
        true
    }

    /// Answers a deferred TCP message, writing its responses to `stream`
    /// (a transfer writes many).
    pub async fn answer_tcp<W: AsyncWrite + Unpin>(
        &self,
        catalog: Arc<Catalog>,
        config: &AnswerConfig,
        raw: &[u8],
        peer: SocketAddr,
        stream: &mut FramedWriter<'_, W>,
    ) -> io::Result<()> {
        let mut out = Vec::new();
        let req = match self.check(raw, peer, &mut out) {
            Ok(Some(req)) => req,
            Ok(None) => return stream.send(&out).await,
            Err(()) => return Ok(()),
        };
        match (req.q.header.opcode(), req.q.qtype) {
            (Opcode::NOTIFY, _) => self.notify(&req, &mut out),
            (_, RType::AXFR | RType::IXFR) => return self.transfer(&catalog, &req, stream).await,
            _ => self.plain(&catalog, config, &req, Transport::Tcp, &mut out),
        }
        stream.send(&out).await
    }

    /// Parses and verifies the TSIG, if any. Ok(None): an error response
    /// is in `out`; Err: send nothing.
    fn check<'a>(
        &self,
        raw: &'a [u8],
        peer: SocketAddr,
        out: &mut Vec<u8>,
    ) -> Result<Option<Request<'a>>, ()> {
        let Ok(q) = message::parse_query(raw) else {
            return Err(()); // the engine answered malformed queries already
        };
        let signed = match tsig::verify_request(raw, &*self.keys, unix_now()) {
            Ok(signed) => signed,
            Err(failure) => {
                // Displays as "error (key NAME)".
                tracing::warn!("TSIG check failed for a query from {peer}: {failure}");
                self.tsig_error(&q, raw, &failure, out);
                return Ok(None);
            }
        };
        Ok(Some(Request {
            raw,
            q,
            signed,
            peer,
        }))
    }

    /// NOTAUTH with the TSIG error (RFC 8945 5.2).
    fn tsig_error(&self, q: &Query, raw: &[u8], failure: &TsigFailure, out: &mut Vec<u8>) {
        let mut w = Writer::new(out, u16::MAX as usize);
        w.question_raw(&raw[q.question.clone()]);
        w.finish(
            q.header.id,
            response_flags(q) | failure.error.response_rcode().0,
            1,
        );
        tsig::error_response_tsig(out, failure, &*self.keys, unix_now());
    }

    /// A plain query that was signed: answered by the engine, then signed.
    fn plain(
        &self,
        catalog: &Catalog,
        config: &AnswerConfig,
        req: &Request,
        transport: Transport,
        out: &mut Vec<u8>,
    ) {
        let reserve = req.signed.as_ref().map_or(0, |v| v.key.rr_len());
        answer_parsed(catalog, config, &req.q, req.raw, transport, reserve, out);
        sign(req, out);
    }

    /// A header-and-question response with `rcode`, logged.
    fn refuse(&self, req: &Request, rcode: Rcode, what: &str, out: &mut Vec<u8>) {
        tracing::warn!(
            "{what} from {} for {} refused ({rcode})",
            req.peer,
            req.q.qname_lower.to_name()
        );
        header_only(req, rcode, out);
    }

    /// RFC 1995 2: over UDP the answer is our SOA alone, which tells a
    /// client that is behind to come back over TCP.
    fn ixfr_over_udp(&self, catalog: &Catalog, req: &Request, out: &mut Vec<u8>) {
        let Some(zone) = self.transfer_zone(catalog, req, out) else {
            return;
        };
        let reserve = req.signed.as_ref().map_or(0, |v| v.key.rr_len());
        let mut packer = Packer::new(
            req.q.header.id,
            &req.raw[req.q.question.clone()],
            zone.class(),
            reserve,
        );
        let mut soa = std::iter::once(transfer::soa_record(&zone)).peekable();
        packer
            .next_message(&mut soa, out)
            .expect("an SOA fits in a message");
        sign(req, out);
    }

    /// The zone a transfer asks for, if it may have it; otherwise an
    /// error response is in `out`.
    fn transfer_zone(
        &self,
        catalog: &Catalog,
        req: &Request,
        out: &mut Vec<u8>,
    ) -> Option<Arc<Zone>> {
        let qname = req.q.qname_lower.to_name();
        let Some(zone) = catalog
            .get(&qname)
            .filter(|z| z.class().0 == req.q.qclass.0)
        else {
            self.refuse(req, Rcode::NOTAUTH, "transfer of a zone not served", out);
            sign(req, out);
            return None;
        };
        let policy = self.primary.policy(zone.origin());
        let key = req.signed.as_ref().map(|v| &v.key.name);
        if let Err(why) = policy.allow_transfer.check(req.peer.ip(), key) {
            self.refuse(req, Rcode::REFUSED, &format!("transfer ({why})"), out);
            sign(req, out);
            return None;
        }
        Some(zone.clone())
    }

    /// AXFR or IXFR over TCP: a stream of messages, each signed when the
    /// request was.
    async fn transfer<W: AsyncWrite + Unpin>(
        &self,
        catalog: &Catalog,
        req: &Request<'_>,
        stream: &mut FramedWriter<'_, W>,
    ) -> io::Result<()> {
        let mut out = Vec::new();
        let Some(zone) = self.transfer_zone(catalog, req, &mut out) else {
            return stream.send(&out).await;
        };
        let client_serial = match req.q.qtype {
            RType::IXFR => match soa_serial_in(req.raw, |m| &m.authority) {
                Some(s) => Some(s),
                None => {
                    self.refuse(req, Rcode::FORMERR, "IXFR without an SOA", &mut out);
                    sign(req, &mut out);
                    return stream.send(&out).await;
                }
            },
            _ => None,
        };
        let _slot = self.transfers.acquire().await.map_err(io::Error::other)?;
        let started = std::time::Instant::now();
        let plan = self.primary.plan(&zone, client_serial);
        let kind = match &plan {
            TransferPlan::Axfr if client_serial.is_some() => "IXFR (full zone)",
            TransferPlan::Axfr => "AXFR",
            TransferPlan::Ixfr(_) => "IXFR",
            TransferPlan::UpToDate => "IXFR (up to date)",
        };
        let soa = transfer::soa_record(&zone);
        let (messages, records) = match &plan {
            TransferPlan::Axfr => {
                let reserve = req.signed.as_ref().map_or(0, |v| v.key.rr_len());
                let question = &req.raw[req.q.question.clone()];
                let id = req.q.header.id;
                // Ordering a large zone's names takes a while (2M: 0.17 s here).
                let mut axfr = if zone.node_count() > LARGE_ZONE_NODES {
                    off_the_runtime(|| AxfrWriter::new(&zone, id, question, reserve))
                } else {
                    AxfrWriter::new(&zone, id, question, reserve)
                };
                self.send_all(req, |out| axfr.next_message(out), stream)
                    .await?
            }
            TransferPlan::Ixfr(chain) => {
                self.stream(req, &zone, transfer::ixfr_records(chain, soa), stream)
                    .await?
            }
            TransferPlan::UpToDate => {
                self.stream(req, &zone, std::iter::once(soa), stream)
                    .await?
            }
        };
        tracing::info!(
            "{kind} of {} serial {} to {}: {records} records in {messages} messages, {} ms",
            zone.origin(),
            zone.serial(),
            req.peer,
            started.elapsed().as_millis()
        );
        Ok(())
    }

    /// Packs, signs and writes `records`; returns (messages, records).
    async fn stream<'r, W: AsyncWrite + Unpin>(
        &self,
        req: &Request<'_>,
        zone: &Zone,
        records: impl Iterator<Item = XfrRecord<'r>>,
        stream: &mut FramedWriter<'_, W>,
    ) -> io::Result<(usize, usize)> {
        let reserve = req.signed.as_ref().map_or(0, |v| v.key.rr_len());
        let question = &req.raw[req.q.question.clone()];
        let mut packer = Packer::new(req.q.header.id, question, zone.class(), reserve);
        let mut records = records.peekable();
        self.send_all(req, |out| packer.next_message(&mut records, out), stream)
            .await
    }

    /// Writes the messages `next` makes, each signed if the request was;
    /// returns (messages, records).
    async fn send_all<W: AsyncWrite + Unpin>(
        &self,
        req: &Request<'_>,
        mut next: impl FnMut(&mut Vec<u8>) -> Result<bool, transfer::RecordTooLarge>,
        stream: &mut FramedWriter<'_, W>,
    ) -> io::Result<(usize, usize)> {
        let mut signer = req.signed.as_ref().map(ResponseSigner::new);
        let mut out = Vec::with_capacity(transfer::MAX_MESSAGE);
        let (mut messages, mut total) = (0, 0);
        loop {
            match next(&mut out) {
                Ok(true) => {}
                Ok(false) => break,
                Err(transfer::RecordTooLarge) => {
                    return Err(io::Error::other("a record does not fit in a message"));
                }
            }
            total += Header::read(&out).map_or(0, |h| h.ancount as usize);
            if let Some(signer) = signer.as_mut() {
                signer.sign(&mut out, unix_now());
            }
            stream.send(&out).await?;
            messages += 1;
        }
        Ok((messages, total))
    }

    /// NOTIFY in: accepted only for a zone we are secondary for, from an
    /// allowed address and key (RFC 1996 3.10).
    fn notify(&self, req: &Request, out: &mut Vec<u8>) {
        let origin = req.q.qname_lower.to_name();
        let (Some(sender), true) = (&self.notify_in, (self.is_secondary)(&origin)) else {
            self.refuse(
                req,
                Rcode::NOTAUTH,
                "NOTIFY for a zone we are not secondary for",
                out,
            );
            sign(req, out);
            return;
        };
        let key = req.signed.as_ref().map(|v| &v.key.name);
        let policy = self.primary.policy(&origin);
        if let Err(why) = policy.allow_notify.check(req.peer.ip(), key) {
            self.refuse(req, Rcode::REFUSED, &format!("NOTIFY ({why})"), out);
            sign(req, out);
            return;
        }
        let serial = soa_serial_in(req.raw, |m| &m.answers);
        tracing::info!(
            "NOTIFY for {origin} from {} (serial {})",
            req.peer,
            serial.map_or("-".into(), |s| s.to_string())
        );
        let _ = sender.send(NotifyReceived {
            origin,
            from: req.peer,
            serial,
        });
        header_only(req, Rcode::NOERROR, out);
        sign(req, out);
    }
}

/// Zones with more nodes than this are ordered for an AXFR off the
/// runtime, so that the other connections of its thread keep being served.
const LARGE_ZONE_NODES: usize = 100_000;

/// Runs `f` on this thread after handing its other tasks to another
/// runtime thread (a runtime with one thread, as in tests, just runs it).
fn off_the_runtime<T>(f: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// QR and AA set, opcode and RD copied.
fn response_flags(q: &Query) -> u16 {
    flags::QR | flags::AA | (q.header.flags & (0x7800 | flags::RD))
}

fn header_only(req: &Request, rcode: Rcode, out: &mut Vec<u8>) {
    let mut w = Writer::new(out, u16::MAX as usize);
    w.question_raw(&req.raw[req.q.question.clone()]);
    w.finish(req.q.header.id, response_flags(&req.q) | rcode.0, 1);
}

/// Signs `out` if the request was signed.
fn sign(req: &Request, out: &mut Vec<u8>) {
    if let Some(verified) = &req.signed {
        ResponseSigner::new(verified).sign(out, unix_now());
    }
}

/// The serial of the first SOA for `origin` in the section `pick` chooses:
/// an IXFR request's authority section holds the client's version (RFC
/// 1995 3), a NOTIFY's answer section may hint the new one (RFC 1996 3.7).
fn soa_serial_in(raw: &[u8], pick: fn(&Message) -> &[Record]) -> Option<u32> {
    let m = Message::parse(raw).ok()?;
    let soa = pick(&m).iter().find(|r| r.rtype == RType::SOA)?;
    rdata::soa_serial(&soa.rdata)
}

/// Where TCP responses go: each message length-prefixed (RFC 7766 8),
/// each write bounded in time, so a client that stops reading a transfer
/// cannot hold its task forever.
pub struct FramedWriter<'w, W> {
    stream: &'w mut W,
    write_timeout: Duration,
}

impl<'w, W: AsyncWrite + Unpin> FramedWriter<'w, W> {
    pub fn new(stream: &'w mut W, write_timeout: Duration) -> FramedWriter<'w, W> {
        FramedWriter {
            stream,
            write_timeout,
        }
    }

    /// Writes one message; nothing for an empty one.
    async fn send(&mut self, msg: &[u8]) -> io::Result<()> {
        if msg.is_empty() {
            return Ok(());
        }
        let mut framed = Vec::with_capacity(msg.len() + 2);
        framed.extend_from_slice(&(msg.len() as u16).to_be_bytes());
        framed.extend_from_slice(msg);
        tokio::time::timeout(self.write_timeout, self.stream.write_all(&framed))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "write timed out"))?
    }
}

fn unix_now() -> u64 {
    heron_xfr::primary::notify::unix_now()
}
