#!/usr/bin/env python3
"""Server CPU per TCP connect refused at the total limit.

usage: tcp_shed_cost.py PID PORT ATTEMPTS [HELD]

Opens HELD connections (default 0) to 127.0.0.1:PORT, each from an address
of its own in 127.2.0.0/16 with half a length sent (a message begun, so
none is idle), then makes ATTEMPTS connects from 127.3.0.1 and closes each,
and prints the CPU seconds the server (PID) used for them. Run the server
with `[tcp] max-connections = HELD`, long idle and message timeouts, and
compare with HELD = 0 (every connect admitted). Bounded: ATTEMPTS connects.
"""
import os
import socket
import sys
import time


def cpu(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    pid, port, attempts = (int(a) for a in sys.argv[1:4])
    count = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    held = []
    for i in range(count):
        s = socket.socket()
        s.bind((f"127.2.{i // 200}.{1 + i % 200}", 0))
        s.connect(("127.0.0.1", port))
        s.send(b"\x00")
        held.append(s)
    time.sleep(2)
    before, started = cpu(pid), time.time()
    for _ in range(attempts):
        s = socket.socket()
        s.bind(("127.3.0.1", 0))
        s.connect(("127.0.0.1", port))
        s.close()
    time.sleep(1)
    used = cpu(pid) - before
    print(f"held {count}: {attempts} connects, server CPU {used:.2f} s, "
          f"{used / attempts * 1e6:.1f} us each, {time.time() - started:.1f} s")


main()
