#!/usr/bin/env python3
"""loop_cost.py PORT CONNS BURST ROUNDS [tls]: CONNS connections (TLS when
the fifth argument is `tls`; no certificate check); each round every
connection writes BURST queries in one write and reads until all BURST
answers came. Waits for a line on stdin after connecting (so the caller
can start its counters with every connection open and the handshakes
done), and prints the answers after the rounds. Queries: the names of
QUERIES (first column), type A."""
import os, socket, ssl, struct, sys, selectors
port, conns, burst, rounds = map(int, sys.argv[1:5])
tls = len(sys.argv) > 5 and sys.argv[5] == 'tls'
names = [l.split()[0] for l in open(os.environ['QUERIES']) if l.strip()][:5000]
def query(name, qid):
    wire = b''.join(bytes([len(x)]) + x.encode() for x in name.rstrip('.').split('.') if x) + b'\0'
    m = struct.pack('>HHHHHH', qid, 0, 1, 0, 0, 0) + wire + struct.pack('>HH', 1, 1)
    return struct.pack('>H', len(m)) + m
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
def connect():
    s = socket.create_connection(('127.0.0.1', port))
    return ctx.wrap_socket(s) if tls else s
socks = [connect() for _ in range(conns)]
print('connected', flush=True)
sys.stdin.readline()
sel = selectors.DefaultSelector()
for i, s in enumerate(socks): sel.register(s, selectors.EVENT_READ, i)
answered = 0; qi = 0
for r in range(rounds):
    need = {}
    for i, s in enumerate(socks):
        data = b''
        for b in range(burst):
            data += query(names[qi % len(names)], (r * burst + b) & 0xffff); qi += 1
        s.sendall(data); need[i] = [burst, b'']
    while need:
        ready = sel.select(30)
        if not ready:
            sys.exit(f'no answer within 30 s on {len(need)} connections')
        for key, _ in ready:
            i = key.data
            if i not in need: continue
            while True:  # TLS may hold decrypted bytes the selector cannot see
                try:
                    got = socks[i].recv(65536)
                except (ssl.SSLWantReadError, BlockingIOError):
                    break
                if not got:
                    sys.exit(f"connection {i} closed by the server with {need[i][0]} answers missing")
                buf = need[i][1] + got
                while len(buf) >= 2 and len(buf) >= 2 + struct.unpack('>H', buf[:2])[0]:
                    buf = buf[2 + struct.unpack('>H', buf[:2])[0]:]; need[i][0] -= 1; answered += 1
                need[i][1] = buf
                if need[i][0] == 0 or not tls or socks[i].pending() == 0: break
            if need[i][0] == 0: del need[i]
print(f'answered {answered}', flush=True)
sys.stdin.readline()
