#!/usr/bin/python3
"""Update-to-served latency (issue 39): how long after an UPDATE's answer
arrives the record it added is answered by every worker of the server.

Sends COUNT TSIG-signed UPDATEs (hmac-sha256) over UDP, one at a time,
each adding an A record to a name of its own. When the NOERROR answer
arrives, the clock starts; then the new name is asked for (A, over UDP)
from SOCKETS sockets, each with a source port of its own, so that the
kernel's SO_REUSEPORT hash spreads them over the server's workers (with
16 sockets and 2 workers, the chance that one worker gets none is 2^-15).
Each socket asks again until it is answered with the record; the clock
stops when the last one is. The same asking is then timed again, the
record there already: the floor (the round trips and this tool's own
time), printed beside the latency. Prints one line, in microseconds:

    latency n=200 failed=0 p50_us=... p90_us=... p99_us=... max_us=...
        mean_us=... floor_p50_us=... floor_p99_us=...

Needs dnspython (apt-get install python3-dnspython).

    update_latency.py SERVER PORT ZONE SECRET [COUNT] [SOCKETS] [PREFIX]
"""

import select
import socket
import sys
import time

import dns.message
import dns.name
import dns.rcode
import dns.tsigkeyring
import dns.update

import served

# Bounds: a record never answered gives up after this many seconds.
GIVE_UP = 10.0
# A socket with no answer asks again after this long.
RETRY = 0.002


def update(zone, keyring, owner, address):
    message = dns.update.UpdateMessage(zone, keyring=keyring, keyalgorithm="hmac-sha256")
    message.add(owner, 300, "A", address)
    return message


def send_update(sock, server, message):
    """The UPDATE's rcode, or None if no answer within 5 s."""
    wire = message.to_wire()
    sock.sendto(wire, server)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        ready, _, _ = select.select([sock], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        data, _ = sock.recvfrom(65535)
        try:
            answer = dns.message.from_wire(data, keyring=message.keyring, request_mac=message.mac)
        except Exception:  # noqa: BLE001 - a stray or malformed datagram: keep waiting
            continue
        if answer.id == message.id:
            return answer.rcode()
    return None


def answered(data, qid):
    """Whether `data` answers query `qid` (for one name's A record) with
    records: read from the header, not parsed, to keep this tool's own
    time out of what is measured."""
    return (
        len(data) >= 12
        and int.from_bytes(data[0:2], "big") == qid
        and data[2] & 0x80
        and data[3] & 0x0F == 0
        and int.from_bytes(data[6:8], "big") > 0
    )


def wait_served(socks, server, owner):
    """Seconds until every socket has been answered with `owner`'s A
    record (None past GIVE_UP)."""
    query = bytearray(dns.message.make_query(owner, "A").to_wire())
    return served.wait_served(socks, server, query, answered, GIVE_UP, RETRY)



def main():
    server_ip, port, zone_text, secret = sys.argv[1:5]
    count = int(sys.argv[5]) if len(sys.argv) > 5 else 200
    sockets = int(sys.argv[6]) if len(sys.argv) > 6 else 16
    prefix = sys.argv[7] if len(sys.argv) > 7 else "lat"
    server = (server_ip, int(port))
    zone = dns.name.from_text(zone_text)
    keyring = dns.tsigkeyring.from_text({"ops": ("hmac-sha256", secret)})
    updater = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    askers = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(sockets)]
    for sock in askers:
        sock.bind(("127.0.0.1", 0))
    latencies, floors, failed = [], [], 0
    for i in range(count):
        owner = dns.name.from_text(f"{prefix}{i}", zone)
        address = f"203.0.{(i >> 8) & 255}.{i & 255}"
        rcode = send_update(updater, server, update(zone, keyring, owner, address))
        if rcode != dns.rcode.NOERROR:
            failed += 1
            continue
        took = wait_served(askers, server, owner)
        if took is None:
            failed += 1
            continue
        latencies.append(took * 1e6)
        floor = wait_served(askers, server, owner)
        if floor is not None:
            floors.append(floor * 1e6)
    if not latencies:
        print(f"latency n=0 failed={failed}")
        return 1
    print(
        f"latency n={len(latencies)} failed={failed} {served.summary(latencies)} "
        f"floor_p50_us={served.percentile(floors, 50):.0f} "
        f"floor_p99_us={served.percentile(floors, 99):.0f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
