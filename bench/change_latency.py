#!/usr/bin/python3
"""Change-to-served latency of a zone Heron signs (issue 38): how long
after a reload, or a transfer from a hidden primary, brings a change the
changed names are answered signed by every worker.

    change_latency.py HERON MODE [NAMES] [COUNT] [CHANGE] [SOCKETS]

MODE `reload`: one Heron signs a zone of NAMES names (dnssec-policy
"default") from its file. COUNT times, the file gets CHANGE new names
(one A record each) and the next serial, written to a new file renamed
over the old; the clock starts, `heron ctl reload ZONE` runs (it returns
once the zone is served), and the clock stops when SOCKETS sockets, each
with a source port of its own (so that SO_REUSEPORT spreads them over
the server's 2 workers), have all been answered the last new name's A
record with its RRSIG (DO set).

MODE `transfer`: Heron as a bump-in-the-wire signer. A hidden primary (a
second Heron, unsigned, NOTIFYing the signer) serves the file; each
change is reloaded there, and the clock starts once the primary answers
the new name; it stops once every socket has it signed from the signer
(NOTIFY, SOA query, IXFR, incremental signing and the new version
served, all in the latency).

Prints one line, microseconds:

    change mode=reload names=10000 change=1 n=50 failed=0 p50_us=...
        p90_us=... p99_us=... max_us=... ctl_p50_us=... floor_p50_us=...

`ctl_p50_us` is how long `heron ctl reload` took to return (reload mode)
and `floor_p50_us` the asking alone, the record there already (this
tool's round trips). Only loopback; every server it starts it stops.
Standard library only.
"""

import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

import served

ZONE = "chg.test"
# A name never answered gives up after this many seconds.
GIVE_UP = 30.0
# A socket with no answer asks again after this long.
RETRY = 0.002


def query(owner, qid):
    """An A query for `owner` with an OPT record, DO set (wire form)."""
    header = struct.pack(">HHHHHH", qid, 0, 1, 0, 0, 1)
    qname = b"".join(bytes([len(label)]) + label.encode() for label in owner.split(".") if label)
    question = qname + b"\x00" + struct.pack(">HH", 1, 1)
    opt = b"\x00" + struct.pack(">HHIH", 41, 1232, 0x8000, 0)
    return bytearray(header + question + opt)


def answered(data, qid, records):
    """Whether `data` answers `qid` with NOERROR and at least `records`
    answer records (2: the A record and its RRSIG), from the header."""
    return (
        len(data) >= 12
        and int.from_bytes(data[0:2], "big") == qid
        and data[2] & 0x80
        and data[3] & 0x0F == 0
        and int.from_bytes(data[6:8], "big") >= records
    )


def wait_served(socks, server, owner, records):
    """Seconds until every socket is answered `owner` (None past GIVE_UP)."""

    def is_answered(data, qid):
        return answered(data, qid, records)

    return served.wait_served(socks, server, query(owner, 0), is_answered, GIVE_UP, RETRY)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def zone_text(names, serial, added):
    lines = [
        f"$ORIGIN {ZONE}.",
        "$TTL 300",
        f"@ SOA ns hostmaster {serial} 3600 600 86400 60",
        "@ NS ns",
        "ns A 192.0.2.1",
    ]
    lines += [f"h{i} A 198.51.{(i >> 8) & 255}.{i & 255}" for i in range(names)]
    lines += [f"c{i} A 203.0.{(i >> 8) & 255}.{i & 255}" for i in range(added)]
    return "\n".join(lines) + "\n"


def write_zone(path, text):
    """A new file renamed over the old: the reload sees a new one."""
    with open(path + ".new", "w") as f:
        f.write(text)
    os.rename(path + ".new", path)


class Servers:
    """The Herons this run starts, stopped by their PIDs at the end."""

    def __init__(self, heron, work):
        self.heron, self.work, self.procs = heron, work, []

    def start(self, name, config):
        path = os.path.join(self.work, f"{name}.toml")
        with open(path, "w") as f:
            f.write(config)
        log = open(os.path.join(self.work, f"{name}.log"), "w")
        env = dict(os.environ, HERON_LOG="warn")
        cmd = ["taskset", "-c", "0-1", self.heron, "serve", "--config", path]
        self.procs.append(subprocess.Popen(cmd, stderr=log, stdout=log, env=env))

    def ctl(self, socket_path, *args):
        cmd = [self.heron, "ctl", "--control", socket_path, *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    def stop(self):
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def signer_config(work, port, source):
    """The signer's configuration: `source` is the zone's own lines."""
    return (
        f'[server]\nlisten = ["127.0.0.1:{port}"]\nworkers = 2\n'
        f'control = "{work}/signer.sock"\n'
        f'[[zone]]\norigin = "{ZONE}"\n{source}'
        f'dnssec-policy = "default"\nkey-directory = "{work}/keys"\n'
    )


def start(servers, work, mode, names):
    """Starts the servers; returns (signer address, primary address or
    None, the socket to reload at, the zone file)."""
    zone_file = os.path.join(work, "chg.zone")
    write_zone(zone_file, zone_text(names, 1, 0))
    port = free_port()
    if mode == "reload":
        servers.start("signer", signer_config(work, port, f'file = "{zone_file}"\n'))
        return ("127.0.0.1", port), None, f"{work}/signer.sock", zone_file
    primary_port = free_port()
    servers.start(
        "primary",
        f'[server]\nlisten = ["127.0.0.1:{primary_port}"]\nworkers = 1\n'
        f'control = "{work}/primary.sock"\n'
        f'[[zone]]\norigin = "{ZONE}"\nfile = "{zone_file}"\n'
        f'allow-transfer = ["127.0.0.1"]\nnotify = ["127.0.0.1:{port}"]\n',
    )
    kept = f'file = "{work}/kept.zone"\nprimaries = ["127.0.0.1:{primary_port}"]\n'
    servers.start("signer", signer_config(work, port, kept))
    return ("127.0.0.1", port), ("127.0.0.1", primary_port), f"{work}/primary.sock", zone_file



def run(heron, mode, names, count, change, sockets, work):
    servers = Servers(heron, work)
    try:
        signer, primary, control, zone_file = start(servers, work, mode, names)
        askers = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(sockets)]
        for sock in askers:
            sock.bind(("127.0.0.1", 0))
        # Signed and served: the last name of the file has its RRSIG.
        if wait_served(askers[:1], signer, f"h{names - 1}.{ZONE}", 2) is None:
            print(f"change mode={mode}: the zone was not served signed", file=sys.stderr)
            return 1
        latencies, ctl_times, floors, failed = [], [], [], 0
        for step in range(count):
            added = (step + 1) * change
            write_zone(zone_file, zone_text(names, step + 2, added))
            owner = f"c{added - 1}.{ZONE}"
            started = time.perf_counter()
            done = servers.ctl(control, "reload", ZONE)
            ctl_times.append(time.perf_counter() - started)
            if done.returncode != 0:
                print(f"reload failed: {done.stdout}{done.stderr}", file=sys.stderr)
                failed += 1
                continue
            if primary is not None:
                if wait_served(askers[:1], primary, owner, 1) is None:
                    failed += 1
                    continue
                started = time.perf_counter()
            took = wait_served(askers, signer, owner, 2)
            if took is None:
                failed += 1
                continue
            latencies.append((time.perf_counter() - started) * 1e6)
            floor = wait_served(askers, signer, owner, 2)
            if floor is not None:
                floors.append(floor * 1e6)
        if not latencies:
            print(f"change mode={mode} names={names} change={change} n=0 failed={failed}")
            return 1
        print(
            f"change mode={mode} names={names} change={change} n={len(latencies)} "
            f"failed={failed} {served.summary(latencies)} "
            f"ctl_p50_us={served.percentile(ctl_times, 50) * 1e6:.0f} "
            f"floor_p50_us={served.percentile(floors, 50):.0f}"
        )
        return 0 if failed == 0 else 1
    finally:
        servers.stop()


def main():
    if len(sys.argv) < 3 or sys.argv[2] not in ("reload", "transfer"):
        print(__doc__, file=sys.stderr)
        return 2
    heron = os.path.realpath(sys.argv[1])
    mode = sys.argv[2]
    names, count, change, sockets = (
        int(sys.argv[i]) if len(sys.argv) > i else default
        for i, default in ((3, 10_000), (4, 50), (5, 1), (6, 16))
    )
    work = tempfile.mkdtemp(prefix="change-latency.")
    try:
        return run(heron, mode, names, count, change, sockets, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
