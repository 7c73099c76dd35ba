#!/usr/bin/env python3
"""A flood of one query from loopback addresses, counting what comes back.

    rrl_flood.py SERVER_PORT SERVER_PID RATE SECONDS PREFIXES [NAME]

Sends NAME/A at RATE queries a second for SECONDS from PREFIXES /24s
(127.1.N.1 to 127.1.N.4 each; 1 prefix: 127.0.0.2 alone), like a spoofed
flood aimed at a victim, and prints one line of JSON: queries sent,
answers (full), slipped (TC set, no records), none back, and the server's
CPU seconds over the flood (from /proc/PID/stat) per query sent.
"""
import json
import os
import selectors
import socket
import struct
import sys
import time


def query(name, qid):
    q = struct.pack(">HHHHHH", qid, 0, 1, 0, 0, 0)
    for label in name.rstrip(".").split("."):
        q += bytes([len(label)]) + label.encode()
    return q + b"\x00" + struct.pack(">HH", 1, 1)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sources(prefixes):
    if prefixes == 1:
        return ["127.0.0.2"]
    return [f"127.1.{n}.{h}" for n in range(prefixes) for h in range(1, 5)]


def main():
    port, pid, rate, seconds, prefixes = (int(a) for a in sys.argv[1:6])
    name = sys.argv[6] if len(sys.argv) > 6 else "www.example.test"
    socks = []
    sel = selectors.DefaultSelector()
    for addr in sources(prefixes):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        s.bind((addr, 0))
        s.setblocking(False)
        socks.append(s)
        sel.register(s, selectors.EVENT_READ)
    target = ("127.0.0.1", port)
    counts = {"answers": 0, "slipped": 0, "other": 0}

    def drain(timeout):
        for key, _ in sel.select(timeout):
            while True:
                try:
                    msg = key.fileobj.recv(4096)
                except BlockingIOError:
                    break
                flags, ancount = struct.unpack(">H", msg[2:4])[0], struct.unpack(">H", msg[6:8])[0]
                if flags & 0x0200 and ancount == 0:
                    counts["slipped"] += 1
                elif ancount > 0:
                    counts["answers"] += 1
                else:
                    counts["other"] += 1

    cpu0 = cpu_seconds(pid)
    total = rate * seconds
    start = time.monotonic()
    sent = 0
    while sent < total:
        due = min(total, int((time.monotonic() - start) * rate))
        while sent < due:
            socks[sent % len(socks)].sendto(query(name, sent & 0xFFFF), target)
            sent += 1
        drain(0.001)
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        drain(0.05)
    cpu = cpu_seconds(pid) - cpu0
    back = counts["answers"] + counts["slipped"] + counts["other"]
    print(json.dumps({
        "sent": sent, **counts, "none": sent - back,
        "seconds": round(time.monotonic() - start - 1.0, 2),
        "server_cpu_us_per_query": round(cpu * 1e6 / sent, 2),
    }))


main()
