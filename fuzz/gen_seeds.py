#!/usr/bin/env python3
"""Writes the seed corpora in fuzz/seeds/<target>/ (run from anywhere).

* query, message: valid queries (plain, EDNS, DO, TCP-sized, odd opcodes and
  classes) for names of the fuzz zone; message also gets responses built
  from the same records, with compression pointers.
* rdata: two-byte type + wire RDATA for every case of the codec's own table
  (crates/heron-proto/src/rdata/tests.rs, CASES).
* zonefile: the zone files under crates/*/tests/data/.

Files named regress-* are inputs that once failed; they are kept as they are.
"""
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


def main():
    # Inputs that once failed (regress-*) are kept; the rest is regenerated.
    for f in SEEDS.glob("*/*"):
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

    # zonefile
    for d in ["crates/heron-zone/tests/data", "crates/heron/tests/data"]:
        for f in sorted((ROOT / d).rglob("*.zone")):
            rel = f.relative_to(ROOT / d)
            write("zonefile", str(rel).replace("/", "-"), f.read_bytes())


if __name__ == "__main__":
    main()
