#!/usr/bin/env python3
"""burst.py PORT PID CONNS BURST ROUNDS: CONNS connections; each round every
connection writes BURST queries in one write and reads until all BURST
answers came. Counts the server's system calls (perf stat over the rounds)
and segments each side sent (ss tcp_info), per answered query."""
import os, random, re, socket, struct, subprocess, sys, time, selectors
port, pid, conns, burst, rounds = map(int, sys.argv[1:6])
names = [l.split()[0] for l in open(os.environ.get('QUERIES', '/work/matrix-data/queries/root.txt')) if l.strip()][:5000]
def query(name, qid):
    wire = b''.join(bytes([len(x)]) + x.encode() for x in name.rstrip('.').split('.') if x) + b'\0'
    m = struct.pack('>HHHHHH', qid, 0, 1, 0, 0, 0) + wire + struct.pack('>HH', 1, 1)
    return struct.pack('>H', len(m)) + m
socks = [socket.create_connection(('127.0.0.1', port)) for _ in range(conns)]
def ss(side):
    out = subprocess.run(['ss', '-tinH', 'state', 'established', f'( {side} = :{port} )'], capture_output=True, text=True).stdout
    return (sum(int(x) for x in re.findall(r' segs_out:(\d+)', out)), sum(int(x) for x in re.findall(r'data_segs_out:(\d+)', out)))
perf = subprocess.Popen(['perf', 'stat', '-x,', '-e', 'raw_syscalls:sys_enter', '-p', str(pid)], stderr=subprocess.PIPE, text=True)
time.sleep(0.5)
s0, c0 = ss('sport'), ss('dport')
sel = selectors.DefaultSelector()
for i, s in enumerate(socks): sel.register(s, selectors.EVENT_READ, i)
answered = 0; qi = 0; t0 = time.time()
for r in range(rounds):
    need = {}
    for i, s in enumerate(socks):
        data = b''
        for b in range(burst):
            data += query(names[qi % len(names)], (r * burst + b) & 0xffff); qi += 1
        s.sendall(data); need[i] = [burst, b'']
    while need:
        ready = sel.select(10)
        if not ready:
            sys.exit(f'no answer within 10 s on {len(need)} connections')
        for key, _ in ready:
            i = key.data
            if i not in need: continue
            got = socks[i].recv(65536)
            if not got:
                sys.exit(f"connection {i} closed by the server with {need[i][0]} answers missing")
            buf = need[i][1] + got
            while len(buf) >= 2 and len(buf) >= 2 + struct.unpack('>H', buf[:2])[0]:
                buf = buf[2 + struct.unpack('>H', buf[:2])[0]:]; need[i][0] -= 1; answered += 1
            need[i][1] = buf
            if need[i][0] == 0: del need[i]
el = time.time() - t0
s1, c1 = ss('sport'), ss('dport')
perf.send_signal(2); err = perf.communicate()[1]
calls = int([l for l in err.splitlines() if 'raw_syscalls' in l][0].split(',')[0])
print(f"conns={conns} burst={burst} rounds={rounds} answered={answered} in {el:.1f}s ({el/rounds*1000:.2f} ms/round): "
      f"server syscalls/query {calls/answered:.3f}, server segs/query {(s1[0]-s0[0])/answered:.3f} (data {(s1[1]-s0[1])/answered:.3f}), client segs/query {(c1[0]-c0[0])/answered:.3f} (data {(c1[1]-c0[1])/answered:.3f})")
