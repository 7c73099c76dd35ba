#!/usr/bin/env python3
"""Writes the seed corpora in fuzz/seeds/<target>/ (run from anywhere).

* query, message: valid queries (plain, EDNS, DO, TCP-sized, odd opcodes and
  classes) for names of the fuzz zone; message also gets responses built
  from the same records, with compression pointers.
* rdata: two-byte type + wire RDATA for every case of the codec's own table
  (crates/heron-proto/src/rdata/tests.rs, CASES).
* zonefile: the zone files under crates/*/tests/data/.
* processor: one octet (transport in bits 0-1: UDP, TCP, TLS; peer in
  bits 2-4: 127.0.0.2 transfers with the key, .3 without, .4 may NOTIFY,
  192.0.2.9 nothing) and a query: plain, signed (good and wrong secret),
  AXFR and IXFR (with the client's SOA, without, over UDP), NOTIFY for the
  secondary zone and for the primary one.
* tsig: queries signed with the fuzz target's keys (one per algorithm):
  good, outside the fudge (BADTIME), truncated to the RFC minimum and one
  octet below, wrong secret, unknown key; and an unsigned query.
* xdp_packet: two octets of reply length, then an Ethernet frame of a UDP
  query with its checksums right: IPv4 and IPv6, IPv4 without a UDP
  checksum, and each with the UDP checksum left to offload.
* update: a settings octet (updates in the batch, permissions, serial
  policy, whether signed by k.edge.test.), then each update's length, its
  prerequisite and update counts, and its records: adds, deletions of a
  record, an RRset and a name, each prerequisite kind (RFC 2136 2.4), a
  CNAME beside data, an apex NS removed, a batch whose second update
  depends on the first.

Files named regress-* are inputs that once failed; they are kept as they are.
"""
import hashlib
import hmac
import re
import struct
from pathlib import Path

FUZZ = Path(__file__).resolve().parent
ROOT = FUZZ.parent
SEEDS = FUZZ / "seeds"

TYPES = dict(
    (m.group(1), int(m.group(2)))
    for m in re.finditer(r"\b([A-Z][A-Z0-9]*) = (\d+)",
                         (ROOT / "crates/heron-proto/src/types.rs").read_text())
)


def name(text):
    out = b""
    for label in text.strip(".").split("."):
        if label:
            out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def header(id_, flags, qd=1, an=0, ns=0, ar=0):
    return struct.pack(">HHHHHH", id_, flags, qd, an, ns, ar)


def opt(size=1232, do=False, options=b""):
    ttl = 0x8000 if do else 0
    return b"\0" + struct.pack(">HHIH", 41, size, ttl, len(options)) + options


def query(qname, qtype, qclass=1, flags=0x0100, edns=None, id_=0x1234):
    ar = 1 if edns is not None else 0
    m = header(id_, flags, ar=ar) + name(qname) + struct.pack(">HH", qtype, qclass)
    return m + (edns if edns is not None else b"")


# The tsig target's clock and keys (fuzz_targets/tsig.rs).
TSIG_NOW = 1_700_000_000
TSIG_SECRET = b"fuzz secret"
TSIG_ALGS = [  # text name, wire name, hashlib name, full MAC length
    ("hmac-md5", "hmac-md5.sig-alg.reg.int", "md5", 16),
    ("hmac-sha1", "hmac-sha1", "sha1", 20),
    ("hmac-sha224", "hmac-sha224", "sha224", 28),
    ("hmac-sha256", "hmac-sha256", "sha256", 32),
    ("hmac-sha384", "hmac-sha384", "sha384", 48),
    ("hmac-sha512", "hmac-sha512", "sha512", 64),
]


def tsig_sign(msg, key_name, alg, secret=TSIG_SECRET, time=TSIG_NOW, fudge=300, trunc=None):
    """msg with a TSIG RR appended (RFC 8945 4.3.3 digest), ARCOUNT + 1."""
    _, wire_alg, hash_name, _ = alg
    time48 = struct.pack(">Q", time)[2:]
    variables = (name(key_name.lower()) + struct.pack(">HI", 255, 0) + name(wire_alg)
                 + time48 + struct.pack(">HHH", fudge, 0, 0))
    mac = hmac.new(secret, msg + variables, hash_name).digest()[:trunc]
    rdata = (name(wire_alg) + time48 + struct.pack(">HH", fudge, len(mac)) + mac
             + msg[:2] + struct.pack(">HH", 0, 0))
    rr = name(key_name) + struct.pack(">HHIH", 250, 255, 0, len(rdata)) + rdata
    arcount = struct.unpack(">H", msg[10:12])[0] + 1
    return msg[:10] + struct.pack(">H", arcount) + msg[12:] + rr


def write(target, label, data):
    d = SEEDS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / label).write_bytes(data)


def rdata_cases():
    src = (ROOT / "crates/heron-proto/src/rdata/tests.rs").read_text()
    body = src[src.index("const CASES"):]
    body = body[:body.index("\n];")]
    for m in re.finditer(r'\(\s*RType::(\w+),\s*"(?:[^"\\]|\\.)*",\s*"([0-9a-f]*)"', body):
        yield m.group(1), TYPES[m.group(1)], bytes.fromhex(m.group(2))


GENERATED = ["rdata", "query", "message", "tsig", "cookie", "processor", "xdp_packet", "dnstap_frame", "http_request",
             "update", "zonefile"]


def main():
    # Inputs that once failed (regress-*) are kept; the rest is regenerated.
    # Only in the folders written here: others are written by tests or by
    # hand (catalog_zone, journal_file, key_files, ...).
    for target in GENERATED:
        for f in SEEDS.glob(f"{target}/*"):
            if not f.name.startswith("regress-"):
                f.unlink()

    # rdata
    cases = list(rdata_cases())
    for i, (mn, num, wire) in enumerate(cases):
        write("rdata", f"{i:03}-{mn.lower()}", struct.pack(">H", num) + wire)

    # query / message: queries
    names = ["edge.test", "www.edge.test", "foo.wild.edge.test", "b.c.ent.edge.test",
             "chain1.edge.test", "x.dname.edge.test", "a.sub.edge.test",
             "secure.edge.test", "nx.edge.test", "MiXeD.edge.test",
             "bigtxt.edge.test", "outside.example", "version.bind"]
    qtypes = ["A", "AAAA", "NS", "SOA", "MX", "TXT", "ANY", "DS", "CNAME", "SRV",
              "AXFR", "IXFR", "SVCB", "HTTPS", "LOC", "CAA", "NAPTR"]
    queries = []
    for i, qn in enumerate(names):
        for j, qt in enumerate(qtypes[i % 5:][:4]):
            variant = (i + j) % 4
            edns = [None, opt(), opt(do=True), opt(4096, options=struct.pack(">HH", 10, 8) + b"\x01" * 8)][variant]
            queries.append((f"{qn}-{qt}-{variant}", query(qn, TYPES[qt], edns=edns)))
    queries.append(("chaos-version", query("version.bind", TYPES["TXT"], qclass=3)))
    queries.append(("chaos-id", query("id.server", TYPES["TXT"], qclass=3, edns=opt())))
    queries.append(("notify", query("edge.test", TYPES["SOA"], flags=0x2000)))
    queries.append(("edns1", query("edge.test", TYPES["A"],
                                   edns=b"\0" + struct.pack(">HHIH", 41, 512, 0x00010000, 0))))
    queries.append(("compressed-qname", header(1, 0, 1) + b"\x03www\xc0\x14"
                    + struct.pack(">HH", 1, 1) + b"\x04edge\x04test\x00"))
    for label, q in queries:
        write("query", label, q)
        write("message", "q-" + label, q)

    # message: responses with compression (answer owner points at the question)
    by_type = {}
    for mn, num, wire in cases:
        by_type.setdefault(mn, (num, wire))
    for mn, (num, wire) in by_type.items():
        qn = name("rr.example.com")
        rr = b"\xc0\x0c" + struct.pack(">HHIH", num, 1, 3600, len(wire)) + wire
        auth = (b"\xc0\x0f" + struct.pack(">HHIH", TYPES["NS"], 1, 3600, 6)
                + b"\x03ns1\xc0\x0f")
        glue = b"\x03ns1\xc0\x0f" + struct.pack(">HHIH", 1, 1, 3600, 4) + bytes([192, 0, 2, 1])
        m = (header(0xBEEF, 0x8400, an=1, ns=1, ar=2) + qn + struct.pack(">HH", num, 1)
             + rr + auth + glue + opt(do=True))
        write("message", "r-" + mn.lower(), m)

    # tsig
    q = query("example.com", TYPES["SOA"])
    write("tsig", "unsigned", q)
    for alg in TSIG_ALGS:
        text, _, _, full = alg
        key = f"{text}.fuzz."
        minimum = max(10, full // 2)
        write("tsig", f"{text}-good", tsig_sign(q, key, alg))
        write("tsig", f"{text}-good-edns", tsig_sign(query("example.com", 6, edns=opt()), key, alg))
        write("tsig", f"{text}-badtime", tsig_sign(q, key, alg, time=TSIG_NOW + 1000))
        write("tsig", f"{text}-trunc-min", tsig_sign(q, key, alg, trunc=minimum))
        write("tsig", f"{text}-trunc-below", tsig_sign(q, key, alg, trunc=minimum - 1))
        write("tsig", f"{text}-badsig", tsig_sign(q, key, alg, secret=b"wrong"))
        write("tsig", f"{text}-badkey", tsig_sign(q, "unknown.fuzz.", alg))

    # cookie: now, switches, age, then OPT RDATA (see fuzz_targets/cookie.rs)
    def option(code, data):
        return struct.pack(">HH", code, len(data)) + data
    client = bytes.fromhex("2464c4abcf10c957")
    server = bytes.fromhex("010000005cf79f111f8130c3eee29480")
    for label, switches, age, rdata in [
        ("client-only", 0b0010, 0, option(10, client)),
        ("client-only-require", 0b0011, 0, option(10, client)),
        ("forged-young", 0b1011, 60, option(10, client + server)),
        ("forged-old", 0b1011, 2000, option(10, client + server)),
        ("forged-expired", 0b1011, 3601, option(10, client + server)),
        ("forged-future", 0b1111, -301 & 0xFFFF, option(10, client + server)),
        ("foreign-server-cookie", 0b0011, 0, option(10, client + server)),
        ("long-server-cookie", 0b0010, 0, option(10, client + bytes(32))),
        ("malformed", 0b0010, 0, option(10, client[:7])),
        ("nsid-expire-unknown", 0b0010, 0, option(3, b"") + option(9, b"") + option(65001, b"x")),
        ("two-cookies", 0b0010, 0, option(10, client) + option(10, client + server)),
    ]:
        write("cookie", label, struct.pack(">IBH", 1559731985, switches, age) + rdata)
    # processor: the peers and the key of fuzz_targets/processor.rs
    def cookie_option(length):
        return struct.pack(">HH", 10, length) + bytes(range(1, length + 1))

    udp, tcp, tls = 0, 1, 2
    keyed, open_, notifier, stranger = 0 << 2, 1 << 2, 2 << 2, 3 << 2
    sha256 = TSIG_ALGS[3]

    def soa_rr(serial):
        return b"\xc0\x0c" + struct.pack(">HHIH", 6, 1, 60, 22) + b"\0\0" + struct.pack(">IIIII", serial, 1, 2, 3, 4)

    def with_soa(m, section, serial):
        counts = list(struct.unpack(">HHHH", m[4:12]))
        counts[section] += 1
        return m[:4] + struct.pack(">HHHH", *counts) + m[12:] + soa_rr(serial)

    def signed(m, secret=TSIG_SECRET):
        return tsig_sign(m, "xfr.fuzz.", sha256, secret=secret)

    axfr = query("edge.test", TYPES["AXFR"], flags=0)
    ixfr = with_soa(query("edge.test", TYPES["IXFR"], flags=0), 2, 1)
    notify = with_soa(query("sec.test", TYPES["SOA"], flags=0x2000), 1, 7)
    cases = [
        ("plain-udp", udp | stranger, query("www.edge.test", TYPES["A"], edns=opt())),
        ("plain-tcp", tcp | stranger, query("edge.test", TYPES["SOA"])),
        ("signed-udp", udp | keyed, signed(query("www.edge.test", TYPES["A"]))),
        ("signed-wrong-secret", tcp | keyed, signed(query("www.edge.test", TYPES["A"]), b"wrong")),
        ("axfr-signed", tcp | keyed, signed(axfr)),
        ("axfr-signed-tls", tls | keyed, signed(axfr)),
        ("axfr-unsigned-refused", tcp | keyed, axfr),
        ("axfr-open", tcp | open_, axfr),
        ("axfr-stranger", tcp | stranger, axfr),
        ("axfr-udp", udp | open_, axfr),
        ("axfr-not-served", tcp | open_, query("other.test", TYPES["AXFR"], flags=0)),
        ("ixfr-tcp", tcp | open_, ixfr),
        ("ixfr-signed", tcp | keyed, signed(ixfr)),
        ("ixfr-udp", udp | open_, ixfr),
        ("ixfr-without-soa", tcp | open_, query("edge.test", TYPES["IXFR"], flags=0)),
        ("notify", udp | notifier, notify),
        ("notify-signed", tcp | notifier, signed(notify)),
        ("notify-stranger", udp | stranger, notify),
        ("notify-primary-zone", udp | notifier, query("edge.test", TYPES["SOA"], flags=0x2000)),
        ("axfr-edns-refused", tcp | stranger, query("edge.test", TYPES["AXFR"], flags=0, edns=opt())),
        ("axfr-udp-signed", udp | keyed, signed(query("edge.test", TYPES["AXFR"], flags=0, edns=opt()))),
        ("class-any", udp | stranger, query("www.edge.test", TYPES["A"], qclass=255, edns=opt())),
        ("class-any-signed", tcp | keyed, signed(query("nx.edge.test", TYPES["A"], qclass=255))),
        # RFC 7873 5.4: no question, a client cookie; and one with a server cookie too.
        ("cookie-only", udp | stranger, header(0x1234, 0, qd=0, ar=1) + opt(options=cookie_option(8))),
        ("cookie-only-tcp", tcp | stranger, header(0x1234, 0, qd=0, ar=1) + opt(options=cookie_option(24))),
    ]
    for label, pick, m in cases:
        write("processor", label, bytes([pick]) + m)

    # dnstap_frame: control frames as a Frame Streams reader sends them
    def control(kind, content_types=(), extra=b""):
        body = struct.pack(">I", kind)
        for c in content_types:
            body += struct.pack(">II", 1, len(c)) + c
        body += extra
        return b"\0\0\0\0" + struct.pack(">I", len(body)) + body

    dnstap = b"protobuf:dnstap.Dnstap"
    for label, frame in [
        ("accept", control(1, [dnstap])),
        ("accept_two", control(1, [b"protobuf:other", dnstap])),
        ("finish", control(5)),
        ("ready_unknown_field", control(4, [dnstap], struct.pack(">II", 9, 3) + b"abc")),
        ("data_frame", struct.pack(">I", 5) + b"hello"),
    ]:
        write("dnstap_frame", label, frame)

    # http_request: request heads as a Prometheus scraper (or anyone) sends
    for label, head in [
        ("get", b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("head", b"HEAD /metrics?x=1 HTTP/1.0\r\n\r\n"),
        ("post", b"POST /metrics HTTP/1.1\r\nA: b\r\n\r\n"),
        ("v2", b"GET / HTTP/2\n\n"),
        # What Prometheus sends, so the fuzzer reaches the Accept parser.
        ("accept-prometheus", b"GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text;"
         b"version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,"
         b"text/plain;version=0.0.4;q=0.3,*/*;q=0.2\r\n\r\n"),
        ("accept-refused", b"GET /metrics HTTP/1.1\r\nAccept: text/plain\r\n"
         b"accept: application/openmetrics-text; q=0\r\n\r\n"),
        ("accept-refused-upper-q", b"GET /metrics HTTP/1.0\r\nAccept: application/openmetrics-text;Q=0\r\n\r\n"),
    ]:
        write("http_request", label, head)

    # xdp_packet: a reply length, then a query's frame, checksums right
    def checksum(data):
        if len(data) % 2:
            data += b"\0"
        total = sum(struct.unpack(">%dH" % (len(data) // 2), data))
        while total > 0xffff:
            total = (total & 0xffff) + (total >> 16)
        return total ^ 0xffff

    def udp_frame(src, dst, udp_sum="right"):
        payload = query("www.example.com.", TYPES["A"])
        udp_len = 8 + len(payload)
        pseudo = src + dst + struct.pack(">HH", 17, udp_len)
        udp = struct.pack(">HHHH", 5300, 53, udp_len, 0) + payload
        if udp_sum == "right":
            c = checksum(pseudo + udp) or 0xffff
        elif udp_sum == "offload":
            c = checksum(pseudo) ^ 0xffff
        else:
            c = 0
        udp = udp[:6] + struct.pack(">H", c) + udp[8:]
        macs = bytes([2] * 6) + bytes([4] * 6)
        if len(src) == 4:
            ip = struct.pack(">BBHHHBBH", 0x45, 0, 20 + udp_len, 1, 0x4000, 64, 17, 0) + src + dst
            ip = ip[:10] + struct.pack(">H", checksum(ip)) + ip[12:]
            return macs + b"\x08\x00" + ip + udp
        ip = struct.pack(">IHBB", 0x60000000, udp_len, 17, 64) + src + dst
        return macs + b"\x86\xdd" + ip + udp

    v4 = (bytes([198, 51, 100, 2]), bytes([198, 51, 100, 1]))
    v6 = (bytes.fromhex("20010db8000500000000000000000002"),
          bytes.fromhex("20010db8000500000000000000000001"))
    for label, reply_len, frame in [
        ("udp4-query", 100, udp_frame(*v4)),
        ("udp4-query-b", 2000, udp_frame(*v4)),
        ("udp4-no-checksum", 100, udp_frame(*v4, udp_sum="none")),
        ("udp4-offloaded", 100, udp_frame(*v4, udp_sum="offload")),
        ("udp6-query", 100, udp_frame(*v6)),
        ("udp6-query-b", 0, udp_frame(*v6)),
        ("udp6-offloaded", 100, udp_frame(*v6, udp_sum="offload")),
    ]:
        write("xdp_packet", label, struct.pack(">H", reply_len) + frame)

    # update: see fuzz_targets/update.rs
    def rr(owner, rtype, rclass=1, ttl=300, rdata=b""):
        return name(owner) + struct.pack(">HHIH", TYPES[rtype] if isinstance(rtype, str) else rtype,
                                         rclass, ttl, len(rdata)) + rdata

    def piece(prereqs, updates):
        body = bytes([len(prereqs), len(updates)]) + b"".join(prereqs) + b"".join(updates)
        return struct.pack(">H", len(body)) + body

    a = lambda *o: bytes(o)
    ANY_, NONE_ = 255, 254
    for label, switches, pieces in [
        ("add-a", 0, [piece([], [rr("new.edge.test", "A", rdata=a(192, 0, 2, 9))])]),
        ("add-txt-two", 0, [piece([], [rr("new.edge.test", "TXT", rdata=b"\x02hi"),
                                       rr("new.edge.test", "TXT", rdata=b"\x03hey")])]),
        ("delete-record", 0, [piece([], [rr("www.edge.test", "A", NONE_, 0, a(192, 0, 2, 80))])]),
        ("delete-rrset", 0, [piece([], [rr("mail.edge.test", "AAAA", ANY_, 0)])]),
        ("delete-name", 0, [piece([], [rr("sip.edge.test", ANY_, ANY_, 0)])]),
        ("delete-apex-ns", 0, [piece([], [rr("edge.test", "NS", ANY_, 0)])]),
        ("cname-beside-data", 0, [piece([], [rr("www.edge.test", "CNAME", rdata=name("mail.edge.test"))])]),
        ("prereq-yxdomain", 0, [piece([rr("www.edge.test", ANY_, ANY_, 0)],
                                      [rr("www.edge.test", "TXT", rdata=b"\x01x")])]),
        ("prereq-nxdomain", 0, [piece([rr("free.edge.test", ANY_, NONE_, 0)],
                                      [rr("free.edge.test", "A", rdata=a(192, 0, 2, 7))])]),
        ("prereq-yxrrset", 0, [piece([rr("www.edge.test", "A", ANY_, 0)],
                                     [rr("www.edge.test", "A", ANY_, 0)])]),
        ("prereq-nxrrset", 0, [piece([rr("www.edge.test", "TXT", NONE_, 0)],
                                     [rr("www.edge.test", "TXT", rdata=b"\x01y")])]),
        ("prereq-value", 0, [piece([rr("www.edge.test", "A", 1, 0, a(192, 0, 2, 80))],
                                   [rr("www.edge.test", "A", NONE_, 0, a(192, 0, 2, 80))])]),
        ("batch-depends", 1, [piece([], [rr("b.edge.test", "A", rdata=a(192, 0, 2, 11))]),
                              piece([rr("b.edge.test", "A", ANY_, 0)],
                                    [rr("b.edge.test", ANY_, ANY_, 0)])]),
        ("batch-four", 3, [piece([], [rr(f"n{i}.edge.test", "A", rdata=a(192, 0, 2, i))]) for i in range(4)]),
        ("keyed-www", (1 << 2) | 0x40, [piece([], [rr("x.www.edge.test", "AAAA", rdata=bytes(16))])]),
        ("keyed-self", (2 << 2) | 0x40, [piece([], [rr("k.edge.test", "TXT", rdata=b"\x01k")])]),
        ("wildcard-rule", 3 << 2, [piece([], [rr("z.wild.edge.test", "CNAME", rdata=name("www.edge.test"))])]),
        ("unix-serial", 1 << 4, [piece([], [rr("t.edge.test", "A", rdata=a(192, 0, 2, 1))])]),
        ("date-serial", 2 << 4, [piece([], [rr("t.edge.test", "A", rdata=a(192, 0, 2, 1))])]),
    ]:
        write("update", label, bytes([switches]) + b"".join(pieces))

    # zonefile
    for d in ["crates/heron-zone/tests/data", "crates/heron/tests/data"]:
        for f in sorted((ROOT / d).rglob("*.zone")):
            rel = f.relative_to(ROOT / d)
            write("zonefile", str(rel).replace("/", "-"), f.read_bytes())


if __name__ == "__main__":
    main()
