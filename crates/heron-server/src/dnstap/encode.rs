//! The dnstap protobuf message (`dnstap.proto`), written by hand: the
//! schema is small and fixed, and we only write it. Field numbers and
//! enum values are dnstap.proto's; the tests read what this writes with
//! `dnstap-read` (BIND) and with the decoder in the tests.

use std::net::SocketAddr;
use std::time::Duration;

use crate::processor::Transport;

/// `Dnstap.Type.MESSAGE`.
const DNSTAP_MESSAGE: u64 = 1;

/// `Message.Type`: the two an authoritative server logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    AuthQuery = 1,
    AuthResponse = 2,
}

// `Dnstap` fields.
const IDENTITY: u32 = 1;
const VERSION: u32 = 2;
const MESSAGE: u32 = 14;
const TYPE: u32 = 15;
// `Message` fields.
const M_TYPE: u32 = 1;
const SOCKET_FAMILY: u32 = 2;
const SOCKET_PROTOCOL: u32 = 3;
const QUERY_ADDRESS: u32 = 4;
const RESPONSE_ADDRESS: u32 = 5;
const QUERY_PORT: u32 = 6;
const RESPONSE_PORT: u32 = 7;
const QUERY_TIME_SEC: u32 = 8;
const QUERY_TIME_NSEC: u32 = 9;
const QUERY_MESSAGE: u32 = 10;
const QUERY_ZONE: u32 = 11;
const RESPONSE_TIME_SEC: u32 = 12;
const RESPONSE_TIME_NSEC: u32 = 13;
const RESPONSE_MESSAGE: u32 = 14;

// Wire types.
const VARINT: u32 = 0;
const LEN: u32 = 2;
const FIXED32: u32 = 5;

/// One message to log and where it went between.
pub struct Record<'a> {
    pub kind: Kind,
    pub transport: Transport,
    /// The client.
    pub peer: SocketAddr,
    /// Our address, if known.
    pub local: Option<SocketAddr>,
    /// Since the Unix epoch: when the query was read.
    pub query_time: Duration,
    /// Since the Unix epoch: when the response was sent (a response's).
    pub time: Duration,
    /// The zone that answers the query, in wire form, if one does.
    pub zone: Option<&'a [u8]>,
    pub message: &'a [u8],
}

/// `SocketProtocol`: UDP 1, TCP 2, DOT 3.
fn protocol(transport: Transport) -> u64 {
    match transport {
        Transport::Udp => 1,
        Transport::Tcp => 2,
        Transport::Tls => 3,
    }
}

fn address_bytes(addr: &SocketAddr) -> Vec<u8> {
    match addr {
        SocketAddr::V4(a) => a.ip().octets().to_vec(),
        SocketAddr::V6(a) => a.ip().octets().to_vec(),
    }
}

/// Appends the `Dnstap` message for `record` to `out`; `scratch` is
/// reused for the nested `Message`.
pub fn dnstap(
    identity: &[u8],
    version: &[u8],
    record: &Record,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) {
    scratch.clear();
    message(record, scratch);
    if !identity.is_empty() {
        bytes_field(IDENTITY, identity, out);
    }
    if !version.is_empty() {
        bytes_field(VERSION, version, out);
    }
    bytes_field(MESSAGE, scratch, out);
    varint_field(TYPE, DNSTAP_MESSAGE, out);
}

fn message(r: &Record, out: &mut Vec<u8>) {
    varint_field(M_TYPE, r.kind as u64, out);
    let family = if r.peer.is_ipv4() { 1 } else { 2 };
    varint_field(SOCKET_FAMILY, family, out);
    varint_field(SOCKET_PROTOCOL, protocol(r.transport), out);
    bytes_field(QUERY_ADDRESS, &address_bytes(&r.peer), out);
    if let Some(local) = &r.local {
        bytes_field(RESPONSE_ADDRESS, &address_bytes(local), out);
    }
    varint_field(QUERY_PORT, u64::from(r.peer.port()), out);
    if let Some(local) = &r.local {
        varint_field(RESPONSE_PORT, u64::from(local.port()), out);
    }
    varint_field(QUERY_TIME_SEC, r.query_time.as_secs(), out);
    fixed32_field(QUERY_TIME_NSEC, r.query_time.subsec_nanos(), out);
    match r.kind {
        Kind::AuthQuery => bytes_field(QUERY_MESSAGE, r.message, out),
        Kind::AuthResponse => {
            varint_field(RESPONSE_TIME_SEC, r.time.as_secs(), out);
            fixed32_field(RESPONSE_TIME_NSEC, r.time.subsec_nanos(), out);
            bytes_field(RESPONSE_MESSAGE, r.message, out);
        }
    }
    if let Some(zone) = r.zone {
        bytes_field(QUERY_ZONE, zone, out);
    }
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn key(field: u32, wire: u32, out: &mut Vec<u8>) {
    varint(u64::from(field << 3 | wire), out);
}

fn varint_field(field: u32, v: u64, out: &mut Vec<u8>) {
    key(field, VARINT, out);
    varint(v, out);
}

fn fixed32_field(field: u32, v: u32, out: &mut Vec<u8>) {
    key(field, FIXED32, out);
    out.extend_from_slice(&v.to_le_bytes());
}

fn bytes_field(field: u32, b: &[u8], out: &mut Vec<u8>) {
    key(field, LEN, out);
    varint(b.len() as u64, out);
    out.extend_from_slice(b);
}

/// A protobuf reader for the tests: the fields of one message, by number.
#[cfg(test)]
pub(crate) mod decode {
    use std::collections::BTreeMap;

    #[derive(Clone, Debug, PartialEq, Eq)]
    pub enum Value {
        Varint(u64),
        Fixed32(u32),
        Bytes(Vec<u8>),
    }

    fn varint(b: &[u8], at: &mut usize) -> u64 {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = b[*at];
            *at += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                break;
            }
        }
        v
    }

    /// Every field of the message in `b` (each number appears once).
    pub fn fields(b: &[u8]) -> BTreeMap<u32, Value> {
        let mut out = BTreeMap::new();
        let mut at = 0;
        while at < b.len() {
            let key = varint(b, &mut at);
            let value = match key & 7 {
                0 => Value::Varint(varint(b, &mut at)),
                5 => {
                    at += 4;
                    Value::Fixed32(u32::from_le_bytes(b[at - 4..at].try_into().unwrap()))
                }
                2 => {
                    let len = varint(b, &mut at) as usize;
                    at += len;
                    Value::Bytes(b[at - len..at].to_vec())
                }
                other => panic!("wire type {other}"),
            };
            assert!(out.insert((key >> 3) as u32, value).is_none());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::decode::{Value, fields};
    use super::*;

    #[test]
    fn varints_as_protobuf_writes_them() {
        for (v, want) in [
            (0u64, &[0u8][..]),
            (1, &[1]),
            (127, &[0x7f]),
            (128, &[0x80, 0x01]),
            (300, &[0xac, 0x02]),
            (
                u64::MAX,
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            ),
        ] {
            let mut out = Vec::new();
            varint(v, &mut out);
            assert_eq!(out, want, "{v}");
        }
    }

    #[test]
    fn a_response_over_tls_from_ipv6() {
        let record = Record {
            kind: Kind::AuthResponse,
            transport: Transport::Tls,
            peer: "[2001:db8::1]:5353".parse().unwrap(),
            local: Some("[2001:db8::53]:853".parse().unwrap()),
            query_time: Duration::new(1_700_000_000, 123_000_000),
            time: Duration::new(1_700_000_000, 123_456_789),
            zone: Some(b"\x07example\x00"),
            message: &[1; 300],
        };
        let (mut scratch, mut out) = (Vec::new(), Vec::new());
        dnstap(b"ns1", b"heron 1", &record, &mut scratch, &mut out);
        let top = fields(&out);
        assert_eq!(top[&IDENTITY], Value::Bytes(b"ns1".to_vec()));
        assert_eq!(top[&VERSION], Value::Bytes(b"heron 1".to_vec()));
        assert_eq!(top[&TYPE], Value::Varint(1));
        let Value::Bytes(inner) = &top[&MESSAGE] else {
            panic!("no message")
        };
        let m = fields(inner);
        assert_eq!(m[&M_TYPE], Value::Varint(2));
        assert_eq!(m[&SOCKET_FAMILY], Value::Varint(2));
        assert_eq!(m[&SOCKET_PROTOCOL], Value::Varint(3));
        let client: std::net::Ipv6Addr = "2001:db8::1".parse().unwrap();
        assert_eq!(m[&QUERY_ADDRESS], Value::Bytes(client.octets().to_vec()));
        assert_eq!(m[&QUERY_PORT], Value::Varint(5353));
        assert_eq!(m[&RESPONSE_PORT], Value::Varint(853));
        assert_eq!(m[&RESPONSE_TIME_SEC], Value::Varint(1_700_000_000));
        assert_eq!(m[&RESPONSE_TIME_NSEC], Value::Fixed32(123_456_789));
        // The query's own time, before the response's.
        assert_eq!(m[&QUERY_TIME_SEC], Value::Varint(1_700_000_000));
        assert_eq!(m[&QUERY_TIME_NSEC], Value::Fixed32(123_000_000));
        assert_eq!(m[&QUERY_ZONE], Value::Bytes(b"\x07example\x00".to_vec()));
        assert_eq!(m[&RESPONSE_MESSAGE], Value::Bytes(vec![1; 300]));
        assert!(!m.contains_key(&QUERY_MESSAGE));
    }

    #[test]
    fn a_query_over_udp_from_ipv4_without_our_address() {
        let record = Record {
            kind: Kind::AuthQuery,
            transport: Transport::Udp,
            peer: "127.0.0.1:40000".parse().unwrap(),
            local: None,
            query_time: Duration::new(5, 0),
            time: Duration::new(5, 0),
            zone: None,
            message: b"query",
        };
        let (mut scratch, mut out) = (Vec::new(), Vec::new());
        dnstap(b"", b"", &record, &mut scratch, &mut out);
        let top = fields(&out);
        assert!(!top.contains_key(&IDENTITY) && !top.contains_key(&VERSION));
        let Value::Bytes(inner) = &top[&MESSAGE] else {
            panic!("no message")
        };
        let m = fields(inner);
        assert_eq!(m[&M_TYPE], Value::Varint(1));
        assert_eq!(m[&SOCKET_FAMILY], Value::Varint(1));
        assert_eq!(m[&SOCKET_PROTOCOL], Value::Varint(1));
        assert_eq!(m[&QUERY_ADDRESS], Value::Bytes(vec![127, 0, 0, 1]));
        assert_eq!(m[&QUERY_TIME_SEC], Value::Varint(5));
        assert_eq!(m[&QUERY_MESSAGE], Value::Bytes(b"query".to_vec()));
        assert!(!m.contains_key(&RESPONSE_ADDRESS) && !m.contains_key(&RESPONSE_MESSAGE));
        assert!(!m.contains_key(&QUERY_ZONE), "no zone answers it");
    }
}
