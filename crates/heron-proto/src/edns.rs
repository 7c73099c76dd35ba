//! EDNS(0): the OPT pseudo-record (RFC 6891) and the options Heron reads
//! in queries and writes in responses.

use crate::types::Full;

/// What a query's OPT record says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edns {
    /// Requestor's UDP payload size; values below 512 count as 512.
    pub udp_size: u16,
    /// Upper eight bits of the extended response code.
    pub ext_rcode: u8,
    pub version: u8,
    /// DNSSEC OK (RFC 3225).
    pub do_bit: bool,
    /// The options the server acts on, read once with the record.
    pub options: EdnsOptions,
}

/// Smallest UDP payload every EDNS requestor must accept (RFC 6891 6.2.5).
pub const MIN_UDP_SIZE: u16 = 512;

/// Option codes (IANA "DNS EDNS0 Option Codes").
pub mod code {
    /// Name server identifier (RFC 5001).
    pub const NSID: u16 = 3;
    /// Zone expiry timer (RFC 7314).
    pub const EXPIRE: u16 = 9;
    /// Padding (RFC 7830).
    pub const PADDING: u16 = 12;
    /// DNS cookies (RFC 7873).
    pub const COOKIE: u16 = 10;
    /// TCP idle timeout a server signals (RFC 7828).
    pub const TCP_KEEPALIVE: u16 = 11;
    /// Extended DNS errors (RFC 8914).
    pub const EXTENDED_ERROR: u16 = 15;
}

/// Length of a client cookie (RFC 7873 4.1).
pub const CLIENT_COOKIE_LEN: usize = 8;
/// Shortest and longest server cookie (RFC 7873 4.2).
pub const MIN_SERVER_COOKIE_LEN: usize = 8;
pub const MAX_SERVER_COOKIE_LEN: usize = 32;

/// The options of an OPT record the server acts on; every other option is
/// skipped, as RFC 6891 6.1.2 requires. Fixed size: nothing is allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct EdnsOptions {
    pub cookie: CookieOption,
    /// An NSID option was present: the requestor asks who answers
    /// (RFC 5001 2.1; its payload, empty in queries, is not read).
    pub nsid: bool,
    /// An EXPIRE option was present (RFC 7314 2).
    pub expire: bool,
    /// The seconds an EXPIRE option of four octets carried: a response's
    /// (a query's option is empty).
    pub expire_seconds: Option<u32>,
    /// A Padding option was present: over an encrypted transport the
    /// response is padded too (RFC 7830 4).
    pub padding: bool,
    /// An edns-tcp-keepalive option was present: over TCP and TLS the
    /// response says how long the connection may stay idle (RFC 7828
    /// 3.3.2); over UDP it is ignored (3.3.1).
    pub tcp_keepalive: bool,
}

/// The first COOKIE option of the record (RFC 7873 5.2 processes only
/// the first; later ones are ignored, as BIND does).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CookieOption {
    #[default]
    Absent,
    /// A length no cookie has (not 8, nor 16 to 40): the query gets
    /// FORMERR from a server that implements cookies (RFC 7873 5.2.2).
    Malformed,
    Present(Cookie),
}

/// A client cookie, and the server cookie if the client sent one back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cookie {
    client: [u8; CLIENT_COOKIE_LEN],
    server: [u8; MAX_SERVER_COOKIE_LEN],
    server_len: u8,
}

impl Cookie {
    /// Reads a COOKIE option's data; None for a malformed length.
    pub fn from_option(data: &[u8]) -> Option<Cookie> {
        let (client, server) = data.split_first_chunk::<CLIENT_COOKIE_LEN>()?;
        let server_ok = server.is_empty()
            || (MIN_SERVER_COOKIE_LEN..=MAX_SERVER_COOKIE_LEN).contains(&server.len());
        if !server_ok {
            return None;
        }
        let mut cookie = Cookie {
            client: *client,
            server: [0; MAX_SERVER_COOKIE_LEN],
            server_len: server.len() as u8,
        };
        cookie.server[..server.len()].copy_from_slice(server);
        Some(cookie)
    }

    pub fn client(&self) -> &[u8; CLIENT_COOKIE_LEN] {
        &self.client
    }

    /// The server cookie the client sent back, if any.
    pub fn server(&self) -> Option<&[u8]> {
        (self.server_len > 0).then(|| &self.server[..self.server_len as usize])
    }
}

/// Reads OPT's CLASS, TTL and RDATA. Options must fit the RDATA exactly;
/// COOKIE, NSID and EXPIRE are read, the rest skipped.
pub fn parse_opt(class: u16, ttl: u32, rdata: &[u8]) -> Result<Edns, &'static str> {
    Ok(Edns {
        udp_size: class.max(MIN_UDP_SIZE),
        ext_rcode: (ttl >> 24) as u8,
        version: (ttl >> 16) as u8,
        do_bit: ttl & 0x8000 != 0,
        options: parse_options(rdata)?,
    })
}

/// Walks the options of an OPT RDATA.
fn parse_options(rdata: &[u8]) -> Result<EdnsOptions, &'static str> {
    let mut options = EdnsOptions::default();
    let mut rest = rdata;
    while !rest.is_empty() {
        let Some((head, after)) = rest.split_first_chunk::<4>() else {
            return Err("option header runs past RDATA");
        };
        let len = u16::from_be_bytes([head[2], head[3]]) as usize;
        if len > after.len() {
            return Err("option runs past RDATA");
        }
        let (data, after) = after.split_at(len);
        match u16::from_be_bytes([head[0], head[1]]) {
            code::COOKIE if options.cookie == CookieOption::Absent => {
                options.cookie = match Cookie::from_option(data) {
                    Some(cookie) => CookieOption::Present(cookie),
                    None => CookieOption::Malformed,
                };
            }
            code::NSID => options.nsid = true,
            code::PADDING => options.padding = true,
            code::TCP_KEEPALIVE => options.tcp_keepalive = true,
            code::EXPIRE => {
                options.expire = true;
                options.expire_seconds = data.try_into().ok().map(u32::from_be_bytes);
            }
            _ => {}
        }
        rest = after;
    }
    Ok(options)
}

/// An OPT record with no options: our payload size, the upper bits of
/// `rcode`, version 0 and the DO bit as given.
pub fn opt_record(udp_size: u16, rcode: u16, do_bit: bool) -> [u8; OPT_LEN] {
    let ttl = (((rcode >> 4) as u32) << 24) | if do_bit { 0x8000 } else { 0 };
    let mut out = [0u8; OPT_LEN]; // root owner first
    out[1..3].copy_from_slice(&41u16.to_be_bytes());
    out[3..5].copy_from_slice(&udp_size.to_be_bytes());
    out[5..9].copy_from_slice(&ttl.to_be_bytes());
    out
}

/// Wire length of the OPT record [`opt_record`] makes.
pub const OPT_LEN: usize = 11;

/// Extended DNS Error INFO-CODEs the server gives (RFC 8914 4).
pub mod ede {
    /// 18: a policy refuses the client (`allow-query`).
    pub const PROHIBITED: u16 = 18;
    /// 20: a name in no zone the server serves (RFC 8914 4.21).
    pub const NOT_AUTHORITATIVE: u16 = 20;
}

/// Wire length of [`opt_record_with_error`]'s record.
pub const OPT_WITH_ERROR_LEN: usize = OPT_LEN + OPTION_HEADER_LEN + 2;

/// [`opt_record`] holding one Extended DNS Error option with `info_code`
/// and no text.
pub fn opt_record_with_error(
    udp_size: u16,
    rcode: u16,
    do_bit: bool,
    info_code: u16,
) -> [u8; OPT_WITH_ERROR_LEN] {
    let mut out = [0u8; OPT_WITH_ERROR_LEN];
    out[..OPT_LEN].copy_from_slice(&opt_record(udp_size, rcode, do_bit));
    let rdlength = (OPTION_HEADER_LEN + 2) as u16;
    out[OPT_RDLENGTH_AT..OPT_LEN].copy_from_slice(&rdlength.to_be_bytes());
    out[OPT_LEN..OPT_LEN + 2].copy_from_slice(&code::EXTENDED_ERROR.to_be_bytes());
    out[OPT_LEN + 2..OPT_LEN + 4].copy_from_slice(&2u16.to_be_bytes());
    out[OPT_LEN + 4..].copy_from_slice(&info_code.to_be_bytes());
    out
}
/// Where RDLENGTH sits in an OPT record (root owner, type, class, TTL).
const OPT_RDLENGTH_AT: usize = 9;
/// Octets an option takes besides its data.
pub const OPTION_HEADER_LEN: usize = 4;

/// Appends options to the OPT record that ends a response, keeping its
/// RDLENGTH right. The response's header is untouched: the OPT record is
/// already counted. A TSIG record, if any, is added after.
pub struct OptionWriter<'a> {
    msg: &'a mut Vec<u8>,
    opt_at: usize,
    limit: usize,
}

impl<'a> OptionWriter<'a> {
    /// For the OPT record at `opt_at`, which must be the last record of
    /// `msg` (root owner, type OPT, RDATA up to the end); the message may
    /// grow to `limit` octets. None if `opt_at` holds no such record.
    pub fn new(msg: &'a mut Vec<u8>, opt_at: usize, limit: usize) -> Option<OptionWriter<'a>> {
        let record = msg.get(opt_at..)?;
        let fixed = record.get(..OPT_LEN)?;
        let rdlen = u16::from_be_bytes([fixed[9], fixed[10]]) as usize;
        if fixed[..3] != [0, 0, 41] || OPT_LEN + rdlen != record.len() {
            return None;
        }
        Some(OptionWriter { msg, opt_at, limit })
    }

    /// For a response that ends with an [`opt_record`] (no options yet).
    pub fn after_bare_opt(msg: &'a mut Vec<u8>, limit: usize) -> Option<OptionWriter<'a>> {
        let opt_at = msg.len().checked_sub(OPT_LEN)?;
        OptionWriter::new(msg, opt_at, limit)
    }

    /// For a response that ends with an OPT record, with or without
    /// options already (a cookie written before NSID, or after it). The
    /// bare case costs one compare; otherwise the records are walked once
    /// to find where the last one starts.
    pub fn ending(msg: &'a mut Vec<u8>, limit: usize) -> Option<OptionWriter<'a>> {
        if let Some(opt_at) = msg.len().checked_sub(OPT_LEN)
            && msg[opt_at..opt_at + 3] == [0, 0, 41]
            && msg[opt_at + 9..opt_at + 11] == [0, 0]
        {
            return OptionWriter::new(msg, opt_at, limit);
        }
        let opt_at = last_record_start(msg)?;
        OptionWriter::new(msg, opt_at, limit)
    }

    /// Appends one option of `parts` concatenated; nothing is written if
    /// it would pass the size limit or RDLENGTH's 65,535.
    pub fn option(&mut self, code: u16, parts: &[&[u8]]) -> Result<(), Full> {
        let data_len: usize = parts.iter().map(|p| p.len()).sum();
        let added = OPTION_HEADER_LEN + data_len;
        let rdlen = self.msg.len() - self.opt_at - OPT_LEN + added;
        if self.msg.len() + added > self.limit || rdlen > u16::MAX as usize {
            return Err(Full);
        }
        self.msg.extend_from_slice(&code.to_be_bytes());
        self.msg.extend_from_slice(&(data_len as u16).to_be_bytes());
        for part in parts {
            self.msg.extend_from_slice(part);
        }
        let at = self.opt_at + OPT_RDLENGTH_AT;
        self.msg[at..at + 2].copy_from_slice(&(rdlen as u16).to_be_bytes());
        Ok(())
    }

    /// COOKIE: the client's cookie echoed and our server cookie (RFC 7873 4).
    pub fn cookie(&mut self, client: &[u8; CLIENT_COOKIE_LEN], server: &[u8]) -> Result<(), Full> {
        debug_assert!((MIN_SERVER_COOKIE_LEN..=MAX_SERVER_COOKIE_LEN).contains(&server.len()));
        self.option(code::COOKIE, &[client, server])
    }

    /// NSID: this server's identifier (RFC 5001 2.3).
    pub fn nsid(&mut self, id: &[u8]) -> Result<(), Full> {
        self.option(code::NSID, &[id])
    }

    /// EXPIRE: seconds until the zone expires (RFC 7314 2).
    pub fn expire(&mut self, seconds: u32) -> Result<(), Full> {
        self.option(code::EXPIRE, &[&seconds.to_be_bytes()])
    }

    /// edns-tcp-keepalive: the idle timeout in units of 100 ms (RFC 7828
    /// 3.1).
    pub fn tcp_keepalive(&mut self, tenths: u16) -> Result<(), Full> {
        self.option(code::TCP_KEEPALIVE, &[&tenths.to_be_bytes()])
    }

    /// Padding (RFC 7830) that brings the message, with `reserve` octets
    /// still to come (a TSIG record), to a multiple of `block` octets
    /// (RFC 8467 4.1: 468 for responses); as much as fits the limit.
    pub fn pad_to(&mut self, block: usize, reserve: usize) -> Result<(), Full> {
        let unpadded = self.msg.len() + OPTION_HEADER_LEN + reserve;
        if unpadded > self.limit {
            // Not even an empty option fits beside what is still to come.
            return Err(Full);
        }
        let wanted = (block - unpadded % block) % block;
        let room = self.limit - unpadded;
        const ZEROS: [u8; 512] = [0; 512];
        self.option(
            code::PADDING,
            &[&ZEROS[..wanted.min(room).min(ZEROS.len())]],
        )
    }

    /// Keeps the message's first `keep` octets (its header and question)
    /// and this OPT record with the options written so far: the records
    /// between go, and the header counts them no more (answer and
    /// authority sections empty, the OPT the one additional record). For
    /// a response truncated because what was asked for does not fit (RFC
    /// 6891 7): the caller sets TC. Nothing is cut if `keep` is past the
    /// records' start.
    pub fn keep_only_question(&mut self, keep: usize) {
        if keep > self.opt_at || keep < 12 {
            return;
        }
        self.msg.drain(keep..self.opt_at);
        self.opt_at = keep;
        // ANCOUNT, NSCOUNT, ARCOUNT.
        self.msg[6..12].copy_from_slice(&[0, 0, 0, 0, 0, 1]);
    }

    /// Removes additional records before the OPT record, the last first,
    /// until `needed` more octets fit the limit, keeping the first
    /// `at_least`; whether they fit then. Only records that are optional
    /// may go: an authoritative answer's additional data (RFC 2181 9, as
    /// BIND and Knot drop it to give an NSID), a referral's past its
    /// required glue (RFC 9471).
    pub fn drop_additional_for(&mut self, needed: usize, at_least: usize) -> bool {
        let fits = |w: &Self| w.msg.len() + needed <= w.limit;
        let Some(starts) = additional_starts(&self.msg[..self.opt_at], self.msg) else {
            return fits(self);
        };
        let mut kept = starts.len();
        while !fits_without(self, &starts, kept, needed) && kept > at_least {
            kept -= 1;
        }
        if kept == starts.len() {
            return fits(self);
        }
        let from = starts[kept];
        self.msg.drain(from..self.opt_at);
        self.opt_at = from;
        let arcount = (kept + 1) as u16; // and the OPT record
        self.msg[10..12].copy_from_slice(&arcount.to_be_bytes());
        fits(self)
    }

    /// Extended DNS Error: INFO-CODE and optional UTF-8 EXTRA-TEXT
    /// (RFC 8914 2; empty text is left out).
    pub fn extended_error(&mut self, info_code: u16, text: &str) -> Result<(), Full> {
        self.option(
            code::EXTENDED_ERROR,
            &[&info_code.to_be_bytes(), text.as_bytes()],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// OPT RDATA holding the given (code, data) options.
    fn options(list: &[(u16, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (code, data) in list {
            out.extend_from_slice(&code.to_be_bytes());
            out.extend_from_slice(&(data.len() as u16).to_be_bytes());
            out.extend_from_slice(data);
        }
        out
    }

    fn read(list: &[(u16, &[u8])]) -> EdnsOptions {
        parse_opt(1232, 0, &options(list)).unwrap().options
    }

    #[test]
    fn opt_fields() {
        let e = parse_opt(4096, 0x0001_8000, &[]).unwrap();
        assert_eq!((e.udp_size, e.version, e.do_bit), (4096, 1, true));
        assert_eq!(e.options, EdnsOptions::default());
        assert_eq!(parse_opt(100, 0, &[]).unwrap().udp_size, 512);
        assert!(parse_opt(1232, 0, &[0, 10, 0]).is_err());
        assert!(parse_opt(1232, 0, &[0, 10, 0, 9, 1]).is_err());
        assert!(parse_opt(1232, 0, &[0, 10, 0, 1, 1]).is_ok());
        let out = opt_record(1232, 16, true);
        assert_eq!(out, [0, 0, 41, 4, 0xD0, 1, 0, 0x80, 0, 0, 0]);
    }

    #[test]
    fn cookies_of_every_allowed_length_are_read() {
        let client = [1, 2, 3, 4, 5, 6, 7, 8];
        let CookieOption::Present(c) = read(&[(code::COOKIE, &client)]).cookie else {
            panic!("client cookie alone");
        };
        assert_eq!((c.client(), c.server()), (&client, None));
        for server_len in [8, 16, 32] {
            let mut data = client.to_vec();
            data.extend((0..server_len).map(|i| i as u8 + 100));
            let CookieOption::Present(c) = read(&[(code::COOKIE, &data)]).cookie else {
                panic!("server cookie of {server_len}");
            };
            assert_eq!(c.client(), &client);
            assert_eq!(c.server(), Some(&data[8..]));
        }
    }

    #[test]
    fn cookies_of_other_lengths_are_malformed() {
        // RFC 7873 5.2.2: shorter than a client cookie, a server cookie
        // shorter than 8 or longer than 32.
        for len in [0, 1, 7, 9, 15, 41, 64] {
            let data = vec![7u8; len];
            let read = read(&[(code::COOKIE, &data)]);
            assert_eq!(read.cookie, CookieOption::Malformed, "length {len}");
        }
    }

    #[test]
    fn only_the_first_cookie_counts() {
        let good = [9u8; 8];
        let bad = [9u8; 9];
        let first_good = read(&[(code::COOKIE, &good), (code::COOKIE, &bad)]);
        assert!(matches!(first_good.cookie, CookieOption::Present(_)));
        let first_bad = read(&[(code::COOKIE, &bad), (code::COOKIE, &good)]);
        assert_eq!(first_bad.cookie, CookieOption::Malformed);
    }

    #[test]
    fn nsid_and_expire_requests_are_seen_and_unknown_options_skipped() {
        let read = read(&[
            (65001, b"x"),
            (code::NSID, b""),
            (8, &[0, 1, 24, 0, 1, 2, 3]),
        ]);
        assert!(read.nsid && !read.expire);
        assert_eq!(read.cookie, CookieOption::Absent);
        let read = super::tests::read(&[(code::EXPIRE, b""), (code::NSID, b"ignored")]);
        assert!(read.nsid && read.expire);
        assert_eq!(read.expire_seconds, None, "a query's empty EXPIRE");
        assert_eq!(super::tests::read(&[(65001, b"")]), EdnsOptions::default());
    }

    #[test]
    fn an_opt_record_with_an_error_reads_back_as_one() {
        let record = opt_record_with_error(1232, 5, true, ede::NOT_AUTHORITATIVE);
        let rdata = &record[OPT_LEN..];
        assert_eq!(
            u16::from_be_bytes([record[9], record[10]]) as usize,
            rdata.len()
        );
        assert_eq!(rdata, [0, 15, 0, 2, 0, 20]);
        let edns = parse_opt(1232, u32::from_be_bytes([0, 0, 0x80, 0]), rdata).unwrap();
        assert_eq!(edns.options, EdnsOptions::default(), "EDE is not a query's");
        assert_eq!(record[..9], opt_record(1232, 5, true)[..9]);
    }

    #[test]
    fn a_keepalive_option_is_seen_with_or_without_a_timeout() {
        // RFC 7828 3.2.1: clients send it empty; BIND answers one that
        // carries a value too, and so do we.
        for data in [&b""[..], &[0, 100], &[1]] {
            assert!(
                read(&[(code::TCP_KEEPALIVE, data)]).tcp_keepalive,
                "{data:?}"
            );
        }
        assert!(!read(&[(code::PADDING, b"")]).tcp_keepalive);
    }

    #[test]
    fn a_response_expire_of_four_octets_is_read_and_other_lengths_are_not() {
        let read = super::tests::read(&[(code::EXPIRE, &86_399u32.to_be_bytes())]);
        assert_eq!((read.expire, read.expire_seconds), (true, Some(86_399)));
        for bad in [&[0u8, 1, 2][..], &[0, 0, 0, 1, 0]] {
            let read = super::tests::read(&[(code::EXPIRE, bad)]);
            assert_eq!((read.expire, read.expire_seconds), (true, None), "{bad:?}");
        }
    }

    #[test]
    fn a_malformed_option_list_is_an_error_even_after_good_options() {
        let mut rdata = options(&[(code::NSID, b""), (code::COOKIE, &[1; 8])]);
        rdata.extend_from_slice(&[0, 9, 0, 4, 0, 0]); // EXPIRE cut short
        assert!(parse_opt(1232, 0, &rdata).is_err());
        rdata.truncate(rdata.len() - 4);
        assert!(parse_opt(1232, 0, &rdata).is_err(), "header cut short");
    }

    /// A response ending with a bare OPT record after `before` octets.
    fn response(before: usize) -> Vec<u8> {
        let mut msg = vec![0xAB; before];
        msg.extend_from_slice(&opt_record(1232, 0, false));
        msg
    }

    #[test]
    fn written_options_read_back_and_rdlength_follows() {
        let mut msg = response(12);
        let mut w = OptionWriter::after_bare_opt(&mut msg, 512).unwrap();
        let client = [1, 2, 3, 4, 5, 6, 7, 8];
        w.cookie(&client, &[0x55; 16]).unwrap();
        w.nsid(b"ns1").unwrap();
        w.expire(3600).unwrap();
        w.extended_error(18, "").unwrap();
        w.extended_error(6, "no key").unwrap();
        let rdata = &msg[12 + OPT_LEN..];
        let rdlen = u16::from_be_bytes([msg[12 + 9], msg[12 + 10]]) as usize;
        assert_eq!(rdlen, rdata.len());
        let expected = options(&[
            (code::COOKIE, &[&client[..], &[0x55; 16]].concat()),
            (code::NSID, b"ns1"),
            (code::EXPIRE, &3600u32.to_be_bytes()),
            (code::EXTENDED_ERROR, &[0, 18]),
            (code::EXTENDED_ERROR, b"\x00\x06no key"),
        ]);
        assert_eq!(rdata, expected);
        let read = parse_opt(1232, 0, rdata).unwrap().options;
        assert!(read.nsid && read.expire);
        let CookieOption::Present(c) = read.cookie else {
            panic!("cookie written");
        };
        assert_eq!(c.server(), Some(&[0x55; 16][..]));
    }

    #[test]
    fn an_option_that_does_not_fit_is_not_written() {
        let mut msg = response(20);
        let len = msg.len();
        // Exactly at the limit fits; one octet more does not.
        let mut w = OptionWriter::after_bare_opt(&mut msg, len + 4 + 3).unwrap();
        assert_eq!(w.nsid(b"ns12"), Err(Full));
        w.nsid(b"ns1").unwrap();
        assert_eq!(w.expire(1), Err(Full));
        assert_eq!(msg.len(), len + 7);
        assert_eq!(msg[len - 2..len], [0, 7]);
        // RDLENGTH can not pass 65,535 however large the limit.
        let mut msg = response(0);
        let mut w = OptionWriter::after_bare_opt(&mut msg, usize::MAX).unwrap();
        let big = vec![0; u16::MAX as usize - OPTION_HEADER_LEN];
        w.nsid(&big).unwrap();
        assert_eq!(w.expire(0), Err(Full));
        assert_eq!(msg.len(), OPT_LEN + u16::MAX as usize);
    }

    /// Padding brings the message and what is still to come (a TSIG
    /// record) to a multiple of the block, within the limit: near it, as
    /// much as fits; past it, none at all, not even the option's header
    /// (which overflowed a 65,535-octet TCP message, its length prefix
    /// wrapping).
    #[test]
    fn padding_fills_the_block_and_never_passes_the_limit() {
        let mut msg = response(20);
        let len = msg.len();
        let mut w = OptionWriter::after_bare_opt(&mut msg, 1000).unwrap();
        w.pad_to(468, 30).unwrap();
        assert_eq!((msg.len() + 30) % 468, 0);
        let mut msg = response(20);
        let mut w = OptionWriter::after_bare_opt(&mut msg, len + 4 + 30 + 10).unwrap();
        w.pad_to(468, 30).unwrap();
        assert_eq!(msg.len() + 30, len + 4 + 30 + 10, "as much as fits");
        let mut msg = response(20);
        let mut w = OptionWriter::after_bare_opt(&mut msg, len + 4 + 29).unwrap();
        assert_eq!(w.pad_to(468, 30), Err(Full));
        assert_eq!(msg.len(), len, "nothing written");
    }

    #[test]
    fn the_writer_wants_the_opt_record_that_ends_the_message() {
        let mut msg = response(12);
        assert!(OptionWriter::new(&mut msg, 11, 512).is_none(), "not at OPT");
        assert!(OptionWriter::new(&mut msg, 13, 512).is_none(), "inside OPT");
        assert!(OptionWriter::new(&mut msg, 12, 512).is_some());
        msg.push(0);
        assert!(OptionWriter::new(&mut msg, 12, 512).is_none(), "not last");
        assert!(OptionWriter::after_bare_opt(&mut vec![0; 5], 512).is_none());
        // After options were written, the record is still found at its start.
        let mut msg = response(12);
        OptionWriter::after_bare_opt(&mut msg, 512)
            .unwrap()
            .nsid(b"a")
            .unwrap();
        assert!(OptionWriter::new(&mut msg, 12, 512).is_some());
        assert!(OptionWriter::after_bare_opt(&mut msg, 512).is_none());
    }
}

/// Where the last resource record of a well-formed message starts; None
/// for a message with no records or one that does not parse.
fn last_record_start(msg: &[u8]) -> Option<usize> {
    let count = |at: usize| Some(u16::from_be_bytes([*msg.get(at)?, *msg.get(at + 1)?]) as usize);
    let (questions, records) = (count(4)?, count(6)? + count(8)? + count(10)?);
    let mut at = 12;
    for _ in 0..questions {
        at = skip_name(msg, at)? + 4;
    }
    let mut last = None;
    for _ in 0..records {
        last = Some(at);
        at = skip_name(msg, at)?;
        let rdlen = count(at + 8)?;
        at += 10 + rdlen;
    }
    (at == msg.len()).then_some(last).flatten()
}

/// Whether `w`'s message, its additional records after the first `kept`
/// of `starts` gone, has room for `needed` more octets.
fn fits_without(w: &OptionWriter, starts: &[usize], kept: usize, needed: usize) -> bool {
    let dropped = starts.get(kept).map_or(0, |&from| w.opt_at - from);
    w.msg.len() - dropped + needed <= w.limit
}

/// Where each additional record before the OPT record starts (`before`:
/// the message up to the OPT record; `msg` whole, whose ARCOUNT counts the
/// OPT record too). None if the message does not read so.
fn additional_starts(before: &[u8], msg: &[u8]) -> Option<Vec<usize>> {
    let count = |at: usize| Some(u16::from_be_bytes([*msg.get(at)?, *msg.get(at + 1)?]) as usize);
    let (questions, earlier) = (count(4)?, count(6)? + count(8)?);
    let additional = count(10)?.checked_sub(1)?;
    let mut at = 12;
    for _ in 0..questions {
        at = skip_name(before, at)? + 4;
    }
    let mut starts = Vec::with_capacity(additional);
    for i in 0..earlier + additional {
        if i >= earlier {
            starts.push(at);
        }
        at = skip_name(before, at)?;
        let rdlen = u16::from_be_bytes([*before.get(at + 8)?, *before.get(at + 9)?]) as usize;
        at += 10 + rdlen;
    }
    (at == before.len()).then_some(starts)
}

/// The position after the (possibly compressed) name at `at`.
fn skip_name(msg: &[u8], mut at: usize) -> Option<usize> {
    loop {
        let len = *msg.get(at)? as usize;
        match len {
            0 => return Some(at + 1),
            l if l & 0xC0 == 0xC0 => return Some(at + 2),
            l if l & 0xC0 == 0 => at += 1 + l,
            _ => return None,
        }
    }
}

#[cfg(test)]
mod ending_tests {
    use super::*;

    /// A response: header, question `a.`, one A record, then an OPT.
    fn response(opt_options: &[u8]) -> Vec<u8> {
        let mut m = vec![0, 1, 0x84, 0, 0, 1, 0, 1, 0, 0, 0, 1];
        m.extend_from_slice(&[1, b'a', 0, 0, 1, 0, 1]);
        m.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1]);
        m.extend_from_slice(&[0, 0, 41, 4, 0xD0, 0, 0, 0, 0]);
        m.extend_from_slice(&(opt_options.len() as u16).to_be_bytes());
        m.extend_from_slice(opt_options);
        m
    }

    #[test]
    fn a_second_option_goes_into_an_opt_that_has_one() {
        let first = [0, 3, 0, 2, b'i', b'd'];
        let mut m = response(&first);
        let mut w = OptionWriter::ending(&mut m, 512).expect("the OPT is found");
        w.option(9, &[&[0, 0, 0, 5]]).unwrap();
        let mut want = response(&first);
        want.truncate(want.len() - first.len() - 2);
        want.extend_from_slice(&14u16.to_be_bytes());
        want.extend_from_slice(&first);
        want.extend_from_slice(&[0, 9, 0, 4, 0, 0, 0, 5]);
        assert_eq!(m, want);
    }

    #[test]
    fn a_bare_opt_and_no_opt_and_a_truncated_message() {
        let mut bare = response(&[]);
        assert!(OptionWriter::ending(&mut bare, 512).is_some());
        let mut no_opt = response(&[]);
        no_opt.truncate(no_opt.len() - OPT_LEN);
        no_opt[11] = 0;
        assert!(OptionWriter::ending(&mut no_opt, 512).is_none());
        let mut cut = response(&[0, 3, 0, 2, b'i', b'd']);
        cut.pop();
        assert!(OptionWriter::ending(&mut cut, 512).is_none());
        let mut garbage = vec![0xFF; 40];
        assert!(OptionWriter::ending(&mut garbage, 512).is_none());
    }
}
