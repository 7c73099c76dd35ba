#!/usr/bin/env python3
"""Server CPU per answered UDP query at fixed offered rates, for Heron, NSD
and the socket floor (floor.c: recvmmsg/sendmmsg, no DNS work), as the cost
matrix measures it: each server on CPU 0 with one worker, the generator
(dnsperf or heron-bench blast) on CPU 1, both at nice -20, the CPU from
/proc/PID/task/*/schedstat of every process of the server over the load.
Trials rotate the servers' order each round. Prints a JSON line per trial
and, at the end, a markdown table: per cell the median (min-max) of each
server's cost and of floor / NSD and Heron / NSD over the rounds.

If the floor costs more than 0.8x NSD in a cell, no server on sockets can
meet the cost matrix's 0.8x target there: the rest of the cost is the
kernel's. The zones and query files are those `heron-bench run` writes to
--data. See docs/benchmarks/udp-socket-path.md."""
import argparse, glob, json, os, re, statistics, subprocess, sys, time

ZONES = {'root': [('.', 'root.zone')], 'mix40': [('edge.test.', 'edge.test.zone')],
         'big': [('big.test.', 'big.test.zone')]}
APEX = {'root': '.', 'mix40': 'edge.test.', 'big': 'big.test.'}
# The matrix's rates: 20k, 80k and the highest every server answers.
RATES = {'root': [20000, 80000, 120000], 'mix40': [20000, 80000, 140000],
         'big': [20000, 80000, 100000]}
PINNED = ['nice', '-n', '-20', 'taskset', '-c']


def family(pid):
    """The pid and its descendants (NSD forks its server process)."""
    out = subprocess.run(['ps', '-o', 'pid=', '--ppid', str(pid)], capture_output=True, text=True)
    return [pid] + [q for c in out.stdout.split() for q in family(int(c))]


def cpu_ns(pid):
    total = 0
    for p in family(pid):
        for f in glob.glob(f'/proc/{p}/task/*/schedstat'):
            try:
                total += int(open(f).read().split()[0])
            except OSError:
                pass
    return total


def configure(kind, workload, port, d, data):
    zones = [(o, os.path.join(data, f)) for o, f in ZONES[workload]]
    if kind == 'heron':
        conf = f'[server]\nlisten = ["127.0.0.1:{port}"]\nworkers = 1\n'
        conf += ''.join(f'[[zone]]\norigin = "{o}"\nfile = "{f}"\n' for o, f in zones)
        open(f'{d}/heron.toml', 'w').write(conf)
        return [ARGS.heron, 'serve', '--config', f'{d}/heron.toml']
    if kind == 'nsd':
        conf = (f'server:\n  ip-address: 127.0.0.1@{port}\n  server-count: 1\n  username: ""\n'
                f'  chroot: ""\n  database: ""\n  zonelistfile: "{d}/zone.list"\n'
                f'  xfrdfile: "{d}/xfrd.state"\n  pidfile: "{d}/nsd.pid"\n  zonesdir: "{d}"\n'
                '  verbosity: 0\n  minimal-responses: yes\n  rrl-ratelimit: 0\n'
                'remote-control:\n  control-enable: no\n')
        conf += ''.join(f'zone:\n  name: "{o}"\n  zonefile: "{f}"\n' for o, f in zones)
        open(f'{d}/nsd.conf', 'w').write(conf)
        return ['/usr/sbin/nsd', '-d', '-c', f'{d}/nsd.conf']
    return [ARGS.floor, str(port)]


def start(kind, workload, port):
    d = f'{ARGS.scratch}/{kind}-{workload}'
    os.makedirs(d, exist_ok=True)
    cmd = configure(kind, workload, port, d, os.path.abspath(ARGS.data))
    log = open(f'{d}/log', 'w')
    p = subprocess.Popen(PINNED + ['0'] + cmd, stdout=log, stderr=log, cwd=d)
    for _ in range(300):
        r = subprocess.run(['dig', '+tries=1', '+time=1', '-p', str(port), '@127.0.0.1',
                            APEX[workload], 'SOA'], capture_output=True, text=True)
        if 'status:' in r.stdout:  # the floor answers with the query itself
            return p
        time.sleep(0.2)
    p.kill()
    sys.exit(f'{kind} did not answer on {port}; see {d}/log')


def offer(gen, workload, port, rate):
    """(sent, answered) for RATE q/s offered over ARGS.seconds."""
    queries = os.path.join(os.path.abspath(ARGS.data), 'queries', f'{workload}.txt')
    if gen == 'dnsperf':
        out = subprocess.run(PINNED + ['1', 'dnsperf', '-m', 'udp', '-s', '127.0.0.1', '-p', str(port),
                              '-d', queries, '-c', '4', '-q', str(max(200, rate // 100)), '-T', '1',
                              '-t', '2', '-l', str(ARGS.seconds), '-Q', str(rate)],
                             capture_output=True, text=True).stdout
        count = lambda what: int(re.search(rf'Queries {what}:\s+(\d+)', out).group(1))
        return count('sent'), count('completed')
    out = subprocess.run(PINNED + ['1', ARGS.bench, 'blast', '--target', f'127.0.0.1:{port}',
                          '--queries', queries, '--rate', str(rate), '--duration', str(ARGS.seconds),
                          '--cpus', '1', '--json'], capture_output=True, text=True).stdout
    blast = json.loads(out)['blast']
    return blast['sent'], blast['answered']


def spread(values):
    return f'{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})'


def table(rows):
    kinds = ARGS.servers.split(',')
    head = '| workload | generator | offered q/s | ' + ' | '.join(f'{k} µs/q' for k in kinds)
    head += ' | floor / NSD | Heron / NSD |'
    lines = [head, '|' + '---|' * (len(kinds) + 5)]
    cells = {}
    for r in rows:
        cells.setdefault((r['workload'], r['gen'], r['rate']), []).append(r)
    for (wl, gen, rate), rs in cells.items():
        cost = {k: [r[k]['us_per_q'] for r in rs] for k in kinds}
        ratio = lambda k: spread([r[k]['us_per_q'] / r['nsd']['us_per_q'] for r in rs])
        lines.append(f'| {wl} | {gen} | {rate} | ' + ' | '.join(spread(cost[k]) for k in kinds)
                     + f' | {ratio("floor")} | {ratio("heron")} |')
    return '\n'.join(lines)


ap = argparse.ArgumentParser()
ap.add_argument('--heron', required=True)
ap.add_argument('--bench', required=True, help='heron-bench, for blast')
ap.add_argument('--floor', required=True, help='floor.c, built')
ap.add_argument('--data', required=True)
ap.add_argument('--scratch', default='/tmp/heron-udp-floor')
ap.add_argument('--servers', default='heron,nsd,floor')
ap.add_argument('--workloads', default='root,mix40,big')
ap.add_argument('--gens', default='dnsperf,blast')
ap.add_argument('--seconds', type=int, default=3)
ap.add_argument('--rounds', type=int, default=3)
ARGS = ap.parse_args()
os.makedirs(ARGS.scratch, exist_ok=True)
rows = []
port = 42000 + os.getpid() % 1000
for wl in ARGS.workloads.split(','):
    servers = {}
    try:
        for kind in ARGS.servers.split(','):
            port += 1
            servers[kind] = (start(kind, wl, port), port)
            offer('dnsperf', wl, port, 20000)  # warm up
        for gen in ARGS.gens.split(','):
            for rate in RATES[wl]:
                for rnd in range(ARGS.rounds):
                    kinds = list(servers)
                    kinds = kinds[rnd % len(kinds):] + kinds[:rnd % len(kinds)]
                    row = {'workload': wl, 'gen': gen, 'rate': rate, 'round': rnd}
                    for kind in kinds:
                        p, pt = servers[kind]
                        time.sleep(0.3)
                        c0 = cpu_ns(p.pid)
                        sent, answered = offer(gen, wl, pt, rate)
                        used = cpu_ns(p.pid) - c0
                        row[kind] = {'sent': sent, 'answered': answered,
                                     'us_per_q': used / 1e3 / max(answered, 1)}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    finally:
        for p, _ in servers.values():
            p.terminate()
            p.wait()
print(table(rows))
