#!/usr/bin/env python3
"""One-socket investigation (issue 40): Heron and Knot, one worker each on
CPU 0, loaded from CPU 1 at a fixed rate by dnsperf with one socket (-c 1;
--clients for other shapes, --sources N for N dnsperf processes each -a
its own 127.0.1.x address). During the load, perf counts the server's
system calls (raw_syscalls:sys_enter by id, every thread of the process) and records the return value
of every recvmmsg / sendmmsg / epoll_wait / recvfrom / sendmsg, so the
figures are: system calls per query, queries per receive call (the batch
size), receive calls that came back empty, and wakes (epoll_wait returns)
per query. Server and dnsperf run at nice -20 (the machine is shared). perf slows the server a little; these are counts, not timings.

Usage: one-socket.py ZONE QUERIES [--rate 80000] [--seconds 3]
         [--heron BIN] [--servers heron,knot] [--clients 1] [--sources 1]
Bounded: every process is started here and stopped by its PID.
"""
import argparse, collections, os, re, shutil, signal, socket, subprocess, sys, tempfile, time

SYSCALLS = {}


def syscall_names():
    # x86_64 numbers from the kernel headers, as ausyscall would.
    out = subprocess.run(['sh', '-c', "printf '#include <sys/syscall.h>\\n' | cpp -dM | grep '#define __NR_'"],
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        m = re.match(r'#define __NR_(\w+) (\d+)', line)
        if m:
            SYSCALLS[int(m.group(2))] = m.group(1)


def free_port():
    s = socket.socket(); s.bind(('127.0.0.1', 0)); p = s.getsockname()[1]; s.close(); return p


def start(kind, heron, zone, port, work):
    d = tempfile.mkdtemp(dir=work)
    if kind == 'heron':
        conf = f'{d}/heron.toml'
        open(conf, 'w').write(f'[server]\nlisten = ["127.0.0.1:{port}"]\nworkers = 1\n\n[[zone]]\norigin = "."\nfile = "{zone}"\n')
        cmd = [heron, 'serve', '--config', conf]
    else:
        conf = f'{d}/knot.conf'
        open(conf, 'w').write(
            f'server:\n  rundir: "{d}"\n  listen: 127.0.0.1@{port}\n  udp-workers: 1\n  tcp-workers: 1\n  background-workers: 1\n'
            f'log:\n  - target: stderr\n    any: warning\ndatabase:\n  storage: "{d}"\n'
            f'template:\n  - id: default\n    storage: "{d}"\n    zonefile-sync: -1\n    journal-content: none\n    semantic-checks: off\n'
            f'zone:\n  - domain: "."\n    file: "{zone}"\n')
        cmd = ['knotd', '-c', conf]
    p = subprocess.Popen(['nice', '-n', '-20', 'taskset', '-c', '0'] + cmd, stdout=subprocess.DEVNULL, stderr=open(f'{d}/log', 'w'))
    for _ in range(300):
        r = subprocess.run(['dig', '+short', '+time=1', '+tries=1', '-p', str(port), '@127.0.0.1', '.', 'SOA'],
                           capture_output=True, text=True)
        if r.stdout.strip():
            return p
        time.sleep(0.1)
    p.kill(); raise SystemExit(f'{kind} did not answer')


def udp_worker_tid(pid, kind):
    """The thread that answers UDP: Heron's 'udp-...' thread, Knot's 'udp...' one."""
    for tid in os.listdir(f'/proc/{pid}/task'):
        name = open(f'/proc/{pid}/task/{tid}/comm').read().strip()
        if name.startswith('udp'):
            return int(tid), name
    return None, None


def dnsperf(port, queries, rate, seconds, clients, sources):
    procs = []
    addrs = [None] if sources <= 1 else [f'127.0.1.{i + 1}' for i in range(sources)]
    for a in addrs:
        cmd = ['nice', '-n', '-20', 'taskset', '-c', '1', 'dnsperf', '-m', 'udp', '-s', '127.0.0.1', '-p', str(port), '-d', queries,
               '-c', str(max(1, clients // len(addrs))), '-q', str(max(200, clients)), '-l', str(seconds),
               '-Q', str(int(rate / len(addrs)))]
        if a:
            cmd += ['-a', a]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
    return procs


def measure(kind, pid, tid, seconds, work):
    data = f'{work}/perf-{kind}.data'
    events = ['raw_syscalls:sys_enter']
    for s in ['recvmmsg', 'sendmmsg', 'epoll_wait', 'epoll_pwait', 'recvfrom', 'recvmsg', 'sendmsg', 'sendto']:
        events.append(f'syscalls:sys_exit_{s}')
    cmd = ['perf', 'record', '-q', '-o', data, '-p', str(pid)]
    for e in events:
        cmd += ['-e', e]
    perf = subprocess.Popen(cmd + ['--', 'sleep', str(seconds)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    perf.wait(timeout=seconds + 30)
    script = subprocess.run(['perf', 'script', '-i', data, '-F', 'event,trace'], capture_output=True, text=True).stdout
    os.remove(data)
    enters = collections.Counter()
    rets = collections.defaultdict(list)
    for line in script.splitlines():
        m = re.search(r'raw_syscalls:sys_enter:\s+NR (\d+)', line)
        if m:
            enters[SYSCALLS.get(int(m.group(1)), m.group(1))] += 1
            continue
        m = re.search(r'syscalls:sys_exit_(\w+):\s+0x([0-9a-f]+)', line)
        if m:
            v = int(m.group(2), 16)
            rets[m.group(1)].append(v - (1 << 64) if v >= 1 << 63 else v)
    return enters, rets


def report(kind, enters, rets):
    recv = [r for s in ('recvmmsg', 'recvfrom', 'recvmsg') for r in rets.get(s, [])]
    queries = sum(r for r in rets.get('recvmmsg', []) if r > 0) + sum(1 for s in ('recvfrom', 'recvmsg') for r in rets.get(s, []) if r > 0)
    total = sum(enters.values())
    print(f'\n{kind}: {queries} queries received in the window, {total} system calls, {total / max(queries, 1):.3f} per query')
    for name, n in enters.most_common(8):
        print(f'  {name:14} {n:8}  {n / max(queries, 1):.3f} per query')
    if recv:
        ok = [r for r in recv if r > 0]
        print(f'  receive calls {len(recv)}: {len(recv) - len(ok)} empty (EAGAIN/timeout), queries per non-empty call {sum(ok) / max(len(ok), 1):.2f}')
        hist = collections.Counter(min(r, 32) for r in ok)
        print('  batch sizes (queries per receive, 32 = 32+):', ', '.join(f'{k}:{hist[k]}' for k in sorted(hist)))
    for s in ('epoll_wait', 'epoll_pwait'):
        if rets.get(s):
            print(f'  {s}: {len(rets[s])} returns, {len(rets[s]) / max(queries, 1):.3f} per query, '
                  f'{sum(1 for r in rets[s] if r == 0)} timed out')
    for s in ('sendmmsg', 'sendmsg', 'sendto'):
        if rets.get(s):
            sent = sum(r for r in rets[s] if r > 0)
            print(f'  {s}: {len(rets[s])} calls, {sent} messages, {sent / max(queries, 1):.3f} messages per query')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('zone'); ap.add_argument('queries')
    ap.add_argument('--rate', type=float, default=80000)
    ap.add_argument('--seconds', type=float, default=3)
    ap.add_argument('--heron', default='target/release/heron')
    ap.add_argument('--servers', default='heron,knot')
    ap.add_argument('--clients', type=int, default=1)
    ap.add_argument('--sources', type=int, default=1)
    a = ap.parse_args()
    syscall_names()
    work = tempfile.mkdtemp(prefix='one-socket-')
    try:
        for kind in a.servers.split(','):
            port = free_port()
            p = start(kind, os.path.abspath(a.heron), os.path.abspath(a.zone), port, work)
            try:
                tid, name = udp_worker_tid(p.pid, kind)
                gens = dnsperf(port, a.queries, a.rate, a.seconds + 3, a.clients, a.sources)
                time.sleep(1.5)
                enters, rets = measure(kind, p.pid, tid or p.pid, a.seconds, work)
                outs = [g.communicate(timeout=a.seconds + 30)[0] for g in gens]
                done = sum(int(m.group(1)) for o in outs for m in [re.search(r'Queries completed:\s+(\d+)', o)] if m)
                print(f'\n== {kind} (thread {name}), dnsperf -c {a.clients} over {max(a.sources, 1)} address(es) at {a.rate:.0f} q/s: {done} answered in all')
                report(kind, enters, rets)
            finally:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill(); p.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
