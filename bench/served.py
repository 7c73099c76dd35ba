"""Shared by the latency tools (update_latency.py, change_latency.py):
how long until every one of a set of sockets is answered a record.

Each socket has a source port of its own, so that the kernel's
SO_REUSEPORT hash spreads them over the server's workers; each asks
again every `retry` seconds until it is answered, and the wait gives up
after `give_up` seconds."""

import select
import time


def wait_served(socks, server, wire, answered, give_up, retry):
    """Seconds until every socket in `socks` has been answered (`answered`
    of the reply's bytes and the query ID it was asked with) to the query
    `wire` (a bytearray whose ID is set per socket); None past `give_up`."""
    started = time.perf_counter()
    pending = {sock: (0.0, 1000 + i) for i, sock in enumerate(socks)}
    while pending:
        now = time.perf_counter()
        if now - started > give_up:
            return None
        for sock, (sent, qid) in list(pending.items()):
            if now - sent >= retry:
                wire[0:2] = qid.to_bytes(2, "big")
                sock.sendto(wire, server)
                pending[sock] = (now, qid)
        ready, _, _ = select.select(list(pending), [], [], retry)
        for sock in ready:
            data, _ = sock.recvfrom(65535)
            if sock in pending and answered(data, pending[sock][1]):
                del pending[sock]
    return time.perf_counter() - started


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def summary(latencies):
    """p50, p90, p99, max and mean of `latencies` (µs), as key=value."""
    cells = " ".join(f"p{p}_us={percentile(latencies, p):.0f}" for p in (50, 90, 99))
    mean = sum(latencies) / len(latencies)
    return f"{cells} max_us={max(latencies):.0f} mean_us={mean:.0f}"
